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
"""

from __future__ import annotations

import enum
import itertools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING

import attrs

from cake_core.ir import nodes as n
from cake_core.ir.exprs import EvalError, evaluate
from cake_core.ir.primitive import Effect, Kind, Operand
from cake_core.verify.symbolic import (
    Bound, Bounder, Form, Lin, Linearizer, ShapeDomain, SizeRange, Var, eliminations, lin_multiple, relaxations,
)  # fmt: skip

if TYPE_CHECKING:
    from cake_core.ir.sema import KernelModel, TypedOpImpl

__all__ = [
    "AccessVerdict", "Binder", "BinderKind", "KernelDomain", "Obligation", "ShapeDomain", "SizeRange", "Status",
    "Verdict", "Witness",
]  # fmt: skip

RANGE_EXACT = 64  # loop and grid ranges up to this long are enumerated in full
SIZE_COMBOS = 4096  # full product of size samples up to this many combinations
EVAL_BUDGET = 60_000  # concrete evaluations of one witness search
SCALAR_SAMPLES = (-1, 0, 1, 2, 65536)  # scalar parameters are unconstrained


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
    """``m >= 0`` must hold where the operation runs; ``check`` tells, concretely, how it fails."""

    m: Lin | None
    exprs: tuple[n.Expr, ...]  # the expressions it depends on (for choosing sizes to sample)
    check: Callable[[Mapping[str, object]], str | None]


@attrs.frozen
class AccessVerdict:
    """Whether one operand access of one operation stays in bounds."""

    typed: TypedOpImpl
    effect: Effect
    verdict: Verdict

    @property
    def operand(self) -> Operand:
        return self.effect.operand


# ---------------------------------------------------------------------------------------------------
# The analysis of one kernel under one specialization
# ---------------------------------------------------------------------------------------------------


class KernelDomain:
    """Proofs and witness searches about run-time sizes for one :class:`KernelModel`."""

    def __init__(self, model: KernelModel) -> None:
        self.model = model
        self.shape = ShapeDomain.of(model)
        self.lin = Linearizer(model.env, frozenset(self.shape.sizes), self.shape.scalars)
        self.scopes = _scopes(model)
        self.constants = _kernel_constants(model)

    # -- scopes --------------------------------------------------------------------------------------

    def scope(self, typed: TypedOpImpl) -> tuple[Binder, ...]:
        return self.scopes.get(id(typed.op), ())

    def _symbolic(self, chain: Sequence[Binder]) -> tuple[dict[str, Lin | None], dict[str, Bound], list[Lin]]:
        """Lets (as linear forms), variable bounds and guards of a scope."""
        lets: dict[str, Lin | None] = {}
        bounds: dict[str, Bound] = {}
        guards: list[Lin] = []
        for b in chain:
            if b.kind is BinderKind.GRID:
                ext = self.lin.lin(b.stop, lets) if b.stop is not None else None
                hi = None if ext is None else ext.plus(-1)
                bounds[b.name] = (Lin(), hi)
                if hi is not None:
                    guards.append(hi - Lin.of(Var(b.name)))
            elif b.kind is BinderKind.SELF:
                bounds["self"] = (Lin(), Lin(Fraction(b.count - 1)))
            elif b.kind is BinderKind.LOOP:
                start = self.lin.lin(b.start, lets) if b.start is not None else None
                stop = self.lin.lin(b.stop, lets) if b.stop is not None else None
                step = self.lin.lin(b.step, lets) if b.step is not None else Lin(Fraction(1))
                v = Lin.of(Var(b.name))
                if step is not None and step.is_const and step.const < 0:
                    lo, hi = (None if stop is None else stop.plus(1)), start
                elif step is not None and (step.is_const or self._positive(step, bounds)):
                    lo, hi = start, (None if stop is None else stop.plus(-1))
                else:  # a run-time step not proved positive: nothing is known of the variable
                    lo = hi = None
                bounds[b.name] = (lo, hi)
                if lo is not None:
                    guards.append(v - lo)
                if hi is not None:
                    guards.append(hi - v)
            elif b.kind is BinderKind.LET:
                lets[b.name] = self.lin.lin(b.value, lets) if b.value is not None else None
            elif b.kind is BinderKind.GUARD and b.value is not None:
                guards.extend(self._facts(b.value, b.negate, lets))
        for s in self.shape.scalars:
            bounds.setdefault(s, (None, None))
        return lets, bounds, guards

    def _positive(self, x: Lin, bounds: Mapping[str, Bound]) -> bool:
        """Whether ``x >= 1`` is proved with the variable bounds known so far."""
        return Bounder(self.shape, bounds).proves_nonneg(Bounder(self.shape, bounds).lower(x.plus(-1)))

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
        if self.shape.empty():
            return Verdict(Status.PROVED)
        lets, bounds, guards = self._symbolic(chain)
        bounder = Bounder(self.shape, bounds)
        open_: list[tuple[Obligation, list[Form]]] = []
        for ob in obligations:
            if ob.m is None:
                open_.append((ob, []))
                continue
            ok, forms = self.prove(ob.m, bounder, guards)
            if not ok:
                open_.append((ob, forms))
        if not open_:
            return Verdict(Status.PROVED)
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

    def size_assignments(self, names: Sequence[str]) -> Iterator[dict[str, int]]:
        """The witness set over ``names`` (run-time sizes and scalars; see the module documentation)."""
        per = {
            s: list(SCALAR_SAMPLES) if s in self.shape.scalars else self.shape.samples(s, self.constants)
            for s in names
        }
        if not names:
            yield {}
            return
        if math.prod(len(v) for v in per.values()) <= SIZE_COMBOS:
            for combo in itertools.product(*(per[s] for s in names)):
                yield dict(zip(names, combo, strict=True))
            return
        seen: set[tuple[int, ...]] = set()
        for s in names:
            for pick in ("low", "middle", "high"):
                base = {}
                for o in names:
                    vals = per[o]
                    base[o] = {"low": vals[0], "middle": vals[len(vals) // 2], "high": vals[-1]}[pick]
                for v in per[s]:
                    a = dict(base)
                    a[s] = v
                    key = tuple(a[x] for x in names)
                    if key not in seen:
                        seen.add(key)
                        yield a

    def _search(self, chain: Sequence[Binder], open_: Sequence[tuple[Obligation, list[Form]]]) -> Verdict:
        names = self._relevant_sizes(chain, open_)
        budget = [EVAL_BUDGET]
        tried = 0
        for sizes in self.size_assignments(names):
            full = {s: sizes.get(s, r.lo) for s, r in self.shape.sizes.items()}
            live = [ob for ob, forms in open_ if not any(f.at(full) > -1 for f in forms if _covers(f, full))]
            if not live:
                continue
            tried += 1
            env: dict[str, object] = dict(self.model.env)
            env.update(full)
            env.update({s: sizes.get(s, 0) for s in self.shape.scalars})
            found = self._walk(chain, 0, env, {}, live, budget)
            if found is not None:
                ob, what, vars_ = found
                keep = _depends(chain, ob.exprs)
                return Verdict(
                    Status.VIOLATED,
                    Witness(
                        tuple((s, sizes[s]) for s in names if s in keep),
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
        vars_: dict[str, int],
        live: Sequence[Obligation],
        budget: list[int],
    ) -> tuple[Obligation, str, dict[str, int]] | None:
        if budget[0] <= 0:
            return None
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
        try:
            if b.kind is BinderKind.LET:
                assert b.value is not None
                env2 = dict(env)
                env2[b.name] = evaluate(b.value, env)
                return self._walk(chain, i + 1, env2, vars_, live, budget)
            if b.kind is BinderKind.GUARD:
                assert b.value is not None
                if bool(evaluate(b.value, env)) == b.negate:
                    return None
                return self._walk(chain, i + 1, env, vars_, live, budget)
            if b.kind is BinderKind.SELF:
                values: Sequence[int] = range(b.count)
            elif b.kind is BinderKind.GRID:
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
        for v in _pick(values, self.constants):
            env2 = dict(env)
            env2[b.name] = v
            named = {**vars_, b.name: v} if b.kind is not BinderKind.SELF or b.count > 1 else vars_
            found = self._walk(chain, i + 1, env2, named, live, budget)
            if found is not None or budget[0] <= 0:
                return found
        return None

    # -- obligations of accesses ---------------------------------------------------------------------

    def access_obligations(self, typed: TypedOpImpl, effect: Effect) -> list[Obligation]:
        """Every index of one operand access must lie inside what it indexes."""
        o = effect.operand
        lets, _, _ = self._symbolic(self.scope(typed))
        out: list[Obligation] = []
        extents: list[n.Expr]
        stages: int | None = None
        if o.kind is Kind.GLOBAL and isinstance(o.decl, n.Param):
            extents = list(o.decl.shape)
        elif o.kind is Kind.SHARED and o.name in self.model.smem:
            info = self.model.smem[o.name]
            extents = [n.Num(v) for v in info.shape]
            stages = info.stages
        elif o.kind is Kind.REGISTERS and o.name in self.model.regs:
            extents = [n.Num(v) for v in self.model.regs[o.name].shape]
        elif o.kind is Kind.BARRIER and o.name in self.model.barriers:
            extents, stages = [], self.model.barriers[o.name].stages
        else:
            return out
        if o.stage is not None and stages is not None:
            out += self._index(o.stage, n.Num(stages), lets, f"`{o.name}` has {stages} stages", stage=True)
        for d, item in enumerate(o.index):
            if d >= len(extents):
                break
            where = f"in dimension {d + 1}"
            if isinstance(item, n.At):
                out += self._index(item.expr, extents[d], lets, where)
            elif isinstance(item, n.Span):
                out += self._span(item.start, item.size, extents[d], lets, where)
        return out

    def _index(
        self, e: n.Expr, ext: n.Expr, lets: Mapping[str, Lin | None], where: str, stage: bool = False
    ) -> list[Obligation]:
        x, E = self.lin.lin(e, lets), self.lin.lin(ext, lets)

        def low(env: Mapping[str, object]) -> str | None:
            v = evaluate(e, env)
            if v < 0:  # type: ignore[operator]
                return f"stage `{_text(e)}` is {v}, below 0" if stage else f"{where}, index `{_text(e)}` is {v}, below 0"
            return None

        def high(env: Mapping[str, object]) -> str | None:
            v, top = evaluate(e, env), evaluate(ext, env)
            if v >= top:  # type: ignore[operator]
                if stage:
                    return f"stage `{_text(e)}` is {v}, but {where}"
                return f"{where}, index `{_text(e)}` is {v}, past the extent {_extent(ext, top)}"
            return None

        return [
            Obligation(x, (e,), low),
            Obligation(None if x is None or E is None else (E - x).plus(-1), (e, ext), high),
        ]

    def _span(self, start: n.Expr, size: n.Expr, ext: n.Expr, lets: Mapping[str, Lin | None], where: str) -> list[Obligation]:
        s, z, E = self.lin.lin(start, lets), self.lin.lin(size, lets), self.lin.lin(ext, lets)

        def low(env: Mapping[str, object]) -> str | None:
            v = evaluate(start, env)
            return f"{where}, the slice starts at {v}, below 0" if v < 0 else None  # type: ignore[operator]

        def high(env: Mapping[str, object]) -> str | None:
            a, k, top = evaluate(start, env), evaluate(size, env), evaluate(ext, env)
            if k > 0 and a + k > top:  # type: ignore[operator]
                span = f"is at {a}" if k == 1 else f"covers {a}..{a + k - 1}"  # type: ignore[operator]
                return f"{where}, the slice {span}, past the extent {_extent(ext, top)}"
            return None

        return [
            Obligation(s, (start,), low),
            Obligation(None if s is None or z is None or E is None else E - s - z, (start, size, ext), high),
        ]

    def access(self, typed: TypedOpImpl, effect: Effect) -> Verdict:
        """Whether one operand access stays in bounds (masked accesses are not examined)."""
        if effect.masked:
            return Verdict(Status.MASKED)
        return self.decide(typed, self.access_obligations(typed, effect))

    def accesses(self) -> list[AccessVerdict]:
        """Every tile and barrier access of every operation, with its verdict."""
        out = []
        for typed in self.model.ops:
            for eff in typed.prim.effects(typed):
                if eff.operand.kind is Kind.VALUE or eff.operand.name is None:
                    continue
                out.append(AccessVerdict(typed, eff, self.access(typed, eff)))
        return out

    # -- divisibility --------------------------------------------------------------------------------

    def multiple_of(self, typed: TypedOpImpl | None, e: n.Expr, scale: int, k: int, what: str) -> Verdict:
        """Whether ``e * scale`` is a multiple of ``k`` wherever the operation runs, for every size.

        ``what`` names the quantity in a witness: its ``what`` reads ``f"{what} {e * scale}"``.

        Proved when every term's coefficient (times the size's modulus, for a size) and the constant,
        scaled, are multiples of ``k`` (a variable steps through consecutive integers, so that is also
        necessary for most); otherwise decided by the witness search. ``typed=None`` looks at sizes only.
        """
        chain = self.scope(typed) if typed is not None else ()
        lets, _, _ = self._symbolic(chain)
        x = self.lin.lin(e, lets)
        if x is not None and lin_multiple(x.scale(scale), k, self.shape):
            return Verdict(Status.PROVED)

        def check(env: Mapping[str, object]) -> str | None:
            v = evaluate(e, env)
            if isinstance(v, int) and (v * scale) % k:
                return f"{what} {v * scale}"
            return None

        ob = Obligation(None, (e,), check)
        return self._search(chain, [(ob, [])])


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


def _covers(f: Form, sizes: Mapping[str, int]) -> bool:
    return all(s in sizes for s, _ in f.terms)


def _pick(values: Sequence[int], constants: Sequence[int]) -> list[int]:
    """All of a short range; of a long one its ends, its middle, and the values around multiples of
    the kernel's constants counted from either end."""
    count = len(values)
    if count <= RANGE_EXACT:
        return list(values)
    idx = {0, 1, 2, 3, count - 4, count - 3, count - 2, count - 1, count // 2}
    for c in constants:
        for k in (c - 1, c, c + 1):
            idx.update((k, count - 1 - k))
    return [values[i] for i in sorted(i for i in idx if 0 <= i < count)]


def _names(e: n.Expr) -> set[str]:
    return {x.id for x in n.walk_expr(e) if isinstance(x, n.Name)}


def _kernel_constants(model: KernelModel) -> list[int]:
    """Positive integers written in the kernel or fixed by the specialization (at most 4096)."""
    found: set[int] = set()
    for v in model.env.values():
        if isinstance(v, int) and not isinstance(v, bool):
            found.add(v)
    k = model.kernel
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
    return sorted(c for c in found if 2 <= c <= 4096)


def _extent(ext: n.Expr, value: object) -> str:
    return str(value) if isinstance(ext, n.Num) else f"`{_text(ext)}` = {value}"


def _text(e: n.Expr) -> str:
    """Source-like text of an expression, for messages."""
    from cake_core.ir.printer import expr as print_expr

    try:
        return print_expr(e)
    except Exception:  # the printer does not know an expression: fall back to a plain form
        return type(e).__name__
