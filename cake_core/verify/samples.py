"""The concrete sizes a kernel's protocol is simulated at.

Each kernel model is simulated at every run-time size's least admissible value (at least 1), and at
*grown* assignments (:meth:`Sizes.at`): each size that the kernel divides by a constant ``c``
(``cdiv(N, c)``, ``N / c``, ``N % c``) is ``k * c``, snapped to the domain's ranges and divisibility.
Sizes the kernel never divides keep their least value; scalar parameters are 1. Every assignment is
completed to satisfy the domain's relations between sizes (``KP >= K``: :meth:`ShapeDomain.complete`).
The target constant ``SMS`` is simulated as :data:`SIM_SMS` (times the kernel's cluster size: as many
clusters) when no compile-time declaration uses it, so persistent loops (``for tile in w .. TILES step min(SMS, TILES)``) run several times at small sizes:
a protocol must not depend on the machine's size.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import attrs

from cake_core.ir import nodes as n
from cake_core.ir.exprs import try_int
from cake_core.ir.model import KernelModel
from cake_core.verify.analyses import for_model
from cake_core.ir.cluster import cluster_size
from cake_core.verify.shapes import ShapeDomain

SIM_SMS = 2  # the multiprocessor count persistent loops are simulated with (when nothing compiled uses it)


@attrs.frozen
class Sample:
    """Concrete sizes a protocol is simulated at (and the multiprocessor count, when overridden)."""

    sizes: tuple[tuple[str, int], ...]
    sms: int | None = None  # the simulated `SMS`, when it differs from the target's

    @property
    def when(self) -> str:
        """``; seen at B=1, N=1`` — the tail of a finding's message (nothing without run-time sizes)."""
        words = ", ".join(f"{k}={v}" for k, v in self.sizes)
        return f"; seen at {words}" if words else ""

    @property
    def note(self) -> str | None:
        if self.sms is None:
            return None
        return (f"simulated on one CTA with `SMS` = {self.sms}, so that persistent loops run more than once at "
                "small sizes; the protocol must not depend on the machine's size")  # fmt: skip


def snap(v: int, lo: int, hi: int | None, mod: int) -> int | None:
    """The least admissible value at least ``v`` (the greatest admissible when ``v`` is past the top)."""
    x = max(v, lo)
    x = -(-x // mod) * mod
    if hi is not None and x > hi:
        x = (hi // mod) * mod
        if x < lo:
            return None
    return x


def per_kernel(model: KernelModel, key: str, make: Callable[[n.Kernel], Any]) -> Any:
    """``make(model.kernel)``, for what depends on the kernel's syntax alone: computed once for all
    specializations of the kernel in the checked module's analysis table
    (:mod:`cake_core.verify.analyses`), or on every call for a model without one."""
    table = for_model(model)
    if table is None:
        return make(model.kernel)
    return table.get(key, id(model.kernel), lambda: make(model.kernel))


def _divisions(k: n.Kernel) -> list[tuple[n.Expr, frozenset[str]]]:
    """Every division in the kernel's grid and role bodies (``cdiv``, ``/``, ``%``): the divisor, and the
    names the dividend mentions. Only the divisor's value depends on the specialization."""
    exprs: list[n.Expr] = list(k.grid.extents)
    for role in k.roles:
        for s in n.walk_stmts(role.body):
            if isinstance(s, n.For):
                exprs += [s.start, s.stop] + ([s.step] if s.step is not None else [])
            elif isinstance(s, n.Let):
                exprs.append(s.value)
            elif isinstance(s, n.If):
                exprs.append(s.cond)
            elif isinstance(s, n.Op):
                exprs += list(s.operands) + [a.value for a in s.attrs]
    out: list[tuple[n.Expr, frozenset[str]]] = []
    for e in exprs:
        _scan(e, out)
    return out


def _scan(e: n.Expr, out: list[tuple[n.Expr, frozenset[str]]]) -> None:
    """Appends each division in ``e`` to ``out``: its divisor and the names its dividend mentions (as
    :func:`cake_core.ir.nodes.walk_expr` finds them). Divisions are rare: names are gathered for dividends
    only, not for every subexpression."""
    for c in n.children(e):
        _scan(c, out)
    if isinstance(e, n.Bin) and e.op in ("/", "%"):
        out.append((e.right, frozenset(_names(e.left, set()))))
    elif isinstance(e, n.Call) and e.fn == "cdiv" and len(e.args) == 2:
        out.append((e.args[1], frozenset(_names(e.args[0], set()))))


def _names(e: n.Expr, into: set[str]) -> set[str]:
    """``into`` with the names ``e`` mentions (those :func:`cake_core.ir.nodes.walk_expr` yields)."""
    if isinstance(e, n.Name):
        into.add(e.id)
    else:
        for c in n.children(e):
            _names(c, into)
    return into


def _divisors(model: KernelModel, sizes: Iterable[str]) -> dict[str, int]:
    """For each run-time size, the largest constant the kernel divides an expression of it by."""
    unit = {s: 1 for s in sizes}
    if not unit:
        return unit  # no run-time size to grow: the kernel's divisions need not be found
    env = model.env
    for den, names in per_kernel(model, "protocol divisions", _divisions):
        if names.isdisjoint(unit):
            continue  # a dividend of no run-time size (a stage index `g % S`): evaluated for nothing
        c = try_int(den, env)
        if c is None or c < 2:
            continue
        for name in names:
            if name in unit:
                unit[name] = max(unit[name], c)
    return unit


def _uses_sms_at_compile_time(k: n.Kernel) -> bool:
    exprs: list[n.Expr] = [c.value for c in k.consts] + [k.cta.warps]
    if k.cta.occupancy is not None:
        exprs.append(k.cta.occupancy)
    for s in k.smem:
        exprs += list(s.shape) + [x for x in (s.stages, s.pad, s.align) if x is not None]
    for b in k.barriers:
        exprs += [b.count] + ([b.stages] if b.stages is not None else [])
    for r in k.roles:
        exprs += [r.warp_start, r.warp_stop] + [x for x in (r.per, r.regs) if x is not None]
    names: set[str] = set()
    for e in exprs:
        _names(e, names)
    return "SMS" in names


@attrs.frozen
class Sizes:
    """How a kernel's run-time sizes are sampled: the least admissible values, and growth by a factor."""

    small: tuple[tuple[str, int], ...]
    ranges: tuple[tuple[str, int, int | None, int, int], ...]  # name, lo, hi, modulus, divisor
    sms: int | None
    shape: ShapeDomain = attrs.field(eq=False)

    def at(self, k: int) -> Sample:
        """Every size the kernel divides by a constant ``c`` at about ``k * c``; the others at their least;
        completed to satisfy the domain's relations (the least sizes where they cannot be)."""
        out = {}
        for (name, least), (_, lo, hi, mod, unit) in zip(self.small, self.ranges, strict=True):
            grown = snap(k * unit, lo, hi, mod) if unit > 1 else None
            out[name] = least if grown is None else grown
        full = self.shape.complete(out)
        if full is None:
            return Sample(self.small, self.sms)
        return Sample(tuple((name, full[name]) for name, _ in self.small), self.sms)


def sizes(model: KernelModel) -> Sizes | None:
    """How ``model``'s run-time sizes are sampled; None when its domain admits no sizes."""
    shape = ShapeDomain.of(model)
    if shape.empty():
        return None
    sms = None
    if "SMS" in model.env and not per_kernel(model, "protocol uses SMS", _uses_sms_at_compile_time):
        # a clustered grid of `min(SMS / C, ...) * C` CTAs must still loop more than once: SIM_SMS clusters
        sms = SIM_SMS * cluster_size(model.kernel, model.env)
    unit = _divisors(model, shape.sizes)
    least, ranges = {}, []
    for name, r in sorted(shape.sizes.items()):
        v = snap(1, r.lo, r.hi, r.modulus)
        if v is None:
            return None
        least[name] = v
        ranges.append((name, r.lo, r.hi, r.modulus, unit[name]))
    small = shape.complete(least)
    if small is None:
        return None
    return Sizes(tuple((name, small[name]) for name in least), tuple(ranges), sms, shape)
