"""``blackwell.cake`` on a B200, for its owners: every check cell of kmeans-assign and small ragged shapes,
fresh random inputs, outputs poisoned before each run and judged by the problem's oracle before and after
timing (``bench_candidate``), the cubin's instructions checked against what the primitives claim. Marked
``gpu``; skipped without a driver and on any GPU that is not compute capability 10.0 (an H200 cannot load
sm_100a code). It has never run: no B200 was available when it was written (``ran: false``)."""

from __future__ import annotations

import pytest
from cake_core import pipeline, plugins
from cake_core.loop.benchmark import bench_candidate
from cake_core.problems.kmeans_assign.cells import CHECK_CELLS
from cake_core.runtime.device import driver_status, requires_gpu
from cake_core.runtime.plan import Timing

from cake_blackwell import SCHEDULES

RAGGED = [({"B": 2, "N": 300, "K": 37, "D": 64}, "bf16"), ({"B": 1, "N": 129, "K": 130, "D": 128}, "f16"),
          ({"B": 3, "N": 1, "K": 257, "D": 256}, "bf16")]  # fmt: skip
CELLS = RAGGED + [(c.shape, c.dtype) for c in CHECK_CELLS]
IDS = ["-".join(f"{k}{v}" for k, v in s.items()) + f"-{d}" for s, d in CELLS]


@pytest.fixture(scope="module")
def on_b200():
    ok, reason = driver_status()
    if not ok:
        pytest.skip(f"no NVIDIA driver here: {reason}")
    from cake_core.runtime.worker import GpuRunner

    with GpuRunner() as runner:
        info = runner.device_info()
        if tuple(info.compute_capability) != (10, 0):
            cc = "".join(map(str, info.compute_capability))
            pytest.skip(f"blackwell.cake is compiled for sm_100a; this GPU is {info.name} (sm_{cc})")
        yield runner


@requires_gpu
@pytest.mark.parametrize(("shape", "dtype"), CELLS, ids=IDS)
def test_blackwell_passes_the_oracle_on_a_b200(shape, dtype, on_b200) -> None:
    reg = plugins.registry()
    cand = pipeline.Candidate(pipeline.load(SCHEDULES / "blackwell.cake"), reg.get("targets", "b200"))
    m = bench_candidate(cand, reg.get("problems", "kmeans-assign"), shape, dtype, on_b200, impl="cake:blackwell",
                        timing=Timing(warmup=2, reps=10), timeout_s=300)  # fmt: skip
    assert m.status == "ok" and m.correct, (m.status, m.error, m.oracle)
    assert len(m.oracle) == 2  # checked before and after timing
    assert m.sass is not None and not m.sass["missing"], m.sass
