"""Mutation operators for output coverage: the edits that leave output elements unwritten or written twice.

==================  ==================================================================================
class               edit
==================  ==================================================================================
grid-floor          a ``cdiv(a, b)`` in a grid extent becomes ``a / b``: the CTAs for the last, partial
                    tile are gone (CR129)
dropped-self-offset a term naming ``self`` removed from the start of a store's index into a global
                    tensor: every role instance stores the same elements (CR130)
==================  ==================================================================================
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from cake_core.ir import nodes as n
from cake_core.ir.primitive import Primitive
from cake_core.ir.printer import expr as text
from cake_core.mutate.mutant import Mutant, Operator
from cake_core.mutate.rewrite import replace


class GridFloor(Operator):
    name = "grid-floor"
    summary = "a grid extent's `cdiv(a, b)` turned into the floor division `a / b`"

    def kernel_mutants(
        self, module: n.Module, kernel: n.Kernel, primitives: Mapping[str, Primitive]
    ) -> Iterator[Mutant]:
        for extent in kernel.grid.extents:
            for e in n.walk_expr(extent):
                if isinstance(e, n.Call) and e.fn == "cdiv" and len(e.args) == 2:
                    new = n.Bin("/", e.args[0], e.args[1], loc=e.loc)
                    yield self.mutant(
                        kernel, kernel.grid.loc, f"grid extent `{text(extent)}`: `{text(e)}` -> `{text(new)}`",
                        replace(module, e, new), kernel.grid.vars[0] if kernel.grid.vars else "", "floor",
                    )  # fmt: skip


def _mentions_self(e: n.Expr) -> bool:
    return any(isinstance(x, n.Name) and x.id == "self" for x in n.walk_expr(e))


def _without_self(start: n.Expr) -> n.Expr | None:
    """``start`` with its additive term naming ``self`` removed (``t * BM + self * ROWS`` -> ``t * BM``;
    ``self * ROWS`` -> ``0``); None when it names no ``self``."""
    if not _mentions_self(start):
        return None
    if isinstance(start, n.Bin) and start.op in ("+", "-"):
        if _mentions_self(start.right) and not _mentions_self(start.left):
            return start.left
        if start.op == "+" and _mentions_self(start.left) and not _mentions_self(start.right):
            return start.right
        left = _without_self(start.left)
        if left is not None:
            return n.Bin(start.op, left, start.right, loc=start.loc)
        return None
    return n.Num(0, loc=start.loc)


class DroppedSelfOffset(Operator):
    name = "dropped-self-offset"
    summary = "the `self` term of a global store's start dropped: role instances store the same elements"

    def kernel_mutants(
        self, module: n.Module, kernel: n.Kernel, primitives: Mapping[str, Primitive]
    ) -> Iterator[Mutant]:
        tensors = {p.name for p in kernel.params if p.tier == "global"}
        for role in kernel.roles:
            for s in n.walk_stmts(role.body):
                if not isinstance(s, n.Op):
                    continue
                for out in s.outs:
                    if not (isinstance(out, n.Ref) and out.name in tensors):
                        continue
                    for item in out.index:
                        start = item.start if isinstance(item, n.Span) else item.expr if isinstance(item, n.At) \
                            else None  # fmt: skip
                        new = _without_self(start) if start is not None else None
                        if new is None:
                            continue
                        yield self.mutant(
                            kernel, s.loc, f"role `{role.name}` `{s.name}` into `{out.name}`: start "
                            f"`{text(start)}` -> `{text(new)}`", replace(module, start, new), out.name, "drop",
                        )  # fmt: skip


COVERAGE_OPERATORS: tuple[Operator, ...] = (GridFloor(), DroppedSelfOffset())
