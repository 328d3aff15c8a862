"""Building new IR nodes inside a rewrite: operations, arithmetic that skips a literal 0, and names that
collide with nothing the kernel already uses. No precondition: these only build nodes; the tactic that
uses them decides where they go."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import attrs
from cake_core.ir import nodes as n
from cake_core.ir.exprs import substitute

from cake_tactics_core.fit import names_in


def op(name: str, outs: tuple[n.Expr, ...] | list[n.Expr] = (), ins: tuple[n.Expr, ...] | list[n.Expr] = (),
       **attributes: n.Expr) -> n.Op:  # fmt: skip
    """The operation ``name outs <- ins, key=value, ...``."""
    return n.Op(name=name, outs=tuple(outs), ins=tuple(ins), attrs=tuple(n.Attr(k, v) for k, v in attributes.items()))


def arith(operator: str, left: n.Expr, right: n.Expr) -> n.Expr:
    """``left operator right``, without adding or subtracting a literal 0 or multiplying by a literal 1."""
    if operator in "+-" and right == n.Num(0):
        return left
    if operator == "+" and left == n.Num(0):
        return right
    if operator == "*" and n.Num(1) in (left, right):
        return left if right == n.Num(1) else right
    return n.Bin(operator, left, right)


def ref_at(ref: n.Ref, var: str, value: n.Expr) -> n.Ref:
    """``ref`` with ``var`` replaced by ``value`` in its index (the tile a loop reads at another trip)."""

    def index(i: n.Idx) -> n.Idx:
        if isinstance(i, n.At):
            return attrs.evolve(i, expr=substitute(i.expr, {var: value}))
        if isinstance(i, n.Span):
            return attrs.evolve(i, start=substitute(i.start, {var: value}), size=substitute(i.size, {var: value}))
        return i

    return attrs.evolve(ref, index=tuple(map(index, ref.index)))


def ring_ahead(loop: n.For, depth: n.Expr, count: str, p: str, j: str,
               copies: Callable[[n.Expr, n.Expr], tuple[n.Stmt, ...]],
               reads: tuple[n.Stmt, ...]) -> tuple[tuple[n.Stmt, ...], tuple[n.Stmt, ...]]:  # fmt: skip
    """The prologue and the new body of ``loop`` when its tiles come through a ring of ``depth`` stages filled
    ``depth - 1`` trips ahead by cp.async (the staging and cp-async-pipeline tactics' form): the prologue
    (``let count``, then the first ``depth - 1`` tiles each in its own group), and a body that waits for the
    oldest group, synchronizes the CTA, runs ``reads`` and copies the tile ``depth - 1`` trips ahead.
    ``copies(offset, stage)`` makes the copies of the tile at trip ``start + offset`` into ``stage``."""
    step = arith("-", n.Name(loop.var), loop.start)
    prologue = (
        n.Let(name=count, value=arith("-", loop.stop, loop.start)),
        n.For(var=p, start=n.Num(0), stop=arith("-", depth, n.Num(1)), body=(
            n.If(cond=arith("<", n.Name(p), n.Name(count)), then=copies(n.Name(p), n.Name(p))),
            op("cp.async.commit"),
        )),
    )  # fmt: skip
    body = (
        op("cp.async.wait", pending=arith("-", depth, n.Num(2))),
        op("bar.sync"),
        *reads,
        n.Let(name=j, value=arith("-", arith("+", step, depth), n.Num(1))),
        n.If(cond=arith("<", n.Name(j), n.Name(count)), then=copies(n.Name(j), arith("%", n.Name(j), depth))),
        op("cp.async.commit"),
    )  # fmt: skip
    return prologue, body


def taken(kernel: n.Kernel) -> set[str]:
    """Every name ``kernel`` declares or uses: parameters, domain names, constants, grid variables, shared
    buffers, barriers, pipes, roles, and every register tile, ``let`` and loop variable of every role."""
    out = {p.name for p in kernel.params} | {c.var for c in kernel.domain} | {c.name for c in kernel.consts}
    out |= set(kernel.grid.vars) | {s.name for s in kernel.smem} | {b.name for b in kernel.barriers}
    out |= {p.name for p in kernel.pipes} | {r.name for r in kernel.roles} | names_in(kernel)
    for role in kernel.roles:
        for st in n.walk_stmts(role.body):
            if isinstance(st, (n.RegDecl, n.Let)):
                out.add(st.name)
            elif isinstance(st, n.For):
                out.add(st.var)
    return out


class Fresh:
    """Hands out names that collide with nothing in a kernel nor with one another: ``stem``, else
    ``stem2``, ``stem3``, ..."""

    def __init__(self, kernel: n.Kernel, also: Iterable[str] = ()) -> None:
        self._taken = taken(kernel) | set(also)

    def __call__(self, stem: str) -> str:
        name, i = stem, 1
        while name in self._taken:
            i += 1
            name = f"{stem}{i}"
        self._taken.add(name)
        return name
