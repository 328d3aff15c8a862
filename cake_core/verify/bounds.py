"""Symbolic bounds: lower and upper bounds of a linear expression over the shape domain, as forms.

A :class:`Bounder` stands for one set of variable bounds (one scope of a kernel: each variable's
lowest and highest value in terms of outer names, :data:`Bound`). It bounds a
:class:`~cake_core.verify.linear.Lin` by replacing each variable by the bound of its range that
minimizes (or maximizes) it and each atom by a bound derived from bounds of its arguments; the result
is a :class:`~cake_core.verify.linear.Form` over the run-time sizes alone. :func:`lin_multiple` decides
divisibility of a linear expression over the domain.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from cake_core.verify.linear import Atom, Form, Lin, Q, Size, Sym, Var, int_const, quotient
from cake_core.verify.shapes import ShapeDomain

__all__ = ["Bound", "Bounder", "lin_multiple"]

Bound = tuple[Lin | None, Lin | None]  # a variable's lowest and highest value, in terms of outer names


def _sum(const: Q, parts: Sequence[tuple[Form, Q]]) -> Form:
    """``const + Σ a·f`` over the ``(f, a)`` of ``parts``."""
    acc: dict[str, Q] = {}
    for f, a in parts:
        const += f.const * a
        for s, c in f.terms:
            acc[s] = acc.get(s, 0) + c * a
    return Form.make(const, acc)


def _sum_rational(const: Q, parts: Sequence[tuple[Form, Q]]) -> Form:
    """:func:`_sum` in integers: every number scaled by the common denominator ``d`` of the products,
    the totals divided by it at the end (exact: the same rationals as :func:`_sum`, normalized alike
    by :meth:`Form.make`, without a :class:`~fractions.Fraction` per operation)."""
    d = const.denominator
    for f, a in parts:
        da = a.denominator
        d = math.lcm(d, f.const.denominator * da, *(c.denominator * da for _, c in f.terms))
    total = const.numerator * (d // const.denominator)
    acc: dict[str, int] = {}
    for f, a in parts:
        na, da = a.numerator, a.denominator
        c0 = f.const
        total += c0.numerator * na * (d // (c0.denominator * da))
        for s, c in f.terms:
            acc[s] = acc.get(s, 0) + c.numerator * na * (d // (c.denominator * da))
    return Form.make(quotient(total, d), {s: quotient(v, d) for s, v in acc.items()})


class Bounder:
    """Symbolic lower and upper bounds (:class:`Form`) of linear expressions.

    A bounder stands for one set of variable bounds (one scope of a kernel) and may be shared by every
    question about that scope. Its memos (bounds of symbols and of linear forms, and the relaxations'
    :attr:`alternatives` of atoms) are scratch memos of the proof search under that scope: they live as
    long as the bounder, which lives as long as the :class:`~cake_core.verify.domain.KernelDomain` that
    made it, and hold nothing any other scope could read.
    """

    def __init__(self, domain: ShapeDomain, var_bounds: Mapping[str, Bound]) -> None:
        self.domain, self.var_bounds = domain, var_bounds
        self._memo: dict[tuple[str, bool], Form | None] = {}
        self._lin_memo: dict[tuple[str, bool], Form | None] = {}
        self._acyclic: bool | None = None
        self.asked: set[str] = set()  # the variables whose bounds were looked up
        #: (atom key, sign of its coefficient) -> what :func:`~cake_core.verify.proof.relaxations` may
        #: replace it by (a function of bounds this bounder memoizes)
        self.alternatives: dict[tuple[str, bool], list[Lin]] = {}

    def inherit(self, other: Bounder) -> None:
        """Start from ``other``'s memo (the caller knows its bounds are this bounder's)."""
        self._memo.update(other._memo)
        self._lin_memo.update(other._lin_memo)
        self.asked.update(other.asked)

    @property
    def acyclic(self) -> bool:
        """Whether no variable's bound refers back to it (through other variables' bounds and atoms).

        Then computing a bound never meets the bound being computed (the memo's placeholder for a
        cycle is never read), so every bound the bounder gives is a function of its question alone,
        whatever it was asked before. (Variables named again by an inner binder can make a cycle.)
        """
        known = self._acyclic
        if known is None:
            known = self._acyclic = _acyclic(self.var_bounds)
        return known

    def lower(self, x: Lin) -> Form | None:
        return self._bound(x, low=True)

    def upper(self, x: Lin) -> Form | None:
        return self._bound(x, low=False)

    def _bound(self, x: Lin, low: bool) -> Form | None:
        if not x.terms:
            return Form(x.const, ())
        key = (x.key, low)
        memo = self._lin_memo
        if key in memo:
            return memo[key]
        parts: list[tuple[Form, Q]] = []
        exact = type(x.const) is int  # every number an int so far
        out: Form | None = None
        for sym, a in x.terms:
            f = self._sym(sym, low=(a > 0) == low)
            if f is None:
                break
            parts.append((f, a))
            if exact:
                if type(a) is not int or type(f.const) is not int:
                    exact = False
                else:
                    for _, c in f.terms:
                        if type(c) is not int:
                            exact = False
                            break
        else:
            out = _sum(x.const, parts) if exact else _sum_rational(x.const, parts)
        memo[key] = out
        return out

    def _sym(self, sym: Sym, low: bool) -> Form | None:
        if type(sym) is Size:
            return Form(0, ((sym.name, 1),))
        key = (sym.key, low)
        memo = self._memo
        if key in memo:
            return memo[key]
        memo[key] = None  # a cycle (never expected) is unbounded
        if type(sym) is Var:
            self.asked.add(sym.name)
            lo, hi = self.var_bounds.get(sym.name, (None, None))
            b = lo if low else hi
            out = None if b is None else self._bound(b, low)
        else:
            out = self._atom(sym, low)  # type: ignore[arg-type]
        memo[key] = out
        return out

    def proves_nonneg(self, f: Form | None) -> bool:
        if f is None:
            return False
        m = self.domain.min_of(f)
        return m is not None and m > -1

    def _le(self, a: Form | None, b: Form | None) -> bool:
        """Whether ``a <= b`` for every admissible size."""
        if a is None or b is None:
            return False
        # ``self.domain.min_of(b + a.scale(-1)) >= 0`` without building the difference: the same
        # exact sum over the sizes whose coefficient in ``b - a`` is not zero
        acc = dict(b.terms)
        for s, c in a.terms:
            acc[s] = acc.get(s, 0) - c
        least = self.domain.least(b.const - a.const, [(s, c) for s, c in acc.items() if c != 0])
        return least is not None and least >= 0

    def _atom(self, atom: Atom, low: bool) -> Form | None:
        op, args = atom.op, atom.args
        if op in ("floor", "mod", "modv", "div"):
            x, k_lin = args
            k = int_const(k_lin)
            if op == "floor" and k:
                if low:
                    lo = self.lower(x)
                    if lo is None:
                        return None
                    exact = self.domain.always_multiple(lo, k)
                    return (lo if exact else lo + Form(-(k - 1), ())).div(k)
                hi = self.upper(x)
                return None if hi is None else hi.div(k)
            if op == "mod" and k:
                lo, hi = self.lower(x), self.upper(x)
                if self.proves_nonneg(lo) and self._le(hi, Form(k - 1, ())):
                    return lo if low else hi  # 0 <= x < k: the remainder is x itself
                if lin_multiple(x, k, self.domain):
                    return Form(0, ())
                return Form(0, ()) if low else Form(k - 1, ())
            if op == "modv":  # remainder by a run-time value: 0 .. divisor-1 when the divisor is positive
                dlo, dhi = self.lower(k_lin), self.upper(k_lin)
                if dlo is None or not self._le(Form(1, ()), dlo):
                    return None
                return Form(0, ()) if low else (None if dhi is None else dhi + Form(-1, ()))
            return None  # division by a run-time value
        if op == "cdiv":
            x, k_lin = args
            k = int_const(k_lin)
            if not k:
                return None
            if low:
                lo = self.lower(x)
                return None if lo is None else lo.div(k)
            hi = self.upper(x)
            if hi is None:
                return None
            exact = self.domain.always_multiple(hi, k)
            return (hi if exact else hi + Form(k - 1, ())).div(k)
        if op in ("min", "max"):
            a, b = args
            fa, fb = self._bound(a, low), self._bound(b, low)
            is_min = op == "min"
            if is_min != low:
                # an upper bound of min (a lower bound of max): either argument's will do; the
                # tighter one where that is proved
                if fa is None or fb is None:
                    return fa if fb is None else fb
                tighter_a = self._le(fa, fb) if is_min else self._le(fb, fa)
                return fa if tighter_a else fb
            # a lower bound of min (an upper bound of max) needs the extreme of both
            if fa is None or fb is None:
                return None
            if self._le(fa, fb):
                return fa if is_min else fb
            if self._le(fb, fa):
                return fb if is_min else fa
            if low:
                ea, eb = self.domain.min_of(fa), self.domain.min_of(fb)
                return None if ea is None or eb is None else Form(min(ea, eb), ())
            ea, eb = self.domain.max_of(fa), self.domain.max_of(fb)
            return None if ea is None or eb is None else Form(max(ea, eb), ())
        if op == "mul":
            a, b = args
            la, ha, lb, hb = self.lower(a), self.upper(a), self.lower(b), self.upper(b)
            if all(f is not None and f.is_const for f in (la, ha, lb, hb)):
                prods = [p.const * q.const for p in (la, ha) for q in (lb, hb)]  # type: ignore[union-attr]
                return Form(min(prods) if low else max(prods), ())
            if not (self.proves_nonneg(la) and self.proves_nonneg(lb)):
                return None
            # both factors are non-negative: scale one factor's bound by the other's constant extreme
            assert la is not None and lb is not None
            if low:
                ca, cb = self.domain.min_of(la), self.domain.min_of(lb)
                if ca is not None and ca > 0:
                    return lb.scale(ca)
                return la.scale(cb) if cb is not None else Form(0, ())
            ca = self.domain.max_of(ha) if ha is not None else None
            cb = self.domain.max_of(hb) if hb is not None else None
            if ca is not None and hb is not None:
                return hb.scale(ca)
            if cb is not None and ha is not None:
                return ha.scale(cb)
            return None
        return None


def _var_names(x: Lin, out: set[str]) -> set[str]:
    """The variables ``x`` mentions, in its terms and inside its atoms, added to ``out``."""
    for sym, _ in x.terms:
        if type(sym) is Var:
            out.add(sym.name)
        elif type(sym) is Atom:
            for arg in sym.args:
                _var_names(arg, out)
    return out


def _acyclic(var_bounds: Mapping[str, Bound]) -> bool:
    """Whether the graph from each variable to the variables its bounds mention has no cycle."""
    deps: dict[str, set[str]] = {}
    for name, (lo, hi) in var_bounds.items():
        names: set[str] = set()
        for b in (lo, hi):
            if b is not None:
                _var_names(b, names)
        if names:
            deps[name] = names
    done: set[str] = set()
    for root in deps:
        if root in done:
            continue
        path: set[str] = {root}
        stack = [(root, iter(deps[root]))]
        while stack:
            name, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                path.discard(name)
                done.add(name)
            elif nxt in path:
                return False
            elif nxt not in done and nxt in deps:
                path.add(nxt)
                stack.append((nxt, iter(deps[nxt])))
    return True


def lin_multiple(x: Lin, k: int, shape: ShapeDomain) -> bool:
    """Whether ``x`` is a multiple of ``k`` for every admissible size and every variable value.

    Sufficient: the constant and every coefficient are multiples of ``k`` (a size's coefficient times
    its modulus). Variables and atoms take every integer for all the proof knows.
    """
    if x.const % k:
        return False
    for sym, a in x.terms:
        m = shape.sizes[sym.name].modulus if type(sym) is Size and sym.name in shape.sizes else 1
        if (a * m) % k:
            return False
    return True
