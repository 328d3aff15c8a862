"""What the interpreter's operations act on: their effects, operand regions and barriers, and the
operand view primitives execute against.

:class:`OpInfo` sorts an operation's declared effects once; :func:`region` resolves a tile operand to
the :class:`~cake_core.semantics.memory.Region` it covers for one role instance, :func:`barrier` a
barrier operand to its state; :class:`ExecContext` gives a primitive its operands' values and takes
its writes (held in the operation's transfer when asynchronous).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from cake_core.errors import CakeInternalError
from cake_core.ir import nodes as n
from cake_core.ir.exprs import WORDS
from cake_core.ir.primitive import Access, BarrierAction, Bind, Effect, Kind, Operand, Primitive
from cake_core.ir.model import TypedOpImpl
from cake_core.semantics import codes, reports
from cake_core.semantics.barriers import BarState
from cake_core.semantics.findings import Findings
from cake_core.semantics.memory import Region, Store
from cake_core.semantics.races import RegionTransfer
from cake_core.semantics.scheduler import InterpCta, InterpInstance

if TYPE_CHECKING:
    from cake_core.semantics.interp import Interpreter

#: the core's kinds of memory a tile operand lives in (a plugin tier's region, ``n.Mem``, is one too)
TILES = (Kind.GLOBAL, Kind.SHARED, Kind.REGISTERS)
#: evaluates an expression for an instance where an operation (or statement) runs
Eval = Callable[[InterpInstance, n.Expr, Any], Any]


@attrs.define(eq=False)
class OpInfo:
    """What one typed operation does, by its declared effects: computed once per operation."""

    typed: TypedOpImpl
    prim: Primitive
    effects: tuple[Effect, ...]
    by_slot: dict[str, Effect]
    tiles: tuple[Effect, ...]
    waits: tuple[Effect, ...]
    inits: tuple[Effect, ...]
    signals: tuple[Effect, ...]  # arrive, expect_tx, arrive_expect_tx (after executing)
    completes: tuple[Effect, ...]  # complete_tx
    asynchronous: bool
    binds: tuple[Bind, ...]  # what the operation assigns once it has run

    @classmethod
    def of(cls, typed: TypedOpImpl) -> OpInfo:
        prim = typed.prim
        effects = tuple(prim.effects(typed))
        tiles = tuple(e for e in effects if e.tier in TILES or type(e.operand.decl) is n.Mem)
        bars = [e for e in effects if e.tier is Kind.BARRIER and e.barrier is not None]
        return cls(
            typed, prim, effects, {e.operand.slot.name: e for e in effects}, tiles,
            tuple(e for e in bars if e.barrier is BarrierAction.WAIT),
            tuple(e for e in bars if e.barrier is BarrierAction.INIT),
            tuple(e for e in bars if e.barrier in (BarrierAction.ARRIVE, BarrierAction.EXPECT_TX,
                                                   BarrierAction.ARRIVE_EXPECT_TX)),
            tuple(e for e in bars if e.barrier is BarrierAction.COMPLETE_TX),
            any(e.asynchronous for e in tiles), tuple(prim.binds(typed)),
        )  # fmt: skip

    @property
    def op(self) -> n.Op:
        return self.typed.op


def accesses(e: Effect) -> tuple[str, ...]:
    """The accesses an effect makes, in the race tracker's words."""
    if e.access is Access.READ:
        return ("read",)
    if e.access is Access.WRITE:
        return ("write",)
    if e.access is Access.READWRITE:
        return ("read", "write")
    return ()


def region(a: InterpInstance, o: Operand, op: n.Op, ev: Eval, cta: InterpCta | None = None) -> Region:
    """The region operand ``o`` of ``op`` covers for instance ``a`` (its register tile made on first use);
    ``cta``: the CTA of ``a``'s cluster whose shared memory it names (``a``'s own by default)."""
    cta = cta or a.cta
    name = o.name or ""
    if o.kind is Kind.GLOBAL:
        store = cta.globals[name]
    elif o.kind is Kind.SHARED or type(o.decl) is n.Mem:  # a region of a plugin tier lives per CTA too
        store = cta.shared[name]
    else:
        store = a.regs.get(name)  # type: ignore[assignment]
        if store is None:
            info = cta.model.regs[name]
            store = a.regs[name] = Store.poisoned(name, Kind.REGISTERS, info.dtype, info.shape, owner=a.who)
    lo: list[int] = []
    size: list[int] = []
    keep: list[bool] = []
    dims = store.shape
    first = 0
    if store.stages is not None:
        first = 1
        if o.stage is not None:
            lo.append(int(ev(a, o.stage, op)))
            size.append(1)
            keep.append(False)
        else:
            lo.append(0)
            size.append(store.stages)
            keep.append(True)
    for d in range(first, len(dims)):
        i = d - first
        item = o.index[i] if i < len(o.index) else None
        if isinstance(item, n.At):
            lo.append(int(ev(a, item.expr, op)))
            size.append(1)
            keep.append(False)
        elif isinstance(item, n.Span):
            lo.append(int(ev(a, item.start, op)))
            size.append(max(int(ev(a, item.size, op)), 0))
            keep.append(True)
        else:
            lo.append(0)
            size.append(dims[d])
            keep.append(True)
    return Region(store, tuple(lo), tuple(size), tuple(keep))


def barrier(a: InterpInstance, o: Operand, op: n.Op, ev: Eval, findings: Findings,
            cta: InterpCta | None = None) -> BarState:  # fmt: skip
    """The barrier (the stage of a ring) operand ``o`` of ``op`` names (in ``cta`` of ``a``'s cluster,
    ``a``'s own by default); a stage outside the ring faults."""
    states = (cta or a.cta).barriers[o.name or ""]
    stage = int(ev(a, o.stage, op)) if o.stage is not None else 0
    if not 0 <= stage < len(states):
        raise findings.stop(
            codes.OUT_OF_BOUNDS, o.expr.loc,
            f"`{op.name}` uses stage {stage} of the barrier ring `{o.name}`, which has {len(states)} stage(s)",
            a.who, label="stage out of range",
        )  # fmt: skip
    return states[stage]


class ExecContext:
    """:class:`cake_core.ir.primitive.ExecContext` for one execution of one operation by one role instance."""

    __slots__ = ("_interp", "_inst", "_info", "_regions", "_transfer")

    def __init__(self, interp: Interpreter, inst: InterpInstance, info: OpInfo, regions: dict[str, Region],
                 transfer: RegionTransfer | None) -> None:  # fmt: skip
        self._interp, self._inst, self._info, self._regions, self._transfer = interp, inst, info, regions, transfer

    def _region(self, slot: str) -> Region:
        try:
            return self._regions[slot]
        except KeyError:
            raise CakeInternalError(
                f"primitive `{self._info.prim.name}` accessed operand `{slot}`, which is not a tile operand "
                f"of this operation"
            ) from None

    def read(self, slot: str) -> np.ndarray:
        region = self._region(slot)
        overlays: list = []
        effect = self._info.by_slot.get(slot)
        if self._transfer is not None and effect is not None and effect.asynchronous:
            # an asynchronous unit sees what the earlier operations of its group wrote
            overlays = self._inst.cta.tracker.chain(self._transfer, region)
        missing, first = region.unwritten(overlays)
        if missing:
            findings = self._interp.findings
            findings.report(reports.uninitialized(findings, self._inst.who, self._info, slot, region, missing, first))
        return region.read(overlays)

    def write(self, slot: str, value: np.ndarray) -> None:
        region = self._region(slot)
        try:
            part = region.storage_part(value)
        except ValueError as exc:
            raise CakeInternalError(
                f"primitive `{self._info.prim.name}` wrote a {np.shape(value)} value to operand `{slot}` "
                f"of shape {region.shape}: {exc}"
            ) from None
        effect = self._info.by_slot.get(slot)
        if self._transfer is not None and effect is not None and effect.asynchronous:
            self._transfer.values[id(region)] = part
        else:
            region.apply(part)

    def value(self, e: n.Expr) -> int | float:
        return self._interp.eval(self._inst, e, self._info.op)  # type: ignore[return-value]

    def attr(self, key: str, default: Any = None) -> Any:
        e = self._info.typed.attr(key)
        spec = self._info.prim.signature.attr(key)
        if e is None:
            return default if default is not None else (spec.default if spec is not None else None)
        if (spec is not None and spec.kind == "word") or (
            isinstance(e, n.Name) and e.id not in self._inst.env and e.id not in WORDS
        ):
            return e.id if isinstance(e, n.Name) else self.value(e)
        v = self.value(e)
        if spec is not None and spec.kind == "float":
            return float(v)
        return v

    def masked(self, slot: str) -> bool:
        effect = self._info.by_slot.get(slot)
        return bool(effect is not None and effect.masked)

    def in_bounds(self, slot: str) -> np.ndarray:
        return self._region(slot).in_bounds()
