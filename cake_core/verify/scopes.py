"""What encloses each operation of a kernel (its binders), and the symbolic view of those binders.

Between a kernel's entry and one of its operations lie :class:`Binder`\\ s: the grid variables, the
role instance ``self``, loops, ``let`` names and the arms of ``if`` statements (:func:`binders`). The
proof search reads a chain of binders as a :class:`Scope`: the ``let`` values as linear forms, each
variable's bounds, the guards ``G >= 0`` that hold inside (enclosing conditions, loop and grid ranges),
and the :class:`~cake_core.verify.bounds.Bounder` of those bounds. :class:`ScopeViews` builds the scope
of each chain once, from the scope of its longest prefix already built.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import TYPE_CHECKING

import attrs

from cake_core.ir import nodes as n
from cake_core.ir.cluster import CRANK, cluster_size
from cake_core.ir.pipes import stages_expr
from cake_core.verify.bounds import Bound, Bounder
from cake_core.verify.linear import Form, Lin, Linearizer, Var
from cake_core.verify.shapes import ShapeDomain

if TYPE_CHECKING:
    from cake_core.ir.model import KernelModel

__all__ = ["Binder", "BinderKind", "Scope", "ScopeViews", "binders"]


class BinderKind(enum.StrEnum):
    GRID = "grid"
    SELF = "self"
    LOOP = "loop"
    LET = "let"
    GUARD = "guard"


@attrs.frozen
class Binder:
    """One thing between a kernel's entry and an operation: a variable, a ``let`` or an ``if`` arm."""

    kind: BinderKind
    name: str = ""  # the variable or let name
    start: n.Expr | None = None  # loop start; None for grid (0)
    stop: n.Expr | None = None  # loop stop, grid extent
    step: n.Expr | None = None
    value: n.Expr | None = None  # let value or guard condition
    negate: bool = False  # a guard from an `else` arm
    count: int = 1  # role instances (or a cluster's CTAs, for `crank`), for SELF


def binders(model: KernelModel) -> dict[int, tuple[Binder, ...]]:
    """For every operation (by ``id``), the binders that enclose it, outermost first."""
    k = model.kernel
    grid = tuple(
        Binder(BinderKind.GRID, v, stop=e) for v, e in zip(k.grid.vars, k.grid.extents, strict=False)
    )
    out: dict[int, tuple[Binder, ...]] = {}

    def block(body: tuple[n.Stmt, ...], chain: tuple[Binder, ...]) -> None:
        for s in body:
            if isinstance(s, n.Let):
                chain = chain + (Binder(BinderKind.LET, s.name, value=s.value),)
            elif isinstance(s, n.For):
                block(s.body, chain + (Binder(BinderKind.LOOP, s.var, s.start, s.stop, s.step),))
            elif isinstance(s, n.If):
                block(s.then, chain + (Binder(BinderKind.GUARD, value=s.cond),))
                block(s.orelse, chain + (Binder(BinderKind.GUARD, value=s.cond, negate=True),))
            elif isinstance(s, n.Op):
                out[id(s)] = chain
                stage = _stage_binder(model, s)
                if stage is not None:
                    chain = chain + (stage,)

    if k.cta.cluster:  # the CTA's rank in its cluster, `crank`, ranges like an instance index: 0 .. C - 1
        grid = grid + (Binder(BinderKind.SELF, CRANK, count=cluster_size(k, model.env)),)
    for info in model.roles:
        block(info.role.body, grid + (Binder(BinderKind.SELF, "self", count=info.instances),))
    return out


def _stage_binder(model: KernelModel, op: n.Op) -> Binder | None:
    """The stage a pipe operation names for the rest of its block, as a variable over the pipe's
    stages (which one it is depends on the role instance's count of stages taken)."""
    typed = model.by_op.get(id(op))
    if typed is None or not typed.outs or not typed.outs[0].slot.binds:
        return None
    pipe = model.kernel.pipe(typed.ins[0].name or "")
    if pipe is None:
        return None
    # the stage count as written: binders are shared by every specialization of the kernel
    return Binder(BinderKind.LOOP, typed.outs[0].name or "", n.Num(0), stages_expr(model.kernel, pipe))


@attrs.define(eq=False)
class Scope:
    """The symbolic view of one chain of binders, and what is memoized for it while its
    :class:`ScopeViews` lives (every access under the same binders shares it: linear forms of
    expressions, the bounder, proofs of obligations by the key of ``m``)."""

    chain: tuple[Binder, ...]  # held so that the ids keying the views stay unique
    lets: dict[str, Lin | None]
    bounds: dict[str, Bound]  # variable bounds, scalars not yet defaulted (what inner binders see)
    guards: list[Lin]
    full_bounds: dict[str, Bound] | None = None
    bounder: Bounder | None = None
    lins: dict[int, tuple[n.Expr, Lin | None]] = attrs.field(factory=dict)
    proofs: dict[str, tuple[bool, list[Form]]] = attrs.field(factory=dict)
    parent: Scope | None = None  # the scope of all but the last binder (None at the root)
    var: str | None = None  # the variable the last binder adds (grid, self, loop)


class ScopeViews:
    """The :class:`Scope` of every chain of binders of one kernel model, each built once.

    Bounders share work where their answers cannot tell: when no variable's bound refers back to
    itself (:attr:`~cake_core.verify.bounds.Bounder.acyclic`), a bound is a function of its question
    alone, whatever was asked before. Then a ``let`` or a guard without facts shares its parent's
    bounder and proofs (same variable bounds, same guards); a new bounder starts from the memo of the
    nearest enclosing one when the variables added in between are new to it; and a run-time loop step
    is bounded by the enclosing scope's bounder.
    """

    def __init__(self, shape: ShapeDomain, lin: Linearizer) -> None:
        self.shape, self.linearizer = shape, lin
        self._root = Scope((), {}, {}, [], {s: (None, None) for s in shape.scalars})
        self._states: dict[tuple[int, ...], Scope] = {}
        self._by_chain: dict[int, tuple[tuple[Binder, ...], Scope]] = {}

    def view(self, chain: tuple[Binder, ...]) -> Scope:
        """The scope of ``chain``, built from its longest prefix already built."""
        # first by the chain's own identity: the scopes of operations are a few tuples met again and
        # again (the entry holds the tuple, so its id is not reused)
        hit = self._by_chain.get(id(chain))
        if hit is not None and hit[0] is chain:
            return hit[1]
        key = tuple(map(id, chain))
        state = self._states.get(key)
        if state is not None:
            self._by_chain[id(chain)] = (chain, state)
            return state
        k = len(chain)
        while k > 0 and key[:k] not in self._states:
            k -= 1
        parent = self._states[key[:k]] if k else self._root
        for i in range(k, len(chain)):
            child = self._extend(parent, chain[: i + 1])
            child.parent = parent
            if child.bounds is parent.bounds and child.guards is parent.guards:
                # a `let`, or a guard that gives no fact: the same variable bounds and guards, so the
                # same bounder and the same proofs. Shared where the bounder's answers do not depend
                # on the order of its questions (acyclic bounds), so that sharing its memo changes
                # no answer.
                child.full_bounds = parent.full_bounds
                bounder = self.bounder(parent)
                if bounder.acyclic:
                    child.bounder, child.proofs = bounder, parent.proofs
            else:
                bounds = dict(child.bounds)
                for s in self.shape.scalars:
                    bounds.setdefault(s, (None, None))
                child.full_bounds = bounds
            parent = self._states[key[: i + 1]] = child
        self._by_chain[id(chain)] = (chain, parent)
        return parent

    def bounder(self, state: Scope) -> Bounder:
        """The bounder of ``state``'s variable bounds, made on first use.

        A bounder starts from what the bounder of the nearest enclosing scope that has one knows,
        where that is what it would compute itself: both bounders acyclic (their answers depend on
        their questions only), and each variable the binders in between add new (not shadowing one)
        and never asked about by the outer bounder (so every bound it memoized reads only variables
        whose bounds the two share: lets and guards change no variable's bound).
        """
        bounder = state.bounder
        if bounder is None:
            assert state.full_bounds is not None
            bounder = state.bounder = Bounder(self.shape, state.full_bounds)
            # the nearest enclosing scope that has a bounder, and the variables added since
            added = [] if state.var is None else [state.var]
            outer = state.parent
            while outer is not None and outer.bounder is None:
                if outer.var is not None:
                    added.append(outer.var)
                outer = outer.parent
            if outer is not None and added:
                known = outer.bounder
                assert known is not None
                if (
                    not any(v in known.var_bounds or v in known.asked for v in added)
                    and known.acyclic and bounder.acyclic
                ):  # fmt: skip
                    bounder.inherit(known)
        return bounder

    def lin(self, state: Scope, e: n.Expr) -> Lin | None:
        """``e`` linearized under ``state``'s lets, memoized by the expression's identity."""
        hit = state.lins.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        x = self.linearizer.lin(e, state.lets)
        state.lins[id(e)] = (e, x)  # the entry keeps ``e`` alive, so its id is not reused
        return x

    def _extend(self, parent: Scope, chain: tuple[Binder, ...]) -> Scope:
        """The scope of ``chain`` from the scope of all but its last binder."""
        b = chain[-1]
        lin = self.linearizer.lin
        lets, bounds, guards = parent.lets, parent.bounds, parent.guards
        if b.kind is BinderKind.GRID:
            ext = lin(b.stop, lets) if b.stop is not None else None
            hi = None if ext is None else ext.plus(-1)
            bounds = {**bounds, b.name: (Lin(), hi)}
            if hi is not None:
                guards = guards + [hi - Lin.of(Var(b.name))]
        elif b.kind is BinderKind.SELF:
            bounds = {**bounds, b.name: (Lin(), Lin(b.count - 1))}
        elif b.kind is BinderKind.LOOP:
            start = lin(b.start, lets) if b.start is not None else None
            stop = lin(b.stop, lets) if b.stop is not None else None
            step = lin(b.step, lets) if b.step is not None else Lin(1)
            v = Lin.of(Var(b.name))
            if step is not None and step.is_const and step.const < 0:
                lo, hi = (None if stop is None else stop.plus(1)), start
            elif step is not None and (step.is_const or self._positive(step, parent)):
                lo, hi = start, (None if stop is None else stop.plus(-1))
            else:  # a run-time step not proved positive: nothing is known of the variable
                lo = hi = None
            bounds = {**bounds, b.name: (lo, hi)}
            added = ([v - lo] if lo is not None else []) + ([hi - v] if hi is not None else [])
            if added:
                guards = guards + added
        elif b.kind is BinderKind.LET:
            lets = {**lets, b.name: lin(b.value, lets) if b.value is not None else None}
        elif b.kind is BinderKind.GUARD and b.value is not None:
            facts = self._facts(b.value, b.negate, lets)
            if facts:
                guards = guards + facts
        var = b.name if b.kind in (BinderKind.GRID, BinderKind.SELF, BinderKind.LOOP) else None
        return Scope(chain, lets, bounds, guards, var=var)

    def _positive(self, x: Lin, parent: Scope) -> bool:
        """Whether ``x >= 1`` is proved with the variable bounds of ``parent`` (the scope so far).

        Asked of ``parent``'s bounder (whose bounds are the same, scalars defaulted as a missing name
        is) where its answers do not depend on what it was asked before (acyclic), else of a fresh one.
        """
        bounder = self.bounder(parent)
        if not bounder.acyclic:
            bounder = Bounder(self.shape, parent.bounds)
        return bounder.proves_nonneg(bounder.lower(x.plus(-1)))

    def _facts(self, cond: n.Expr, negate: bool, lets: Mapping[str, Lin | None]) -> list[Lin]:
        """Facts ``G >= 0`` that a condition (or its negation) implies."""
        if isinstance(cond, n.Unary) and cond.op == "not":
            return self._facts(cond.operand, not negate, lets)
        if isinstance(cond, n.Bin) and cond.op in ("and", "or"):
            if (cond.op == "and") != negate:  # a and b; not (a or b)
                return self._facts(cond.left, negate, lets) + self._facts(cond.right, negate, lets)
            return []
        if not isinstance(cond, n.Bin) or cond.op not in ("<", "<=", ">", ">=", "==", "!="):
            return []
        a, b = self.linearizer.lin(cond.left, lets), self.linearizer.lin(cond.right, lets)
        if a is None or b is None:
            return []
        op = cond.op
        if negate:
            op = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}[op]
        return {
            "<": [(b - a).plus(-1)], "<=": [b - a], ">": [(a - b).plus(-1)], ">=": [a - b],
            "==": [a - b, b - a], "!=": [],
        }[op]  # fmt: skip
