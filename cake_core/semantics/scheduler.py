"""The interpreter's role instances of one CTA, and the order they run in.

Each role instance runs its body as a generator that yields after every operation (and while it is
blocked). ``policy="sequential"`` always runs the lowest-numbered instance that can run and lets the
machine complete in-flight copies only when no instance can. ``policy="random"`` picks, after every
operation, whether to keep running the same instance or to switch to a random runnable one (or to
complete a random in-flight copy), from a seeded generator. When no instance can run and no copy is
in flight, the CTA is deadlocked.

It also keeps what the threads of one instance release: an arrival by fewer threads than the instance
has (one elected thread, ``per=instance``) releases only what every thread did before the instance's
last CTA barrier (:meth:`InterpInstance.release`), and the CTA remembers each such partial release to
name the threads in the race it leaves behind (:class:`PartialRelease`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from cake_core.ir import nodes as n
from cake_core.location import Loc
from cake_core.ir.model import KernelModel, RoleInfo
from cake_core.semantics import reports
from cake_core.semantics.barriers import BarState
from cake_core.semantics.clocks import VC
from cake_core.semantics.engine import CLUSTER, CTA, DONE, MBAR, READY, Cta, RoleInstance, Transfer, instance_words
from cake_core.semantics.findings import Findings, Stop
from cake_core.semantics.memory import Store
from cake_core.semantics.races import Actor, Record, RegionTransfer, Tracker

if TYPE_CHECKING:
    from cake_core.semantics.cluster import ClusterRun

POLICIES = ("random", "sequential")


@attrs.define(eq=False, slots=True)
class InterpInstance(RoleInstance):
    """One role instance of one CTA in the interpreter: its environment, register tiles and body.

    ``sync_clock``: its clock at its last CTA barrier. ``wait``: the barrier phase it is blocked on
    (barrier, parity, operation); ``blocked_op``: the CTA barrier it waits at. ``waits`` counts its
    passed waits per barrier stage (the derived parity).
    """

    role: RoleInfo = attrs.field(kw_only=True)
    instance: int = attrs.field(kw_only=True)
    env: dict[str, Any] = attrs.field(kw_only=True)
    cta: InterpCta = attrs.field(kw_only=True)
    regs: dict[str, Store] = attrs.field(factory=dict, kw_only=True)
    sync_clock: int = attrs.field(default=0, kw_only=True)
    wait: tuple[BarState, int, n.Op] | None = attrs.field(default=None, kw_only=True)
    blocked_op: n.Op | None = attrs.field(default=None, kw_only=True)
    waits: dict[tuple[str, int | None], int] = attrs.field(factory=dict, kw_only=True)
    gen: Iterator[Any] | None = attrs.field(default=None, kw_only=True)

    @property
    def who(self) -> str:
        words = instance_words(self.role.role.name, self.instance, self.role.instances)
        return f"{words} of cluster rank {self.cta.rank}" if len(self.cta.cluster) > 1 else words

    def actor(self, loc: Loc) -> Actor:
        return Actor(self.vc, self.comp, self.sync_clock, self.who, loc)

    @property
    def threads(self) -> int:
        return self.role.per * 32

    def release(self, count: int, op: n.Op, clock: int) -> VC:
        """The clock an arrival of ``count`` of the instance's threads at ``op`` (its clock ``clock``)
        releases.

        All of the instance's when every thread arrives. When fewer do, the arriving threads' own
        accesses are ordered before the arrival, the other threads' only by a CTA barrier: the clock
        keeps the instance's component at its last CTA barrier (and everything the instance acquired
        by waits, which every thread executes, and by its copies). The arriving threads' own accesses
        since the barrier are left out too: no operation says which thread is elected.
        """
        if count >= self.threads:
            return self.vc
        vc = dict(self.vc)
        vc[self.comp] = self.sync_clock
        self.cta.partial.append(PartialRelease(self.comp, self.sync_clock, clock, op, count, self.threads, self.who))
        return vc

    def passed_cta_barrier(self) -> None:
        self.sync_clock = self.tick()
        self.blocked_op = None


@attrs.define(frozen=True, slots=True)
class PartialRelease:
    """An arrival by ``count`` of the ``threads`` threads of a role instance (component ``comp``) at its
    clock ``clock``, its last CTA barrier at ``sync``."""

    comp: int
    sync: int
    clock: int
    op: n.Op
    count: int
    threads: int
    who: str

    def covers(self, rec: Record) -> bool:
        """Whether ``rec`` is an access of the instance between its last CTA barrier and this arrival."""
        return rec.comp == self.comp and self.sync <= rec.clock < self.clock

    def words(self, rec: Record) -> str:
        """Why ``rec`` is not ordered by the arrival, naming the threads."""
        arriving = "one elected thread" if self.count == 1 else f"{self.count} threads"
        return (
            f"{self.who} released it with `{self.op.name}` at line {self.op.loc.line} by {arriving} of its "
            f"{self.threads}; the `{rec.op}` at line {rec.loc.line} is executed by all {self.threads} threads "
            f"and no CTA barrier orders the other {self.threads - self.count} threads' accesses before the arrival"
        )


class InterpCta(Cta):
    """One CTA of a launch: its stores, barriers, instances and race tracker."""

    def __init__(self, model: KernelModel, coords: tuple[tuple[str, int], ...], globals_: dict[str, Store],
                 shared: dict[str, Store], barriers: dict[str, list[BarState]], peer: InterpCta | None = None,
                 rank: int = 0) -> None:  # fmt: skip
        """``peer``: a CTA of the same thread-block cluster, whose clock numbering, race tracker and copies
        in flight this one shares (:mod:`cake_core.semantics.cluster`); ``rank``: this CTA's in the cluster."""
        super().__init__()
        self.model, self.coords, self.globals, self.shared, self.barriers = model, coords, globals_, shared, barriers
        self.instances: list[InterpInstance] = []
        self.rank = rank
        self.cluster: tuple[InterpCta, ...] = (self,)  # every CTA of its cluster, by rank (set by the interpreter)
        if peer is None:
            self.tracker = Tracker(self.inflight)
            self.comps = itertools.count()
            self.partial: list[PartialRelease] = []  # arrivals by fewer threads than their instance has
        else:
            self.inflight, self.tracker = peer.inflight, peer.tracker
            self.comps, self.partial = peer.comps, peer.partial

    def partial_release(self, rec: Record) -> PartialRelease | None:
        """The latest arrival by fewer threads than its instance has that ``rec`` is unordered against."""
        return next((p for p in reversed(self.partial) if p.covers(rec)), None)

    def new_comp(self) -> int:
        return next(self.comps)

    def landed(self, tr: Transfer, comp: int, clock: int) -> None:
        """The transfer's writes apply; its accesses are recorded at ``(comp, clock)``."""
        assert isinstance(tr, RegionTransfer)
        for region in tr.writes:
            part = tr.values.get(id(region))
            if part is not None:
                region.apply(part)
            self.tracker.record(region, "write", comp, clock, tr.loc, tr.who, tr.op_name)
        for region in tr.reads:
            self.tracker.record(region, "read", comp, clock, tr.loc, tr.who, tr.op_name)


class Scheduler:
    """Runs the instances of a CTA to the end under a policy; raises the deadlock it finds."""

    def __init__(self, policy: str, seed: int, switch: float, findings: Findings) -> None:
        self.policy, self.switch, self.findings = policy, switch, findings
        self.rng = np.random.default_rng(seed)

    def run(self, cta: InterpCta | ClusterRun) -> None:
        instances = cta.instances
        current: InterpInstance | None = None
        while True:
            live = [a for a in instances if a.state != DONE]
            if not live:
                break
            runnable = [a for a in live if a.state == READY or (a.state == MBAR and a.wait is not None
                                                                and a.wait[0].ready(a.wait[1]))]  # fmt: skip
            machine = cta.machine_transfers()
            if not runnable and not machine:
                raise Stop(reports.deadlock(self.findings, instances, cta.model.kernel.loc))
            if self.policy == "sequential":
                if runnable:
                    self.step(cta, runnable[0])
                else:
                    cta.complete(machine[0])
                continue
            if current is not None and current in runnable and self.rng.random() >= self.switch:
                self.step(cta, current)
                continue
            options = len(runnable) + (1 if machine else 0)
            pick = int(self.rng.integers(options))
            if pick < len(runnable):
                current = runnable[pick]
                self.step(cta, current)
            else:
                cta.complete(machine[int(self.rng.integers(len(machine)))])
        for t in cta.machine_transfers():
            cta.complete(t)

    @staticmethod
    def step(cta: InterpCta | ClusterRun, a: InterpInstance) -> None:
        """``a`` runs one operation (or finishes); the last instance to reach a CTA barrier releases it, the
        last of the cluster (``cta``: what the scheduler runs) to reach a cluster barrier releases that."""
        a.state = READY
        assert a.gen is not None
        try:
            next(a.gen)
        except StopIteration:
            a.cta.finish(a)
            return
        own = a.cta
        if a.state == CTA and all(b.state == CTA for b in own.instances):
            own.release_cta_barrier(own.instances)
        elif a.state == CLUSTER and all(b.state == CLUSTER for b in cta.instances):
            cta.release_cta_barrier(cta.instances)
