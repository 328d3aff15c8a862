"""The protocol replay: a CTA's traces interleaved, with the mbarrier semantics of the interpreter.

The replay runs the interpreter's model (:mod:`cake_core.semantics.engine`: role instances, transfers,
asynchronous groups and their completion; :mod:`~cake_core.semantics.barriers`;
:mod:`~cake_core.semantics.clocks`; :mod:`~cake_core.semantics.boxes`) under its ``sequential``
policy, without data: the lowest-numbered instance that can run executes its next step; asynchronous
copies stay in flight until no instance can run (or their group is waited for); a wait for parity
``P`` passes once the barrier's last completed phase has parity ``P``; a phase completes at ``count``
arrivals with no outstanding transaction bytes.

Happens-before is tracked with vector clocks: each instance is a component, and so is each *lane* of
asynchronous operations — those of one issuer that signal the same barrier stages (or join the same
group), which complete in issue order, so a lane's clock counts them and clocks stay small. Arrivals
and completed copies join a phase's clock, a passing wait acquires it, a CTA barrier joins everyone.
A read of shared memory not ordered after an overlapping write of another component (or overlapping a
copy still in flight) is a ``raw`` conflict; a write not ordered after another component's read or
write is ``war``/``waw``. Accesses of one instance are in program order (the threads inside an
instance are the interpreter's business). Atomic accesses do not conflict with each other. When no
instance can run, no copy is in flight and some instance is not finished, the replay records the
deadlock and stops.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING

import attrs

from cake_core.ir.model import KernelModel
from cake_core.semantics.barriers import ARRIVES, EXPECTS, BarState
from cake_core.semantics.boxes import Box, contains, overlaps
from cake_core.semantics.clocks import join
from cake_core.semantics.engine import CTA, DONE, MBAR, READY, Cta, RoleInstance, Transfer

if TYPE_CHECKING:
    from cake_core.verify.traces import SharedAccess, Step


@attrs.define(eq=False)
class Conflict:
    """Two accesses to overlapping shared memory that nothing orders.

    ``step`` is the later access (the one found unordered), ``other`` the earlier one — for a copy, the
    step that issued it. ``signals`` are the barrier phases the earlier access's copy completes
    (``(barrier, stage, phase)``), and ``waits`` the later accessor's last passed wait on each barrier:
    ``barrier -> (stage, phase it saw complete (-1: none yet), step)``.
    """

    kind: str  # "raw" (read before the write is ordered), "war", "waw" (write before the earlier access is)
    buffer: str
    step: Step
    access: SharedAccess
    other: Step
    in_flight: bool
    signals: tuple[tuple[str, int, int], ...]
    waits: dict[str, tuple[int, int, Step]]
    released: Step | None = None  # the later accessor's last arrival on any barrier before this access


@attrs.define(eq=False)
class Blocked:
    """One instance that can never go on: at a barrier wait, or at a CTA barrier."""

    inst: int
    step: Step
    barrier: str | None  # None: a CTA barrier
    stage: int = 0
    parity: int = 0
    state: str = ""


@attrs.define(eq=False)
class ReplayResult:
    """What a replay found: unordered accesses, and the deadlock that stopped it."""

    conflicts: list[Conflict]
    deadlock: list[Blocked] | None  # every blocked instance, when the replay deadlocked
    finished: list[int]  # instances that had finished when it did


@attrs.define(eq=False, slots=True)
class StepTransfer(Transfer):
    """An asynchronous operation of the replay: the step that issued it, its shared-memory accesses, and
    the barrier phases it completes (``signals``: ``(barrier, stage, phase)``)."""

    step: Step = attrs.field(kw_only=True)
    signals: list[tuple[str, int, int]] = attrs.field(factory=list, kw_only=True)
    buffers: set[str] = attrs.field(factory=set, kw_only=True)


@attrs.define(eq=False, slots=True)
class _Record:
    """One shared-memory access the replay keeps: its box, epoch, step and the phases its copy signals."""

    box: Box
    comp: int
    clock: int
    write: bool
    step: Step
    atomic: bool
    signals: tuple[tuple[str, int, int], ...] = ()


@attrs.define(eq=False, slots=True)
class ReplayInstance(RoleInstance):
    """One role instance in the replay (its component is its index): its trace and where it is in it.

    ``sub``: the waits of the current step already passed. ``counts``: passed waits per barrier stage
    (the derived parity). ``last_wait``/``last_arrive``: for the words of a conflict.
    """

    trace: list[Step] = attrs.field(kw_only=True)
    pc: int = attrs.field(default=0, kw_only=True)
    sub: int = attrs.field(default=0, kw_only=True)
    wait: tuple[BarState, int, str, int] | None = attrs.field(default=None, kw_only=True)
    cta_passed: bool = attrs.field(default=False, kw_only=True)
    counts: dict[tuple[str, int], int] = attrs.field(factory=dict, kw_only=True)
    last_wait: dict[str, tuple[int, int, Step]] = attrs.field(factory=dict, kw_only=True)
    last_arrive: Step | None = attrs.field(default=None, kw_only=True)

    def passed_cta_barrier(self) -> None:
        self.cta_passed = True


class Replay(Cta):
    """One replay of one sample's traces."""

    def __init__(self, model: KernelModel, traces: list[list[Step]]) -> None:
        super().__init__()
        self.model = model
        self.bars: dict[tuple[str, int], BarState] = {}
        for name, info in model.barriers.items():
            for s in range(info.stages or 1):
                self.bars[(name, s)] = BarState(name, s, info.count)
        self.instances = [ReplayInstance(i, trace=t) for i, t in enumerate(traces)]
        self.next_comp = len(self.instances)
        # Asynchronous operations of one issuer that signal the same barrier stages (or join the same
        # group) complete in issue order: one vector-clock component ("lane") stands for all of them,
        # its clock counting them, so clocks stay as small as the number of lanes
        self.lanes: dict[tuple, int] = {}
        self.lane_clock: dict[int, int] = {}
        # access records per (buffer, stage): a ring's accesses to one stage are keyed by it, accesses
        # to a whole ring or to an unstaged buffer by None
        self.records: dict[tuple[str, int | None], list[_Record]] = collections.defaultdict(list)
        self.conflicts: list[Conflict] = []
        self.seen: set[tuple] = set()

    # -- scheduling ----------------------------------------------------------------------------------

    def run(self) -> ReplayResult:
        instances = self.instances
        for a in instances:
            if not a.trace:
                a.state = DONE
        while True:
            progressed = False
            for a in instances:
                if a.state == DONE:
                    continue
                if a.state == MBAR:
                    assert a.wait is not None
                    if not a.wait[0].ready(a.wait[1]):
                        continue
                    a.state = READY
                if a.state == CTA:
                    continue
                self.changed = False
                self.advance(a)
                # nothing an earlier instance waits for has changed: the same instance goes on
                while a.state == READY and not self.changed:
                    self.advance(a)
                progressed = True
                break
            if progressed:
                continue
            if any(a.state == CTA for a in instances) and all(a.state == CTA for a in instances):
                self.release_cta_barrier(instances)
                continue
            machine = self.machine_transfers()
            if machine:
                self.complete(machine[0])
                continue
            if all(a.state == DONE for a in instances):
                break
            return ReplayResult(self.conflicts, self.deadlock(), [a.comp for a in instances if a.state == DONE])
        for t in self.machine_transfers():
            self.complete(t)
        return ReplayResult(self.conflicts, None, [a.comp for a in instances])

    def deadlock(self) -> list[Blocked]:
        out = []
        for a in self.instances:
            if a.state == MBAR and a.wait is not None:
                bar, parity, name, stage = a.wait
                out.append(Blocked(a.comp, a.trace[a.pc], name, stage, parity, bar.state_text()))
            elif a.state == CTA:
                out.append(Blocked(a.comp, a.trace[a.pc], None))
        return out

    # -- one step ------------------------------------------------------------------------------------

    def advance(self, a: ReplayInstance) -> None:
        st = a.trace[a.pc]
        waits = st.waits
        while a.sub < len(waits):
            name, stage, parity, _ = waits[a.sub]
            key = (name, stage)
            bar = self.bars[key]
            k = a.counts.get(key, 0)
            p = (parity if parity is not None else k) & 1
            if not bar.ready(p):
                a.state, a.wait = MBAR, (bar, p, name, stage)
                return
            a.wait = None
            join(a.vc, bar.done_vc)
            a.counts[key] = k + 1
            a.last_wait[name] = (stage, bar.completed - 1, st)
            a.sub += 1
        plan = st.plan
        assert plan is not None
        if plan.cta and not a.cta_passed:
            a.state = CTA
            return
        a.cta_passed = False
        a.sub = 0
        t = a.tick()
        if plan.group_wait is not None:
            for tr in a.group(plan.group_wait).retire(st.pending or 0):
                self.land(a, tr, t)
        tr: StepTransfer | None = None
        if plan.asynchronous:
            lane = (a.comp, id(plan), tuple([stg for _, stg, _, _ in st.completes]))
            comp = self.lanes.get(lane)
            if comp is None:
                comp = self.lanes[lane] = self.next_comp
                self.next_comp += 1
            clock = self.lane_clock[comp] = self.lane_clock.get(comp, 0) + 1
            vc = dict(a.vc)
            vc[comp] = clock
            tr = StepTransfer(comp, clock, vc, a.comp, plan.group, step=st)
        accesses = st.accesses
        if accesses:
            for x in accesses:
                self.check(a, st, x, tr)
            for x in accesses:
                if x.asynchronous and tr is not None:
                    if x.write:
                        tr.writes.append(x)
                    if x.read:
                        tr.reads.append(x)
                    tr.buffers.add(x.buffer)
                else:
                    self.record(x, a.comp, t, st, ())
        if tr is not None:
            for name, stage, nbytes, _ in st.completes:
                bar = self.bars[(name, stage)]
                tr.tx_barriers.append((bar, nbytes))
                tr.signals.append((name, stage, bar.completed))
            self.inflight.append(tr)
            if plan.group is not None:
                a.group(plan.group).open.append(tr)
        for act, name, stage, arrivals, nbytes, _ in st.signals:
            bar = self.bars[(name, stage)]
            expect = 0
            if act in EXPECTS:
                expect = nbytes if nbytes is not None else (sum(b for _, b in tr.tx_barriers) if tr is not None else 0)
            if act in ARRIVES:
                a.last_arrive = st
                done = bar.signal(expect, a.vc, arrivals)
            else:
                done = bar.signal(expect)
            if done:
                self.changed = True
        if plan.group_commit is not None:
            a.group(plan.group_commit).commit()
        a.pc += 1
        if a.pc >= len(a.trace):
            self.finish(a)

    def landed(self, tr: Transfer, comp: int, clock: int) -> None:
        """The copy's accesses are recorded at ``(comp, clock)``."""
        assert isinstance(tr, StepTransfer)
        signals = tuple(tr.signals)
        for x in tr.writes:
            self.record(x, comp, clock, tr.step, signals)
        for x in tr.reads:
            if not x.write:
                self.record(x, comp, clock, tr.step, signals)

    # -- memory --------------------------------------------------------------------------------------

    def _keys(self, x: SharedAccess) -> list[tuple[str, int | None]]:
        """The record lists an access may overlap."""
        if x.stage is not None:
            return [(x.buffer, x.stage), (x.buffer, None)]
        return [k for k in self.records if k[0] == x.buffer]

    def record(self, x: SharedAccess, comp: int, clock: int, step: Step, signals: tuple) -> None:
        recs = self.records[(x.buffer, x.stage)]
        if x.write:
            recs[:] = [r for r in recs if not contains(x.box, r.box)]
            recs.append(_Record(x.box, comp, clock, True, step, x.atomic, signals))
        if x.read and not x.write:
            recs[:] = [r for r in recs if r.write or r.comp != comp or not contains(x.box, r.box)]
            recs.append(_Record(x.box, comp, clock, False, step, x.atomic, signals))

    def check(self, a: ReplayInstance, st: Step, x: SharedAccess, tr: StepTransfer | None) -> None:
        vc, comp, box = a.vc, a.comp, x.box
        for key in self._keys(x):
            for r in self.records.get(key, ()):
                if r.comp == comp or vc.get(r.comp, 0) >= r.clock or not overlaps(box, r.box):
                    continue
                if x.atomic and r.atomic:
                    continue
                if r.write and x.read:
                    self.conflict("raw", a, st, x, r.step, False, r.signals)
                elif x.write:
                    self.conflict("waw" if r.write else "war", a, st, x, r.step, False, r.signals)
        buf = x.buffer
        for t in self.inflight:  # StepTransfers, all of them
            if t is tr or t.done or buf not in t.buffers:
                continue
            if t.issuer == a.comp and tr is not None and t.group is not None and t.group == tr.group:
                continue  # one asynchronous unit processes its group in issue order
            if x.read and any(w.buffer == x.buffer and overlaps(w.box, x.box) for w in t.writes):
                self.conflict("raw", a, st, x, t.step, True, tuple(t.signals))
            elif x.write and any(o.buffer == x.buffer and overlaps(o.box, x.box) for o in t.writes + t.reads):
                kind = "waw" if any(w.buffer == x.buffer and overlaps(w.box, x.box) for w in t.writes) else "war"
                self.conflict(kind, a, st, x, t.step, True, tuple(t.signals))

    def conflict(self, kind: str, a: ReplayInstance, st: Step, x: SharedAccess, other: Step, in_flight: bool,
                 signals: tuple) -> None:  # fmt: skip
        key = (kind, id(st.op), id(other.op), x.buffer)
        if key in self.seen:
            return
        self.seen.add(key)
        self.conflicts.append(
            Conflict(kind, x.buffer, st, x, other, in_flight, signals, dict(a.last_wait), a.last_arrive)
        )
