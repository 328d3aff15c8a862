"""The shape domain of a kernel under one specialization: the admissible values of each run-time size.

A run-time size ranges over ``lo <= v <= hi`` with ``v % modulus == 0`` (:class:`SizeRange`), from
the kernel's ``domain`` clauses; a clause that bounds a size by other run-time sizes (``KP >= K``,
``N % K == 0``) is a :class:`Relation`. :class:`ShapeDomain` holds every size's range, the relations
and the scalar parameters; it minimizes a :class:`~cake_core.verify.linear.Form` over the ranges in
closed form (relations only narrow the domain, so a bound over the ranges holds over it), gives the
sample values the witness search tries for each size, and completes sampled sizes into an assignment
that satisfies every clause (:meth:`ShapeDomain.complete`), so that no size quoted in a diagnostic
contradicts the domain.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING

import attrs

from cake_core.ir import nodes as n
from cake_core.ir.exprs import EvalError, evaluate
from cake_core.ir.printer import expr as text

if TYPE_CHECKING:
    from cake_core.ir.model import KernelModel
    from cake_core.verify.linear import Form

__all__ = ["BASE_SAMPLES", "DENSE", "Relation", "ShapeDomain", "SizeRange"]

DENSE = 16  # the least admissible values of a size are all tried (a bounded range this short, entirely)
#: Values every size is tried at (after snapping to the domain), besides those the kernel suggests.
BASE_SAMPLES = (0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 63, 65, 100, 127, 129, 1000, 4095, 4097,
                65521, 65536)  # fmt: skip


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


    def up(self, v: int) -> int | None:
        """The least admissible value at least ``v``; None past the top."""
        x = max(v, self.lo)
        x = -(-x // self.modulus) * self.modulus
        return None if self.hi is not None and x > self.hi else x

    def down(self, v: int) -> int | None:
        """The greatest admissible value at most ``v``; None below the bottom."""
        x = v if self.hi is None else min(v, self.hi)
        x = (x // self.modulus) * self.modulus
        return None if x < self.lo else x


@attrs.frozen
class Relation:
    """A domain clause bounding a run-time size by an expression of other sizes: ``var op value``, with
    ``op`` one of ``>=``, ``<=`` and ``%`` (``var`` is a multiple of ``value``)."""

    var: str
    op: str
    value: n.Expr

    def fix(self, v: int, bound: int, r: SizeRange) -> int | None:
        """The admissible value of ``var`` nearest ``v`` that satisfies the clause where its value is
        ``bound``: raised to a lower bound, lowered to an upper bound, rounded up to a multiple; None
        where the range has no such value."""
        if self.op == ">=":
            return v if v >= bound else r.up(bound)
        if self.op == "<=":
            return v if v <= bound else r.down(bound)
        if bound <= 0:
            return None
        if v % bound == 0:
            return v
        m = math.lcm(bound, r.modulus)
        x = r.up(-(-v // m) * m)
        return x if x is not None and x % m == 0 else None

    def describe(self) -> str:
        if self.op == "%":
            return f"{self.var} % {text(self.value)} == 0"
        return f"{self.var} {self.op} {text(self.value)}"


@attrs.define
class ShapeDomain:
    """The run-time part of a kernel's shape domain under one specialization."""

    sizes: dict[str, SizeRange]
    scalars: frozenset[str]
    relations: tuple[Relation, ...] = ()
    #: the compile-time values the relations mention
    env: dict[str, object] = attrs.field(factory=dict)

    @classmethod
    def of(cls, model: KernelModel) -> ShapeDomain:
        lo: dict[str, int] = {s: 0 for s in model.runtime_sizes}
        hi: dict[str, int | None] = {s: None for s in model.runtime_sizes}
        mod: dict[str, int] = {s: 1 for s in model.runtime_sizes}
        relations: list[Relation] = []
        for c in model.kernel.domain:
            if c.var not in lo or not c.values:
                continue
            try:
                v = evaluate(c.values[0], model.env)
            except EvalError:
                names = {x.id for x in n.walk_expr(c.values[0]) if isinstance(x, n.Name)}
                if c.op in (">=", "<=", "%") and names <= set(lo) | set(model.env):
                    relations.append(Relation(c.var, c.op, c.values[0]))  # in terms of other run-time sizes
                continue
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
        return cls(sizes, scalars, tuple(relations), dict(model.env) if relations else {})

    def empty(self) -> bool:
        """Whether no size assignment is admissible (a contradictory domain; relations aside)."""
        return any(r.hi is not None and r.hi < r.lo for r in self.sizes.values())

    def describe(self) -> str:
        """Every clause, one size's ranges at a time, then the relations: ``N >= 1; KP >= 0; KP >= K``."""
        parts = [r.describe() for r in self.sizes.values()] + [x.describe() for x in self.relations]
        return "; ".join(parts)

    def complete(self, values: Mapping[str, int]) -> dict[str, int] | None:
        """``values`` (admissible values of some run-time sizes) completed to an assignment of every size
        that satisfies every clause: the other sizes at their least, then each size a relation bounds
        moved to the nearest value it admits, until nothing moves; None where that fails (a relation
        no value satisfies, or moves that do not settle)."""
        out = {s: r.lo for s, r in self.sizes.items()}
        out.update(values)
        if not self.relations:
            return out
        env: dict[str, object] = dict(self.env)
        for _ in range(len(self.relations) + 1):
            moved = False
            for rel in self.relations:
                env.update(out)
                try:
                    bound = evaluate(rel.value, env)
                except EvalError:
                    return None
                if not isinstance(bound, int) or isinstance(bound, bool):
                    return None
                v = rel.fix(out[rel.var], bound, self.sizes[rel.var])
                if v is None:
                    return None
                if v != out[rel.var]:
                    out[rel.var], moved = v, True
            if not moved:
                return out
        return None

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
