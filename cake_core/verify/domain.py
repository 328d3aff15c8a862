"""Reasoning about run-time sizes: does an access stay in bounds for every size in the shape domain?

A kernel's shape domain fixes some sizes to finite sets (those are the specializations: under one of
them they are constants) and leaves the others to run time, constrained by ranges (``N >= 1``,
``N <= 4096``) and divisibility (``N % 8 == 0``); a size without a lower bound ranges from 0, and
scalar parameters are unconstrained integers. Inside the kernel, indices also depend on the grid
variables, ``self`` (the role instance), loop variables and ``let`` names. This module decides, for
one operation's operand, whether every index it can take is inside the extent of what it indexes, for
**every** admissible size and **every** value of those variables.

What is proved
--------------
Index expressions are *linearized*: every integer expression becomes ``c + Σ a·x`` where ``x`` is a
run-time size, a variable, or an *atom* — a sub-expression that is not linear (``e / k``, ``e % k``,
``cdiv(e, k)``, ``min``, ``max``, a product of two non-constant terms). Each obligation is put in the
form ``M >= 0`` (``start >= 0``, ``extent - start - size >= 0``, and for a single index
``extent - 1 - index >= 0``). A lower bound of ``M`` is derived symbolically as a :class:`Form`, a
linear function of the run-time sizes with rational coefficients:

* a variable is replaced by the bound of its range that minimizes ``M`` (its start, or its stop
  minus one; a grid variable ranges over ``0 .. extent``, ``self`` over the role's instances) —
  extremal reasoning, exact for affine indices over a box of ranges;
* an atom is replaced by a bound of its value derived from bounds of its arguments:
  ``floor(x/k) >= (lo(x) - (k-1))/k``, ``cdiv(x, k) <= (hi(x) + k-1)/k``, exactly ``lo/k`` or ``hi/k``
  when the divisibility clauses make the bound a multiple of ``k``, ``x % k`` in ``0 .. k-1`` (or ``x``
  itself when ``0 <= x < k`` is proved), ``min``/``max`` by whichever argument bound is proved smaller
  or larger (else the smaller of their constant extremes);
* relations between variables are used through *guards*, facts ``G >= 0`` that hold where the
  operation runs: the enclosing ``if`` conditions (negated in ``else``), each loop's
  ``start <= v <= stop - 1``, each grid variable's ``g <= extent - 1``. ``M - λ·G`` (``λ > 0``
  chosen to cancel a variable, up to two guards) is bounded instead of ``M``;
* atoms are also *relaxed* in place, keeping their correlation with the rest of ``M``: a ``min``
  subtracted from ``M`` (or a ``max`` added) is replaced by either argument, ``x % k`` subtracted by
  ``x`` where ``x >= 0`` is proved, ``floor`` and ``cdiv`` by ``x/k`` shifted by ``k-1`` in the safe
  direction (unshifted where the divisibility clauses make ``x`` a multiple of ``k``).

A bound form is then minimized over the domain (each size at its least admissible value, or at its
greatest where its coefficient is negative; an unbounded size with a negative coefficient defeats the
proof). ``M`` is an integer, so a minimum above ``-1`` proves ``M >= 0`` for every admissible size
and every variable value: the verdict is :attr:`Status.PROVED`.

What is sampled
---------------
When no proof is found, a *witness search* runs the operation's enclosing binders concretely (grid,
``self``, loops, ``let``, ``if``) for a set of sizes: for each relevant size its 16 least admissible
values (all of them when a bounded range has fewer), values just below, at and above one and two
multiples of every constant written in the
kernel, a fixed list of small and large values (up to 65521 and 65536), all snapped to the
divisibility clauses and clipped to the ranges; scalar parameters take -1, 0, 1, 2 and 65536. All
combinations are tried when there are at most 4096, else each size is varied over its values while
the others take a small, a middle and a large one. Loop and grid ranges longer than 64 are sampled at
their ends, their middle and around multiples of the kernel's constants from either end. A size
assignment for which a symbolic lower bound already holds is skipped, and the search stops after
60000 concrete evaluations. The first failing evaluation is a :class:`Witness` naming the sizes and
variable values the failing index depends on (:attr:`Status.VIOLATED`); when none is found the
verdict is :attr:`Status.SAMPLED`: in bounds on every sample, not proved.

Divisibility
------------
:meth:`KernelDomain.multiple_of` decides whether an expression (a row pitch, a start column) times an
element size is a multiple of an access width: *proved* when the constant and every coefficient
(a size's times its modulus) are multiples, else decided by the same witness search.

Expressions are evaluated as the interpreter does: ``/`` is floor division, ``%`` the non-negative
remainder. A domain with no admissible size (``N >= 8, N <= 4``) makes every obligation hold.

How it is computed (none of this changes a verdict)
---------------------------------------------------
* The symbolic view of a chain of binders (lets as linear forms, variable bounds, guards) is built
  once per chain prefix, with one :class:`~cake_core.verify.symbolic.Bounder` whose memo every access
  under those binders shares; proofs are memoized by obligation.
* Verdicts are memoized across the specializations of a kernel that cannot tell them apart (the
  same integer constants, run-time sizes, role instances and buffer, barrier and tile shapes:
  :meth:`KernelDomain.fingerprint`) in the dict :func:`~cake_core.ir.sema.check_module` gives every
  model of a kernel. Nothing is kept across type checks.
* The witness search walks the binders concretely in two tiers: the recursive
  :meth:`KernelDomain._walk` evaluates the expressions as they are, which is cheapest for the many
  searches that end after a few evaluations; a search that goes on past :data:`INTERPRETED_WORK`
  steps of that walk compiles it — binders and obligations — into one generated function
  (:class:`_WalkerSource`) with the recursive walk's exact evaluation order, budget and exception
  handling, and redoes the size assignment it was walking with it (a walk only reads: redoing it
  spends the same budget and finds the same witness). What cannot be compiled stays recursive.
* Size assignments are filtered with the proof attempts' lower bounds as integers, over tuples of
  sample values: most of the assignments a search enumerates are covered by a bound and skipped.
* An access with no obligation (nothing indexed) is proved without building its scope.
* Bounders share work where their answers cannot tell: when no variable's bound refers back to
  itself (:attr:`~cake_core.verify.symbolic.Bounder.acyclic`), a bound is a function of its question
  alone, whatever was asked before. Then a ``let`` or a guard without facts shares its parent's
  bounder and proofs (same variable bounds, same guards); a new bounder starts from the memo of the
  nearest enclosing one when the variables added in between are new to it; a run-time loop step is
  bounded by the enclosing scope's bounder; and :meth:`KernelDomain.prove` tries ``lower(m)`` (the
  first form of its search) before the relaxations look at ``m``'s atoms, whose alternatives each
  bounder memoizes.
* Size samples are shared by the specializations with the same range and constants; sums of bound
  forms with fractional numbers are computed in integers over a common denominator.
"""

from __future__ import annotations

import enum
import itertools
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import attrs

from cake_core.ir import nodes as n
from cake_core.ir.exprs import BUILTINS, WORDS, EvalError, evaluate
from cake_core.ir.primitive import Effect, Kind, Operand
from cake_core.verify.facts import facts
from cake_core.verify.symbolic import (
    Bound, Bounder, Form, Lin, Linearizer, ShapeDomain, SizeRange, Var, eliminations, lin_multiple,
    relaxations,
)  # fmt: skip

if TYPE_CHECKING:
    from cake_core.ir.model import KernelModel, TypedOpImpl

__all__ = [
    "AccessVerdict", "Binder", "BinderKind", "KernelDomain", "Obligation", "ShapeDomain", "SizeRange", "Status",
    "Verdict", "Witness",
]  # fmt: skip

#: the key under which :func:`cake_core.ir.sema.check_module` records, in a kernel's shared memo, how
#: many specializations share it
SPECIALIZATIONS = "specializations"
RANGE_EXACT = 64  # loop and grid ranges up to this long are enumerated in full
SIZE_COMBOS = 4096  # full product of size samples up to this many combinations
EVAL_BUDGET = 60_000  # concrete evaluations of one witness search
SCALAR_SAMPLES = (-1, 0, 1, 2, 65536)  # scalar parameters are unconstrained
#: steps of the recursive walk a witness search takes before it compiles its walk (the compiled walk
#: is about ten times faster, and compiling it costs about as much as this many steps)
INTERPRETED_WORK = 300


# ---------------------------------------------------------------------------------------------------
# Scopes: what encloses an operation
# ---------------------------------------------------------------------------------------------------


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
    count: int = 1  # role instances, for SELF


def _scopes(model: KernelModel) -> dict[int, tuple[Binder, ...]]:
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

    for info in model.roles:
        block(info.role.body, grid + (Binder(BinderKind.SELF, "self", count=info.instances),))
    return out


@attrs.define(eq=False)
class _Scope:
    """The symbolic view of one chain of binders: what :meth:`KernelDomain._symbolic` returns, and what
    is memoized for it while one :class:`KernelDomain` lives (every access under the same binders
    shares it: linear forms of expressions, the bounder, proofs of obligations)."""

    chain: tuple[Binder, ...]  # held so that the ids keying the memo stay unique
    lets: dict[str, Lin | None]
    bounds: dict[str, Bound]  # variable bounds, scalars not yet defaulted (what inner binders see)
    guards: list[Lin]
    full_bounds: dict[str, Bound] | None = None
    bounder: Bounder | None = None
    lins: dict[int, tuple[n.Expr, Lin | None]] = attrs.field(factory=dict)
    proofs: dict[str, tuple[bool, list[Form]]] = attrs.field(factory=dict)
    parent: _Scope | None = None  # the scope of all but the last binder (None at the root)
    var: str | None = None  # the variable the last binder adds (grid, self, loop)


# ---------------------------------------------------------------------------------------------------
# Verdicts
# ---------------------------------------------------------------------------------------------------


class Status(enum.StrEnum):
    PROVED = "proved"  # holds for every admissible size and variable value
    SAMPLED = "sampled"  # not proved; held on every sample of the witness search
    VIOLATED = "violated"  # a witness breaks it
    MASKED = "masked"  # the access is bounds-masked: out-of-bounds elements are handled


@attrs.frozen
class Witness:
    """Concrete sizes and variable values under which an obligation fails, and what happens."""

    sizes: tuple[tuple[str, int], ...]
    vars: tuple[tuple[str, int], ...]
    what: str

    def describe(self) -> str:
        """``N=1, B=1 (t=0, b=0)``."""
        s = ", ".join(f"{k}={v}" for k, v in self.sizes)
        v = ", ".join(f"{k}={x}" for k, x in self.vars)
        if s and v:
            return f"{s} (at {v})"
        return s or (f"at {v}" if v else "")

    @property
    def when(self) -> str:
        """`` when N=1 (at t=0)``, or nothing when the failure depends on no size or variable."""
        d = self.describe()
        return f" when {d}" if d else ""


@attrs.frozen
class Verdict:
    status: Status
    witness: Witness | None = None
    samples: int = 0  # size assignments the witness search tried

    @property
    def ok(self) -> bool:
        return self.status is not Status.VIOLATED


@attrs.frozen
class Obligation:
    """``m >= 0`` must hold where the operation runs; ``check`` tells, concretely, how it fails.

    ``parts``, when given, is ``check`` taken apart: expressions evaluated in order, then a function of
    their values; ``check(env)`` must equal ``parts[1](*(evaluate(x, env) for x in parts[0]))``. The
    witness search compiles obligations that have ``parts`` into its walk. ``fails``, when given, is a
    Python expression over the values ``a0, a1, ...`` that is true exactly when ``parts[1]`` returns a
    message (its first test, so it raises where that would): the walk calls the function only then.
    """

    m: Lin | None
    exprs: tuple[n.Expr, ...]  # the expressions it depends on (for choosing sizes to sample)
    check: Callable[[Mapping[str, object]], str | None]
    parts: tuple[tuple[n.Expr, ...], Callable[..., str | None]] | None = None
    fails: str | None = None


@attrs.frozen
class AccessVerdict:
    """Whether one operand access of one operation stays in bounds."""

    typed: TypedOpImpl
    effect: Effect
    verdict: Verdict

    @property
    def operand(self) -> Operand:
        return self.effect.operand


#: the verdicts that carry nothing but their status, shared (they are frozen)
_PROVED, _MASKED = Verdict(Status.PROVED), Verdict(Status.MASKED)
# built without attrs' frozen __init__ (one per obligation, one per access)


# ---------------------------------------------------------------------------------------------------
# The analysis of one kernel under one specialization
# ---------------------------------------------------------------------------------------------------


class KernelDomain:
    """Proofs and witness searches about run-time sizes for one :class:`KernelModel`."""

    def __init__(self, model: KernelModel) -> None:
        self.model = model
        # what holds for every specialization of the kernel, memoized across its models (one
        # verification's worth: the dict lives in the models of one type check)
        shared = getattr(model, "shared", None)
        self._shared: dict[object, object] = shared if isinstance(shared, dict) else {}
        self.shape = ShapeDomain.of(model)
        self.lin = Linearizer(model.env, frozenset(self.shape.sizes), self.shape.scalars)
        instances = tuple(r.instances for r in model.roles)
        scopes = self._shared.get(("scopes", instances))
        if scopes is None:
            scopes = self._shared[("scopes", instances)] = _scopes(model)
        self.scopes: dict[int, tuple[Binder, ...]] = scopes  # type: ignore[assignment]
        self._constants: list[int] | None = None
        # memoized for this object's life: the symbolic view of each chain of binders
        self._root = _Scope((), {}, {}, [], {s: (None, None) for s in self.shape.scalars})
        self._states: dict[tuple[int, ...], _Scope] = {}
        self._by_chain: dict[int, tuple[tuple[Binder, ...], _Scope]] = {}
        self._picks: dict[int, list[int]] = {}
        self._picked: dict[range, list[int]] = {}
        self._size_samples: dict[str, list[int]] = {}
        self._base_names = frozenset(model.env) | frozenset(self.shape.sizes) | self.shape.scalars
        self._walkers: dict[tuple[str, tuple[str, ...]], Callable[..., object] | None]
        self._walkers = self._shared.setdefault("walkers", {})  # type: ignore[assignment]
        self._fingerprint: tuple | None = None
        self._fingerprint_id: int | None = None
        self._nums: dict[int, n.Num] = {}

    @property
    def constants(self) -> list[int]:
        """Positive integers written in the kernel or fixed by the specialization (at most 4096): the
        witness search samples sizes and long ranges around them."""
        if self._constants is None:
            literals = self._shared.get("literals")
            if literals is None:
                literals = self._shared["literals"] = _kernel_literals(self.model.kernel)
            self._constants = _kernel_constants(self.model, literals)  # type: ignore[arg-type]
        return self._constants

    def _memo_key(self, *parts: object) -> tuple | None:
        """A key for memoizing a verdict across the kernel's specializations; None where the kernel has
        only this one (nothing to share, so nothing is fingerprinted)."""
        if self._shared.get(SPECIALIZATIONS, 2) == 1:
            return None
        if self._fingerprint_id is None:
            # the fingerprint, a large tuple, stands for itself by a small number in the keys (a tuple
            # hashes all its items every time)
            ids = self._shared.setdefault("fingerprints", {})
            self._fingerprint_id = ids.setdefault(self.fingerprint(), len(ids))  # type: ignore[attr-defined]
        return (*parts, self._fingerprint_id)

    def fingerprint(self) -> tuple:
        """Everything of this specialization the analysis depends on: two models of one kernel with
        the same fingerprint get the same verdicts (so they are memoized across them)."""
        if self._fingerprint is None:
            m = self.model
            used = self._shared.get("names")
            if used is None:
                used = self._shared["names"] = _kernel_names(m.kernel)
            env = tuple(sorted(
                (k, v) for k, v in m.env.items() if not isinstance(v, str) or k in used  # type: ignore[operator]
            ))  # fmt: skip
            self._fingerprint = (
                env, m.runtime_sizes, tuple(r.instances for r in m.roles),
                tuple((name, i.shape, i.stages) for name, i in m.smem.items()),
                tuple((name, i.stages) for name, i in m.barriers.items()),
                tuple((name, i.shape) for name, i in m.regs.items()),
            )  # fmt: skip
        return self._fingerprint

    # -- scopes --------------------------------------------------------------------------------------

    def scope(self, typed: TypedOpImpl) -> tuple[Binder, ...]:
        return self.scopes.get(id(typed.op), ())

    def _symbolic(self, chain: Sequence[Binder]) -> tuple[dict[str, Lin | None], dict[str, Bound], list[Lin]]:
        """Lets (as linear forms), variable bounds and guards of a scope.

        Computed once per chain (and per prefix of it) for the life of this object; the returned
        containers are shared and must not be modified.
        """
        state = self._scope_state(tuple(chain))
        assert state.full_bounds is not None
        return state.lets, state.full_bounds, state.guards

    def _scope_state(self, chain: tuple[Binder, ...]) -> _Scope:
        """The memoized :class:`_Scope` of ``chain``, built from its longest memoized prefix."""
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
                bounder = self._bounder(parent)
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

    def _bounder(self, state: _Scope) -> Bounder:
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

    def _extend(self, parent: _Scope, chain: tuple[Binder, ...]) -> _Scope:
        """The scope of ``chain`` from the scope of all but its last binder."""
        b = chain[-1]
        lets, bounds, guards = parent.lets, parent.bounds, parent.guards
        if b.kind is BinderKind.GRID:
            ext = self.lin.lin(b.stop, lets) if b.stop is not None else None
            hi = None if ext is None else ext.plus(-1)
            bounds = {**bounds, b.name: (Lin(), hi)}
            if hi is not None:
                guards = guards + [hi - Lin.of(Var(b.name))]
        elif b.kind is BinderKind.SELF:
            bounds = {**bounds, "self": (Lin(), Lin(b.count - 1))}
        elif b.kind is BinderKind.LOOP:
            start = self.lin.lin(b.start, lets) if b.start is not None else None
            stop = self.lin.lin(b.stop, lets) if b.stop is not None else None
            step = self.lin.lin(b.step, lets) if b.step is not None else Lin(1)
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
            lets = {**lets, b.name: self.lin.lin(b.value, lets) if b.value is not None else None}
        elif b.kind is BinderKind.GUARD and b.value is not None:
            facts = self._facts(b.value, b.negate, lets)
            if facts:
                guards = guards + facts
        var = b.name if b.kind in (BinderKind.GRID, BinderKind.SELF, BinderKind.LOOP) else None
        return _Scope(chain, lets, bounds, guards, var=var)

    def _positive(self, x: Lin, parent: _Scope) -> bool:
        """Whether ``x >= 1`` is proved with the variable bounds of ``parent`` (the scope so far).

        Asked of ``parent``'s bounder (whose bounds are the same, scalars defaulted as a missing name
        is) where its answers do not depend on what it was asked before (acyclic), else of a fresh one.
        """
        bounder = self._bounder(parent)
        if not bounder.acyclic:
            bounder = Bounder(self.shape, parent.bounds)
        return bounder.proves_nonneg(bounder.lower(x.plus(-1)))

    def _lin(self, state: _Scope, e: n.Expr) -> Lin | None:
        """``e`` linearized under ``state``'s lets, memoized by the expression's identity."""
        hit = state.lins.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        x = self.lin.lin(e, state.lets)
        state.lins[id(e)] = (e, x)  # the entry keeps ``e`` alive, so its id is not reused
        return x

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
        a, b = self.lin.lin(cond.left, lets), self.lin.lin(cond.right, lets)
        if a is None or b is None:
            return []
        op = cond.op
        if negate:
            op = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}[op]
        return {
            "<": [(b - a).plus(-1)], "<=": [b - a], ">": [(a - b).plus(-1)], ">=": [a - b],
            "==": [a - b, b - a], "!=": [],
        }[op]  # fmt: skip

    # -- proving -------------------------------------------------------------------------------------

    def prove(self, m: Lin, bounder: Bounder, guards: Sequence[Lin]) -> tuple[bool, list[Form]]:
        """Whether ``m >= 0`` is proved; also every lower-bound form tried (for filtering samples)."""
        if bounder.acyclic:
            # The first form the search below tries is ``bounder.lower(m)`` (eliminations and
            # relaxations both yield ``m`` itself first); most obligations are proved by it. Trying it
            # before the relaxations look at ``m``'s atoms only reorders calls to the bounder, which
            # give the same forms in any order where no variable's bound refers back to itself
            # (:attr:`Bounder.acyclic`). Not proved: the search runs from its start, and tries this
            # form first again (from the bounder's memo).
            f = bounder.lower(m)
            if f is not None and bounder.proves_nonneg(f):
                return True, [f]
        forms: list[Form] = []
        for cand in eliminations(m, guards):
            for variant in relaxations(cand, bounder):
                f = bounder.lower(variant)
                if f is None:
                    continue
                forms.append(f)
                if bounder.proves_nonneg(f):
                    return True, forms
        return False, forms

    def decide(self, typed: TypedOpImpl, obligations: Sequence[Obligation]) -> Verdict:
        """Prove every obligation, or search for a witness that breaks one."""
        chain = self.scope(typed)
        return self._decide(chain, self._scope_state(chain), obligations)

    def _decide(self, chain: tuple[Binder, ...], state: _Scope, obligations: Sequence[Obligation]) -> Verdict:
        """:meth:`decide` under ``chain``, whose scope is ``state``."""
        if not obligations or self.shape.empty():
            return _PROVED
        bounder = self._bounder(state)
        open_: list[tuple[Obligation, list[Form]]] = []
        for ob in obligations:
            if ob.m is None:
                open_.append((ob, []))
                continue
            proof = state.proofs.get(ob.m.key)
            if proof is None:
                proof = state.proofs[ob.m.key] = self.prove(ob.m, bounder, state.guards)
            ok, forms = proof
            if not ok:
                open_.append((ob, forms))
        if not open_:
            return _PROVED
        return self._search(chain, open_)

    # -- witness search ------------------------------------------------------------------------------

    def _relevant_sizes(self, chain: Sequence[Binder], open_: Sequence[tuple[Obligation, list[Form]]]) -> list[str]:
        names: set[str] = set()
        for b in chain:
            for e in (b.start, b.stop, b.step, b.value):
                if e is not None:
                    names |= _names(e)
        for ob, forms in open_:
            for e in ob.exprs:
                names |= _names(e)
            for f in forms:
                names |= {s for s, _ in f.terms}
        return sorted(names & (set(self.shape.sizes) | self.shape.scalars))

    def size_assignments(self, names: Sequence[str]) -> Iterator[tuple[int, ...]]:
        """The witness set over ``names`` (run-time sizes and scalars; see the module documentation),
        each assignment a tuple of values in the order of ``names``."""
        per = [self._samples(s) for s in names]
        if math.prod(len(v) for v in per) <= SIZE_COMBOS:
            yield from itertools.product(*per)
            return
        seen: set[tuple[int, ...]] = set()
        for i, values in enumerate(per):
            for pick in (lambda vals: vals[0], lambda vals: vals[len(vals) // 2], lambda vals: vals[-1]):
                base = [pick(vals) for vals in per]
                for v in values:
                    base[i] = v
                    key = tuple(base)
                    if key not in seen:
                        seen.add(key)
                        yield key

    def _samples(self, name: str) -> list[int]:
        """The values one size (or scalar) takes in witness searches; computed once per name."""
        out = self._size_samples.get(name)
        if out is None:
            if name in self.shape.scalars:
                out = list(SCALAR_SAMPLES)
            else:
                # a function of the size's range and the constants only: shared by the specializations
                # that have both alike
                r = self.shape.sizes[name]
                key = ("samples", r.lo, r.hi, r.modulus, tuple(self.constants))
                out = self._shared.get(key)  # type: ignore[assignment]
                if out is None:
                    out = self._shared[key] = self.shape.samples(name, self.constants)
            self._size_samples[name] = out
        return out

    def _search(self, chain: Sequence[Binder], open_: Sequence[tuple[Obligation, list[Form]]]) -> Verdict:
        names = self._relevant_sizes(chain, open_)
        obligations = [ob for ob, _ in open_]
        filters = [_integral_forms(forms, names) for _, forms in open_]
        base: dict[str, object] = dict(self.model.env)  # sizes not sampled at their least, scalars at 0
        base.update({s: r.lo for s, r in self.shape.sizes.items()})
        base.update(dict.fromkeys(self.shape.scalars, 0))
        compilable = self._compilable(chain, obligations)
        # [evaluations left, steps of the recursive walk left before it is compiled]
        budget: list[float] = [EVAL_BUDGET, INTERPRETED_WORK if compilable else math.inf]
        walker: Callable[..., object] | None = None
        parts = tuple(ob.parts[1] if ob.parts is not None else None for ob in obligations)
        checks = tuple(ob.check for ob in obligations)
        tried = 0
        for sizes in self.size_assignments(names):
            # the obligations no bound covers at these sizes (_above, inlined: this runs for every
            # assignment, and most are covered)
            live = []
            for ob, fs in zip(obligations, filters):
                for total, terms, d in fs:
                    for i, a in terms:
                        total += a * sizes[i]
                    if total > -d:
                        break
                else:
                    live.append(ob)
            if not live:
                continue
            tried += 1
            env = dict(base)
            env.update(zip(names, sizes))
            found = None
            if walker is None:
                left = budget[0]
                try:
                    found = self._walk(chain, 0, env, [], live, budget)
                except _Interrupted:  # long enough to be worth compiling: this assignment again, compiled
                    budget[0] = left
                    walker = self._walker(chain, obligations)
                    if walker is None:  # Python cannot compile it: the recursive walk, without limit
                        budget[1] = math.inf
                        found = self._walk(chain, 0, env, [], live, budget)
            if walker is not None:
                flags = tuple(any(ob is x for x in live) for ob in obligations)
                hit = walker(env, budget, flags, parts, checks, self._pick)
                found = None if hit is None else (obligations[hit[0]], hit[1], hit[2])
            if found is not None:
                ob, what, vars_ = found
                keep = _depends(chain, ob.exprs)
                return Verdict(
                    Status.VIOLATED,
                    Witness(
                        tuple((s, v) for s, v in zip(names, sizes) if s in keep),
                        tuple((v, x) for v, x in vars_.items() if v in keep),
                        what,
                    ),
                    tried,
                )  # fmt: skip
            if budget[0] <= 0:
                break
        return Verdict(Status.SAMPLED, None, tried)

    def _walk(
        self,
        chain: Sequence[Binder],
        i: int,
        env: dict[str, object],
        vars_: list[tuple[str, int]],
        live: Sequence[Obligation],
        budget: list[float],
    ) -> tuple[Obligation, str, dict[str, int]] | None:
        """Run the binders ``chain[i:]`` concretely, depth first, checking ``live`` at every leaf.

        ``env`` is updated in place and restored on the way out; ``vars_`` is the stack of named
        variable values (a witness's ``vars``). An :class:`EvalError`, :class:`TypeError` or
        :class:`ValueError` under a ``let`` or a guard abandons that subtree; one while computing a
        range abandons the range. ``budget`` is ``[evaluations left, steps left]``: every call is a
        step, and one past the last raises :class:`_Interrupted`.
        """
        if budget[0] <= 0:
            return None
        budget[1] -= 1
        if budget[1] < 0:
            raise _Interrupted
        if i == len(chain):
            budget[0] -= 1
            for ob in live:
                try:
                    what = ob.check(env)
                except EvalError:
                    continue
                if what is not None:
                    return ob, what, dict(vars_)
            return None
        b = chain[i]
        kind = b.kind
        if kind is BinderKind.GUARD:
            assert b.value is not None
            try:
                if bool(evaluate(b.value, env)) == b.negate:
                    return None
                return self._walk(chain, i + 1, env, vars_, live, budget)
            except (EvalError, TypeError, ValueError):
                return None
        missing = object()
        if kind is BinderKind.LET:
            assert b.value is not None
            try:
                value = evaluate(b.value, env)
            except (EvalError, TypeError, ValueError):
                return None
            old = env.get(b.name, missing)
            env[b.name] = value
            try:
                return self._walk(chain, i + 1, env, vars_, live, budget)
            except (EvalError, TypeError, ValueError):
                return None
            finally:
                if old is missing:
                    del env[b.name]
                else:
                    env[b.name] = old
        try:
            if kind is BinderKind.SELF:
                values: Sequence[int] = range(b.count)
            elif kind is BinderKind.GRID:
                assert b.stop is not None
                values = range(0, int(evaluate(b.stop, env)))  # type: ignore[call-overload]
            else:
                start = int(evaluate(b.start, env)) if b.start is not None else 0  # type: ignore[call-overload]
                stop = int(evaluate(b.stop, env)) if b.stop is not None else 0  # type: ignore[call-overload]
                step = int(evaluate(b.step, env)) if b.step is not None else 1  # type: ignore[call-overload]
                if step == 0:
                    return None
                values = range(start, stop, step)
        except (EvalError, TypeError, ValueError):
            return None
        name = b.name
        named = kind is not BinderKind.SELF or b.count > 1
        old = env.get(name, missing)
        try:
            for v in self._pick(values):
                env[name] = v
                if named:
                    vars_.append((name, v))
                try:
                    found = self._walk(chain, i + 1, env, vars_, live, budget)
                finally:
                    if named:
                        vars_.pop()
                if found is not None or budget[0] <= 0:
                    return found
            return None
        finally:
            if old is missing:
                env.pop(name, None)
            else:
                env[name] = old

    def _pick(self, values: range) -> Sequence[int]:
        """:func:`_pick` with the kernel's constants, memoized by range (the walk meets the same ranges
        again and again). A short range is its own pick."""
        count = len(values)
        if count <= RANGE_EXACT:
            return values
        out = self._picked.get(values)
        if out is None:
            idx = self._picks.get(count)
            if idx is None:
                idx = self._picks[count] = _pick_indices(count, self.constants)
            out = self._picked[values] = [values[i] for i in idx]
        return out

    @staticmethod
    def _compilable(chain: Sequence[Binder], obligations: Sequence[Obligation]) -> bool:
        """Whether the walk of ``chain`` checking ``obligations`` can be generated (:class:`_WalkerSource`)."""
        if not all(_compilable(e) for b in chain for e in (b.start, b.stop, b.step, b.value) if e is not None):
            return False
        return all(_compilable(e) for ob in obligations if ob.parts is not None for e in ob.parts[0])

    def _walker(self, chain: Sequence[Binder], obligations: Sequence[Obligation]) -> Callable[..., object] | None:
        """The compiled walk (:class:`_WalkerSource`) of ``chain`` checking ``obligations`` (which
        :meth:`_compilable` accepts); None where Python cannot compile it."""
        gen = _WalkerSource(chain, obligations, self._base_names)
        source = gen.source()
        key = (source, tuple(map(repr, gen.src.consts)))
        if key not in self._walkers:
            self._walkers[key] = _compile_walker(source, tuple(gen.src.consts))
        return self._walkers[key]

    # -- obligations of accesses ---------------------------------------------------------------------

    def access_obligations(self, typed: TypedOpImpl, effect: Effect) -> list[Obligation]:
        """Every index of one operand access must lie inside what it indexes."""
        return self._access_obligations(self.scope(typed), effect)

    def _access_obligations(self, chain: tuple[Binder, ...], effect: Effect) -> list[Obligation]:
        o = effect.operand
        out: list[Obligation] = []
        extents: list[n.Expr]
        stages: int | None = None
        if o.kind is Kind.GLOBAL and isinstance(o.decl, n.Param):
            extents = list(o.decl.shape)
        elif o.kind is Kind.SHARED and o.name in self.model.smem:
            info = self.model.smem[o.name]
            extents = [self._num(v) for v in info.shape]
            stages = info.stages
        elif o.kind is Kind.REGISTERS and o.name in self.model.regs:
            extents = [self._num(v) for v in self.model.regs[o.name].shape]
        elif o.kind is Kind.BARRIER and o.name in self.model.barriers:
            extents, stages = [], self.model.barriers[o.name].stages
        else:
            return out
        if (o.stage is None or stages is None) and not o.index:
            return out  # nothing indexed: no obligation
        state = self._scope_state(chain)
        lets = state.lets
        if o.stage is not None and stages is not None:
            out += self._index(o.stage, self._num(stages), lets, f"`{o.name}` has {stages} stages", stage=True, state=state)
        for d, item in enumerate(o.index):
            if d >= len(extents):
                break
            where = f"in dimension {d + 1}"
            if isinstance(item, n.At):
                out += self._index(item.expr, extents[d], lets, where, state=state)
            elif isinstance(item, n.Span):
                out += self._span(item.start, item.size, extents[d], lets, where, state=state)
        return out

    def _num(self, v: int) -> n.Num:
        """A literal for an extent the model knows, one node per value (so that the linear forms
        memoized by node, and the compiled walks, are shared by every access to it)."""
        node = self._nums.get(v)
        if node is None:
            node = self._nums[v] = n.Num(v)
        return node

    def _index(
        self, e: n.Expr, ext: n.Expr, lets: Mapping[str, Lin | None], where: str, stage: bool = False,
        state: _Scope | None = None,
    ) -> list[Obligation]:
        if state is not None:
            x, E = self._lin(state, e), self._lin(state, ext)
        else:
            x, E = self.lin.lin(e, lets), self.lin.lin(ext, lets)

        def low_of(v: object) -> str | None:
            if v < 0:  # type: ignore[operator]
                if stage:
                    return f"stage `{_text(e)}` is {v}, below 0"
                return f"{where}, index `{_text(e)}` is {v}, below 0"
            return None

        def high_of(v: object, top: object) -> str | None:
            if v >= top:  # type: ignore[operator]
                if stage:
                    return f"stage `{_text(e)}` is {v}, but {where}"
                return f"{where}, index `{_text(e)}` is {v}, past the extent {_extent(ext, top)}"
            return None

        return [
            self._obligation(x, (e,), (e,), low_of, "a0 < 0"),
            self._obligation(
                None if x is None or E is None else (E - x).plus(-1), (e, ext), (e, ext), high_of, "a0 >= a1"
            ),
        ]

    def _obligation(
        self, m: Lin | None, exprs: tuple[n.Expr, ...], evaluated: tuple[n.Expr, ...], of: Callable[..., str | None],
        fails: str | None = None,
    ) -> Obligation:
        """An obligation whose check evaluates ``evaluated`` in order and gives the values to ``of``;
        ``fails`` is ``of``'s first test, over ``a0, a1, ...`` (see :class:`Obligation`)."""

        def check(env: Mapping[str, object]) -> str | None:
            return of(*[evaluate(x, env) for x in evaluated])

        return Obligation(m, exprs, check, (evaluated, of), fails)

    def _span(
        self, start: n.Expr, size: n.Expr, ext: n.Expr, lets: Mapping[str, Lin | None], where: str,
        state: _Scope | None = None,
    ) -> list[Obligation]:
        if state is not None:
            s, z, E = self._lin(state, start), self._lin(state, size), self._lin(state, ext)
        else:
            s, z, E = self.lin.lin(start, lets), self.lin.lin(size, lets), self.lin.lin(ext, lets)

        def low_of(v: object) -> str | None:
            return f"{where}, the slice starts at {v}, below 0" if v < 0 else None  # type: ignore[operator]

        def high_of(a: object, k: object, top: object) -> str | None:
            if k > 0 and a + k > top:  # type: ignore[operator]
                span = f"is at {a}" if k == 1 else f"covers {a}..{a + k - 1}"  # type: ignore[operator]
                return f"{where}, the slice {span}, past the extent {_extent(ext, top)}"
            return None

        return [
            self._obligation(s, (start,), (start,), low_of, "a0 < 0"),
            self._obligation(
                None if s is None or z is None or E is None else E - s - z, (start, size, ext), (start, size, ext),
                high_of, "a1 > 0 and a0 + a1 > a2",
            ),  # fmt: skip
        ]

    def access(self, typed: TypedOpImpl, effect: Effect) -> Verdict:
        """Whether one operand access stays in bounds (masked accesses are not examined)."""
        if effect.masked:
            return _MASKED
        o = effect.operand
        key = self._memo_key("access", id(typed.op), id(o.expr), o.slot.name, o.kind)
        if key is None:
            return self._access(typed, effect)
        hit = self._shared.get(key)
        if hit is not None and hit[0] is typed.op and hit[1] is o.expr:  # type: ignore[index]
            return hit[2]  # type: ignore[index,no-any-return]
        verdict = self._access(typed, effect)
        self._shared[key] = (typed.op, o.expr, verdict)  # the entry keeps the nodes alive
        return verdict

    def _access(self, typed: TypedOpImpl, effect: Effect) -> Verdict:
        """``decide(typed, access_obligations(typed, effect))``."""
        chain = self.scope(typed)
        obligations = self._access_obligations(chain, effect)
        if not obligations:  # what decide says of no obligation, without looking at the scope
            return _PROVED
        return self._decide(chain, self._scope_state(chain), obligations)

    def accesses(self) -> list[AccessVerdict]:
        """Every tile and barrier access of every operation, with its verdict."""
        out = []
        for of in facts(self.model).ops:  # the effects every rule reads, computed once per model
            for eff in of.effects:
                if eff.operand.kind is Kind.VALUE or eff.operand.name is None:
                    continue
                out.append(AccessVerdict(of.typed, eff, self.access(of.typed, eff)))
        return out

    # -- divisibility --------------------------------------------------------------------------------

    def multiple_of(self, typed: TypedOpImpl | None, e: n.Expr, scale: int, k: int, what: str) -> Verdict:
        """Whether ``e * scale`` is a multiple of ``k`` wherever the operation runs, for every size.

        ``what`` names the quantity in a witness: its ``what`` reads ``f"{what} {e * scale}"``.

        Proved when every term's coefficient (times the size's modulus, for a size) and the constant,
        scaled, are multiples of ``k`` (a variable steps through consecutive integers, so that is also
        necessary for most); otherwise decided by the witness search. ``typed=None`` looks at sizes only.
        """
        op = typed.op if typed is not None else None
        key = self._memo_key("multiple", id(op), id(e), scale, k, what)
        if key is None:
            return self._multiple_of(typed, e, scale, k, what)
        hit = self._shared.get(key)
        if hit is not None and hit[0] is op and hit[1] is e:  # type: ignore[index]
            return hit[2]  # type: ignore[index,no-any-return]
        verdict = self._multiple_of(typed, e, scale, k, what)
        self._shared[key] = (op, e, verdict)  # the entry keeps the nodes alive
        return verdict

    def _multiple_of(self, typed: TypedOpImpl | None, e: n.Expr, scale: int, k: int, what: str) -> Verdict:
        chain = self.scope(typed) if typed is not None else ()
        x = self._lin(self._scope_state(chain), e)
        if x is not None and lin_multiple(x.scale(scale), k, self.shape):
            return _PROVED

        def of(v: object) -> str | None:
            if isinstance(v, int) and (v * scale) % k:
                return f"{what} {v * scale}"
            return None

        fails = f"isinstance(a0, int) and (a0 * {scale!r}) % {k!r}" if type(scale) is int and type(k) is int else None
        ob = self._obligation(None, (e,), (e,), of, fails)
        return self._search(chain, [(ob, [])])



# ---------------------------------------------------------------------------------------------------
# Compiled evaluation
# ---------------------------------------------------------------------------------------------------


class _Interrupted(Exception):
    """The recursive walk has taken the steps it was given (see :meth:`KernelDomain._search`)."""


class _Failed(EvalError):
    """What the compiled walk raises where :func:`evaluate` raises :class:`EvalError`: the same type
    for every handler, made without building a message or a node (the search raises it often)."""

    expr: n.Expr = n.Num(0)

    def __init__(self, message: str = "no value") -> None:
        Exception.__init__(self, message)


#: raised again and again by the search (an instance made once: nothing reads its traceback)
_DIVISION_BY_ZERO = _Failed("division by zero")


def _free(*_: object) -> object:
    raise _Failed("a name has no value here")


def _div0() -> object:
    raise _DIVISION_BY_ZERO.with_traceback(None)


def _word(name: str) -> object:
    """A word's value (``inf``) where no binding names it; any other name has none."""
    if name in WORDS:
        return WORDS[name]
    return _free()


def _floordiv(a: object, b: object) -> object:
    if b == 0:
        raise _DIVISION_BY_ZERO.with_traceback(None)
    if isinstance(a, float) or isinstance(b, float):
        return a / b  # type: ignore[operator]
    return a // b  # type: ignore[operator]


def _mod(a: object, b: object) -> object:
    if b == 0:
        raise _DIVISION_BY_ZERO.with_traceback(None)
    return a % b  # type: ignore[operator]


def _cdiv(a: object, b: object) -> object:
    if b == 0:
        raise _DIVISION_BY_ZERO.with_traceback(None)
    return -(-a // b)  # type: ignore[operator]


_NOVALUE = object()  # a sub-expression computed ahead raised (see _Source)
_TEMP = re.compile(r"\b_t[0-9]+\b")  # the temporaries of generated source
_RUNTIME = {"_NOVALUE": _NOVALUE, "_free": _free, "_word": _word, "_floordiv": _floordiv, "_mod": _mod, "_cdiv": _cdiv, "_min": min,
            "_max": max, "_bool": bool, "_EvalError": EvalError, "_E": (EvalError, TypeError, ValueError)}  # fmt: skip
_BIN_OPS = frozenset({"<", "<=", ">", ">=", "==", "!=", "+", "-", "*", "/", "%", "and", "or"})


def _compilable(e: n.Expr) -> bool:
    """Whether every binary operator in ``e`` is one :func:`evaluate` knows (the others raise there)."""
    return all(x.op in _BIN_OPS for x in n.walk_expr(e) if isinstance(x, n.Bin))


class _Source:
    """Python source for IR expressions, with :func:`evaluate`'s semantics.

    ``resolve`` maps an IR name to the Python expression that holds its value where the expression is
    evaluated, or None for a name without one (evaluating it raises :class:`EvalError`, as
    :func:`evaluate` does, at the same point of the evaluation). Literals go to :attr:`consts`.

    ``fixed``, when given, tells which of those Python expressions hold one value for the whole
    generated function: it gives the name that value has in :attr:`prologue` (the lines run first),
    else None. A composite sub-expression over such names only is then computed once, in the
    prologue, and read where it is used; where computing it raised, it is computed again where it is
    used, which raises there as it would have. Expressions have no side effects, so computing one
    early, or in vain, changes nothing but the time spent. (A ``let`` of such a value may stand for
    it in the prologue: wherever the ``let`` is read, it was computed without raising, so the
    prologue's value was too, and equals it.)
    """

    def __init__(self, fixed: Callable[[str], str | None] | None = None) -> None:
        self.consts: list[object] = []
        self.temps = 0
        self.fixed = fixed
        self.prologue: list[str] = []
        self.hoisted: dict[str, str] = {}  # source of a sub-expression computed in the prologue -> its local

    def temp(self) -> str:
        self.temps += 1
        return f"_t{self.temps}"

    def const(self, value: object) -> str:
        if type(value) is int:
            return repr(value)
        self.consts.append(value)
        return f"_c[{len(self.consts) - 1}]"

    def ahead(self, x: n.Expr, resolve: Callable[[str], str | None]) -> str | None:
        """Where ``x`` is composite and its names are :attr:`fixed`, the local the prologue computes it
        into (:data:`_NOVALUE` where that raised); else None."""
        fixed = self.fixed
        if fixed is None or isinstance(x, (n.Num, n.Name)):
            return None
        for y in n.walk_expr(x):
            if isinstance(y, n.Name):
                held = resolve(y.id)
                if held is not None and fixed(held) is None:
                    return None
        self.fixed = None
        src = self.expr(x, lambda name: None if (held := resolve(name)) is None else fixed(held))
        self.fixed = fixed
        # one computation for every occurrence: the same source up to the numbering of its temporaries
        numbers: dict[str, str] = {}
        key = _TEMP.sub(lambda m: numbers.setdefault(m.group(), f"_t{len(numbers)}"), src)
        local = self.hoisted.get(key)
        if local is None:
            local = self.hoisted[key] = f"_h{len(self.hoisted)}"
            self.prologue += ["try:", f"    {local} = {src}", "except Exception:", f"    {local} = _NOVALUE"]
        return local

    def _hoist(self, x: n.Expr, resolve: Callable[[str], str | None]) -> str | None:
        """Where :meth:`ahead` computes ``x``, an expression reading it there, or computing it again
        where that raised; else None."""
        local = self.ahead(x, resolve)
        if local is None:
            return None
        fixed, self.fixed = self.fixed, None
        src = self.expr(x, resolve)
        self.fixed = fixed
        return f"({local} if {local} is not _NOVALUE else {src})"

    def flat(self, x: n.Expr, resolve: Callable[[str], str | None], lines: list[str], fail: str) -> str:
        """``x`` as statements appended to ``lines`` and a final expression, for a context where any
        :class:`EvalError`, :class:`TypeError` or :class:`ValueError` means the same thing: ``fail``
        (a statement). An integer division or remainder by zero then runs ``fail`` instead of raising.

        Operands are evaluated in order, and both before the operation, as :func:`evaluate` does; only
        the order of two failures can differ, which the context cannot tell apart. Right operands of
        ``and``/``or`` are left inline (they may not be evaluated at all).
        """
        hoisted = self._hoist(x, resolve)
        if hoisted is not None:
            return hoisted
        if isinstance(x, n.Bin) and x.op in ("/", "%"):
            left = self.flat(x.left, resolve, lines, fail)
            right = self.flat(x.right, resolve, lines, fail)
            fast, helper = ("//", "_floordiv") if x.op == "/" else ("%", "_mod")
            return self._flat_division(left, right, fast, helper, lines, fail)
        if isinstance(x, n.Call) and x.fn == "cdiv" and len(x.args) == 2:
            a = self.flat(x.args[0], resolve, lines, fail)
            b = self.flat(x.args[1], resolve, lines, fail)
            return self._flat_division(a, b, "cdiv", "_cdiv", lines, fail)
        if isinstance(x, n.Bin) and x.op not in ("and", "or"):
            left = self.flat(x.left, resolve, lines, fail)
            right = self.flat(x.right, resolve, lines, fail)
            return f"({left} {x.op} {right})"
        if isinstance(x, n.Unary):
            inner = self.flat(x.operand, resolve, lines, fail)
            return f"(not {inner})" if x.op == "not" else f"(-{inner})"
        if isinstance(x, n.Call) and x.fn in ("min", "max") and len(x.args) == 2:
            args = ", ".join(self.flat(a, resolve, lines, fail) for a in x.args)
            return f"_{x.fn}({args})"
        return self.expr(x, resolve)

    def _flat_division(self, left: str, right: str, op: str, helper: str, lines: list[str], fail: str) -> str:
        a, b, out = self.temp(), self.temp(), self.temp()
        fast = f"-(-{a} // {b})" if op == "cdiv" else f"{a} {op} {b}"
        lines += [
            f"{a} = {left}",
            f"{b} = {right}",
            f"if type({a}) is int and type({b}) is int:",
            f"    if not {b}: {fail}",
            f"    {out} = {fast}",
            "else:",
            f"    {out} = {helper}({a}, {b})",
        ]
        return out

    def expr(self, x: n.Expr, resolve: Callable[[str], str | None]) -> str:
        hoisted = self._hoist(x, resolve)
        if hoisted is not None:
            return hoisted
        if isinstance(x, n.Num):
            return self.const(x.value)
        if isinstance(x, n.Name):
            held = resolve(x.id)
            if held is not None:
                return held
            if x.id in WORDS:
                return self.const(WORDS[x.id])
            return "_free()"
        if isinstance(x, n.Unary):
            inner = self.expr(x.operand, resolve)
            return f"(not {inner})" if x.op == "not" else f"(-{inner})"
        if isinstance(x, n.Bin):
            left, right = self.expr(x.left, resolve), self.expr(x.right, resolve)
            if x.op == "and":
                return f"(_bool({left}) and _bool({right}))"
            if x.op == "or":
                return f"(_bool({left}) or _bool({right}))"
            if x.op in ("/", "%"):
                # integers inline (both operands evaluated, in order, before the test); anything else,
                # and a zero divisor, through the helper that does what evaluate does
                a, b = self.temp(), self.temp()
                fast, slow = ("//", "_floordiv") if x.op == "/" else ("%", "_mod")
                return (f"({a} {fast} {b} if (type({a} := {left}) is int) & (type({b} := {right}) is int) and {b} "
                        f"else {slow}({a}, {b}))")  # fmt: skip
            return f"({left} {x.op} {right})"
        if isinstance(x, n.Call):
            if x.fn not in BUILTINS or len(x.args) != BUILTINS[x.fn][0]:
                return "_free()"
            if x.fn == "cdiv":
                a, b = self.temp(), self.temp()
                left, right = self.expr(x.args[0], resolve), self.expr(x.args[1], resolve)
                return (f"(-(-{a} // {b}) if (type({a} := {left}) is int) & (type({b} := {right}) is int) and {b} "
                        f"else _cdiv({a}, {b}))")  # fmt: skip
            args = ", ".join(self.expr(a, resolve) for a in x.args)
            return {"min": f"_min({args})", "max": f"_max({args})"}[x.fn]
        return "_free()"  # a reference, or an expression evaluate does not know


class _WalkerSource:
    """Python source of one witness-search walk: :meth:`KernelDomain._walk` unrolled for one chain of
    binders and one list of obligations.

    The generated function ``_walk(E, B, L, F, C, _pick)`` takes the environment of sizes and
    constants ``E``, the budget cell ``B``, the live flags ``L`` (one per obligation), the obligations'
    ``parts`` functions ``F`` and plain checks ``C``, and the range sampler; it returns
    ``(obligation index, what, variable values)`` or None, after exactly the evaluations, budget
    spending and exception handling of the recursive walk:

    * each binder's variable is a Python local (names resolved statically along the chain, so a later
      binding shadows an earlier one exactly where the environment would);
    * a ``let`` or guard catches :class:`EvalError`, :class:`TypeError` and :class:`ValueError` raised
      in its whole subtree, and abandons it (a run of them shares one ``try``: same handler);
    * a range that cannot be computed abandons its level; abandoning a level continues the nearest
      enclosing loop (or returns, at the top);
    * the budget is checked at the top of every loop iteration (the recursive walk checks it on entry
      of each call and after each child: nothing is evaluated in between).
    """

    def __init__(self, chain: Sequence[Binder], obligations: Sequence[Obligation], base: frozenset[str]) -> None:
        self.chain, self.obligations, self.base = chain, obligations, base
        self.lines: list[str] = []
        self.loaded: dict[str, str] = {}  # base name -> the local it is loaded into
        self.fixed: dict[str, str] = {}  # a local with one value for the whole walk -> its name in the prologue
        self.src = _Source(fixed=self.fixed.get)
        self.count = 0

    def local(self) -> str:
        self.count += 1
        return f"v{self.count}"

    def emit(self, depth: int, line: str) -> None:
        self.lines.append("    " * depth + line)

    def resolver(self, scope: Mapping[str, str]) -> Callable[[str], str | None]:
        def resolve(name: str) -> str | None:
            if name in scope:
                return scope[name]
            if name in self.base:
                local = self.loaded.get(name)
                if local is None:
                    local = self.loaded[name] = self.fixed[local] = f"b{len(self.loaded)}"
                return local
            return None

        return resolve

    def ahead(self, e: n.Expr, resolve: Callable[[str], str | None], value: str) -> str | None:
        """The prologue's name for the value of a ``let`` of ``e`` (rendered ``value``) where it is
        the same for the whole walk; else None."""
        if isinstance(e, n.Num):
            return value
        if isinstance(e, n.Name):
            held = resolve(e.id)
            return None if held is None else self.fixed.get(held)
        return self.src.ahead(e, resolve)

    def source(self) -> str:
        self.level(0, 1, {}, [], False)
        head = ["def _walk(E, B, L, F, C, _pick):"]
        head += [f"    {local} = E[{name!r}]" for name, local in self.loaded.items()]
        head += [f"    {line}" for line in self.src.prologue]
        return "\n".join(head + self.lines) + "\n"

    def level(self, i: int, depth: int, scope: dict[str, str], named: list[tuple[str, str]], in_loop: bool) -> None:
        back = "continue" if in_loop else "return None"
        if i == len(self.chain):
            self.leaf(depth, scope, named)
            return
        b = self.chain[i]
        if b.kind is BinderKind.LET or b.kind is BinderKind.GUARD:
            self.emit(depth, "try:")
            inner = dict(scope)
            j = i
            while j < len(self.chain) and self.chain[j].kind in (BinderKind.LET, BinderKind.GUARD):
                bj = self.chain[j]
                assert bj.value is not None
                lines: list[str] = []
                res = self.resolver(dict(inner))
                value = self.src.flat(bj.value, res, lines, back)
                for line in lines:
                    self.emit(depth + 1, line)
                if bj.kind is BinderKind.LET:
                    local = self.local()
                    self.emit(depth + 1, f"{local} = {value}")
                    ahead = self.ahead(bj.value, res, value)
                    if ahead is not None:
                        self.fixed[local] = ahead
                    inner[bj.name] = local
                else:
                    self.emit(depth + 1, f"if _bool({value}) == {bj.negate!r}: {back}")
                j += 1
            self.level(j, depth + 1, inner, named, in_loop)
            self.emit(depth, f"except _E: {back}")
            return
        inner = dict(scope)
        var = self.local()
        if b.kind is BinderKind.SELF and b.count == 1:  # one instance: no loop, and not named
            self.emit(depth, f"{var} = 0")
            inner[b.name] = var
            self.level(i + 1, depth, inner, named, in_loop)
            return
        values = self.local()
        if b.kind is BinderKind.SELF:
            self.emit(depth, f"{values} = range({b.count})")
        else:
            res = self.resolver(scope)
            self.emit(depth, "try:")
            # each bound converted with int() before the next is computed, as the recursive walk does
            ends = (b.stop,) if b.kind is BinderKind.GRID else (b.start, b.stop, b.step)
            parts: list[str] = []
            for e, default in zip(ends, ("0", "0", "1") if len(ends) == 3 else ("0",), strict=True):
                if e is None:
                    parts.append(default)
                    continue
                lines: list[str] = []
                value = self.src.flat(e, res, lines, back)
                for line in lines:
                    self.emit(depth + 1, line)
                part = self.local()
                self.emit(depth + 1, f"{part} = int({value})")
                parts.append(part)
            computed = f"range(0, {parts[0]})" if b.kind is BinderKind.GRID else f"({', '.join(parts)})"
            self.emit(depth + 1, f"{values} = {computed}")
            self.emit(depth, f"except _E: {back}")
            if b.kind is BinderKind.LOOP:
                self.emit(depth, f"if {values}[2] == 0: {back}")
                self.emit(depth, f"{values} = range(*{values})")
        # _pick of a short range is the range: known here for the instances, else tested inline
        if b.kind is BinderKind.SELF and b.count <= RANGE_EXACT:
            picked = values
        else:
            picked = f"({values} if len({values}) <= {RANGE_EXACT} else _pick({values}))"
        self.emit(depth, f"for {var} in {picked}:")
        self.emit(depth + 1, "if B[0] <= 0: return None")
        inner[b.name] = var
        more = named + [(b.name, var)] if b.kind is not BinderKind.SELF or b.count > 1 else named
        self.level(i + 1, depth + 1, inner, more, True)

    def leaf(self, depth: int, scope: dict[str, str], named: list[tuple[str, str]]) -> None:
        self.emit(depth, "B[0] -= 1")
        found = "{" + ", ".join(f"{name!r}: {local}" for name, local in named) + "}"
        res = self.resolver(scope)
        for j, ob in enumerate(self.obligations):
            self.emit(depth, f"if L[{j}]:")
            self.emit(depth + 1, "try:")
            if ob.parts is not None and ob.fails is not None:
                # the expressions in order, then the check's own first test inline: the function that
                # words the failure runs only when there is one
                names = [f"a{k}" for k in range(len(ob.parts[0]))]
                for name, x in zip(names, ob.parts[0], strict=True):
                    self.emit(depth + 2, f"{name} = {self.src.expr(x, res)}")
                self.emit(depth + 1, "except _EvalError: pass")
                self.emit(depth + 1, "else:")
                self.emit(depth + 2, f"if {ob.fails}:")
                self.emit(depth + 3, f"w = F[{j}]({', '.join(names)})")
                self.emit(depth + 3, f"if w is not None: return ({j}, w, {found})")
                continue
            if ob.parts is not None:  # the check, taken apart: its expressions in order, then its verdict
                values = ", ".join(self.src.expr(x, res) for x in ob.parts[0])
                self.emit(depth + 2, f"w = F[{j}]({values})")
            else:  # a plain check gets the environment as the recursive walk would have it
                env = "{**E, " + ", ".join(f"{name!r}: {local}" for name, local in scope.items()) + "}"
                self.emit(depth + 2, f"w = C[{j}]({env})")
            self.emit(depth + 1, "except _EvalError: pass")
            self.emit(depth + 1, "else:")
            self.emit(depth + 2, f"if w is not None: return ({j}, w, {found})")


def _compile_walker(source: str, consts: tuple[object, ...]) -> Callable[..., object] | None:
    """The walk function of ``source``; None when Python cannot compile it (too deeply nested)."""
    namespace: dict[str, object] = {**_RUNTIME, "_c": consts}
    try:
        exec(source, namespace)  # noqa: S102 - source built from IR nodes, names quoted with repr
    except (SyntaxError, RecursionError, MemoryError):
        return None
    return namespace["_walk"]  # type: ignore[return-value]


# ---------------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------------


def _depends(chain: Sequence[Binder], exprs: Sequence[n.Expr]) -> set[str]:
    """The names ``exprs`` depend on, through the lets and the ranges of the variables in ``chain``."""
    out: set[str] = set()
    for e in exprs:
        out |= _names(e)
    for b in reversed(chain):
        if b.name in out and b.kind is not BinderKind.GUARD:
            for e in (b.start, b.stop, b.step, b.value):
                if e is not None:
                    out |= _names(e)
    return out


IntegralForm = tuple[int, tuple[tuple[int, int], ...], int]  # (D·const, ((position, D·coef), ...), D)


def _integral_forms(forms: Sequence[Form], names: Sequence[str]) -> list[IntegralForm]:
    """The distinct forms, scaled by the common denominator ``D`` of their numbers (``f.at(x) > -1``
    iff ``D·f.at(x) > -D``), each size named by its position in the sampled ``names`` (which hold
    every size of the forms, see :meth:`KernelDomain._relevant_sizes`)."""
    out: list[IntegralForm] = []
    seen: set[tuple] = set()
    where = {s: i for i, s in enumerate(names)}
    for f in forms:
        key = (f.const, f.terms)
        if key in seen:
            continue
        seen.add(key)
        # (an int is its own numerator, over 1)
        d = math.lcm(f.const.denominator, *(a.denominator for _, a in f.terms))
        out.append((
            f.const.numerator * (d // f.const.denominator),
            tuple((where[s], a.numerator * (d // a.denominator)) for s, a in f.terms),
            d,
        ))  # fmt: skip
    return out


def _above(f: IntegralForm, sizes: Sequence[int]) -> bool:
    """Whether the form (see :data:`IntegralForm`) is above -1 at the sampled ``sizes``."""
    total, terms, d = f
    for i, a in terms:
        total += a * sizes[i]
    return total > -d


def _pick(values: Sequence[int], constants: Sequence[int]) -> list[int]:
    """All of a short range; of a long one its ends, its middle, and the values around multiples of
    the kernel's constants counted from either end."""
    count = len(values)
    if count <= RANGE_EXACT:
        return list(values)
    return [values[i] for i in _pick_indices(count, constants)]


def _pick_indices(count: int, constants: Sequence[int]) -> list[int]:
    """The positions :func:`_pick` takes from a range of ``count`` values (more than RANGE_EXACT)."""
    idx = {0, 1, 2, 3, count - 4, count - 3, count - 2, count - 1, count // 2}
    for c in constants:
        for k in (c - 1, c, c + 1):
            idx.update((k, count - 1 - k))
    return sorted(i for i in idx if 0 <= i < count)


def _names(e: n.Expr) -> set[str]:
    return {x.id for x in n.walk_expr(e) if isinstance(x, n.Name)}


def _kernel_constants(model: KernelModel, literals: set[int] | None = None) -> list[int]:
    """Positive integers written in the kernel or fixed by the specialization (at most 4096)."""
    found: set[int] = set()
    for v in model.env.values():
        if isinstance(v, int) and not isinstance(v, bool):
            found.add(v)
    found |= literals if literals is not None else _kernel_literals(model.kernel)
    return sorted(c for c in found if 2 <= c <= 4096)


def _kernel_names(k: n.Kernel) -> frozenset[str]:
    """Every name an expression of the kernel mentions (not the parameters' element types)."""
    exprs: list[n.Expr] = [e for p in k.params for e in p.shape] + list(k.grid.extents) + [c.value for c in k.consts]
    exprs += [k.cta.warps] + ([k.cta.occupancy] if k.cta.occupancy is not None else []) + list(k.cta.cluster)
    for s in k.smem:
        exprs += list(s.shape) + [x for x in (s.stages, s.pad, s.align) if x is not None]
    for b in k.barriers:
        exprs += [b.count] + ([b.stages] if b.stages is not None else [])
    for d in k.domain:
        exprs += list(d.values)
    for role in k.roles:
        exprs += [x for x in (role.warp_start, role.warp_stop, role.per, role.regs) if x is not None]
        for s in n.walk_stmts(role.body):
            if isinstance(s, n.Op):
                exprs += list(s.operands) + [a.value for a in s.attrs]
            elif isinstance(s, n.For):
                exprs += [s.start, s.stop] + ([s.step] if s.step is not None else [])
            elif isinstance(s, n.Let):
                exprs.append(s.value)
            elif isinstance(s, n.If):
                exprs.append(s.cond)
            elif isinstance(s, n.RegDecl):
                exprs += list(s.shape) + (list(s.layout.args) if s.layout is not None else [])
    names: set[str] = set()
    for e in exprs:
        for x in n.walk_expr(e):
            if isinstance(x, n.Name):
                names.add(x.id)
    return frozenset(names)


def _kernel_literals(k: n.Kernel) -> set[int]:
    """Integer literals of the kernel's shapes, grid, constants, operations and control flow."""
    found: set[int] = set()
    exprs: list[n.Expr] = [e for p in k.params for e in p.shape] + list(k.grid.extents)
    exprs += [c.value for c in k.consts]
    for _, op in n.walk_ops(k):
        exprs += list(op.operands) + [a.value for a in op.attrs]
    for role in k.roles:
        for s in n.walk_stmts(role.body):
            if isinstance(s, n.For):
                exprs += [s.start, s.stop] + ([s.step] if s.step is not None else [])
            elif isinstance(s, (n.Let,)):
                exprs.append(s.value)
            elif isinstance(s, n.If):
                exprs.append(s.cond)
    for e in exprs:
        for x in n.walk_expr(e):
            if isinstance(x, n.Num) and isinstance(x.value, int):
                found.add(x.value)
    return found


def _extent(ext: n.Expr, value: object) -> str:
    return str(value) if isinstance(ext, n.Num) else f"`{_text(ext)}` = {value}"


def _text(e: n.Expr) -> str:
    """Source-like text of an expression, for messages."""
    from cake_core.ir.printer import expr as print_expr

    try:
        return print_expr(e)
    except Exception:  # the printer does not know an expression: fall back to a plain form
        return type(e).__name__
