"""Happens-before race detection inside one CTA, with vector clocks.

Every role instance and every asynchronous copy (a *transfer*) is a component of the CTA's vector
clocks (:mod:`cake_core.semantics.clocks`). An instance ticks its own component once per operation;
synchronization joins clocks:

* a CTA barrier joins every instance's clock into every instance's clock;
* an mbarrier arrival (and a copy's completion, ``complete_tx``) joins the arriving clock into the
  barrier's current phase; a wait that sees the phase complete joins the phase's clock into the waiter.
  An arrival by fewer threads than its instance has (one elected thread) joins a clock whose own
  component stops at the instance's last CTA barrier: the other threads' later accesses stay
  unordered for the waiter;
* a copy of an asynchronous group completes at its issuer's group wait, in the issuer's program order,
  and its accesses count as the issuer's there; a copy that signals a barrier keeps its own epoch,
  which the barrier passes on, and so does a collective (warpgroup-wide) one, which the issuer
  acquires at its group wait.

An access record holds the region (a box in the store's coordinates, the stage first), the epoch
``(component, clock)`` of the access, and where it came from. An access by an actor is ordered after
a record when the actor's clock has seen the record's epoch — except for records of the actor's own
component: the threads of one role instance are ordered among themselves only by a CTA barrier, so a
record of the same instance is ordered only if it precedes the instance's last CTA barrier. (Data one
operation of an instance puts in shared memory is distributed over its threads by one mapping and
read by another operation with a different one; the lowering synchronizes them with ``bar.sync``.)

Checks: a read must be ordered after every overlapping write (RAW); a write after every overlapping
read (WAR: overwrite before empty) and every overlapping write of another component (WAW). Accesses
are also checked against copies in flight: reading a region an in-flight copy writes, or writing one
it reads or writes, is a race whatever the clocks say — except between operations of one issuer's
asynchronous group, which one unit processes in issue order. Asynchronous accesses are checked when
issued and recorded when they complete.

Atomic read-modify-writes (effects whose slot declares ``atomic``, like ``atomic.add``) do not race
with each other, whatever the clocks say: the memory system serializes them. They race with plain
reads and writes like any access.

Cost is bounded by keeping records per region, not per element: a write drops every record its box
contains, and a read replaces the same component's reads its box contains. An atomic access, which
other components' atomics need not be ordered with, replaces only its own component's atomic records.
"""

from __future__ import annotations

from collections.abc import Iterator

import attrs
import numpy as np

from cake_core.location import Loc
from cake_core.semantics.boxes import Box, contains, meet, overlaps
from cake_core.semantics.clocks import VC
from cake_core.semantics.engine import Transfer
from cake_core.semantics.memory import Region, Store


@attrs.define(eq=False, slots=True)
class Record:
    """One access to a region."""

    box: Box
    comp: int
    clock: int
    loc: Loc
    who: str  # "role `main`", "`cp.async` issued by role `producer`"
    op: str  # the operation's name
    atomic: bool = False  # an atomic read-modify-write


@attrs.define(eq=False, slots=True)
class Actor:
    """Who accesses: a role instance at one operation, or a transfer at its issue."""

    vc: VC
    comp: int
    sync_clock: int  # the component's clock at its last CTA barrier
    who: str
    loc: Loc

    def ordered_after(self, rec: Record) -> bool:
        if rec.comp == self.comp:
            return rec.clock < self.sync_clock
        return self.vc.get(rec.comp, 0) >= rec.clock


@attrs.define(eq=False, slots=True)
class RegionTransfer(Transfer):
    """A :class:`~cake_core.semantics.engine.Transfer` of the interpreter: its writes and reads are
    regions, the values it writes captured at issue.

    ``nbytes``: the bytes of its writes. ``sync_clock``: its issuer's clock at its last CTA barrier.
    """

    op_name: str = attrs.field(kw_only=True)
    loc: Loc = attrs.field(kw_only=True)
    who: str = attrs.field(kw_only=True)
    sync_clock: int = attrs.field(kw_only=True)
    values: dict[int, np.ndarray] = attrs.field(factory=dict, kw_only=True)  # id(region) -> storage part
    nbytes: int = attrs.field(default=0, kw_only=True)


@attrs.define(eq=False)
class _Records:
    writes: list[Record] = attrs.field(factory=list)
    reads: list[Record] = attrs.field(factory=list)


@attrs.define(eq=False, slots=True)
class Conflict:
    """A race found by the tracker, in its parts; the interpreter words it."""

    kind: str  # "raw", "war", "waw", "pending-write" (a copy in flight writes it), "pending-read"
    store: Store
    box: Box  # the overlap
    access: str  # "read" or "write"
    other: Record | None = None
    transfer: RegionTransfer | None = None


class Tracker:
    """Access records and copies in flight of one CTA."""

    def __init__(self, inflight: list[Transfer]) -> None:
        self.records: dict[int, _Records] = {}
        self.inflight = inflight  # the CTA's transfers in flight, all of them RegionTransfers

    # -- checks -------------------------------------------------------------------------------------

    def check(self, actor: Actor, region: Region, access: str, own: RegionTransfer | None = None,
              chained: bool = False, atomic: bool = False) -> Iterator[Conflict]:  # fmt: skip
        """Conflicts of ``actor`` reading or writing ``region``.

        ``own``: the operation's own new transfer. ``chained``: the access is one of that transfer's
        (asynchronous); it is then ordered after the in-flight transfers of the same group of the same
        issuer, which one asynchronous unit processes in issue order. ``atomic``: the access is an
        atomic read-modify-write, which does not conflict with other atomic accesses.
        """
        if region.empty:
            return
        store, box = region.store, region.box
        for t in self.inflight:
            if t is own or (chained and own is not None and self.same_unit(own, t)):
                continue
            for w in t.writes:
                if w.store is store and not w.empty and overlaps(w.box, box):
                    yield Conflict("pending-write", store, meet(w.box, box), access, transfer=t)
            if access == "write":
                for r in t.reads:
                    if r.store is store and not r.empty and overlaps(r.box, box):
                        yield Conflict("pending-read", store, meet(r.box, box), access, transfer=t)
        if not store.tracked:
            return
        recs = self.records.get(id(store))
        if recs is None:
            return
        for w in recs.writes:
            if atomic and w.atomic:
                continue
            if overlaps(w.box, box) and not actor.ordered_after(w):
                if access == "read":
                    yield Conflict("raw", store, meet(w.box, box), access, other=w)
                elif w.comp != actor.comp:
                    yield Conflict("waw", store, meet(w.box, box), access, other=w)
        if access == "write":
            for r in recs.reads:
                if atomic and r.atomic:
                    continue
                if overlaps(r.box, box) and not actor.ordered_after(r):
                    yield Conflict("war", store, meet(r.box, box), access, other=r)

    @staticmethod
    def same_unit(a: Transfer, b: Transfer) -> bool:
        """Whether two transfers belong to one issuer's asynchronous group (processed in issue order)."""
        return a.group is not None and a.group == b.group and a.issuer == b.issuer

    def chain(self, own: RegionTransfer, region: Region) -> list[tuple[Region, np.ndarray]]:
        """Writes of in-flight transfers of ``own``'s unit that ``region`` overlaps, oldest first."""
        out = []
        for t in self.inflight:
            if t is own or t.done or not self.same_unit(own, t):
                continue
            for w in t.writes:
                part = t.values.get(id(w))  # type: ignore[attr-defined]
                if part is not None and w.store is region.store and not w.empty and overlaps(w.box, region.box):
                    out.append((w, part))
        return out

    # -- records ------------------------------------------------------------------------------------

    def record(self, region: Region, access: str, comp: int, clock: int, loc: Loc, who: str, op: str,
               atomic: bool = False) -> None:  # fmt: skip
        store = region.store
        if region.empty or not store.tracked:
            return
        recs = self.records.setdefault(id(store), _Records())
        rec = Record(region.box, comp, clock, loc, who, op, atomic)
        box = region.box
        if atomic:
            # other atomics need not be ordered with this one, so it stands in for none of theirs, nor
            # for plain accesses (a later atomic skips it, not them): it replaces its own atomics only
            same = [w for w in (recs.writes if access == "write" else recs.reads)
                    if not (w.atomic and w.comp == comp and contains(box, w.box))]  # fmt: skip
            same.append(rec)
            if access == "write":
                recs.writes = same
            else:
                recs.reads = same
            return
        if access == "write":
            recs.writes = [w for w in recs.writes if not contains(box, w.box)]
            recs.reads = [r for r in recs.reads if not contains(box, r.box)]
            recs.writes.append(rec)
        else:
            recs.reads = [r for r in recs.reads if not (r.comp == comp and contains(box, r.box))]
            recs.reads.append(rec)

