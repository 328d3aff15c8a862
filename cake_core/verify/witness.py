"""The witness search: obligations no proof covers, checked concretely on sampled sizes.

For a set of size assignments (:meth:`WitnessSearch.size_assignments`, the sample values
:mod:`cake_core.verify.domain` describes), the search walks the operation's binders concretely —
grid, ``self``, loops (long ranges sampled), ``let`` and ``if`` — evaluating every expression in its
:func:`~cake_core.ir.exprs.compile_expr` form (compiled once per kernel), and checks the open
obligations at every point it reaches. The first failure is a
:class:`~cake_core.verify.verdicts.Witness`; a search that finds none answers
:attr:`~cake_core.verify.verdicts.Status.SAMPLED`. A size assignment for which a lower bound the proof
search found already holds is skipped, and so is one whose walk can reach no leaf
(:meth:`WitnessSearch._unreachable`); the search stops after :data:`EVAL_BUDGET` evaluations.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from cake_core.ir import nodes as n
from cake_core.ir.exprs import BUILTINS, Compiled, EvalError, Fn
from cake_core.verify.samples import per_kernel
from cake_core.verify.scopes import Binder, BinderKind
from cake_core.verify.verdicts import Obligation, Status, Verdict, Witness

if TYPE_CHECKING:
    from cake_core.ir.model import KernelModel
    from cake_core.verify.analyses import Analyses
    from cake_core.verify.linear import Form
    from cake_core.verify.shapes import ShapeDomain

__all__ = ["EVAL_BUDGET", "RANGE_EXACT", "SCALAR_SAMPLES", "SIZE_COMBOS", "WitnessSearch", "names_of"]

RANGE_EXACT = 64  # loop and grid ranges up to this long are enumerated in full
SIZE_COMBOS = 4096  # full product of size samples up to this many combinations
EVAL_BUDGET = 60_000  # concrete evaluations of one witness search
SCALAR_SAMPLES = (-1, 0, 1, 2, 65536)  # scalar parameters are unconstrained

#: an obligation still open after the proof search, with the lower-bound forms it tried
Open = tuple[Obligation, list["Form"]]
IntegralForm = tuple[int, tuple[tuple[int, int], ...], int]  # (D·const, ((position, D·coef), ...), D)
#: a binder with its expressions compiled: (kind, name, start, stop, step, value, negate, count, end),
#: ``end`` the index after the run of lets and guards it starts (its own, for another binder)
Step = tuple[BinderKind, str, Fn | None, Fn | None, Fn | None, Fn | None, bool, int, int]
#: a binder, whether its expressions read no variable, and the divisors it always evaluates that read none
Check = tuple[Step, bool, list[Fn]]


class WitnessSearch:
    """Witness searches over one kernel model's binders (sample values and range picks made once)."""

    def __init__(self, model: KernelModel, shape: ShapeDomain, analyses: Analyses) -> None:
        self.model, self.shape, self._analyses = model, shape, analyses
        self._constants: list[int] | None = None
        self._picks: dict[int, list[int]] = {}
        self._picked: dict[range, list[int]] = {}
        self._size_samples: dict[str, list[int]] = {}
        # the protocol simulator's cache: the same nodes, compiled once for every specialization
        self._compiled = Compiled(per_kernel(model, "protocol expressions", lambda k: {}))
        self._steps: dict[int, tuple[Sequence[Binder], tuple[list[Step], list[Check]]]] = {}
        self._runs: dict[int, dict[int, list[tuple[bool, str, Fn, bool]]]] = {}  # by id of a compiled chain

    @property
    def constants(self) -> list[int]:
        """Positive integers written in the kernel or fixed by the specialization (at most 4096): the
        search samples sizes and long ranges around them."""
        if self._constants is None:
            k = self.model.kernel
            literals = self._analyses.get("witness.literals", id(k), lambda: (k, kernel_literals(k)))[1]
            found = {v for v in self.model.env.values() if isinstance(v, int) and not isinstance(v, bool)}
            self._constants = sorted(c for c in found | literals if 2 <= c <= 4096)
        return self._constants

    def search(self, chain: Sequence[Binder], open_: Sequence[Open]) -> Verdict:
        """A witness that breaks one of the obligations of ``open_`` under ``chain``, or SAMPLED."""
        names = self._relevant_sizes(chain, open_)
        obligations = [ob for ob, _ in open_]
        filters = [_integral_forms(forms, names) for _, forms in open_]
        steps, checks = self._compile(chain)
        base: dict[str, object] = dict(self.model.env)  # sizes not sampled at their least, scalars at 0
        base.update({s: r.lo for s, r in self.shape.sizes.items()})
        base.update(dict.fromkeys(self.shape.scalars, 0))
        budget = [EVAL_BUDGET]  # evaluations left
        tried = 0
        for sizes in self.size_assignments(names):
            # the obligations no bound covers at these sizes (most assignments are covered)
            live = []
            for ob, fs in zip(obligations, filters, strict=True):
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
            env.update(zip(names, sizes, strict=True))
            if checks and self._unreachable(checks, env):
                continue  # what the walk would find: nothing, at no cost to the budget
            found = self._walk(steps, 0, env, [], live, budget)
            if found is not None:
                ob, what, vars_ = found
                keep = _depends(chain, ob.exprs)
                return Verdict(
                    Status.VIOLATED,
                    Witness(
                        tuple((s, v) for s, v in zip(names, sizes, strict=True) if s in keep),
                        tuple((v, x) for v, x in vars_.items() if v in keep),
                        what,
                    ),
                    tried,
                )  # fmt: skip
            if budget[0] <= 0:
                break
        return Verdict(Status.SAMPLED, None, tried)

    def size_assignments(self, names: Sequence[str]) -> Iterator[tuple[int, ...]]:
        """The witness set over ``names`` (run-time sizes and scalars; see :mod:`cake_core.verify.domain`),
        each assignment a tuple of values in the order of ``names``. Where the domain relates sizes
        (``KP >= K``), each sampled assignment is completed to one that satisfies every clause
        (:meth:`~cake_core.verify.shapes.ShapeDomain.complete`), or left out where none is found."""
        if not self.shape.relations:
            yield from self._sampled(names)
            return
        sizes = self.shape.sizes
        seen: set[tuple[int, ...]] = set()
        for key in self._sampled(names):
            full = self.shape.complete({s: v for s, v in zip(names, key, strict=True) if s in sizes})
            if full is None:
                continue
            key = tuple(full.get(s, v) for s, v in zip(names, key, strict=True))
            if key not in seen:
                seen.add(key)
                yield key

    def _sampled(self, names: Sequence[str]) -> Iterator[tuple[int, ...]]:
        """The sample values of ``names`` combined: every combination where there are at most
        :data:`SIZE_COMBOS`, else each name varied while the others take a small, a middle and a large one."""
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
                key = (r.lo, r.hi, r.modulus, tuple(self.constants))
                out = self._analyses.get("witness.samples", key, lambda: self.shape.samples(name, self.constants))
            self._size_samples[name] = out
        return out

    def _relevant_sizes(self, chain: Sequence[Binder], open_: Sequence[Open]) -> list[str]:
        names: set[str] = set()
        for b in chain:
            for e in (b.start, b.stop, b.step, b.value):
                if e is not None:
                    names |= names_of(e)
        for ob, forms in open_:
            for e in ob.exprs:
                names |= names_of(e)
            for f in forms:
                names |= {s for s, _ in f.terms}
        return sorted(names & (set(self.shape.sizes) | self.shape.scalars))

    def _compile(self, chain: Sequence[Binder]) -> tuple[list[Step], list[Check]]:
        """``chain``'s binders with their expressions compiled, and what :meth:`_unreachable` checks of
        them (memoized by chain: one per operation)."""
        hit = self._steps.get(id(chain))
        if hit is not None and hit[0] is chain:
            return hit[1]
        c = self._compiled
        steps: list[Step] = []
        end = len(chain)
        for i in reversed(range(len(chain))):  # where each run of lets and guards ends
            b = chain[i]
            if b.kind is not BinderKind.LET and b.kind is not BinderKind.GUARD:
                end = i
            steps.append((b.kind, b.name, c(b.start), c(b.stop), c(b.step), c(b.value), b.negate, b.count, end))
        steps.reverse()
        # for the first binder of each run of lets and guards, the run: (guard?, name, value, negate) each
        runs: dict[int, list[tuple[bool, str, Fn, bool]]] = {}
        for i, (kind, _, _, _, _, _, _, _, end) in enumerate(steps):
            if kind is BinderKind.LET or kind is BinderKind.GUARD:
                runs[i] = [(s[0] is BinderKind.GUARD, s[1], s[5], s[6]) for s in steps[i:end]]  # type: ignore[misc]
        self._runs[id(steps)] = runs
        checks: list[Check] = []
        varying: set[str] = set()  # names bound, at this point of the chain, by a variable or through one
        for b, step in zip(chain, steps, strict=True):
            exprs = [e for e in (b.start, b.stop, b.step, b.value) if e is not None]
            reads: set[str] = set()
            for e in exprs:
                reads |= names_of(e)
            depends = not reads.isdisjoint(varying)
            divisors = [c(d) for e in exprs for d in _divisors(e) if names_of(d).isdisjoint(varying)]
            fixed = b.kind is not BinderKind.SELF and not depends
            if fixed or divisors:
                checks.append((step, fixed, divisors))  # type: ignore[arg-type]
            if b.kind is BinderKind.LET:
                (varying.add if depends else varying.discard)(b.name)
            elif b.kind is not BinderKind.GUARD:
                varying.add(b.name)
        self._steps[id(chain)] = (chain, (steps, checks))
        return steps, checks

    @staticmethod
    def _unreachable(checks: Sequence[Check], env: dict[str, object]) -> bool:
        """Whether the walk of one size assignment (``env``) reaches no leaf, told from what of its
        binders reads no variable: such an expression takes the one value it would take wherever the walk
        meets it. A binder of such expressions that fails as the walk abandons a subtree (one of the
        three errors it catches, a false guard, an empty range), or one that always evaluates such a
        divisor and finds it zero, would abandon every path to a leaf. Any other error is left to the
        walk."""
        env = dict(env)
        try:
            for (kind, name, start_fn, stop_fn, step_fn, value_fn, negate, _, _), fixed, divisors in checks:
                for d in divisors:
                    if d(env) == 0:
                        return True
                if not fixed:
                    continue
                if kind is BinderKind.GUARD:
                    if bool(value_fn(env)) == negate:  # type: ignore[misc]
                        return True
                elif kind is BinderKind.LET:
                    env[name] = value_fn(env)  # type: ignore[misc]
                elif kind is BinderKind.GRID:
                    if int(stop_fn(env)) <= 0:  # type: ignore[misc, call-overload]
                        return True
                else:
                    start = int(start_fn(env)) if start_fn is not None else 0  # type: ignore[call-overload]
                    stop = int(stop_fn(env)) if stop_fn is not None else 0  # type: ignore[call-overload]
                    step = int(step_fn(env)) if step_fn is not None else 1  # type: ignore[call-overload]
                    if step == 0 or not range(start, stop, step):
                        return True
        except (EvalError, TypeError, ValueError):
            return True
        except Exception:
            return False
        return False

    def _walk(
        self,
        chain: Sequence[Step],
        i: int,
        env: dict[str, object],
        vars_: list[tuple[str, int]],
        live: Sequence[Obligation],
        budget: list[int],
    ) -> tuple[Obligation, str, dict[str, int]] | None:
        """Run the binders ``chain[i:]`` concretely, depth first, checking ``live`` at every leaf.

        ``env`` is updated in place and restored on the way out; ``vars_`` is the stack of named
        variable values (a witness's ``vars``). An :class:`EvalError`, :class:`TypeError` or
        :class:`ValueError` under a ``let`` or a guard abandons that subtree; one while computing a
        range abandons the range. ``budget`` is ``[evaluations left]``: every leaf spends one.
        """
        if budget[0] <= 0:
            return None
        if i == len(chain):
            budget[0] -= 1
            return _leaf(env, vars_, live)
        kind, name, start_fn, stop_fn, step_fn, value_fn, negate, count, end = chain[i]
        missing = _MISSING
        if kind is BinderKind.LET or kind is BinderKind.GUARD:
            # the run of lets and guards chain[i:end], in one frame: any of them failing, or the walk
            # below failing, abandons the subtree alike
            saved: list[tuple[str, object]] = []
            try:
                for guard, name, value_fn, negate in self._runs[id(chain)][i]:
                    if guard:
                        if bool(value_fn(env)) == negate:
                            return None
                    else:
                        value = value_fn(env)
                        saved.append((name, env.get(name, missing)))
                        env[name] = value
                return self._walk(chain, end, env, vars_, live, budget)
            except (EvalError, TypeError, ValueError):
                return None
            finally:
                for name, old in reversed(saved):
                    if old is missing:
                        del env[name]
                    else:
                        env[name] = old
        try:
            if kind is BinderKind.SELF:
                values: Sequence[int] = range(count)
            elif kind is BinderKind.GRID:
                assert stop_fn is not None
                values = range(0, int(stop_fn(env)))  # type: ignore[call-overload]
            else:
                start = int(start_fn(env)) if start_fn is not None else 0  # type: ignore[call-overload]
                stop = int(stop_fn(env)) if stop_fn is not None else 0  # type: ignore[call-overload]
                step = int(step_fn(env)) if step_fn is not None else 1  # type: ignore[call-overload]
                if step == 0:
                    return None
                values = range(start, stop, step)
        except (EvalError, TypeError, ValueError):
            return None
        named = kind is not BinderKind.SELF or count > 1
        last = i + 1 == len(chain)
        old = env.get(name, missing)
        try:
            for v in self._pick(values):
                env[name] = v
                if named:
                    vars_.append((name, v))
                try:
                    if last:  # the leaf, without a call of its own (the budget is above 0 here)
                        budget[0] -= 1
                        found = _leaf(env, vars_, live)
                    else:
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
        """All of a short range; of a long one its ends, its middle, and the values around multiples of
        the kernel's constants counted from either end (memoized by range: the walk meets the same
        ranges again and again)."""
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


_MISSING = object()  # an unbound name, in the walk's saved values


def _leaf(
    env: dict[str, object], vars_: list[tuple[str, int]], live: Sequence[Obligation]
) -> tuple[Obligation, str, dict[str, int]] | None:
    """The first of ``live`` that fails at one point of the walk (an obligation that cannot be evaluated
    there is passed over), with its words and the variables' values."""
    for ob in live:
        try:
            what = ob.check(env)
        except EvalError:
            continue
        if what is not None:
            return ob, what, dict(vars_)
    return None


def names_of(e: n.Expr) -> set[str]:
    """The names ``e`` mentions."""
    return {x.id for x in n.walk_expr(e) if isinstance(x, n.Name)}


def _divisors(e: n.Expr) -> Iterator[n.Expr]:
    """The divisors (of ``/``, ``%`` and ``cdiv``) that every evaluation of ``e`` evaluates: not those
    under the right operand of ``and`` or ``or``, which may be skipped."""
    if isinstance(e, n.Unary):
        yield from _divisors(e.operand)
    elif isinstance(e, n.Bin):
        yield from _divisors(e.left)
        if e.op not in ("and", "or"):
            yield from _divisors(e.right)
            if e.op in ("/", "%"):
                yield e.right
    elif isinstance(e, n.Call) and e.fn in BUILTINS and len(e.args) == BUILTINS[e.fn][0]:
        for a in e.args:
            yield from _divisors(a)
        if e.fn == "cdiv":
            yield e.args[1]


def _depends(chain: Sequence[Binder], exprs: Sequence[n.Expr]) -> set[str]:
    """The names ``exprs`` depend on, through the lets and the ranges of the variables in ``chain``."""
    out: set[str] = set()
    for e in exprs:
        out |= names_of(e)
    for b in reversed(chain):
        if b.name in out and b.kind is not BinderKind.GUARD:
            for e in (b.start, b.stop, b.step, b.value):
                if e is not None:
                    out |= names_of(e)
    return out


def _integral_forms(forms: Sequence[Form], names: Sequence[str]) -> list[IntegralForm]:
    """The distinct forms, scaled by the common denominator ``D`` of their numbers (``f.at(x) > -1``
    iff ``D·f.at(x) > -D``), each size named by its position in the sampled ``names`` (which hold
    every size of the forms, see :meth:`WitnessSearch._relevant_sizes`)."""
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


def _pick_indices(count: int, constants: Sequence[int]) -> list[int]:
    """The positions :meth:`WitnessSearch._pick` takes from a range of ``count`` values (more than
    :data:`RANGE_EXACT`)."""
    idx = {0, 1, 2, 3, count - 4, count - 3, count - 2, count - 1, count // 2}
    for c in constants:
        for k in (c - 1, c, c + 1):
            idx.update((k, count - 1 - k))
    return sorted(i for i in idx if 0 <= i < count)


def kernel_literals(k: n.Kernel) -> set[int]:
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
