"""mbarrier state: phases, arrivals, transaction bytes and parity waits.

A declared barrier (``barrier full: mbarrier[S] count C``) is, per CTA and per stage, a counter of
completed phases plus the current phase's arrivals and outstanding transaction bytes. The compiler
initializes every barrier with its declared count before the roles start; an ``init`` action
re-initializes it (count from the operation's ``count`` attribute, else the declared one).

* ``arrive`` counts the arrivals the effect declares (once per thread of the role instance, or once
  for the instance);
* ``expect_tx`` adds transaction bytes to the current phase; ``arrive_expect_tx`` does both, as one
  action;
* ``complete_tx`` (an asynchronous copy completing) subtracts its bytes;
* after each action, the phase completes when it has ``count`` arrivals and no outstanding bytes: the
  phase counter advances and the next phase starts empty;
* a wait for parity ``P`` passes once the current phase's parity differs from ``P`` — the phase of
  parity ``P`` has completed. Like the hardware, a barrier two phases ahead of the waiter looks the
  same as one that has not moved.

Each phase accumulates the vector clocks of its arrivals and completed copies; a wait that passes
acquires the clock of the last completed phase. It also keeps, per role instance, the clock at which
*every* thread of the instance arrived (``whole``): the instance's own threads are ordered among
themselves by such an arrival followed by its wait (every thread executes both), as by a CTA barrier
— a role that fills its own pipe releases a stage and then acquires it again.
"""

from __future__ import annotations

import attrs

from cake_core.ir.primitive import BarrierAction
from cake_core.semantics.clocks import VC, join


@attrs.define(eq=False, slots=True)
class BarState:
    """One mbarrier (one stage of a ring) of one CTA.

    ``arrivals`` names who arrived in the current phase, for the words of a deadlock; arrivals that
    give no name (the protocol replay's) are counted only.
    """

    name: str
    stage: int | None
    count: int
    completed: int = 0  # phases completed since initialization
    arrived: int = 0
    tx: int = 0  # outstanding transaction bytes of the current phase
    phase_vc: VC = attrs.field(factory=dict)
    done_vc: VC = attrs.field(factory=dict)
    whole: VC = attrs.field(factory=dict)  # instance component -> its clock at an arrival of all its threads
    done_whole: VC = attrs.field(factory=dict)
    arrivals: list[str] = attrs.field(factory=list)

    @property
    def label(self) -> str:
        return f"`{self.name}[{self.stage}]`" if self.stage is not None else f"`{self.name}`"

    def init(self, count: int) -> None:
        self.count = count
        self.completed = self.arrived = self.tx = 0
        self.phase_vc, self.done_vc, self.arrivals = {}, {}, []
        self.whole, self.done_whole = {}, {}

    def ready(self, parity: int) -> bool:
        """Whether a wait for the phase of ``parity`` passes now."""
        return (self.completed & 1) != (parity & 1)

    def signal(
        self, nbytes: int = 0, arrive: VC | None = None, count: int = 1, who: str | None = None,
        whole: tuple[int, int] | None = None,
    ) -> bool:
        """One barrier action: expect ``nbytes`` transaction bytes and, when ``arrive`` (the arriving
        clock) is given, ``count`` arrivals (by ``who``; ``whole``: the instance's component and clock
        where every thread of it arrives). Whether a phase completed."""
        self.tx += nbytes
        if whole is not None:
            self.whole[whole[0]] = max(self.whole.get(whole[0], 0), whole[1])
        if arrive is not None:
            self.arrived += count
            if who is not None:
                self.arrivals.append(who if count == 1 else f"{who} x{count}")
            join(self.phase_vc, arrive)
        return self._maybe_complete()

    def complete_tx(self, nbytes: int, vc: VC) -> bool:
        """A copy delivers ``nbytes``; whether a phase completed."""
        self.tx -= nbytes
        join(self.phase_vc, vc)
        return self._maybe_complete()

    def _maybe_complete(self) -> bool:
        if self.arrived >= self.count and self.tx == 0:
            self.completed += 1
            self.arrived = 0
            self.done_vc, self.phase_vc = self.phase_vc, {}
            self.done_whole, self.whole = self.whole, {}
            if self.arrivals:
                self.arrivals = []
            return True
        return False

    def state_text(self) -> str:
        arrivals = f"{self.arrived} of {self.count} arrivals"
        if self.arrivals:
            arrivals += " (by " + ", ".join(self.arrivals) + ")"
        return (
            f"{self.completed} phase(s) completed; the current one has {arrivals}, "
            f"{self.tx} transaction bytes outstanding"
        )


#: the actions that add expected transaction bytes, and those that arrive
EXPECTS = (BarrierAction.EXPECT_TX, BarrierAction.ARRIVE_EXPECT_TX)
ARRIVES = (BarrierAction.ARRIVE, BarrierAction.ARRIVE_EXPECT_TX)
