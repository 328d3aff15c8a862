"""Linear forms over a kernel's run-time sizes and variables, and the linearizer that builds them.

* :class:`Form` — ``c + Σ a·s`` over run-time sizes, rational coefficients: a bound that holds for
  every admissible size (minimized over the domain by :class:`~cake_core.verify.shapes.ShapeDomain`);
* :class:`Lin` — an integer expression as ``c + Σ a·x`` over sizes (:class:`Size`), variables
  (:class:`Var`) and :class:`Atom`\\ s (floor division, remainders, ``cdiv``, ``min``, ``max``,
  products), built from IR expressions by :class:`Linearizer`.

Numbers are exact rationals (:data:`Q`): a coefficient or constant is an ``int`` while it is integral
and a :class:`~fractions.Fraction` otherwise (an ``int`` and a ``Fraction`` of equal value compare,
hash and print alike, so either may appear; :func:`normal` gives the ``int`` where it can). Symbols and
linear forms cache their canonical ``key`` and compare and hash by it.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

import attrs

from cake_core.ir import nodes as n

__all__ = ["Atom", "Form", "Lin", "Linearizer", "Q", "Size", "Sym", "Var", "int_const", "normal", "quotient"]

Q = int | Fraction  # an exact rational: an int while integral


def normal(x: int | Fraction) -> int | Fraction:
    """``x`` as an int when it is integral (the fast representation), else as it is."""
    if type(x) is Fraction and x.denominator == 1:
        return x.numerator
    return x


def quotient(a: int | Fraction, b: int | Fraction) -> int | Fraction:
    """The exact quotient ``a / b`` (never a float)."""
    if type(a) is int and type(b) is int:
        q, r = divmod(a, b)
        return q if r == 0 else Fraction(a, b)
    return normal(a / b)


@attrs.frozen
class Form:
    """``const + Σ a·s`` over run-time sizes ``s``: a bound that holds for every admissible size."""

    const: Q = 0
    terms: tuple[tuple[str, Q], ...] = ()

    @staticmethod
    def make(const: Q, terms: Mapping[str, Q]) -> Form:
        items = [(s, normal(a)) for s, a in terms.items() if a != 0]
        if len(items) > 1:
            items.sort()
        return Form(normal(const), tuple(items))

    def __add__(self, other: Form) -> Form:
        if not other.terms:
            return Form(normal(self.const + other.const), self.terms)
        t = dict(self.terms)
        for s, a in other.terms:
            t[s] = t.get(s, 0) + a
        return Form.make(self.const + other.const, t)

    def scale(self, k: Q) -> Form:
        if k == 0:
            return Form(0, ())
        # a non-zero factor keeps every term non-zero and the (sorted) order of the sizes
        return Form(normal(self.const * k), tuple((s, normal(a * k)) for s, a in self.terms))

    def div(self, k: int) -> Form:
        """``self.div(k)`` for an integer ``k > 0``, in integers where they divide."""
        return Form(quotient(self.const, k), tuple((s, quotient(a, k)) for s, a in self.terms))

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
        items = [(x, normal(a)) for x, a in terms.items() if a != 0]
        if len(items) > 1:
            items.sort(key=_sym_key)
        return Lin(normal(const), tuple(items))

    @staticmethod
    def of(x: Sym) -> Lin:
        return Lin(0, ((x, 1),))

    def __add__(self, other: Lin) -> Lin:
        if not other.terms:
            return Lin(normal(self.const + other.const), self.terms)
        if not self.terms:
            return Lin(normal(self.const + other.const), other.terms)
        t: dict[Sym, Q] = dict(self.terms)
        for x, a in other.terms:
            t[x] = t.get(x, 0) + a
        return Lin.make(self.const + other.const, t)

    def __sub__(self, other: Lin) -> Lin:
        return self + other.scale(-1)

    def scale(self, k: Q) -> Lin:
        if k == 0:
            return Lin(0, ())
        return Lin(normal(self.const * k), tuple((x, normal(a * k)) for x, a in self.terms))

    def div(self, k: int) -> Lin:
        """``self.div(k)`` for an integer ``k > 0``, in integers where they divide."""
        return Lin(quotient(self.const, k), tuple((x, quotient(a, k)) for x, a in self.terms))

    def plus(self, k: Q) -> Lin:
        return Lin(normal(self.const + k), self.terms)

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


def int_const(x: Lin) -> int | None:
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
        if isinstance(e, n.Num):
            v = e.value
            return Lin(int(v), ()) if isinstance(v, int) else None
        if isinstance(e, n.Name):
            name = e.id
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
        if isinstance(e, n.Bin):
            a, b = self.lin(e.left, lets), self.lin(e.right, lets)
            if a is None or b is None:
                return None
            op = e.op
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
                k = int_const(b)
                if k is not None and k > 0:
                    ka = int_const(a)
                    if ka is not None:
                        return Lin(ka // k if op == "/" else ka % k, ())
                    return Lin.of(Atom("floor" if op == "/" else "mod", (a, b)))
                return Lin.of(Atom("div" if op == "/" else "modv", (a, b)))
            return None  # comparisons and booleans are not indices
        if isinstance(e, n.Unary):
            if e.op != "-":
                return None
            x = self.lin(e.operand, lets)
            return None if x is None else x.scale(-1)
        if isinstance(e, n.Call) and e.fn in ("cdiv", "min", "max") and len(e.args) == 2:
            a, b = self.lin(e.args[0], lets), self.lin(e.args[1], lets)
            if a is None or b is None:
                return None
            fn = e.fn
            ka, kb = int_const(a), int_const(b)
            if ka is not None and kb is not None:
                if fn == "cdiv":
                    return Lin(-(-ka // kb), ()) if kb else None
                return Lin(min(ka, kb) if fn == "min" else max(ka, kb), ())
            if fn == "cdiv" and (kb is None or kb <= 0):
                return Lin.of(Atom("div", (a.plus(-1) + b, b)))
            return Lin.of(Atom(fn, (a, b)))
        return None
