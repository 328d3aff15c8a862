"""Happens-before race detection inside one CTA, with vector clocks.

Every role instance (an *agent*) and every asynchronous copy (a *transfer*) is a component of the
CTA's vector clocks. An agent ticks its own component once per
operation; synchronization joins clocks:

* a CTA barrier joins every agent's clock into every agent's clock;
* an mbarrier arrival (and a copy's completion, ``complete_tx``) joins the arriving clock into the
  barrier's current phase; a wait that sees the phase complete joins the phase's clock into the waiter;
* a copy of an asynchronous group completes at its issuer's group wait, in the issuer's program order,
  and its accesses count as the issuer's there; a copy that signals a barrier keeps its own epoch,
  which the barrier passes on.

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
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from cake_core.location import Loc
from cake_core.semantics.memory import Box, Region, Store, contains, overlaps

if TYPE_CHECKING:
    from cake_core.semantics.barriers import BarState

VC = dict[int, int]


def join(into: VC, other: VC) -> None:
    """``into = max(into, other)`` per component."""
    for k, v in other.items():
        if into.get(k, 0) < v:
            into[k] = v


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
    """Who accesses: an agent at one operation, or a transfer at its issue."""

    vc: VC
    comp: int
    sync_clock: int  # the component's clock at its last CTA barrier
    who: str
    loc: Loc

    def ordered_after(self, rec: Record) -> bool:
        if rec.comp == self.comp:
            return rec.clock < self.sync_clock
        return self.vc.get(rec.comp, 0) >= rec.clock


@attrs.define(eq=False)
class Transfer:
    """An asynchronous operation in flight: its writes (values captured at issue) and reads.

    ``group``: the asynchronous group it joined (it completes at the issuer's group wait), else None:
    it completes whenever the machine gets to it. A transfer that signals barriers (``tx_barriers``:
    each barrier with the bytes it completes there) is always the machine's to complete, in a group
    or not, so that a barrier other roles wait on can move. ``nbytes``: the bytes of its writes.
    """

    comp: int
    issuer: Any  # the interpreter's agent that issued it
    op_name: str
    loc: Loc
    who: str
    vc: VC
    sync_clock: int
    group: str | None
    writes: list[Region] = attrs.field(factory=list)
    values: dict[int, np.ndarray] = attrs.field(factory=dict)  # id(region) -> storage part written
    reads: list[Region] = attrs.field(factory=list)
    tx_barriers: list[tuple[BarState, int]] = attrs.field(factory=list)
    nbytes: int = 0
    done: bool = False


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
    transfer: Transfer | None = None


class Tracker:
    """Access records and copies in flight of one CTA."""

    def __init__(self) -> None:
        self.records: dict[int, _Records] = {}
        self.inflight: list[Transfer] = []

    # -- checks -------------------------------------------------------------------------------------

    def check(self, actor: Actor, region: Region, access: str, own: Transfer | None = None,
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
                    yield Conflict("pending-write", store, _meet(w.box, box), access, transfer=t)
            if access == "write":
                for r in t.reads:
                    if r.store is store and not r.empty and overlaps(r.box, box):
                        yield Conflict("pending-read", store, _meet(r.box, box), access, transfer=t)
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
                    yield Conflict("raw", store, _meet(w.box, box), access, other=w)
                elif w.comp != actor.comp:
                    yield Conflict("waw", store, _meet(w.box, box), access, other=w)
        if access == "write":
            for r in recs.reads:
                if atomic and r.atomic:
                    continue
                if overlaps(r.box, box) and not actor.ordered_after(r):
                    yield Conflict("war", store, _meet(r.box, box), access, other=r)

    @staticmethod
    def same_unit(a: Transfer, b: Transfer) -> bool:
        """Whether two transfers belong to one issuer's asynchronous group (processed in issue order)."""
        return a.group is not None and a.group == b.group and a.issuer is b.issuer

    def chain(self, own: Transfer, region: Region) -> list[tuple[Region, np.ndarray]]:
        """Writes of in-flight transfers of ``own``'s unit that ``region`` overlaps, oldest first."""
        out = []
        for t in self.inflight:
            if t is own or t.done or not self.same_unit(own, t):
                continue
            for w in t.writes:
                part = t.values.get(id(w))
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


def _meet(a: Box, b: Box) -> Box:
    return tuple((max(a0, b0), min(a1, b1)) for (a0, a1), (b0, b1) in zip(a, b, strict=True))
