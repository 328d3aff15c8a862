"""cake-rules-core: the verifier hard gates every Cake schedule must pass.

========  ==============================  ===============================================================
id        slug                            checks
========  ==============================  ===============================================================
CR101     missing-feature                 hardware features the target lacks (``prim.features(op)``, clusters)
CR102     smem-over-limit                 shared memory per block (and per SM for a promised occupancy)
CR103     threads-and-warps               threads per CTA; role warp ranges inside the CTA, disjoint, covering
CR104     register-budget                 a lower bound of registers per thread, per role budget, per block
CR105     cp-async-size-alignment         cp.async sizes, tile rows, row pitches and starts aligned to them
CR106     vector-access-alignment         other vectorized accesses (``bytes``, ``vector_bytes``, ldmatrix)
CR107     mma-shape-dtype                 mma.sync per-warp m16n8 tiles, k16 slices, bf16/f16 into f32
CR108     unmasked-out-of-bounds          unmasked tile accesses in bounds for every size in the domain
CR109     warpgroup-alignment             roles using wgmma, setmaxnreg or warpgroup instances are whole warpgroups
CR110     setmaxnreg-limits               register budgets in 24..256 by 8, a cap at entry, increases within releases
CR111     mbarrier-arrival-count          a barrier's count equals the arrivals one of its phases receives
CR112     expect-tx-bytes                 expect-tx bytes equal the full boxes of the copies of the same iteration
CR113     mbarrier-parity                 wait parities follow the phases of the ring's use index
CR114     wait-never-completes            no barrier waited on that nobody arrives on, no phase never reached, no deadlock
CR115     read-before-full                shared reads ordered after the writes (copies) that fill them
CR116     overwrite-before-empty          shared writes ordered after the reads of what they overwrite
CR117     missing-proxy-fence             generic-proxy writes read by the async proxy are fenced before published
CR118     tma-box-and-alignment           tensor-map boxes, global strides and shared destinations of bulk copies
CR119     wgmma-shape-and-operands        m64nNk16 shapes, one warpgroup, descriptor-addressable K-major operands
CR120     swizzle-mismatch                every reader and writer of a buffer addresses its swizzle and padding
CR121     pipe-trip-counts                every consumer instance of a pipe takes as many stages as its producer fills
CR122     pipe-release                    every pipe stage taken is released once, before it is taken again
CR123     pipe-copy-unacquired            copies into a pipe's buffer go into a stage the producer acquired
CR124     pipe-stage-outside              a pipe's buffers are touched only at stages the role holds
CR125     release-before-instance-sync    a release by fewer threads than read the buffer follows a CTA barrier
CR126     missing-instance-barrier        threads of one instance read shared memory they wrote after a CTA barrier
CR127     read-of-unwritten-shared        every element of shared memory read is written by some operation of the CTA
CR128     padded-reduction                argmin/top-k columns past a tensor's extent (zero-filled) excluded by a limit or mask
CR129     output-coverage-hole            every output element written by some CTA, for every sampled shape
CR130     overlapping-output-writes       no output element written by two role instances or two CTAs
CR131     cluster-shape                   cluster extents >= 1, at most 8 CTAs, a grid of whole clusters for every size
CR132     multicast-mask                  multicast only within a cluster; the ranks' slices tile their stage exactly
CR133     multicast-release               multicast stages released in every CTA (cluster pipes, cluster arrivals)
CR134     cluster-barrier-arrivals        `cluster.sync` reached equally often by every thread of every CTA of a cluster
========  ==============================  ===============================================================

Rule ids never change meaning across versions of this pack; a retired id is never reused.
"""

from __future__ import annotations

from collections.abc import Callable

from cake_core.hookspecs import hookimpl
from cake_core.verify.rule import Rule

from cake_rules_core.alignment import CpAsyncSizeAlignment, VectorAccessAlignment
from cake_rules_core.bounds import UnmaskedOutOfBounds
from cake_rules_core.clusters import (
    ClusterBarrierArrivals, ClusterShape, MulticastMask, MulticastRelease,
)  # fmt: skip
from cake_rules_core.coverage import OutputCoverageHole, OverlappingOutputWrites
from cake_rules_core.features import MissingFeature
from cake_rules_core.instance_sync import MissingInstanceBarrier, ReleaseBeforeInstanceSync
from cake_rules_core.hazards import MissingProxyFence, OverwriteBeforeEmpty, ReadBeforeFull
from cake_rules_core.mbarrier import ExpectTxBytes, MbarrierArrivalCount, MbarrierParity, WaitNeverCompletes
from cake_rules_core.mma import MmaShapeDtype
from cake_rules_core.padding import PaddedReduction
from cake_rules_core.pipes import PipeCopyUnacquired, PipeRelease, PipeStageOutside, PipeTripCounts
from cake_rules_core.resources import RegisterBudget, SmemOverLimit, ThreadsAndWarps
from cake_rules_core.tma import TmaBoxAndAlignment
from cake_rules_core.unwritten import ReadOfUnwrittenShared
from cake_rules_core.warps import SetmaxnregLimits, WarpgroupAlignment
from cake_rules_core.wgmma import SwizzleMismatch, WgmmaShapeAndOperands

__version__ = "0.4.0"

RULES: tuple[type[Rule], ...] = (
    MissingFeature,
    SmemOverLimit,
    ThreadsAndWarps,
    RegisterBudget,
    CpAsyncSizeAlignment,
    VectorAccessAlignment,
    MmaShapeDtype,
    UnmaskedOutOfBounds,
    WarpgroupAlignment,
    SetmaxnregLimits,
    MbarrierArrivalCount,
    ExpectTxBytes,
    MbarrierParity,
    WaitNeverCompletes,
    ReadBeforeFull,
    OverwriteBeforeEmpty,
    MissingProxyFence,
    TmaBoxAndAlignment,
    WgmmaShapeAndOperands,
    SwizzleMismatch,
    PipeTripCounts,
    PipeRelease,
    PipeCopyUnacquired,
    PipeStageOutside,
    ReleaseBeforeInstanceSync,
    MissingInstanceBarrier,
    ReadOfUnwrittenShared,
    PaddedReduction,
    OutputCoverageHole,
    OverlappingOutputWrites,
    ClusterShape,
    MulticastMask,
    MulticastRelease,
    ClusterBarrierArrivals,
)


@hookimpl
def cake_register_rules(register: Callable[[Rule], None]) -> None:
    """Register every rule of the pack."""
    for cls in RULES:
        register(cls())


__all__ = ["RULES", "cake_register_rules", "__version__"]
