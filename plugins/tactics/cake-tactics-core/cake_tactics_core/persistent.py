"""The ``persistent`` tactic: launch one CTA per multiprocessor and let each walk the grid's tiles.

A kernel with ``grid (t, b) over (X, Y)`` becomes ``grid (w) over (min(SMS, X * Y))`` (``SMS`` is the
target's multiprocessor count, a name the language knows), and every role's body runs once per tile of
the old grid, the first grid variable varying fastest as before::

    reg ...                                   (the role's top-level register tiles stay declared once)
    for tile in w .. X * Y step min(SMS, X * Y):
      let t = tile % X
      let b = tile / X
      ... the rest of the role's body, unchanged (fills included: each tile starts afresh) ...
      bar.sync                                 (one role, with shared memory: the next tile's writes
                                                wait for this tile's last reads)

With three grid variables the middle one is ``tile / X % Y`` and the last ``tile / (X * Y)``; with one,
``let t = tile``. The grid's own variable names are kept; ``w`` and ``tile`` are fresh names. Every
(role, tile) pair runs the body the old CTA ran for that tile, in an order the old grid left free; the
pipes' counters carry across tiles (the compiler derives their phases), so a producer may run a tile
ahead of its consumers.

Precondition: the grid is not already persistent (no extent names ``SMS``) and ``SMS`` is not a name
of the kernel; the kernel declares no mbarriers of its own (their hand-written parities would not carry
across tiles; pipes do) and runs in no clusters; with more than one role, every shared buffer belongs
to a pipe (the only hand-off between roles that orders tiles); no top-level register tile's shape
names a grid variable or a name bound in the role; no global parameter is both read and written by
the kernel (a tile could read what another tile wrote, which the new order would expose: the check
does not try to prove the tiles' regions disjoint); and the rewrite fits
(:func:`cake_tactics_core.fit.fits`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce
from typing import TYPE_CHECKING

import attrs

from cake_core.ir import nodes as n
from cake_core.loop.tactic import Application

from cake_tactics_core.construct import Fresh
from cake_tactics_core.fit import names_in, offered, with_kernel

if TYPE_CHECKING:
    from cake_core.target import Target

SMS = "SMS"


def _bound(body: tuple[n.Stmt, ...]) -> set[str]:
    """Names a body binds: its lets, loop variables, register tiles and the stage handles its pipe
    operations bind (``pipe.acquire s <- cring``)."""
    out: set[str] = set()
    for st in n.walk_stmts(body):
        if isinstance(st, (n.Let, n.RegDecl)):
            out.add(st.name)
        elif isinstance(st, n.For):
            out.add(st.var)
        elif isinstance(st, n.Op):
            out |= {e.id for e in st.outs if isinstance(e, n.Name)}
    return out


def _globals_read_and_written(kernel: n.Kernel) -> set[str]:
    """Global parameters one operation writes (an output) and another reads (an input)."""
    params = {p.name for p in kernel.params if p.tier == "global"}
    read: set[str] = set()
    written: set[str] = set()
    for _role, op in n.walk_ops(kernel):
        outs = {e.name for e in op.outs if isinstance(e, n.Ref) and e.name in params}
        ins = {r.name for e in op.ins for r in n.walk_expr(e) if isinstance(r, n.Ref) and r.name in params}
        written |= outs
        read |= ins - outs  # an operation that reads what it writes (atomic.add) orders itself
    return read & written


def refusal(kernel: n.Kernel) -> str | None:
    """Why the precondition's structural part refuses ``kernel`` (``None``: it admits it)."""
    grid = kernel.grid
    if not grid.vars or len(grid.vars) != len(grid.extents):
        return "no grid to walk"
    if any(SMS in names_in(e) for e in grid.extents):
        return "the grid is already persistent"
    declared = {c.name for c in kernel.consts} | {p.name for p in kernel.params} | {c.var for c in kernel.domain}
    if SMS in declared:
        return f"`{SMS}` is a name of the kernel"
    if kernel.barriers:
        return "the kernel declares mbarriers of its own"
    if kernel.cta.cluster:
        return "the kernel runs in clusters (a grid of min(SMS, tiles) CTAs need not fill them)"
    piped = {b for p in kernel.pipes for b in p.buffers}
    if len(kernel.roles) > 1 and any(s.name not in piped for s in kernel.smem):
        return "a shared buffer outside every pipe in a kernel of several roles (nothing orders its reuse)"
    for role in kernel.roles:
        local = _bound(role.body) | set(grid.vars)
        for st in role.body:
            if isinstance(st, n.RegDecl) and names_in((st.shape, st.layout)) & local:
                return f"register tile `{st.name}`'s shape names a grid variable or a local name"
    both = _globals_read_and_written(kernel)
    if both:
        return f"global {', '.join(f'`{x}`' for x in sorted(both))} is both read and written"
    return None


def _mul(a: n.Expr, b: n.Expr) -> n.Expr:
    return n.Bin("*", a, b)


def _grid_lets(grid: n.Grid, tile: n.Expr) -> tuple[n.Let, ...]:
    """``let v_i = tile / (E_1 * .. * E_{i-1}) % E_i`` for each grid variable (no ``%`` for the last,
    no division for the first)."""
    lets = []
    for i, (var, extent) in enumerate(zip(grid.vars, grid.extents, strict=True)):
        value = tile if i == 0 else n.Bin("/", tile, reduce(_mul, grid.extents[:i]))
        if i < len(grid.vars) - 1:
            value = n.Bin("%", value, extent)
        lets.append(n.Let(name=var, value=value))
    return tuple(lets)


def persistent(kernel: n.Kernel) -> n.Kernel:
    """``kernel`` with its grid walked by one CTA per multiprocessor (see the module docstring)."""
    fresh = Fresh(kernel, also=("self", SMS))
    w, tile = fresh("w"), fresh("tile")
    tiles = reduce(_mul, kernel.grid.extents)
    ctas = n.Call("min", (n.Name(SMS), tiles))
    sync = len(kernel.roles) == 1 and bool(kernel.smem)
    roles = []
    for role in kernel.roles:
        regs = tuple(st for st in role.body if isinstance(st, n.RegDecl))
        rest = tuple(st for st in role.body if not isinstance(st, n.RegDecl))
        body = (*_grid_lets(kernel.grid, n.Name(tile)), *rest)
        if sync and not (rest and isinstance(rest[-1], n.Op) and rest[-1].name == "bar.sync"):
            body += (n.Op(name="bar.sync"),)
        loop = n.For(var=tile, start=n.Name(w), stop=tiles, step=ctas, body=body)
        roles.append(attrs.evolve(role, body=(*regs, loop)))
    grid = attrs.evolve(kernel.grid, vars=(w,), extents=(ctas,))
    return attrs.evolve(kernel, grid=grid, roles=tuple(roles))


class Persistent:
    """Walk a kernel's grid with one CTA per multiprocessor: the site is the kernel, no params."""

    name = "persistent"
    precondition = (
        "a kernel whose grid is not persistent yet, with no mbarriers of its own and no clusters, every shared "
        "buffer of a multi-role kernel in a pipe, top-level register tiles sized without grid or local names and "
        "no global both read and written; the rewrite (grid min(SMS, tiles), each role's body in a loop over tiles) "
        "fits"
    )

    def applications(self, module: n.Module, target: Target) -> Sequence[Application]:
        candidates = [
            Application(self.name, kernel.name) for kernel in module.kernels if kernel.roles and refusal(kernel) is None
        ]
        return offered(self, module, target, candidates)

    def apply(self, module: n.Module, target: Target, application: Application) -> n.Module:
        return with_kernel(module, application.site, persistent)
