"""Mutation operators for data flow: a write of shared memory that goes missing, and a reduction that
stops excluding the padding past a tensor's extent.

================  ==================================================================================
class             edit
================  ==================================================================================
dropped-write     an operation that writes shared memory (a copy into a ring stage, a store) removed
                  (CR127 where what it wrote is read)
dropped-limit     a reduction's ``limit=`` attribute removed (CR128 where its columns may be padding)
================  ==================================================================================

Which operations write shared memory is told by their declared signatures: an operand in a slot that
writes (``WRITE`` or ``READWRITE``) naming a shared buffer of the kernel.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import attrs

from cake_core.ir import nodes as n
from cake_core.ir.primitive import Access, Primitive
from cake_core.ir.printer import expr as text
from cake_core.mutate.mutant import Mutant, Operator
from cake_core.mutate.rewrite import blocks, replace, replace_block


def shared_buffers(op: n.Op, kernel: n.Kernel, primitives: Mapping[str, Primitive], write: bool) -> list[str]:
    """The shared buffers ``op`` writes (``write``) or reads, by its signature's slots, in operand order."""
    prim = primitives.get(op.name)
    if prim is None:
        return []
    smem = {s.name for s in kernel.smem}
    wanted = (Access.WRITE, Access.READWRITE) if write else (Access.READ, Access.READWRITE)
    out = []
    for slot, e in zip(prim.signature.outs + prim.signature.ins, op.operands):
        name = e.id if isinstance(e, n.Name) else getattr(e, "name", None)
        if slot.access in wanted and name in smem and name not in out:
            out.append(name)
    return out


def _without(module: n.Module, kernel: n.Kernel, s: n.Stmt) -> n.Module | None:
    """``module`` without statement ``s``; a loop or an ``if`` left empty goes too (None where a role
    would be left empty, or an ``if`` with one arm)."""
    for block in blocks(kernel):
        for i, x in enumerate(block.body):
            if x is not s:
                continue
            if len(block.body) > 1:
                return replace_block(module, block, block.body[:i] + block.body[i + 1 :])
            owner = block.owner
            if isinstance(owner, n.Role) or (isinstance(owner, n.If) and (owner.then and owner.orelse)):
                return None
            return _without(module, kernel, owner)
    return None


class DroppedWrite(Operator):
    name = "dropped-write"
    summary = "an operation that writes shared memory removed"

    def kernel_mutants(
        self, module: n.Module, kernel: n.Kernel, primitives: Mapping[str, Primitive]
    ) -> Iterator[Mutant]:
        for _, s in n.walk_ops(kernel):
            written = shared_buffers(s, kernel, primitives, write=True)
            dropped = _without(module, kernel, s) if written else None
            if dropped is None:
                continue
            yield self.mutant(
                kernel, s.loc, f"`{s.name} {text(s.operands[0])}` (line {s.loc.line}) dropped", dropped, written[0],
                "drop",
            )  # fmt: skip


class DroppedLimit(Operator):
    name = "dropped-limit"
    summary = "a reduction's `limit=` attribute removed"

    def kernel_mutants(
        self, module: n.Module, kernel: n.Kernel, primitives: Mapping[str, Primitive]
    ) -> Iterator[Mutant]:
        for _, op in n.walk_ops(kernel):
            prim = primitives.get(op.name)
            if prim is None or prim.signature.attr("limit") is None:
                continue
            for a in op.attrs:
                if a.key != "limit":
                    continue
                new_op = attrs.evolve(op, attrs=tuple(x for x in op.attrs if x is not a))
                yield self.mutant(
                    kernel, a.loc, f"`{op.name}` `limit={text(a.value)}` dropped", replace(module, op, new_op),
                    op.name, "drop",
                )  # fmt: skip


DATAFLOW_OPERATORS: tuple[Operator, ...] = (DroppedWrite(), DroppedLimit())
