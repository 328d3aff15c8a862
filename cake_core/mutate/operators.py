"""Mutation operators: small, plausible mistakes in the synchronization and staging of a schedule.

Each operator finds its sites in a module and yields one :class:`Mutant` per edit. Operators read
operations through their primitives' declared signatures and effects (which slot waits, which arrives,
which attribute masks an access), never through primitive names, so they apply to plugin primitives
as well. The exception is :class:`DroppedFence`: no declared effect describes a fence, so it takes an
operation whose primitive declares ``proxy_fence`` (as cake-rules-core reads it), or one of the
``fence`` family of names.

======================  ==============================================================================
class                   edit
======================  ==============================================================================
stage-index             the stage selected in a ring (``cs[s]``) one off: ``s + 1``, ``s - 1``, and the
                        wrapped ``(s + 1) % S``, ``(s + S - 1) % S``
parity-flip             a barrier wait's ``parity`` inverted
expect-tx               an expect-tx byte count 16 bytes more or less
arrival-count           a barrier's arrival count one more or less
dropped-fence           a fence operation removed
dropped-mask            a bounds-mask attribute (``oob=zero``, ``oob=skip``) removed
wait-arrive-swap        a barrier wait and the next arrive of the same block (or an arrive and the next
                        wait) exchange places
stage-count             a ring's stage count (shared buffer or barrier array) one more or less
pipe-*                  the mistakes a ``pipe`` leaves possible (:mod:`cake_core.mutate.pipe_operators`)
dropped-write,          a write of shared memory removed; a reduction's ``limit=`` removed
dropped-limit           (:mod:`cake_core.mutate.dataflow_operators`)
arrive-per-instance,    the orderings between the threads of one role instance
dropped-instance-sync   (:mod:`cake_core.mutate.threads_operators`)
======================  ==============================================================================
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import ClassVar

import attrs

from cake_core.ir import nodes as n
from cake_core.location import Loc
from cake_core.ir.primitive import BarrierAction, Primitive
from cake_core.ir.printer import expr as text
from cake_core.mutate.coverage_operators import COVERAGE_OPERATORS
from cake_core.mutate.dataflow_operators import DATAFLOW_OPERATORS
from cake_core.mutate.mutant import Mutant, Operator, plus
from cake_core.mutate.pipe_operators import PIPE_OPERATORS
from cake_core.mutate.rewrite import Block, blocks, replace, replace_block
from cake_core.mutate.threads_operators import THREADS_OPERATORS

_WAITS = frozenset({BarrierAction.WAIT})
_ARRIVES = frozenset({BarrierAction.ARRIVE, BarrierAction.ARRIVE_EXPECT_TX})
_EXPECTS = frozenset({BarrierAction.EXPECT_TX, BarrierAction.ARRIVE_EXPECT_TX})


# ---------------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------------


def _actions(op: n.Op, primitives: Mapping[str, Primitive]) -> frozenset[BarrierAction]:
    """The barrier actions an operation's primitive declares on its slots."""
    prim = primitives.get(op.name)
    if prim is None:
        return frozenset()
    sig = prim.signature
    return frozenset(s.barrier for s in sig.outs + sig.ins if s.barrier is not None)


def _is_fence(op: n.Op, primitives: Mapping[str, Primitive]) -> bool:
    """A fence: a primitive that declares itself one (``proxy_fence``), or of the ``fence`` family."""
    prim = primitives.get(op.name)
    return (prim is not None and prim.proxy_fence) or op.name.split(".")[0] == "fence"


def _staged(kernel: n.Kernel) -> dict[str, n.Expr]:
    """Rings of the kernel (staged shared buffers and barrier arrays) and their stage counts."""
    out: dict[str, n.Expr] = {}
    for s in kernel.smem:
        if s.stages is not None:
            out[s.name] = s.stages
    for b in kernel.barriers:
        if b.stages is not None:
            out[b.name] = b.stages
    return out


# ---------------------------------------------------------------------------------------------------
# Operators
# ---------------------------------------------------------------------------------------------------


class StageIndex(Operator):
    name = "stage-index"
    summary = "the stage selected in a ring one off (s + 1, s - 1, and both wrapped modulo the depth)"

    def kernel_mutants(
        self, module: n.Module, kernel: n.Kernel, primitives: Mapping[str, Primitive]
    ) -> Iterator[Mutant]:
        rings = _staged(kernel)
        for _, op in n.walk_ops(kernel):
            for ref in op.operands:
                if not (isinstance(ref, n.Ref) and ref.name in rings and ref.index):
                    continue
                first = ref.index[0]
                if not isinstance(first, n.At):
                    continue
                e, depth = first.expr, rings[ref.name]
                loc = e.loc
                variants = (
                    ("+1", plus(e, 1)),
                    ("-1", plus(e, -1)),
                    ("+1 wrapped", n.Bin("%", plus(e, 1), depth, loc=loc)),
                    ("-1 wrapped", n.Bin("%", n.Bin("+", e, plus(depth, -1), loc=loc), depth, loc=loc)),
                )
                for tag, new in variants:
                    mutated = replace(module, first, attrs.evolve(first, expr=new))
                    yield self.mutant(
                        kernel, loc, f"`{op.name}` stage `{ref.name}[{text(e)}]` -> `{ref.name}[{text(new)}]` "
                        f"({tag})", mutated, ref.name, tag,
                    )  # fmt: skip


class ParityFlip(Operator):
    name = "parity-flip"
    summary = "a barrier wait's parity inverted"

    def kernel_mutants(
        self, module: n.Module, kernel: n.Kernel, primitives: Mapping[str, Primitive]
    ) -> Iterator[Mutant]:
        for _, op in n.walk_ops(kernel):
            if not _actions(op, primitives) & _WAITS:
                continue
            for a in op.attrs:
                if a.key != "parity":
                    continue
                v = a.value
                if isinstance(v, n.Num) and v.value in (0, 1):
                    new: n.Expr = n.Num(1 - int(v.value), loc=v.loc)
                else:
                    new = n.Bin("%", plus(v, 1), n.Num(2, loc=v.loc), loc=v.loc)
                mutated = replace(module, a, attrs.evolve(a, value=new))
                target = text(op.ins[0]) if op.ins else op.name
                yield self.mutant(
                    kernel, a.loc, f"`{op.name} {target}` parity `{text(v)}` -> `{text(new)}`", mutated, op.name, "flip"
                )


class ExpectTx(Operator):
    name = "expect-tx"
    summary = "an expect-tx byte count 16 bytes more or less"

    def kernel_mutants(
        self, module: n.Module, kernel: n.Kernel, primitives: Mapping[str, Primitive]
    ) -> Iterator[Mutant]:
        for _, op in n.walk_ops(kernel):
            if not _actions(op, primitives) & _EXPECTS:
                continue
            sig = primitives[op.name].signature
            for a in op.attrs:
                spec = sig.attr(a.key)
                if spec is None or spec.kind != "int":
                    continue
                for delta in (16, -16):
                    new = plus(a.value, delta)
                    mutated = replace(module, a, attrs.evolve(a, value=new))
                    target = text(op.ins[0]) if op.ins else op.name
                    yield self.mutant(
                        kernel, a.loc, f"`{op.name} {target}` {a.key} `{text(a.value)}` -> `{text(new)}`", mutated,
                        op.name, f"{delta:+d}",
                    )  # fmt: skip


class ArrivalCount(Operator):
    name = "arrival-count"
    summary = "a barrier's arrival count one more or less"

    def kernel_mutants(
        self, module: n.Module, kernel: n.Kernel, primitives: Mapping[str, Primitive]
    ) -> Iterator[Mutant]:
        for b in kernel.barriers:
            for delta in (1, -1):
                new = plus(b.count, delta)
                mutated = replace(module, b, attrs.evolve(b, count=new))
                yield self.mutant(
                    kernel, b.loc, f"barrier `{b.name}` count `{text(b.count)}` -> `{text(new)}`", mutated, b.name,
                    f"{delta:+d}",
                )  # fmt: skip


class DroppedFence(Operator):
    name = "dropped-fence"
    summary = "a fence operation removed"

    def kernel_mutants(
        self, module: n.Module, kernel: n.Kernel, primitives: Mapping[str, Primitive]
    ) -> Iterator[Mutant]:
        for block in blocks(kernel):
            for i, s in enumerate(block.body):
                if isinstance(s, n.Op) and _is_fence(s, primitives):
                    mutated = replace_block(module, block, block.body[:i] + block.body[i + 1 :])
                    yield self.mutant(kernel, s.loc, f"`{s.name}` dropped", mutated, s.name, "drop")


class DroppedMask(Operator):
    name = "dropped-mask"
    summary = "a bounds-mask attribute removed"

    def kernel_mutants(
        self, module: n.Module, kernel: n.Kernel, primitives: Mapping[str, Primitive]
    ) -> Iterator[Mutant]:
        for _, op in n.walk_ops(kernel):
            prim = primitives.get(op.name)
            if prim is None:
                continue
            sig = prim.signature
            masks = {s.mask_attr for s in sig.outs + sig.ins if s.mask_attr is not None}
            for a in op.attrs:
                if a.key not in masks or (isinstance(a.value, n.Name) and a.value.id == "none"):
                    continue
                new_op = attrs.evolve(op, attrs=tuple(x for x in op.attrs if x is not a))
                mutated = replace(module, op, new_op)
                target = text(op.operands[0]) if op.operands else op.name
                yield self.mutant(
                    kernel, a.loc, f"`{op.name} {target}` mask `{a.key}={text(a.value)}` dropped", mutated, op.name,
                    "drop",
                )  # fmt: skip


class WaitArriveSwap(Operator):
    name = "wait-arrive-swap"
    summary = "a barrier wait and the next arrive of its block (or an arrive and the next wait) swapped"

    def kernel_mutants(
        self, module: n.Module, kernel: n.Kernel, primitives: Mapping[str, Primitive]
    ) -> Iterator[Mutant]:
        for block in blocks(kernel):
            kinds = [self._kind(s, primitives) for s in block.body]
            for i, kind in enumerate(kinds):
                if kind is None:
                    continue
                other = "arrive" if kind == "wait" else "wait"
                j = next((j for j in range(i + 1, len(kinds)) if kinds[j] == other), None)
                if j is None:
                    continue
                yield self._swap(module, kernel, block, i, j)

    @staticmethod
    def _kind(s: n.Stmt, primitives: Mapping[str, Primitive]) -> str | None:
        if not isinstance(s, n.Op):
            return None
        actions = _actions(s, primitives)
        if actions & _WAITS:
            return "wait"
        if actions & _ARRIVES:
            return "arrive"
        return None

    def _swap(self, module: n.Module, kernel: n.Kernel, block: Block, i: int, j: int) -> Mutant:
        body = list(block.body)
        a, b = body[i], body[j]
        body[i], body[j] = b, a
        assert isinstance(a, n.Op) and isinstance(b, n.Op)
        mutated = replace_block(module, block, tuple(body))
        first = f"{a.name} {text(a.ins[0])}" if a.ins else a.name
        second = f"{b.name} {text(b.ins[0])}" if b.ins else b.name
        return self.mutant(
            kernel, a.loc, f"`{first}` (line {a.loc.line}) and `{second}` (line {b.loc.line}) swapped", mutated,
            a.name, "swap",
        )  # fmt: skip


class StageCount(Operator):
    name = "stage-count"
    summary = "a ring's stage count (shared buffer or barrier array) one more or less"

    def kernel_mutants(
        self, module: n.Module, kernel: n.Kernel, primitives: Mapping[str, Primitive]
    ) -> Iterator[Mutant]:
        decls: list[n.Smem | n.Barrier] = [*kernel.smem, *kernel.barriers]
        for d in decls:
            if d.stages is None:
                continue
            what = "shared buffer" if isinstance(d, n.Smem) else "barrier"
            for delta in (1, -1):
                new = plus(d.stages, delta)
                mutated = replace(module, d, attrs.evolve(d, stages=new))
                yield self.mutant(
                    kernel, d.loc, f"{what} `{d.name}` stages `{text(d.stages)}` -> `{text(new)}`", mutated, d.name,
                    f"{delta:+d}",
                )  # fmt: skip


class Literal(Operator):
    """Not one of the report's classes: a broad perturbation for benchmarks and regression snapshots."""

    name = "literal"
    summary = "an integer literal one more or less, doubled or halved"

    def kernel_mutants(
        self, module: n.Module, kernel: n.Kernel, primitives: Mapping[str, Primitive]
    ) -> Iterator[Mutant]:
        for num in _int_literals(kernel):
            v = int(num.value)
            seen = {v}
            for new_value in (v + 1, v - 1, 2 * v, v // 2):
                if new_value in seen or new_value < 0:
                    continue
                seen.add(new_value)
                new = n.Num(new_value, loc=num.loc)
                mutated = replace(module, num, new)
                yield self.mutant(kernel, num.loc, f"literal `{v}` -> `{new_value}`", mutated, str(v), str(new_value))


def _int_literals(node: object) -> Iterator[n.Num]:
    """Every integer literal under ``node``, in field order."""
    if isinstance(node, n.Num):
        if isinstance(node.value, int) and not isinstance(node.value, bool):
            yield node
        return
    if isinstance(node, tuple):
        for item in node:
            yield from _int_literals(item)
        return
    if isinstance(node, Loc) or not attrs.has(type(node)):
        return
    for f in attrs.fields(type(node)):
        yield from _int_literals(getattr(node, f.name))


#: every operator, in report order
OPERATORS: tuple[Operator, ...] = (
    StageIndex(), ParityFlip(), ExpectTx(), ArrivalCount(), DroppedFence(), DroppedMask(), WaitArriveSwap(),
    StageCount(), *PIPE_OPERATORS, *THREADS_OPERATORS, *DATAFLOW_OPERATORS, *COVERAGE_OPERATORS,
)  # fmt: skip


#: operators outside the report: broad perturbations for benchmarks and regression snapshots
EXTRA_OPERATORS: tuple[Operator, ...] = (Literal(),)


def operator(name: str) -> Operator:
    """The operator of class ``name``; :class:`KeyError` when there is none."""
    for op in OPERATORS + EXTRA_OPERATORS:
        if op.name == name:
            return op
    raise KeyError(name)


def mutants(
    module: n.Module, primitives: Mapping[str, Primitive], operators: tuple[Operator, ...] = OPERATORS
) -> Iterator[Mutant]:
    """Every mutant of ``module`` that ``operators`` make, operator by operator, in source order."""
    for op in operators:
        yield from op.mutants(module, primitives)
