"""Mutation operators for the threads of one role instance: the orderings between them an author can lose.

======================  ==============================================================================
class                   edit
======================  ==============================================================================
arrive-per-instance     a per-thread barrier arrival made one elected thread's (``per=instance``), the
                        barrier's count divided by the instance's threads to match (CR125)
dropped-instance-sync   a CTA barrier (``bar.sync``) dropped (CR126)
======================  ==============================================================================

Operations are told by their declared signatures: an arrival has a slot with the ``arrive`` barrier
action and a ``word`` attribute whose choices include ``instance`` (its default the per-thread one);
a CTA barrier's primitive declares ``cta_barrier``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import attrs

from cake_core.ir import nodes as n
from cake_core.ir.primitive import AttrSpec, BarrierAction, Primitive
from cake_core.ir.printer import expr as text
from cake_core.mutate.mutant import Mutant, Operator
from cake_core.mutate.rewrite import blocks, replace, replace_block


def _per_attr(prim: Primitive) -> AttrSpec | None:
    """The attribute that makes an arrival one elected thread's (``per=instance``), if the primitive has one."""
    if not any(s.barrier is BarrierAction.ARRIVE for s in prim.signature.ins):
        return None
    return next((a for a in prim.signature.attrs if a.kind == "word" and "instance" in (a.choices or ())), None)


def _barrier_name(e: n.Expr) -> str | None:
    if isinstance(e, n.Name):
        return e.id
    return getattr(e, "name", None)


def _arrived_barriers(kernel: n.Kernel, primitives: Mapping[str, Primitive]) -> dict[str, set[str]]:
    """Barrier -> the roles that arrive on it."""
    out: dict[str, set[str]] = {}
    for role, op in n.walk_ops(kernel):
        prim = primitives.get(op.name)
        if prim is None:
            continue
        for e, slot in zip(op.ins, prim.signature.ins, strict=False):
            if slot.barrier in (BarrierAction.ARRIVE, BarrierAction.ARRIVE_EXPECT_TX):
                name = _barrier_name(e)
                if name is not None:
                    out.setdefault(name, set()).add(role.name)
    return out


class ArrivePerInstance(Operator):
    name = "arrive-per-instance"
    summary = "a per-thread arrival made one elected thread's (`per=instance`), the barrier's count to match"

    def kernel_mutants(
        self, module: n.Module, kernel: n.Kernel, primitives: Mapping[str, Primitive]
    ) -> Iterator[Mutant]:
        arrivers = _arrived_barriers(kernel, primitives)
        for role, op in n.walk_ops(kernel):
            prim = primitives.get(op.name)
            spec = _per_attr(prim) if prim is not None else None
            if spec is None or not op.ins:
                continue
            per = op.attr(spec.name)
            if isinstance(per, n.Name) and per.id == "instance":
                continue
            bar = kernel.barrier(_barrier_name(op.ins[0]) or "")
            if bar is None or arrivers.get(bar.name) != {role.name}:
                continue  # other roles arrive too: their share of the count is not this one's
            warps = role.per if role.per is not None else n.Bin("-", role.warp_stop, role.warp_start)
            count = n.Bin("/", bar.count, n.Bin("*", n.Num(32), warps))
            attrs_ = tuple(a for a in op.attrs if a.key != spec.name) + (n.Attr(spec.name, n.Name("instance")),)
            mutated = replace(module, op, attrs.evolve(op, attrs=attrs_))
            mutated = replace(mutated, bar, attrs.evolve(bar, count=count))
            yield self.mutant(
                kernel, op.loc, f"`{op.name} {text(op.ins[0])}` (line {op.loc.line}) by one elected thread of role "
                f"`{role.name}`, `{bar.name}` count `{text(bar.count)}` -> `{text(count)}`", mutated, bar.name,
                "per=instance",
            )  # fmt: skip


class DroppedInstanceSync(Operator):
    name = "dropped-instance-sync"
    summary = "a CTA barrier (`bar.sync`) dropped"

    def kernel_mutants(
        self, module: n.Module, kernel: n.Kernel, primitives: Mapping[str, Primitive]
    ) -> Iterator[Mutant]:
        for block in blocks(kernel):
            for i, s in enumerate(block.body):
                prim = primitives.get(s.name) if isinstance(s, n.Op) else None
                if prim is None or not getattr(prim, "cta_barrier", False):
                    continue
                dropped = replace_block(module, block, block.body[:i] + block.body[i + 1 :])
                yield self.mutant(kernel, s.loc, f"`{s.name}` (line {s.loc.line}) dropped", dropped, s.name, "drop")


THREADS_OPERATORS: tuple[Operator, ...] = (ArrivePerInstance(), DroppedInstanceSync())
