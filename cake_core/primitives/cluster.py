"""Thread-block clusters: the cluster barrier, and the lowering pieces that reach the peer CTAs.

A kernel with ``cta ... cluster (C)`` runs its CTAs in clusters of ``C`` consecutive along the grid's
first variable (:mod:`cake_core.ir.cluster`); ``crank`` is a CTA's rank in its cluster. Three things
reach across it:

* ``cluster.sync``: every thread of every CTA of the cluster arrives, then waits for all
  (``barrier.cluster.arrive.release`` + ``barrier.cluster.wait.acquire``). The lowering adds one itself
  after the barriers are initialized and one before the kernel exits, whenever ``C > 1``;
* a multicast copy, ``tma.load cs[s][crank * 64 : +64, :] <- c[...], multicast``
  (:class:`~cake_core.primitives.hopper.TmaLoad`): the box lands at the same shared offset in every CTA
  and completes its bytes on the barrier at the same offset in every CTA;
* an arrival on every CTA's copy of a barrier: ``pipe.release`` of a ``cluster`` pipe and
  ``mbarrier.arrive bar, cluster`` (:func:`arrive_everywhere` lowers it).

Effects say so with ``Effect.cluster``; the interpreter follows them (:mod:`cake_core.semantics.cluster`).
"""

from __future__ import annotations

from cake_core.ir.primitive import ExecContext, Primitive, Signature, TypedOp
from cake_core.lower.prelude import CLUSTER_SYNC
from cake_core.target import Feature


class ClusterSync(Primitive):
    name = "cluster.sync"
    summary = "cluster-wide barrier: every thread of every CTA of the cluster waits for all"
    doc = (
        "Orders every shared-memory access and barrier operation of every CTA of the cluster before it "
        "ahead of every one after it. Every thread of every CTA must reach it (all roles), as for "
        "`bar.sync`. Without a cluster it is a CTA barrier."
    )
    requires = frozenset({Feature.CLUSTERS})
    cluster_barrier = True
    signature = Signature()

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        pass  # the interpreter synchronizes the cluster's role instances itself

    def lower(self, op: TypedOp, ctx) -> None:
        ctx.line(CLUSTER_SYNC)


def arrive_everywhere(ctx, addr: str, cluster: int, guard: str = "") -> None:
    """Lines that arrive once on the barrier at shared address ``addr`` (u32, this CTA's) in every CTA of
    a cluster of ``cluster`` CTAs (``mapa`` to each rank's address, then ``mbarrier.arrive.shared::cluster``
    with its default semantics: the cluster-scope form put a GPU-wide fence before every arrival), this CTA
    included; ``guard``: a C++ condition the arriving thread meets (``""``: every thread arrives)."""
    r = ctx.fresh("r")
    head = f"if ({guard}) " if guard else ""
    ctx.line(f"{head}for (unsigned {r} = 0; {r} < {cluster}u; ++{r}) {{")
    ctx.line(
        f'  asm volatile("{{ .reg .b32 ra; mapa.shared::cluster.u32 ra, %0, %1; '
        f'mbarrier.arrive.shared::cluster.b64 _, [ra]; }}" :: "r"({addr}), "r"({r}) : "memory");'
    )
    ctx.line("}")


PRIMITIVES: tuple[type[Primitive], ...] = (ClusterSync,)
