"""The execution model of one CTA that the interpreter and the protocol replay share.

Role instances run with vector clocks (:mod:`cake_core.semantics.clocks`) and a state: ready, blocked
on an mbarrier phase, blocked at a CTA barrier, or done. An asynchronous operation is a
:class:`Transfer` in flight: it completes at its issuer's group wait (or when the issuer finishes) if
it joined an asynchronous group, else whenever the machine gets to it; a transfer that signals
barriers is always the machine's to complete, so that a barrier others wait on can move. A CTA
barrier releases when every instance is at it, and joins every clock into every clock.

:class:`Cta` holds the transfers in flight and completes them; what a landing transfer does to memory
(values, access records) is the subclass's :meth:`Cta.landed`.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator, Sequence
from typing import Any

import attrs

from cake_core.semantics.barriers import BarState
from cake_core.semantics.clocks import VC, join

# role instance states (CLUSTER: at a cluster barrier)
READY, MBAR, CTA, DONE, CLUSTER = 0, 1, 2, 3, 4


def instance_words(role: str, instance: int, instances: int) -> str:
    """A role instance as findings name it: ``role `main` `` or ``role `consumers` instance 1``."""
    if instances > 1:
        return f"role `{role}` instance {instance}"
    return f"role `{role}`"


@attrs.define(eq=False, slots=True)
class Transfer:
    """An asynchronous operation in flight.

    ``comp``/``clock``: the epoch its accesses take when it completes on its own (its clock is 1 when it
    is a component of its own, its position when it shares a lane with others). ``vc``: its issuer's
    clock at issue, with its own epoch. ``issuer``: the issuing instance's component. ``group``: the
    asynchronous group it joined, else None. ``tx_barriers``: each barrier it signals with the bytes it
    completes there. ``writes``/``reads``: what it accesses, in the model's own terms. ``collective``:
    one unit executes it for all the issuer's threads (a warpgroup-wide ``wgmma``), so every thread
    that waits for its group sees it complete; its accesses keep its own epoch, which the issuer
    acquires at the wait, instead of counting as the issuer's threads' own accesses.
    """

    comp: int
    clock: int
    vc: VC
    issuer: int
    group: str | None
    writes: list[Any] = attrs.field(factory=list)
    reads: list[Any] = attrs.field(factory=list)
    tx_barriers: list[tuple[BarState, int]] = attrs.field(factory=list)
    collective: bool = False
    done: bool = False

    @property
    def own_epoch(self) -> bool:
        """Whether its accesses keep its own epoch when it lands at its issuer's group wait."""
        return self.collective or bool(self.tx_barriers)


@attrs.define(eq=False, slots=True)
class Group:
    """One asynchronous group of one instance: the transfers issued since its last commit, and the
    committed batches, oldest first."""

    open: list[Transfer] = attrs.field(factory=list)
    committed: collections.deque[list[Transfer]] = attrs.field(factory=collections.deque)

    def commit(self) -> None:
        self.committed.append(self.open)
        self.open = []

    def retire(self, pending: int) -> Iterator[Transfer]:
        """The transfers of every committed batch but the ``pending`` most recent, oldest first."""
        while len(self.committed) > max(pending, 0):
            yield from self.committed.popleft()

    def drain(self) -> Iterator[Transfer]:
        """Every transfer of the group, committed batches first."""
        while self.committed:
            yield from self.committed.popleft()
        batch, self.open = self.open, []
        yield from batch


@attrs.define(eq=False, slots=True)
class RoleInstance:
    """One role instance of one CTA: its vector-clock component and clock, state and groups."""

    comp: int
    vc: VC = attrs.field(factory=dict)
    state: int = READY
    groups: dict[str, Group] = attrs.field(factory=dict)

    def tick(self) -> int:
        """The instance's next event: its clock advances."""
        c = self.vc[self.comp] = self.vc.get(self.comp, 0) + 1
        return c

    def group(self, name: str) -> Group:
        g = self.groups.get(name)
        if g is None:
            g = self.groups[name] = Group()
        return g

    def passed_cta_barrier(self) -> None:
        """Called when a CTA barrier releases the instance (after its clock joined everyone's)."""


class Cta:
    """The transfers in flight of one CTA, and the completion of transfers and instances.

    ``changed`` is set whenever a transfer completes a barrier phase (schedulers that let an instance
    run on while nothing changed reset it).
    """

    def __init__(self) -> None:
        self.inflight: list[Transfer] = []
        self.changed = False

    def landed(self, tr: Transfer, comp: int, clock: int) -> None:
        """What ``tr``'s completion does to memory, its accesses at epoch ``(comp, clock)``."""
        raise NotImplementedError

    def machine_transfers(self) -> list[Transfer]:
        """The transfers the machine may complete now: those of no group, and those signalling barriers."""
        return [t for t in self.inflight if not t.done and (t.group is None or t.tx_barriers)]

    def release_cta_barrier(self, instances: Sequence[RoleInstance]) -> None:
        """Every instance is at a CTA barrier: each sees what all have seen, and goes on."""
        joined: VC = {}
        for a in instances:
            join(joined, a.vc)
        for a in instances:
            a.vc = dict(joined)
            a.state = READY
            a.passed_cta_barrier()

    def finish(self, a: RoleInstance) -> None:
        """``a`` ran off the end of its role: its asynchronous groups complete."""
        t = a.tick()
        for g in a.groups.values():
            for tr in g.drain():
                self.land(a, tr, t)
        a.state = DONE

    def land(self, a: RoleInstance, tr: Transfer, clock: int) -> None:
        """A transfer of ``a``'s group completes at ``a``'s group wait (or exit), in ``a``'s program order.

        Its accesses are ``a``'s at ``clock``. A transfer that also signals a barrier, or a collective
        one, keeps its own epoch, which ``a`` acquires here.
        """
        self.complete(tr, a.comp, clock)
        if tr.own_epoch:
            join(a.vc, tr.vc)

    def complete(self, tr: Transfer, comp: int | None = None, clock: int = 1) -> None:
        """A transfer lands: its accesses take effect (at ``(comp, clock)``, or its own epoch when
        the machine completes it, it signals barriers or it is collective), its barriers get their bytes.

        A transfer of a group that signals a barrier may have landed before its group wait (the
        machine completes it so the barrier can move); the wait then finds it done.
        """
        if tr.done:
            return
        tr.done = True
        if comp is None or tr.own_epoch:
            comp, clock = tr.comp, tr.clock
        self.landed(tr, comp, clock)
        self.inflight.remove(tr)
        for bar, nbytes in tr.tx_barriers:
            if bar.complete_tx(nbytes, tr.vc):
                self.changed = True
