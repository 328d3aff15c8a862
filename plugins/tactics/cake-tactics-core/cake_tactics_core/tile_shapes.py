"""The ``tile-shapes`` tactic: change one tile constant of a kernel (rows per CTA, column tile, K chunk).

A *tile constant* is a constant with an integer literal value that sizes a tile or the grid: the grid's
extents, a shared buffer's shape, a register tile's shape or a slice's size name it (directly or through
other constants, ``KC = D / BK``). Constants that also count warps (``cta warps``, a role's warps, a
layout's warp grid), stages or registers are not tile constants: the ring-depth tactic owns stages, and
warp counts change the CTA, not its tiles. The offered values are the current one halved and doubled,
where the rewritten module still fits (:func:`cake_tactics_core.fit.fits`). Where the doubled value fits
only some of the domain's listed sizes, it is offered written in the size (``BM = min(256, 32768 / D)``:
:mod:`cake_tactics_core.adaptive`), each specialization taking the tile it has room for. The kernel is
written in its constants, so every fitting value computes the same answer with different tiles.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from cake_core.ir import nodes as n
from cake_core.ir.transform import set_consts
from cake_core.loop.tactic import Application

from cake_tactics_core.adaptive import scalings, value
from cake_tactics_core.fit import literal_consts, names_in, offered, reach

if TYPE_CHECKING:
    from cake_core.target import Target


def _sizing(kernel: n.Kernel) -> set[str]:
    """Names that size tiles or the grid: grid extents, buffer and register shapes, slice sizes."""
    roots: list[object] = [kernel.grid.extents, tuple(s.shape for s in kernel.smem)]
    for role in kernel.roles:
        for st in n.walk_stmts(role.body):
            if isinstance(st, n.RegDecl):
                roots.append(st.shape)
    sizes: set[str] = set()
    for root in roots:
        sizes |= names_in(root)
    for role in kernel.roles:
        for st in n.walk_stmts(role.body):
            if isinstance(st, n.Op):
                for ref in (*st.outs, *st.ins):
                    for e in n.walk_expr(ref):
                        if isinstance(e, n.Ref):
                            for i in e.index:
                                if isinstance(i, n.Span):
                                    sizes |= names_in(i.size)
    return reach(kernel, sizes)


def _counting(kernel: n.Kernel) -> set[str]:
    """Names that count warps, stages or registers."""
    roots: list[object] = [kernel.cta, tuple(s.stages for s in kernel.smem), tuple(b.stages for b in kernel.barriers)]
    roots += [(r.warp_start, r.warp_stop, r.per, r.regs) for r in kernel.roles]
    for role in kernel.roles:
        for st in n.walk_stmts(role.body):
            if isinstance(st, n.RegDecl) and st.layout is not None:
                roots.append(st.layout.args)
    names: set[str] = set()
    for root in roots:
        names |= names_in(root)
    return reach(kernel, names)


def tile_constants(kernel: n.Kernel) -> dict[str, int]:
    """The kernel's tile constants and their values, in declaration order."""
    sizing, counting = _sizing(kernel), _counting(kernel)
    return {k: v for k, v in literal_consts(kernel).items() if k in sizing and k not in counting}


class TileShapes:
    """One tactic for every tile constant: the site is the kernel, the params the constant's new value."""

    name = "tile-shapes"
    precondition = (
        "a kernel constant with a literal value sizes tiles or the grid and counts no warps, stages or registers; "
        "the rewrite to half or double the value (doubled only up to a listed size of the domain where it does "
        "not fit them all) type-checks, fits shared memory, keeps compile-time divisions exact and verifies "
        "for the target"
    )

    def applications(self, module: n.Module, target: Target) -> Sequence[Application]:
        out: list[Application] = []
        for kernel in module.kernels:
            for const, current in tile_constants(kernel).items():
                halved = [Application(self.name, kernel.name, {const: current // 2})] if current % 2 == 0 else []
                doubled = Application(self.name, kernel.name, {const: current * 2})
                out += offered(self, module, target, [x for x in halved if current > 1])
                fitting = offered(self, module, target, [doubled])
                if not fitting:  # doubled where the domain's sizes leave room, as it is elsewhere
                    scaled = [Application(self.name, kernel.name, {const: current * 2, **s}) for s in scalings(kernel)]
                    fitting = offered(self, module, target, scaled)
                out += fitting
        return out

    def apply(self, module: n.Module, target: Target, application: Application) -> n.Module:
        params = dict(application.params)
        size, upto = params.pop("size", None), params.pop("upto", None)
        values = {k: value(int(v), size, upto) for k, v in params.items()}
        return set_consts(module, values, kernel=application.site)
