"""Mutation operators for pipes: the mistakes a `pipe` still lets an author make.

The compiler derives a pipe's stage indices, parities, counts and bytes, so the operators of
:mod:`cake_core.mutate.operators` that perturb those numbers have nothing to hit in a kernel written
with pipes. What is left is how the roles use the pipe, one class per rule of cake-rules-core that
checks it:

======================  ==============================================================================
class                   edit
======================  ==============================================================================
pipe-trips              a loop around a pipe's take (``pipe.acquire`` or ``pipe.wait``) one trip more or
                        less, on one side only (CR121)
pipe-release            a ``pipe.release`` dropped, or given twice (CR122)
pipe-copy-stage         a copy into a pipe's buffer at a fixed stage, or at a stage name of another pipe
                        (CR123)
pipe-stage-outside      a consumer's access to a pipe's buffer at a fixed stage, or the release before
                        it moved ahead of it (CR124)
======================  ==============================================================================

Pipe operations are told by their declared signatures: a take binds a stage name (a ``binds``
output) from a pipe operand; the producer's take also arms a barrier (an ``arrive_expect_tx`` slot);
a release names a pipe and arrives.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import attrs

from cake_core.ir import nodes as n
from cake_core.ir.pipes import holders, owner, stage_name
from cake_core.ir.primitive import Access, BarrierAction, Kind, Primitive
from cake_core.ir.printer import expr as text
from cake_core.mutate.mutant import Mutant, Operator, plus
from cake_core.mutate.rewrite import blocks, replace, replace_block


def _kind(op: n.Op, primitives: Mapping[str, Primitive]) -> str | None:
    """``acquire``, ``wait`` or ``release`` for a pipe operation, by its signature; else None."""
    prim = primitives.get(op.name)
    if prim is None:
        return None
    sig = prim.signature
    if not any(Kind.PIPE in s.kinds for s in sig.ins):
        return None
    if sig.outs and sig.outs[0].binds:
        arms = any(s.barrier is BarrierAction.ARRIVE_EXPECT_TX for s in sig.ins)
        return "acquire" if arms else "wait"
    if any(s.barrier is BarrierAction.ARRIVE for s in sig.ins):
        return "release"
    return None


def _takes(primitives: Mapping[str, Primitive]) -> frozenset[str]:
    return frozenset(name for name, p in primitives.items() if p.signature.outs and p.signature.outs[0].binds)


def _contains_take(s: n.Stmt, primitives: Mapping[str, Primitive]) -> str | None:
    """The pipe of the first take inside ``s``, if any."""
    for x in n.walk_stmts((s,)):
        if isinstance(x, n.Op) and _kind(x, primitives) in ("acquire", "wait") and x.ins:
            first = x.ins[0]
            return first.id if isinstance(first, n.Name) else getattr(first, "name", None)
    return None


class PipeTrips(Operator):
    name = "pipe-trips"
    summary = "a loop around a pipe's take one trip more or less, on one side only"

    def kernel_mutants(
        self, module: n.Module, kernel: n.Kernel, primitives: Mapping[str, Primitive]
    ) -> Iterator[Mutant]:
        for role in kernel.roles:
            for s in n.walk_stmts(role.body):
                if not isinstance(s, n.For):
                    continue
                pipe = _contains_take(s, primitives)
                if pipe is None:
                    continue
                for delta in (1, -1):
                    new = plus(s.stop, delta)
                    mutated = replace(module, s, attrs.evolve(s, stop=new))
                    yield self.mutant(
                        kernel, s.loc, f"role `{role.name}` loop over `{s.var}` to `{text(s.stop)}` -> "
                        f"`{text(new)}` (pipe `{pipe}`)", mutated, pipe, f"{delta:+d}",
                    )  # fmt: skip


class PipeReleaseDropOrTwice(Operator):
    name = "pipe-release"
    summary = "a pipe release dropped, or given twice"

    def kernel_mutants(
        self, module: n.Module, kernel: n.Kernel, primitives: Mapping[str, Primitive]
    ) -> Iterator[Mutant]:
        for block in blocks(kernel):
            for i, s in enumerate(block.body):
                if not (isinstance(s, n.Op) and _kind(s, primitives) == "release"):
                    continue
                what = f"`{s.name} {text(s.ins[0])}` (line {s.loc.line})"
                dropped = replace_block(module, block, block.body[:i] + block.body[i + 1 :])
                yield self.mutant(kernel, s.loc, f"{what} dropped", dropped, s.name, "drop")
                twice = replace_block(module, block, block.body[: i + 1] + (s,) + block.body[i + 1 :])
                yield self.mutant(kernel, s.loc, f"{what} given twice", twice, s.name, "twice")


def _stage_edits(
    kernel: n.Kernel, op: n.Op, ref: n.Ref, primitives: Mapping[str, Primitive], held: dict
) -> Iterator[tuple[str, n.Expr]]:
    """The wrong stages an access to a pipe's buffer may take: a fixed one, and a stage name in scope
    that another pipe bound."""
    first = ref.index[0]
    assert isinstance(first, n.At)
    yield "fixed", n.Num(0, loc=first.expr.loc)
    pipe = owner(kernel)[ref.name].name
    mine = held.get(id(op), {})
    other = next((name for name, h in mine.items() if h.pipe != pipe), None)
    if other is not None:
        yield "other pipe", n.Name(other, loc=first.expr.loc)


def _pipe_accesses(
    kernel: n.Kernel, primitives: Mapping[str, Primitive], write: bool
) -> Iterator[tuple[n.Op, n.Ref]]:
    """Operations and their operands that copy into (``write``) or otherwise touch a pipe's buffer at
    a named stage."""
    owned = owner(kernel)
    for _, op in n.walk_ops(kernel):
        prim = primitives.get(op.name)
        if prim is None:
            continue
        sig = prim.signature
        for ref, slot in zip(op.outs + op.ins, sig.outs + sig.ins, strict=False):
            if not (isinstance(ref, n.Ref) and ref.name in owned and ref.index and isinstance(ref.index[0], n.At)):
                continue
            if stage_name(ref.index[0].expr) is None:
                continue
            copy = slot.asynchronous and slot.access in (Access.WRITE, Access.READWRITE)
            if copy == write:
                yield op, ref


def _wrong_stages(
    operator: Operator, module: n.Module, kernel: n.Kernel, primitives: Mapping[str, Primitive], write: bool
) -> Iterator[Mutant]:
    """Mutants of the copies into (``write``) or the other accesses to a pipe's buffers at a wrong stage."""
    held = holders(kernel, _takes(primitives))
    verb = "copies into" if write else "touches"
    for op, ref in _pipe_accesses(kernel, primitives, write=write):
        first = ref.index[0]
        for tag, new in _stage_edits(kernel, op, ref, primitives, held):
            mutated = replace(module, first, attrs.evolve(first, expr=new))
            yield operator.mutant(
                kernel, first.loc, f"`{op.name}` {verb} `{ref.name}[{text(new)}]`, not `{ref.name}[{text(first.expr)}]` "
                f"({tag})", mutated, ref.name, tag,
            )  # fmt: skip


class PipeCopyStage(Operator):
    name = "pipe-copy-stage"
    summary = "a copy into a pipe's buffer at a fixed stage or at another pipe's stage name"

    def kernel_mutants(
        self, module: n.Module, kernel: n.Kernel, primitives: Mapping[str, Primitive]
    ) -> Iterator[Mutant]:
        yield from _wrong_stages(self, module, kernel, primitives, write=True)


class PipeStageOutside(Operator):
    name = "pipe-stage-outside"
    summary = "a consumer's access to a pipe's buffer at a fixed stage, or a release moved ahead of a use"

    def kernel_mutants(
        self, module: n.Module, kernel: n.Kernel, primitives: Mapping[str, Primitive]
    ) -> Iterator[Mutant]:
        yield from _wrong_stages(self, module, kernel, primitives, write=False)
        for block in blocks(kernel):
            body = block.body
            for i, s in enumerate(body):
                if i == 0 or not (isinstance(s, n.Op) and _kind(s, primitives) == "release"):
                    continue
                before = body[i - 1]
                if not isinstance(before, n.Op) or _kind(before, primitives) is not None:
                    continue
                mutated = replace_block(module, block, body[: i - 1] + (s, before) + body[i + 1 :])
                yield self.mutant(
                    kernel, s.loc, f"`{s.name} {text(s.ins[0])}` (line {s.loc.line}) moved ahead of `{before.name}` "
                    f"(line {before.loc.line})", mutated, s.name, "early release",
                )  # fmt: skip


PIPE_OPERATORS: tuple[Operator, ...] = (PipeTrips(), PipeReleaseDropOrTwice(), PipeCopyStage(), PipeStageOutside())
