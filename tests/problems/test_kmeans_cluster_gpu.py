"""The clustered kmeans-assign schedule (``hopper_cluster.cake``: clusters of two CTAs sharing every
centroid tile by multicast TMA) on the H200, at two ragged cells, against the problem's oracle: fresh
random inputs, outputs poisoned before each run, checked before and after timing (``bench_candidate``),
and the multicast bulk copies in the cubin. Skipped cleanly without a GPU.

The cells are ragged on purpose: N leaves a partial row tile and an odd number of row tiles in a batch
(rank 1 of a cluster then walks one tile past the end, takes every centroid stage and stores nothing),
K leaves a partial centroid tile; in the second cell the 80 work items (pairs of row tiles) outnumber
the H200's 66 clusters, so clusters loop."""

from __future__ import annotations

import pytest

from cake_core import pipeline, plugins
from cake_core.loop.benchmark import bench_candidate
from cake_core.problems.kmeans_assign.cells import SCHEDULES
from cake_core.runtime.device import requires_gpu
from cake_core.runtime.plan import Timing

pytestmark = pytest.mark.gpu

CELLS = [
    ({"B": 3, "N": 1000, "K": 300, "D": 128}, "bf16"),  # 4 row tiles of 256 a batch, the last partial; K: 3 tiles
    ({"B": 40, "N": 700, "K": 1025, "D": 64}, "f16"),  # 3 row tiles a batch (odd), K one past 8 tiles
]


@requires_gpu
@pytest.mark.parametrize("shape,dtype", CELLS, ids=[f"{s}-{d}" for s, d in CELLS])
def test_clustered_schedule_passes_the_oracle(shape, dtype, gpu_runner, gpu_arch, record) -> None:
    if gpu_arch != "sm_90":  # clusters and multicast TMA: compiled for sm_90a
        pytest.skip(f"hopper_cluster.cake is compiled for h200 (sm_90a); this GPU is {gpu_arch}")
    reg = plugins.registry()
    cand = pipeline.Candidate(pipeline.load(SCHEDULES / "hopper_cluster.cake"), reg.get("targets", "h200"))
    m = bench_candidate(cand, reg.get("problems", "kmeans-assign"), shape, dtype, gpu_runner,
                        impl="cake:hopper_cluster", timing=Timing(warmup=2, reps=10), timeout_s=300)  # fmt: skip
    record("schedules", m)
    assert m.status == "ok" and m.correct, (m.status, m.error, m.oracle)
    assert len(m.oracle) == 2  # checked before and after timing
    assert m.sass is not None and not m.sass["missing"], m.sass
