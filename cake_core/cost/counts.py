"""How often each operation runs: the work counts a cost model multiplies its per-operation terms by.

Control flow in Cake IR never depends on data, so at concrete sizes every loop's trip count and every
condition is known. One walk of each role body, with grid variables and ``self`` at 0, counts the
executions of each operation by one role instance of that CTA: a persistent loop over tiles gives CTA
0 the most tiles, so the counts are the busiest CTA's, the one that decides the kernel's time. A loop
body is walked once, at its first trip, and its counts multiplied by the trip count; bounds of inner
loops that depend on an outer variable are taken at that first trip. A condition directly in a loop's
body that depends on the loop's variable (``if kc == KC - 1`` with ``let kc = i % KC``) is evaluated at
each of the loop's first trips (up to :data:`SAMPLED_TRIPS`), and each branch counted for the share of
trips that take it.

A global operand whose index does not depend on a loop's variable touches the same elements on every
trip of that loop: besides the executions, the walk counts the *distinct* executions of each global
operand (the product of the trips of the loops its index depends on, through ``let`` values too), so a
model can tell re-reads a CTA serves from its caches from traffic that reaches L2 or DRAM.
"""

from __future__ import annotations

import weakref
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

import attrs

from cake_core.ir import nodes as n
from cake_core.ir.cluster import CRANK
from cake_core.ir.exprs import Compiled, EvalError, compile_expr
from cake_core.ir.model import KernelModel
from cake_core.ir.pipes import counter
from cake_core.ir.primitive import Kind


@attrs.define
class Counts:
    """Executions of each operation (by the ``id`` of its node) by one role instance of the busiest CTA,
    and the distinct executions of each of its global operands (``(id, operand name)``)."""

    times: dict[int, float] = attrs.field(factory=lambda: defaultdict(float))
    distinct: dict[tuple[int, str], float] = attrs.field(factory=lambda: defaultdict(float))


_OP, _LET, _FOR, _IF = range(4)
#: how many trips of a loop decide the share of trips a branch on its variable takes
SAMPLED_TRIPS = 16
_ERRORS = (EvalError, ZeroDivisionError, TypeError, ValueError)
_MISSING = object()


class _Walk:
    """A kernel model's role bodies compiled for counting: expressions compiled once, and for each global
    operand the loop variables its index depends on (through ``let`` values), found once."""

    def __init__(self, model: KernelModel) -> None:
        comp = Compiled()
        self.roles = [(info.per * 32, self._block(model, info.role.body, comp, {})) for info in model.roles]
        self.pipes = [counter(p) for p in model.pipes]
        self.grid_vars = model.kernel.grid.vars
        self.grid = [compile_expr(e) for e in model.kernel.grid.extents]

    def _block(self, model: KernelModel, body: tuple[n.Stmt, ...], comp: Compiled,
               deps: dict[str, frozenset[str]], loop_var: str | None = None) -> list[tuple]:  # fmt: skip
        deps = dict(deps)
        out: list[tuple] = []
        for s in body:
            if isinstance(s, n.Op):
                typed = model.by_op.get(id(s))
                if typed is None:
                    continue
                operands = [(o.name, _depends(o.expr, deps)) for o in typed.outs + typed.ins
                            if o.name is not None and o.kind is Kind.GLOBAL]  # fmt: skip
                binds = [(b.name, comp(b.value)) for b in typed.prim.binds(typed)]
                out.append((_OP, id(s), operands, binds))
            elif isinstance(s, n.Let):
                deps[s.name] = _depends(s.value, deps)
                out.append((_LET, s.name, comp(s.value)))
            elif isinstance(s, n.For):
                inner = self._block(model, s.body, comp, {**deps, s.var: frozenset({s.var})}, s.var)
                out.append((_FOR, s.var, comp(s.start), comp(s.stop), comp(s.step), inner))
            elif isinstance(s, n.If):
                # a branch on the enclosing loop's variable: the lets before it, to evaluate it at other trips
                lets = [x for x in out if x[0] == _LET] if loop_var in _depends(s.cond, deps) else None
                out.append((_IF, comp(s.cond), self._block(model, s.then, comp, deps),
                            self._block(model, s.orelse, comp, deps), lets))  # fmt: skip
        return out

    def run(self, env: Mapping[str, Any]) -> Counts:
        out = Counts()
        base: dict[str, Any] = dict(env)
        for v in self.grid_vars:
            base[v] = 0
        base[CRANK] = 0  # the first CTA of a cluster
        for c in self.pipes:
            base[c] = 0
        for threads, prog in self.roles:
            local = dict(base)
            local["self"] = 0
            local["THREADS"] = threads
            _run(prog, local, 1.0, (), out)
        return out


def _run(prog: list[tuple], env: dict[str, Any], mult: float, loops: tuple[tuple[str, int, int, int], ...],
         out: Counts) -> None:  # fmt: skip
    for ins in prog:
        kind = ins[0]
        if kind == _OP:
            _, key, operands, binds = ins
            out.times[key] += mult
            for name, used in operands:
                distinct = 1.0
                for var, trips, _, _ in loops:
                    if var in used:
                        distinct *= trips
                out.distinct[(key, name)] += distinct
            for name, fn in binds:
                try:
                    env[name] = fn(env)
                except _ERRORS:
                    pass
        elif kind == _LET:
            try:
                env[ins[1]] = ins[2](env)
            except _ERRORS:
                env.pop(ins[1], None)
        elif kind == _FOR:
            _, var, start_fn, stop_fn, step_fn, body = ins
            try:
                start, stop = int(start_fn(env)), int(stop_fn(env))
                step = int(step_fn(env)) if step_fn is not None else 1
            except _ERRORS:
                continue
            if step <= 0 or stop <= start:
                continue
            trips = -(-(stop - start) // step)
            inner = dict(env)
            inner[var] = start
            _run(body, inner, mult * trips, loops + ((var, trips, start, step),), out)
        else:
            share = _taken(ins[1], ins[4], env, loops[-1] if loops and ins[4] is not None else None)
            if share > 0:
                _run(ins[2], env if share == 1 else dict(env), mult * share, loops, out)
            if share < 1:
                _run(ins[3], env, mult * (1 - share), loops, out)


def _taken(cond: Any, lets: list[tuple] | None, env: dict[str, Any], loop: tuple[str, int, int, int] | None) -> float:
    """The share of trips that take a branch: its condition at ``env`` (1 or 0; 1 if it cannot be
    evaluated), or, for a branch on the variable of ``loop``, over the loop's first trips with the lets
    before the branch evaluated again at each."""
    if loop is None:
        try:
            return 1.0 if cond(env) else 0.0
        except _ERRORS:
            return 1.0
    var, trips, start, step = loop
    walks = min(trips, SAMPLED_TRIPS)
    names = [var] + [x[1] for x in lets or ()]
    saved = [env.get(name, _MISSING) for name in names]
    taken = 0
    for k in range(walks):
        env[var] = start + k * step
        try:
            for _, name, fn in lets or ():
                env[name] = fn(env)
            taken += bool(cond(env))
        except _ERRORS:
            taken += 1
    for name, value in zip(names, saved, strict=True):  # the walk goes on at the trip it was at
        if value is _MISSING:
            env.pop(name, None)
        else:
            env[name] = value
    return taken / walks


_WALKS: weakref.WeakKeyDictionary[KernelModel, _Walk] = weakref.WeakKeyDictionary()


def _walk(model: KernelModel) -> _Walk:
    """The model's compiled walk, made once."""
    walk = _WALKS.get(model)
    if walk is None:
        walk = _WALKS[model] = _Walk(model)
    return walk


def executions(model: KernelModel, env: Mapping[str, Any]) -> Counts:
    """The :class:`Counts` of one role instance of each role of the CTA whose grid variables are 0, at
    the kernel environment ``env`` (sizes, constants, ``SMS``). The model's bodies are compiled once."""
    return _walk(model).run(env)


def grid_size(model: KernelModel, env: Mapping[str, Any]) -> int:
    """The number of CTAs the kernel launches at ``env``."""
    total = 1
    for fn in _walk(model).grid:
        total *= max(int(fn(env)), 0)
    return total


def _depends(e: n.Expr, deps: Mapping[str, frozenset[str]]) -> frozenset[str]:
    """The loop variables ``e`` depends on, directly or through ``let`` values."""
    found: set[str] = set()
    for x in n.walk_expr(e):
        if isinstance(x, n.Name):
            found |= deps.get(x.id, frozenset())
    return frozenset(found)


__all__ = ["Counts", "executions", "grid_size"]
