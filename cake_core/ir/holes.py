"""Where a hole in a kernel's output comes from: the loop or the grid that should have covered it.

Shared by the verifier's coverage rule (CR129, :mod:`cake_core.verify.coverage`) and the interpreter's
``output-never-written`` finding (CS010), which point at the same statement. Syntax only: the
enclosing loops of the tensor's stores, the names their indices depend on through ``let`` names, and the
grid.
"""

from __future__ import annotations

from cake_core.ir import nodes as n
from cake_core.ir.model import KernelModel
from cake_core.ir.primitive import Access, Kind
from cake_core.location import Loc


def _mentions(e: n.Expr | None) -> set[str]:
    return {x.id for x in n.walk_expr(e) if isinstance(x, n.Name)} if e is not None else set()


def _enclosing(body: tuple[n.Stmt, ...], loops: tuple[n.For, ...], lets: dict[str, set[str]],
               out: dict[int, tuple[tuple[n.For, ...], dict[str, set[str]]]]) -> None:  # fmt: skip
    """For every operation of ``body`` (by ``id``): its enclosing loops, outermost first, and the names
    each ``let`` in scope depends on (closed over earlier lets)."""
    lets = dict(lets)
    for s in body:
        if isinstance(s, n.Op):
            out[id(s)] = (loops, lets)
        elif isinstance(s, n.Let):
            names = _mentions(s.value)
            lets[s.name] = names.union(*(lets.get(x, set()) for x in names))
        elif isinstance(s, n.For):
            _enclosing(s.body, loops + (s,), lets, out)
        elif isinstance(s, n.If):
            _enclosing(s.then, loops, lets, out)
            _enclosing(s.orelse, loops, lets, out)


def site(model: KernelModel, tensor: str, dims: tuple[int, ...] = ()) -> tuple[Loc, str]:
    """Where a hole in ``tensor`` comes from, and what it is: the loop around a store of ``tensor`` whose
    variable indexes one of ``dims`` (the dimensions the hole lies outside of), else a persistent loop
    around one (a loop whose bounds name a grid variable), else the kernel's grid."""
    k = model.kernel
    scopes: dict[int, tuple[tuple[n.For, ...], dict[str, set[str]]]] = {}
    for role in k.roles:
        _enclosing(role.body, (), {}, scopes)
    grid = set(k.grid.vars)
    persistent: n.For | None = None
    for typed in model.ops:
        loops, lets = scopes.get(id(typed.op), ((), {}))
        for e in typed.prim.effects(typed):
            o = e.operand
            if e.tier is not Kind.GLOBAL or e.access is not Access.WRITE or o.name != tensor:
                continue
            names: set[str] = set()
            for d in dims:
                item = o.index[d] if d < len(o.index) else None
                for x in _mentions(item.expr if isinstance(item, n.At) else
                                   item.start if isinstance(item, n.Span) else None):  # fmt: skip
                    names |= {x} | lets.get(x, set())
            for loop in loops:
                if loop.var in names:
                    return loop.loc, "loop"
                bounds = _mentions(loop.start) | _mentions(loop.stop) | _mentions(loop.step)
                if persistent is None and (bounds.union(*(lets.get(v, set()) for v in bounds)) & grid):
                    persistent = loop
    if persistent is not None:
        return persistent.loc, "persistent loop"
    return k.grid.loc, "grid"


#: how to close a hole, by what :func:`site` blames
ADVICE = {
    "grid": "size the grid to every tile, the partial one too (`cdiv(N, BM)` tiles), with masked stores "
            "(`oob=skip`)",
    "loop": "let the loop reach every tile, the partial one too (a `cdiv` trip count), with masked stores "
            "(`oob=skip`)",
    "persistent loop": "take every tile: start at the CTA's index, step by the grid's size, and stop at a tile "
                       "count that counts the partial tiles (`cdiv`)",
}  # fmt: skip
