"""Problems' baselines through the GPU worker (marked ``gpu``; skipped cleanly without a driver, or without
the modules a baseline requires): kmeans-assign's, flash-kmeans with ||x||^2 given; kmeans-update's,
flash-kmeans's sorted update; knn's and knn-ip's, torch's ``q @ x.T`` + ``topk`` with fp32 scores.

* every baseline at a small cell (kmeans-assign's in bf16 with sizes multiples of 16: Triton compiles
  the autotuning configurations once for it and the reference cell; the others ragged, in bf16 and f16),
  and kmeans-assign's at its reference cell: the baseline passes the oracle before and after timing and
  every sample is recorded;
* side by side: a Cake schedule and the baseline run in one worker, one after the other, and the
  schedule still runs after the baseline (torch and the driver API share the worker's context).

With ``CAKE_RESULTS_DIR`` set, every measurement is also written there (tests/conftest.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import cake_core
from cake_core import pipeline, plugins
from cake_core.loop.baseline import bench_baseline
from cake_core.loop.benchmark import bench_candidate
from cake_core.problems.kmeans_assign.baseline import FLASH_KMEANS
from cake_core.problems.kmeans_assign.cells import DEFAULT_CELL
from cake_core.problems.problem import baseline_of
from cake_core.runtime.device import requires_gpu_marks
from cake_core.runtime.plan import Timing

pytestmark = requires_gpu_marks()
needs_flash_kmeans = pytest.mark.skipif(bool(FLASH_KMEANS.missing()),
                                        reason=f"not installed: {', '.join(FLASH_KMEANS.missing())}")  # fmt: skip

SMALL = {"B": 16, "N": 4096, "K": 1024, "D": 128}
#: (problem, cell, element type): a small cell per baseline, ragged except kmeans-assign's
SMALL_CELLS = [
    ("kmeans-assign", SMALL, "bf16"),
    ("kmeans-update", {"B": 3, "N": 1001, "K": 37, "D": 64}, "bf16"),
    ("kmeans-update", {"B": 2, "N": 517, "K": 130, "D": 256}, "f16"),
    ("knn", {"B": 2, "M": 333, "N": 5003, "D": 128, "K": 10}, "f16"),
    ("knn", {"B": 1, "M": 77, "N": 1001, "D": 256, "K": 100}, "bf16"),
    ("knn-ip", {"B": 3, "M": 100, "N": 2011, "D": 64, "K": 16}, "bf16"),
    ("knn-ip", {"B": 1, "M": 257, "N": 999, "D": 128, "K": 1}, "f16"),
]
HOPPER = Path(cake_core.__file__).resolve().parent / "problems" / "kmeans_assign" / "schedules" / "hopper.cake"


def _problem():
    return plugins.registry().get("problems", "kmeans-assign")


@pytest.mark.parametrize(("name", "cell", "dtype"), SMALL_CELLS,
                         ids=[f"{n}-{'-'.join(map(str, c.values()))}-{d}" for n, c, d in SMALL_CELLS])  # fmt: skip
def test_baseline_at_a_small_cell(name: str, cell: dict, dtype: str, gpu_runner, record) -> None:
    problem = plugins.registry().get("problems", name)
    baseline = baseline_of(problem)
    assert baseline is not None, f"`{name}` names no baseline"
    if baseline.missing():
        pytest.skip(f"not installed: {', '.join(baseline.missing())}")
    m = bench_baseline(problem, cell, dtype, gpu_runner, timing=Timing(warmup=3, reps=20), target="h200")
    record("baseline", m)
    assert m.status == "ok" and m.correct, (m.status, m.error, m.oracle)
    assert m.impl == f"baseline:{baseline.name}" and len(m.samples) == 20 and all(s > 0 for s in m.samples)
    assert [line.split(":")[0] for line in m.oracle] == ["before timing", "after timing"]


@needs_flash_kmeans
def test_baseline_at_the_reference_cell(gpu_runner, record) -> None:
    m = bench_baseline(_problem(), DEFAULT_CELL.shape, DEFAULT_CELL.dtype, gpu_runner, target="h200")
    record("baseline", m)
    assert m.status == "ok" and m.correct, (m.status, m.error, m.oracle)
    assert len(m.samples) == Timing().reps and m.median_ms is not None and m.median_ms > 0
    assert all("cuda-fp64-reference" in line for line in m.oracle)  # the oracle's GPU path at this size
    print(f"\nbaseline:flash-kmeans at {DEFAULT_CELL.label}: median {m.median_ms:.4f} ms, {m.tflops:.1f} TFLOP/s")


@needs_flash_kmeans
def test_schedule_and_baseline_side_by_side(gpu_runner, record) -> None:
    if "H200" not in gpu_runner.device_info().name and "H100" not in gpu_runner.device_info().name:
        pytest.skip("the Hopper schedule is compiled for h200")
    gpu_runner.start()
    pid = gpu_runner.worker_pid
    timing = Timing(warmup=3, reps=20)
    cand = pipeline.Candidate(pipeline.load(HOPPER), plugins.registry().get("targets", "h200"))
    before = bench_candidate(cand, _problem(), SMALL, "bf16", gpu_runner, impl="cake:hopper", timing=timing)
    base = bench_baseline(_problem(), SMALL, "bf16", gpu_runner, timing=timing, target="h200")
    after = bench_candidate(cand, _problem(), SMALL, "bf16", gpu_runner, impl="cake:hopper", timing=timing)
    for m in (before, base, after):
        record("baseline-side-by-side", m)
        assert m.status == "ok" and m.correct, (m.impl, m.status, m.error)
    assert gpu_runner.worker_pid == pid  # one worker throughout
