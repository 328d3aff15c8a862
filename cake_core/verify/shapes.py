"""The shape domain of a kernel under one specialization: the admissible values of each run-time size.

A run-time size ranges over ``lo <= v <= hi`` with ``v % modulus == 0`` (:class:`SizeRange`), from
the kernel's ``domain`` clauses; :class:`ShapeDomain` holds every size's range and the scalar
parameters, minimizes a :class:`~cake_core.verify.linear.Form` over the sizes in closed form, and gives
the sample values the witness search tries for each size.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING

import attrs

from cake_core.ir.exprs import EvalError, evaluate

if TYPE_CHECKING:
    from cake_core.ir.model import KernelModel
    from cake_core.verify.linear import Form

__all__ = ["BASE_SAMPLES", "DENSE", "ShapeDomain", "SizeRange"]

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
