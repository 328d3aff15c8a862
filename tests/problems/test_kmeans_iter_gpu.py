"""kmeans-iter on the GPU through stage 3 as `cake bench` runs it (:func:`~cake_core.loop.benchmark.bench_candidate`:
fresh random inputs, outputs poisoned before each run, two runs, timing, the full oracle before and after):
``naive.cake``, ``fused.cake`` and ``hopper.cake`` at small shapes ragged against their tiles (128 points a CTA, 128
centroids a tile), in bf16 and f16; and flash-kmeans's iteration, the baseline, through the worker, where
it is installed. Marked ``gpu``: skipped cleanly without an NVIDIA driver; the code is compiled for h200.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cake_core import pipeline, plugins
from cake_core.loop.baseline import bench_baseline
from cake_core.loop.benchmark import bench_candidate
from cake_core.problems import kmeans_iter
from cake_core.problems.kmeans_iter import KMEANS_ITER as P
from cake_core.runtime.plan import Timing

HERE = Path(kmeans_iter.__file__).parent / "schedules"
TIMING = Timing(warmup=1, reps=3)

#: every size ragged against the tiles; one far centroid (an empty cluster) at least in each batch
CELLS = [
    ({"B": 2, "N": 1001, "K": 37, "D": 64}, "bf16"),
    ({"B": 1, "N": 333, "K": 130, "D": 128}, "f16"),
    ({"B": 3, "N": 517, "K": 5, "D": 256}, "bf16"),
]
PARAMS = [(name, cell, dtype) for name in ("naive", "fused", "hopper") for cell, dtype in CELLS]


@pytest.mark.gpu
@pytest.mark.parametrize(("name", "cell", "dtype"), PARAMS,
                         ids=[f"{n}-{'-'.join(map(str, c.values()))}-{d}" for n, c, d in PARAMS])  # fmt: skip
def test_schedule_passes_the_oracle_on_the_gpu(name: str, cell: dict, dtype: str, gpu_runner, record) -> None:
    cand = pipeline.Candidate.load(HERE / f"{name}.cake", plugins.registry().get("targets", "h200"))
    m = bench_candidate(cand, P, cell, dtype, gpu_runner, impl=f"cake:{name}", commit="test", timing=TIMING,
                        timeout_s=120)  # fmt: skip
    record("kmeans_iter", m)
    assert (m.status, m.correct) == ("ok", True), (m.status, m.error, m.oracle)
    # the centroids are fp32 sums in atomic order: judged in both untimed runs, then after timing
    assert len(m.oracle) == 3, m.oracle


@pytest.mark.gpu
def test_the_flash_kmeans_baseline_passes_the_oracle(gpu_runner, record) -> None:
    cell, dtype = CELLS[0]
    m = bench_baseline(P, cell, dtype, gpu_runner, timing=TIMING, commit="test", target="h200")
    if m.status == "unavailable":
        pytest.skip(m.error or "flash-kmeans is not installed")
    record("kmeans_iter", m)
    assert (m.status, m.correct) == ("ok", True), (m.status, m.error, m.oracle)
