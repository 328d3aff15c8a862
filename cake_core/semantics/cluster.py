"""The interpreter's thread-block clusters: the CTAs of one cluster run together under one scheduler.

A kernel with ``cta ... cluster (C)`` runs its grid in clusters of ``C`` CTAs consecutive along the
first grid variable (:mod:`cake_core.ir.cluster`). Each member CTA keeps its own shared buffers,
barriers and role instances (``crank`` is its rank); the members share one vector-clock numbering, one
race tracker and one list of copies in flight, so that an access in one CTA and a copy issued by another
are ordered, or found racing, exactly as two accesses inside one CTA.

What reaches across the cluster is declared by effects (``Effect.cluster``):

* a multicast copy's write lands in the same buffer of every member and its ``complete_tx`` signals the
  same barrier of every member (:func:`peer_regions`, :func:`everywhere`);
* a cluster arrival (``pipe.release`` of a ``cluster`` pipe, ``mbarrier.arrive bar, cluster``) arrives
  on the same barrier of every member;
* ``cluster.sync`` (a primitive declaring ``cluster_barrier``) blocks until every instance of every
  member arrived; without a cluster it is a CTA barrier.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from cake_core.ir import nodes as n
from cake_core.ir.primitive import Effect
from cake_core.semantics.barriers import BarState
from cake_core.semantics.engine import Transfer
from cake_core.semantics.findings import Findings
from cake_core.semantics.memory import Region

if TYPE_CHECKING:
    from cake_core.semantics.operands import Eval
    from cake_core.semantics.scheduler import InterpCta, InterpInstance


class ClusterRun:
    """The member CTAs of one cluster, as the scheduler runs them: every member's instances, the shared
    copies in flight, and the cluster barrier."""

    def __init__(self, members: Sequence[InterpCta]) -> None:
        self.members = tuple(members)
        self.model = members[0].model

    @property
    def instances(self) -> list[InterpInstance]:
        return [a for m in self.members for a in m.instances]

    def machine_transfers(self) -> list[Transfer]:
        return self.members[0].machine_transfers()  # the members share one list of copies in flight

    def complete(self, tr: Transfer) -> None:
        self.members[0].complete(tr)

    def release_cta_barrier(self, instances: Sequence[InterpInstance]) -> None:
        """Every instance of every member is at ``cluster.sync``: each sees what all have seen."""
        self.members[0].release_cta_barrier(instances)


def reached(a: InterpInstance, e: Effect) -> tuple[InterpCta, ...]:
    """The CTAs an effect of ``a``'s reaches: every member of its cluster for a cluster effect, else its own."""
    return a.cta.cluster if e.cluster else (a.cta,)


def peer_regions(a: InterpInstance, e: Effect, op: n.Op, ev: Eval) -> list[Region]:
    """The regions a cluster effect's operand covers in the other members of ``a``'s cluster."""
    from cake_core.semantics.operands import region

    return [region(a, e.operand, op, ev, m) for m in reached(a, e) if m is not a.cta]


def everywhere(a: InterpInstance, e: Effect, op: n.Op, ev: Eval, findings: Findings) -> list[BarState]:
    """The barrier (stage) a barrier effect names in every CTA it reaches."""
    from cake_core.semantics.operands import barrier

    return [barrier(a, e.operand, op, ev, findings, m) for m in reached(a, e)]
