"""Mutation classes for Blackwell kernels: the tensor-memory mistakes the BW rules exist to catch, made on
purpose, as :class:`cake_core.mutate.mutant.Operator` subclasses like the core's own classes.

======================  ==============================================================================
class                   edit (the rule that refuses it)
======================  ==============================================================================
tmem-columns            a ``tmem`` region's columns doubled (BW101: capacity, or an allocation larger
                        than an earlier one)
dropped-tmem-release    a ``tcgen05.dealloc`` or the ``tcgen05.relinquish`` removed (BW102)
role-order-swap         two roles adjacent in warp order exchange places, each keeping its size
                        (BW103, where a warp-level tensor-memory move lands off its lane quarter)
dropped-commit-wait     a wait on the barrier a ``tcgen05.commit`` arrives on removed (BW104)
======================  ==============================================================================

BW105 (tcgen05 on a target without it) has no class here: a kernel's target is not part of its text,
so no edit of the module makes that mistake; its corpus holds the same kernels for both targets.

Operations are told by this plugin's primitive classes (for its own instructions) or by their declared
signatures and effects (barrier waits, completions of an asynchronous group).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import attrs
from cake_core.ir import nodes as n
from cake_core.ir.primitive import BarrierAction, Primitive
from cake_core.ir.printer import expr as text
from cake_core.mutate.mutant import Mutant, Operator
from cake_core.mutate.rewrite import blocks, replace, replace_block

from cake_blackwell.tmem import TMEM, TmemDealloc, TmemRelinquish


def _drop(module: n.Module, kernel: n.Kernel, keep) -> Iterator[tuple[n.Op, n.Module]]:  # noqa: ANN001
    """Every module with one operation removed that ``keep`` says no to, with that operation."""
    for block in blocks(kernel):
        for i, s in enumerate(block.body):
            if isinstance(s, n.Op) and not keep(s):
                yield s, replace_block(module, block, block.body[:i] + block.body[i + 1 :])


class TmemColumns(Operator):
    name = "tmem-columns"
    summary = "a tensor-memory region's columns doubled"

    def kernel_mutants(self, module: n.Module, kernel: n.Kernel, primitives: Mapping[str, Primitive]) -> Iterator[Mutant]:
        for mem in kernel.mems:
            if mem.tier != TMEM.value or not mem.shape:
                continue
            last = mem.shape[-1]
            two = n.Num(2, loc=last.loc)
            new = n.Num(2 * last.value, loc=last.loc) if isinstance(last, n.Num) else n.Bin("*", last, two, loc=last.loc)
            mutated = replace(module, mem, attrs.evolve(mem, shape=(*mem.shape[:-1], new)))
            what = f"tmem `{mem.name}` columns `{text(last)}` -> `{text(new)}`"
            yield self.mutant(kernel, mem.loc, what, mutated, mem.name, "x2")


class DroppedTmemRelease(Operator):
    name = "dropped-tmem-release"
    summary = "a tensor-memory deallocation or the allocation permit's relinquish removed"

    def kernel_mutants(self, module: n.Module, kernel: n.Kernel, primitives: Mapping[str, Primitive]) -> Iterator[Mutant]:
        def released(op: n.Op) -> bool:
            return isinstance(primitives.get(op.name), (TmemDealloc, TmemRelinquish))

        for op, mutated in _drop(module, kernel, lambda op: not released(op)):
            what = f"{op.name} {text(op.ins[0])}" if op.ins else op.name
            variant = "dealloc" if isinstance(primitives[op.name], TmemDealloc) else "relinquish"
            yield self.mutant(kernel, op.loc, f"`{what}` dropped", mutated, op.name, variant)


class RoleOrderSwap(Operator):
    name = "role-order-swap"
    summary = "two roles adjacent in warp order exchange places, each keeping its number of warps"

    def kernel_mutants(self, module: n.Module, kernel: n.Kernel, primitives: Mapping[str, Primitive]) -> Iterator[Mutant]:
        ranged = [(r, r.warp_start.value, r.warp_stop.value) for r in kernel.roles
                  if isinstance(r.warp_start, n.Num) and isinstance(r.warp_stop, n.Num)]  # fmt: skip
        ranged.sort(key=lambda x: x[1])
        for (a, a0, a1), (b, b0, b1) in zip(ranged, ranged[1:]):
            if a1 != b0:
                continue
            size_b = b1 - b0
            new_b = attrs.evolve(b, warp_start=n.Num(a0, loc=b.warp_start.loc),
                                 warp_stop=n.Num(a0 + size_b, loc=b.warp_stop.loc))  # fmt: skip
            new_a = attrs.evolve(a, warp_start=n.Num(a0 + size_b, loc=a.warp_start.loc),
                                 warp_stop=n.Num(b1, loc=a.warp_stop.loc))  # fmt: skip
            mutated = replace(replace(module, a, new_a), b, new_b)
            yield self.mutant(
                kernel, b.loc, f"roles `{a.name}` (warps {a0}..{a1}) and `{b.name}` (warps {b0}..{b1}) swapped: "
                f"`{b.name}` on warps {a0}..{a0 + size_b}, `{a.name}` on {a0 + size_b}..{b1}", mutated, b.name, "swap",
            )  # fmt: skip


class DroppedCommitWait(Operator):
    name = "dropped-commit-wait"
    summary = "a wait on the barrier that a completion of asynchronous tensor-core work (a commit) arrives on, removed"

    def kernel_mutants(self, module: n.Module, kernel: n.Kernel, primitives: Mapping[str, Primitive]) -> Iterator[Mutant]:
        committed = set()
        for _, op in n.walk_ops(kernel):
            prim = primitives.get(op.name)
            if prim is None or not prim.group_wait:
                continue
            arrives = [i for i, s in enumerate(prim.signature.ins) if s.barrier is BarrierAction.ARRIVE]
            committed |= {_name(op.ins[i]) for i in arrives if i < len(op.ins)}

        def waits_on_commit(op: n.Op) -> bool:
            prim = primitives.get(op.name)
            if prim is None:
                return False
            slots = prim.signature.ins
            return any(s.barrier is BarrierAction.WAIT and i < len(op.ins) and _name(op.ins[i]) in committed
                       for i, s in enumerate(slots))  # fmt: skip

        for op, mutated in _drop(module, kernel, lambda op: not waits_on_commit(op)):
            yield self.mutant(kernel, op.loc, f"`{op.name} {text(op.ins[0])}` dropped", mutated, _name(op.ins[0]) or "", "drop")


def _name(e: n.Expr) -> str | None:
    return e.name if isinstance(e, n.Ref) else (e.id if isinstance(e, n.Name) else None)


#: the classes, in the order of the rules they exercise
MUTATIONS: tuple[Operator, ...] = (TmemColumns(), DroppedTmemRelease(), RoleOrderSwap(), DroppedCommitWait())
#: the rule that refuses each class's mutants
CAUGHT_BY: dict[str, str] = {"tmem-columns": "BW101", "dropped-tmem-release": "BW102", "role-order-swap": "BW103",
                             "dropped-commit-wait": "BW104"}  # fmt: skip
