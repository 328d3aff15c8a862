"""Symbolic arithmetic over a kernel's shape domain: linear forms of run-time sizes, and bounds.

:mod:`cake_core.verify.domain` documents what is proved with these and what is sampled. Here:

* :class:`ShapeDomain` — the admissible values of each run-time size (ranges and divisibility);
* :class:`Form` — ``c + Σ a·s`` over run-time sizes, rational coefficients: a bound that holds for
  every admissible size, minimized or maximized over the domain in closed form;
* :class:`Lin` — an integer expression as ``c + Σ a·x`` over sizes, variables and :class:`Atom`\\ s
  (floor division, remainders, ``cdiv``, ``min``, ``max``, products) built by :class:`Linearizer`;
* :class:`Bounder` — lower and upper bounds of a :class:`Lin` as :class:`Form`\\ s, given the bounds of
  each variable;
* :func:`eliminations` and :func:`relaxations` — equivalent or weaker forms of an obligation whose
  lower bounds are tighter (guards multiplied in, atoms replaced in place).

Numbers are exact rationals: a coefficient or constant is an ``int`` while it is integral and a
:class:`~fractions.Fraction` otherwise (an ``int`` and a ``Fraction`` of equal value compare, hash and
print alike, so either may appear). Symbols and linear forms cache their canonical ``key`` and compare
and hash by it; sorting terms and looking them up never walks a form twice.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING

import attrs

from cake_core.ir import nodes as n
from cake_core.ir.exprs import EvalError, evaluate

if TYPE_CHECKING:
    from cake_core.ir.model import KernelModel

DENSE = 16  # the least admissible values of a size are all tried (a bounded range this short, entirely)
#: Values every size is tried at (after snapping to the domain), besides those the kernel suggests.
BASE_SAMPLES = (0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 63, 65, 100, 127, 129, 1000, 4095, 4097,
                65521, 65536)  # fmt: skip


# ---------------------------------------------------------------------------------------------------
# The shape domain
# ---------------------------------------------------------------------------------------------------


@attrs.frozen
class SizeRange:
    """The admissible values of one run-time size: ``lo <= v <= hi`` and ``v % modulus == 0``."""

    name: str
    lo: int = 0  # already rounded up to a multiple of the modulus
    hi: int | None = None  # already rounded down; None is unbounded
    modulus: int = 1

    def admits(self, v: int) -> bool:
        return v >= self.lo and (self.hi is None or v <= self.hi) and v % self.modulus == 0

    def snapped(self, values: Iterable[int]) -> list[int]:
        """The admissible values nearest each of ``values`` that is not negative, sorted: the multiples
        of the modulus at or next below and above it, where admissible, and the least value."""
        lo, hi, m = self.lo, self.hi, self.modulus
        out: set[int] = set()
        for v in values:
            if v >= 0:
                down = v - v % m
                out.add(down)
                if down != v:
                    out.add(down + m)
                out.add(lo)
        return sorted(x for x in out if x >= lo and (hi is None or x <= hi))

    def describe(self) -> str:
        parts = [f"{self.name} >= {self.lo}"]
        if self.hi is not None:
            parts.append(f"{self.name} <= {self.hi}")
        if self.modulus > 1:
            parts.append(f"{self.name} % {self.modulus} == 0")
        return ", ".join(parts)


@attrs.define
class ShapeDomain:
    """The run-time part of a kernel's shape domain under one specialization."""

    sizes: dict[str, SizeRange]
    scalars: frozenset[str]

    @classmethod
    def of(cls, model: KernelModel) -> ShapeDomain:
        lo: dict[str, int] = {s: 0 for s in model.runtime_sizes}
        hi: dict[str, int | None] = {s: None for s in model.runtime_sizes}
        mod: dict[str, int] = {s: 1 for s in model.runtime_sizes}
        for c in model.kernel.domain:
            if c.var not in lo or not c.values:
                continue
            try:
                v = evaluate(c.values[0], model.env)
            except EvalError:
                continue  # a bound in terms of another run-time size: dropped (the domain only widens)
            if not isinstance(v, int) or isinstance(v, bool):
                continue
            if c.op == ">=":
                lo[c.var] = max(lo[c.var], v)
            elif c.op == "<=":
                h = hi[c.var]
                hi[c.var] = v if h is None else min(h, v)
            elif c.op == "%" and v > 0:
                mod[c.var] = math.lcm(mod[c.var], v)
        sizes = {}
        for s in model.runtime_sizes:
            m = mod[s]
            h = hi[s]
            sizes[s] = SizeRange(s, -(-max(lo[s], 0) // m) * m, None if h is None else (h // m) * m, m)
        scalars = frozenset(p.name for p in model.kernel.params if p.tier == "scalar")
        return cls(sizes, scalars)

    def empty(self) -> bool:
        """Whether no size assignment is admissible (a contradictory domain)."""
        return any(r.hi is not None and r.hi < r.lo for r in self.sizes.values())

    def min_of(self, f: Form) -> Fraction | None:
        """The least value of ``f`` over the domain; None when it is unbounded below."""
        return self.least(f.const, f.terms)

    def least(self, const: Fraction | int, terms: Iterable[tuple[str, Fraction | int]]) -> Fraction | None:
        """The least value of ``const + sum(a * s)`` over the domain, for the ``(s, a)`` of ``terms``;
        None when it is unbounded below."""
        total = const
        for s, a in terms:
            r = self.sizes.get(s)
            if r is None:
                return None
            if a > 0:
                total += a * r.lo
            elif r.hi is None:
                return None
            else:
                total += a * r.hi
        return total

    def max_of(self, f: Form) -> Fraction | None:
        m = self.min_of(f.scale(-1))
        return None if m is None else -m

    def always_multiple(self, f: Form, k: int) -> bool:
        """Whether ``f`` is a multiple of ``k`` for every admissible size (sufficient condition)."""
        if f.const % k:
            return False
        for s, a in f.terms:
            r = self.sizes.get(s)
            if r is None or (a * r.modulus) % k:
                return False
        return True

    def samples(self, name: str, constants: Sequence[int]) -> list[int]:
        """Values of one size to try: its 16 least admissible ones, those around one and two multiples
        of ``constants``, a fixed list of small and large values, all snapped to the domain; every
        admissible value when a bounded range has fewer than 16."""
        r = self.sizes[name]
        if r.hi is not None and (r.hi - r.lo) // r.modulus < DENSE:
            return list(range(r.lo, r.hi + 1, r.modulus))  # few enough to try them all
        wanted: set[int] = {r.lo + k * r.modulus for k in range(DENSE)}
        wanted.update(BASE_SAMPLES)
        for c in constants:
            for k in (1, 2):
                wanted.update((k * c - 1, k * c, k * c + 1))
        if r.hi is not None:
            wanted.update((r.hi, r.hi - 1, r.hi - r.modulus))
        return r.snapped(wanted)


# ---------------------------------------------------------------------------------------------------
# Linear forms
# ---------------------------------------------------------------------------------------------------

Q = int | Fraction  # an exact rational: an int while integral


def _q(x: int | Fraction) -> int | Fraction:
    """``x`` as an int when it is integral (the fast representation), else as it is."""
    if type(x) is Fraction and x.denominator == 1:
        return x.numerator
    return x


def _div(a: int | Fraction, b: int | Fraction) -> int | Fraction:
    """The exact quotient ``a / b`` (never a float)."""
    if type(a) is int and type(b) is int:
        q, r = divmod(a, b)
        return q if r == 0 else Fraction(a, b)
    return _q(a / b)


@attrs.frozen
class Form:
    """``const + Σ a·s`` over run-time sizes ``s``: a bound that holds for every admissible size."""

    const: Q = 0
    terms: tuple[tuple[str, Q], ...] = ()

    @staticmethod
    def make(const: Q, terms: Mapping[str, Q]) -> Form:
        items = [(s, _q(a)) for s, a in terms.items() if a != 0]
        if len(items) > 1:
            items.sort()
        return Form(_q(const), tuple(items))

    def __add__(self, other: Form) -> Form:
        if not other.terms:
            return Form(_q(self.const + other.const), self.terms)
        t = dict(self.terms)
        for s, a in other.terms:
            t[s] = t.get(s, 0) + a
        return Form.make(self.const + other.const, t)

    def scale(self, k: Q) -> Form:
        if k == 0:
            return Form(0, ())
        # a non-zero factor keeps every term non-zero and the (sorted) order of the sizes
        return Form(_q(self.const * k), tuple((s, _q(a * k)) for s, a in self.terms))

    def div(self, k: int) -> Form:
        """``self.div(k)`` for an integer ``k > 0``, in integers where they divide."""
        return Form(_div(self.const, k), tuple((s, _div(a, k)) for s, a in self.terms))

    @property
    def is_const(self) -> bool:
        return not self.terms

    def at(self, sizes: Mapping[str, int]) -> Q:
        total = self.const
        for s, a in self.terms:
            total += a * sizes[s]
        return total

    def __str__(self) -> str:
        parts = [f"{a}*{s}" for s, a in self.terms]
        if self.const or not parts:
            parts.append(str(self.const))
        return " + ".join(parts)




class _Keyed:
    """Symbols and linear forms compare and hash by their canonical key, computed once."""

    __slots__ = ()
    key: str

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if type(other) is not type(self):
            return NotImplemented
        return self.key == other.key  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self.key)


@attrs.frozen(eq=False)
class Size(_Keyed):
    name: str
    key: str = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "key", "s:" + self.name)


@attrs.frozen(eq=False)
class Var(_Keyed):
    name: str
    key: str = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "key", "v:" + self.name)


@attrs.frozen(eq=False)
class Atom(_Keyed):
    """A non-linear sub-expression: ``op`` in floor, cdiv, mod, min, max, mul, div."""

    op: str
    args: tuple[Lin, ...]
    key: str = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "key", f"a:{self.op}(" + ",".join(a.key for a in self.args) + ")")


Sym = Size | Var | Atom


@attrs.frozen(eq=False)
class Lin(_Keyed):
    """``const + Σ a·x`` over sizes, variables and atoms, in a canonical order."""

    const: Q = 0
    terms: tuple[tuple[Sym, Q], ...] = ()
    _key: str | None = attrs.field(default=None, init=False, repr=False)

    @staticmethod
    def make(const: Q, terms: Mapping[Sym, Q]) -> Lin:
        items = [(x, _q(a)) for x, a in terms.items() if a != 0]
        if len(items) > 1:
            items.sort(key=_sym_key)
        return Lin(_q(const), tuple(items))

    @staticmethod
    def of(x: Sym) -> Lin:
        return Lin(0, ((x, 1),))

    def __add__(self, other: Lin) -> Lin:
        if not other.terms:
            return Lin(_q(self.const + other.const), self.terms)
        if not self.terms:
            return Lin(_q(self.const + other.const), other.terms)
        t: dict[Sym, Q] = dict(self.terms)
        for x, a in other.terms:
            t[x] = t.get(x, 0) + a
        return Lin.make(self.const + other.const, t)

    def __sub__(self, other: Lin) -> Lin:
        return self + other.scale(-1)

    def scale(self, k: Q) -> Lin:
        if k == 0:
            return Lin(0, ())
        return Lin(_q(self.const * k), tuple((x, _q(a * k)) for x, a in self.terms))

    def div(self, k: int) -> Lin:
        """``self.div(k)`` for an integer ``k > 0``, in integers where they divide."""
        return Lin(_div(self.const, k), tuple((x, _div(a, k)) for x, a in self.terms))

    def plus(self, k: Q) -> Lin:
        return Lin(_q(self.const + k), self.terms)

    def coef(self, x: Sym) -> Q:
        for y, a in self.terms:
            if y == x:
                return a
        return 0

    @property
    def is_const(self) -> bool:
        return not self.terms

    @property
    def key(self) -> str:  # type: ignore[override]
        k = self._key
        if k is None:
            k = f"{self.const}" + "".join(f"+{a}*{x.key}" for x, a in self.terms)
            object.__setattr__(self, "_key", k)
        return k




def _sym_key(xa: tuple[Sym, Q]) -> str:
    return xa[0].key


def _int_const(x: Lin) -> int | None:
    if not x.terms:
        c = x.const
        if type(c) is int:
            return c
        if c.denominator == 1:
            return int(c)
    return None


class Linearizer:
    """Turns integer expressions into :class:`Lin`; ``None`` for what is not an integer expression."""

    def __init__(self, env: Mapping[str, object], sizes: frozenset[str], scalars: frozenset[str]) -> None:
        self.env, self.sizes, self.scalars = env, sizes, scalars

    def lin(self, e: n.Expr, lets: Mapping[str, Lin | None]) -> Lin | None:
        kind = _KINDS.get(type(e)) or _kind_of(e)
        if kind is n.Num:
            v = e.value  # type: ignore[attr-defined]
            return Lin(int(v), ()) if isinstance(v, int) else None
        if kind is n.Name:
            name = e.id  # type: ignore[attr-defined]
            if name in lets:
                return lets[name]
            v = self.env.get(name)
            if isinstance(v, int) and not isinstance(v, bool):
                return Lin(v, ())
            if name in self.sizes:
                return Lin.of(Size(name))
            if v is not None:
                return None  # a type variable or other non-integer
            return Lin.of(Var(name))  # grid, loop, self, scalar
        if kind is n.Bin:
            a, b = self.lin(e.left, lets), self.lin(e.right, lets)  # type: ignore[attr-defined]
            if a is None or b is None:
                return None
            op = e.op  # type: ignore[attr-defined]
            if op == "+":
                return a + b
            if op == "-":
                return a - b
            if op == "*":
                if not a.terms:
                    return b.scale(a.const)
                if not b.terms:
                    return a.scale(b.const)
                return Lin.of(Atom("mul", (a, b)))
            if op in ("/", "%"):
                k = _int_const(b)
                if k is not None and k > 0:
                    ka = _int_const(a)
                    if ka is not None:
                        return Lin(ka // k if op == "/" else ka % k, ())
                    return Lin.of(Atom("floor" if op == "/" else "mod", (a, b)))
                return Lin.of(Atom("div" if op == "/" else "modv", (a, b)))
            return None  # comparisons and booleans are not indices
        if kind is n.Unary:
            if e.op != "-":  # type: ignore[attr-defined]
                return None
            x = self.lin(e.operand, lets)  # type: ignore[attr-defined]
            return None if x is None else x.scale(-1)
        if kind is n.Call and e.fn in ("cdiv", "min", "max") and len(e.args) == 2:  # type: ignore[attr-defined]
            a, b = self.lin(e.args[0], lets), self.lin(e.args[1], lets)  # type: ignore[attr-defined]
            if a is None or b is None:
                return None
            fn = e.fn  # type: ignore[attr-defined]
            ka, kb = _int_const(a), _int_const(b)
            if ka is not None and kb is not None:
                if fn == "cdiv":
                    return Lin(-(-ka // kb), ()) if kb else None
                return Lin(min(ka, kb) if fn == "min" else max(ka, kb), ())
            if fn == "cdiv" and (kb is None or kb <= 0):
                return Lin.of(Atom("div", (a.plus(-1) + b, b)))
            return Lin.of(Atom(fn, (a, b)))
        return None


#: expression classes the linearizer dispatches on, by exact type (subclasses through :func:`_kind_of`)
_KINDS: dict[type, type] = {c: c for c in (n.Num, n.Name, n.Unary, n.Bin, n.Call)}


def _kind_of(e: object) -> type | None:
    return next((c for c in (n.Num, n.Name, n.Unary, n.Bin, n.Call) if isinstance(e, c)), None)


# ---------------------------------------------------------------------------------------------------
# Bounds
# ---------------------------------------------------------------------------------------------------


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
    return Form.make(_div(total, d), {s: _div(v, d) for s, v in acc.items()})


class Bounder:
    """Symbolic lower and upper bounds (:class:`Form`) of linear expressions.

    Bounds of symbols are memoized for the bounder's lifetime: a bounder stands for one set of
    variable bounds (one scope of a kernel), and may be shared by every question about that scope.
    """

    def __init__(self, domain: ShapeDomain, var_bounds: Mapping[str, Bound]) -> None:
        self.domain, self.var_bounds = domain, var_bounds
        self._memo: dict[tuple[str, bool], Form | None] = {}
        self._lin_memo: dict[tuple[str, bool], Form | None] = {}
        self._acyclic: bool | None = None
        self.asked: set[str] = set()  # the variables whose bounds were looked up
        self._alternatives: dict[tuple[str, bool], list[Lin]] = {}  # see relaxations

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
            k = _int_const(k_lin)
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
            k = _int_const(k_lin)
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


def eliminations(m: Lin, guards: Sequence[Lin]) -> Iterator[Lin]:
    """``m``, then ``m - λ·G`` for guards that cancel one of its variables or atoms (two rounds)."""
    yield m
    seen = {m.key}
    frontier = [m]
    guard_coefs = [(g, dict(g.terms)) for g in guards]
    for _ in range(2):
        nxt: list[Lin] = []
        for x in frontier:
            for g, coefs in guard_coefs:
                lambdas: dict[Q, None] = {1: None}  # insertion-ordered, as a set of values
                for sym, a in x.terms:
                    if type(sym) is Size:
                        continue
                    b = coefs.get(sym, 0)
                    if b != 0:
                        lam = _div(a, b)
                        if lam > 0:
                            lambdas[lam] = None
                for lam in _set_order(lambdas):
                    y = x - g.scale(lam)
                    if y.key not in seen and len(seen) < 256:
                        seen.add(y.key)
                        nxt.append(y)
                        yield y
        frontier = nxt


def _set_order(values: dict[Q, None]) -> list[Q]:
    """The iteration order of the set the original algorithm built (``{Fraction(1)}`` then each λ
    added, as a Fraction): candidates are tried, and deduplicated, in that order. Equal numbers hash
    alike whatever their type, so the set of the values themselves, inserted in the same order, is
    laid out, and iterates, the same way."""
    return list(set(values))


def _alternatives(x: Atom, c: Q, bounder: Bounder) -> list[Lin]:
    """What :func:`relaxations` may replace the term ``c·x`` by (``x`` an atom); empty for none."""
    if (x.op == "min" and c < 0) or (x.op == "max" and c > 0):
        return list(x.args)
    if x.op in ("floor", "cdiv", "mod"):
        arg, k_lin = x.args
        k = _int_const(k_lin)
        if not k:
            return []
        exact = lin_multiple(arg, k, bounder.domain)
        if x.op == "mod" and c < 0 and bounder.proves_nonneg(bounder.lower(arg)):
            return [arg]
        if x.op == "floor":
            return [arg.div(k) if c < 0 or exact else arg.plus(-(k - 1)).div(k)]
        if x.op == "cdiv":
            return [arg.div(k) if c > 0 or exact else arg.plus(k - 1).div(k)]
    return []


def relaxations(m: Lin, bounder: Bounder) -> Iterator[Lin]:
    """``m`` and forms whose lower bounds are lower bounds of ``m``, keeping correlations an atom's
    independent bound would lose. For a term ``c·atom``:

    * ``c < 0``: ``min(a, b) <= a`` and ``<= b``; ``x % k <= x`` when ``x >= 0``; ``floor(x/k) <= x/k``;
      ``cdiv(x, k) <= (x + k-1)/k`` (``x/k`` when ``x`` is always a multiple of ``k``);
    * ``c > 0``: ``max(a, b) >= a`` and ``>= b``; ``cdiv(x, k) >= x/k``;
      ``floor(x/k) >= (x - (k-1))/k`` (``x/k`` when a multiple).
    """
    options: list[tuple[Atom, Q, list[Lin]]] = []
    known = bounder._alternatives
    for x, c in m.terms:
        if type(x) is not Atom:
            continue
        # the alternatives depend on the atom, the sign of its coefficient and bounds the bounder
        # memoizes (it answers a question the same way every time it is asked): computed once
        key = (x.key, c > 0)
        alts = known.get(key)  # type: ignore[assignment]
        if alts is None:
            alts = known[key] = _alternatives(x, c, bounder)
        if alts:
            options.append((x, c, alts))
    yield m
    if not options:
        return
    options = options[:6]
    chosen = {o[0] for o in options}
    rest = Lin.make(m.const, {x: c for x, c in m.terms if x not in chosen})
    for picks in itertools.product(*[[None, *alts] for _, _, alts in options]):
        if all(p is None for p in picks):
            continue
        out = rest
        for (atom, c, _), p in zip(options, picks, strict=True):
            out = out + (Lin.of(atom) if p is None else p).scale(c)
        yield out
