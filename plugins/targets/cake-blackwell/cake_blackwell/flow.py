"""Where each tensor-memory operation of a kernel sits: its role, its place in the role's program order,
and the loops and conditions around it, for the Blackwell verifier rules (:mod:`cake_blackwell.rules`).

The rules read operations through their declared effects and this plugin's own primitive classes:
an access of a ``tmem`` operand (``Access`` other than ``NONE``) by a primitive that is not
``collective`` is a warp-level tensor-memory move (``tcgen05.ld`` / ``st``: each warp moves its own
lanes); a ``collective`` one is the tensor core's (``tcgen05.mma``); a primitive with a ``group_wait``
and a barrier arrival completes an asynchronous group onto an mbarrier (``tcgen05.commit``).
"""

from __future__ import annotations

from collections.abc import Iterator

import attrs
from cake_core.ir import nodes as n
from cake_core.ir.model import KernelModel, RoleInfo, TypedOpImpl
from cake_core.ir.primitive import Access, BarrierAction, Effect
from cake_core.verify.facts import facts

from cake_blackwell.tmem import TMEM, TmemAlloc, TmemDealloc, TmemRelinquish, region_columns


@attrs.frozen(eq=False)
class Site:
    """One typed operation where it runs: its role, its rank in the role's depth-first program order,
    the enclosing loops and branches (outermost first) as ``(statement, branch)`` pairs, and its
    tensor-memory effects."""

    typed: TypedOpImpl
    role: RoleInfo
    order: int
    context: tuple[tuple[n.Stmt, str], ...]
    tmem: tuple[Effect, ...] = ()

    @property
    def op(self) -> n.Op:
        return self.typed.op

    @property
    def loc(self):  # noqa: ANN201 - a cake_core Loc
        return self.typed.op.loc

    @property
    def in_loop(self) -> bool:
        return any(isinstance(s, n.For) for s, _ in self.context)

    def same_context(self, other: Site) -> bool:
        """Whether both run under the same loops and branches (so equally often), in one role."""
        return self.role is other.role and len(self.context) == len(other.context) and all(
            a is b and x == y for (a, x), (b, y) in zip(self.context, other.context, strict=True)
        )  # fmt: skip

    def tmem_effects(self) -> list[Effect]:
        return list(self.tmem)


def sites(model: KernelModel) -> list[Site]:
    """Every typed operation of the kernel model, role by role, in program order (the effects read from
    the model's facts, computed once per model)."""
    known = facts(model).by_op
    out: list[Site] = []
    for info in model.roles:
        counter = iter(range(1 << 30))
        for op, ctx in _walk(info.role.body, ()):
            typed = model.by_op.get(id(op))
            if typed is not None:
                of = known.get(id(op))
                effects = of.effects if of is not None and of.typed is typed else typed.prim.effects(typed)
                tmem = tuple(e for e in effects if e.tier is TMEM)
                out.append(Site(typed, info, next(counter), ctx, tmem))
    return out


def _walk(body: tuple[n.Stmt, ...], ctx: tuple[tuple[n.Stmt, str], ...]) -> Iterator[tuple[n.Op, tuple]]:
    for s in body:
        if isinstance(s, n.Op):
            yield s, ctx
        elif isinstance(s, n.For):
            yield from _walk(s.body, (*ctx, (s, "body")))
        elif isinstance(s, n.If):
            yield from _walk(s.then, (*ctx, (s, "then")))
            yield from _walk(s.orelse, (*ctx, (s, "else")))


def is_alloc(site: Site) -> bool:
    return isinstance(site.typed.prim, TmemAlloc)


def is_dealloc(site: Site) -> bool:
    return isinstance(site.typed.prim, TmemDealloc)


def is_relinquish(site: Site) -> bool:
    return isinstance(site.typed.prim, TmemRelinquish)


def region_of(site: Site) -> str | None:
    """The tensor-memory region an allocation or deallocation names."""
    for o in site.typed.ins:
        if o.kind is TMEM:
            return o.name
    return None


def columns_of(site: Site) -> int | None:
    """Columns the region an allocation or deallocation names occupies (all its stages)."""
    for o in site.typed.ins:
        if o.kind is TMEM:
            return region_columns(o)
    return None


def lane_moves(site: Site) -> list[Effect]:
    """The warp-level tensor-memory accesses of a site: each warp moves its own lanes."""
    if site.typed.prim.collective:
        return []
    return [e for e in site.tmem_effects() if e.access is not Access.NONE]


def reads_tmem(site: Site) -> list[Effect]:
    return [e for e in lane_moves(site) if e.access in (Access.READ, Access.READWRITE)]


def async_writes(site: Site) -> list[Effect]:
    """The tensor core's asynchronous writes of tensor memory: a ``collective`` primitive in an
    asynchronous group (``tcgen05.mma``), which a later commit completes onto an mbarrier. (A warp's own
    ``tcgen05.st`` is completed by its thread-local wait, which the interpreter checks.)"""
    prim = site.typed.prim
    if not prim.group or not prim.collective:
        return []
    return [e for e in site.tmem_effects() if e.asynchronous and e.access in (Access.WRITE, Access.READWRITE)]


def completes(site: Site, group: str) -> list[str]:
    """The barriers a site arrives on when it completes ``group`` (a ``tcgen05.commit``)."""
    if site.typed.prim.group_wait != group:
        return []
    return [
        e.operand.name for e in site.typed.prim.effects(site.typed)
        if e.barrier in (BarrierAction.ARRIVE, BarrierAction.ARRIVE_EXPECT_TX) and e.operand.name
    ]  # fmt: skip


def waits_on(site: Site) -> list[str]:
    """The barriers a site waits on (written or derived operands)."""
    effects = site.typed.prim.effects(site.typed)
    return [e.operand.name for e in effects if e.barrier is BarrierAction.WAIT and e.operand.name]
