"""The committed K-Means schedules on a GPU (the GPU tests are marked ``gpu`` and skipped cleanly
without one).

* every schedule on every check cell of kmeans-assign passes the full oracle, before and after
  timing, and its cubin holds the instructions the schedule claims;
* the Ampere schedule's constant sweep: every variant the verifier accepts passes the oracle on
  (1, 65521, 1024, 128) and (8, 16384, 100, 128);
* a faulting and an endless kernel are recorded as failures and the next kernel runs in a new worker.

A verifier rejection of a committed schedule or of a sweep variant is a failure, never a skip: one
test without a GPU checks that the verifier accepts every sweep variant.

With ``CAKE_RESULTS_DIR`` set, every measurement is also written there (tests/conftest.py).
"""

from __future__ import annotations

import pytest

from cake_core import pipeline, plugins
from cake_core.loop.benchmark import bench_candidate
from cake_core.problems.kmeans_assign.cells import AMPERE_SWEEP, CHECK_CELLS, SCHEDULES, ampere_variant
from cake_core.runtime.device import requires_gpu
from cake_core.runtime.plan import Timing

TARGET = "h200"
SWEEP_CELLS = ({"B": 1, "N": 65521, "K": 1024, "D": 128}, {"B": 8, "N": 16384, "K": 100, "D": 128})


def _problem():
    return plugins.registry().get("problems", "kmeans-assign")


def _target():
    return plugins.registry().get("targets", TARGET)


def _candidate(name: str, values: dict | None = None) -> pipeline.Candidate:
    """A committed schedule (with its constants set to ``values``) as a pipeline candidate for h200."""
    if values:
        assert name == "ampere", name
        return pipeline.Candidate(pipeline.Source(*ampere_variant(values)), _target())
    return pipeline.Candidate(pipeline.load(SCHEDULES / f"{name}.cake"), _target())


def _text_candidate(text: str, file: str) -> pipeline.Candidate:
    cand = pipeline.Candidate(pipeline.load_text(text, file), _target())
    assert cand.check().ok, [d.message for d in cand.check().diagnostics]
    return cand


@pytest.fixture(scope="module")
def on_h200(gpu_runner):
    info = gpu_runner.device_info()
    if "H200" not in info.name and "H100" not in info.name:
        pytest.skip(f"these schedules are compiled for {TARGET}; this GPU is {info.name}")
    return gpu_runner


@requires_gpu
@pytest.mark.parametrize("cell", CHECK_CELLS, ids=[c.label for c in CHECK_CELLS])
@pytest.mark.parametrize("schedule", ["hopper", "hopper_overlap", "ampere", "naive"])
def test_schedule_passes_the_oracle(schedule, cell, on_h200, record) -> None:
    timing = Timing(warmup=1, reps=3) if schedule == "naive" else Timing(warmup=3, reps=20)
    m = bench_candidate(_candidate(schedule), _problem(), cell.shape, cell.dtype, on_h200,
                        impl=f"cake:{schedule}", timing=timing, timeout_s=300)  # fmt: skip
    record("schedules", m)
    assert m.status == "ok" and m.correct, (m.status, m.error, m.oracle)
    assert len(m.oracle) == 2  # checked before and after timing
    assert m.sass is not None and not m.sass["missing"], m.sass


VARIANTS = list(AMPERE_SWEEP)


@requires_gpu
@pytest.mark.parametrize("values", VARIANTS, ids=["-".join(f"{k}{v}" for k, v in v.items()) for v in VARIANTS])
def test_ampere_sweep_variant(values, on_h200, record) -> None:
    cand = _candidate("ampere", values)
    label = "cake:ampere[" + ",".join(f"{k}={v}" for k, v in values.items()) + "]"
    errors = [d for d in cand.verify().diagnostics if d.is_error]
    if errors:
        record("sweep", {"impl": label, "status": "rejected-by-verifier", "errors": [d.message for d in errors]})
    assert not errors, f"the verifier rejects a variant it accepted: {errors[0].code} {errors[0].message}"
    for shape in SWEEP_CELLS:
        m = bench_candidate(cand, _problem(), shape, "bf16", on_h200, impl=label, timing=None)
        record("sweep", m)
        assert m.status == "ok" and m.correct, (label, shape, m.status, m.error)


def test_every_sweep_variant_passes_the_verifier() -> None:
    rejected = {}
    for values in VARIANTS:
        errors = [d for d in _candidate("ampere", values).verify().diagnostics if d.is_error]
        if errors:
            rejected[str(values)] = f"{errors[0].code} {errors[0].message}"
    assert not rejected, rejected


FAULTING = """
# Deliberately broken: an unmasked store 2^28 rows past `out`. Never verified.
kernel broken(x: global T[B, N, D], c: global T[B, K, D], out: global i32[B, N])
  domain T in {bf16, f16}, B >= 1, N >= 1, K >= 1, D in {64, 128, 256}
  grid (t, b) over (cdiv(N, 128), B)
  cta warps 4
  role all warps 0..4:
    reg i: i32[128] layout rows
    fill i, value=0
    store out[b, t * 128 + 268435456 : +128] <- i
"""

ENDLESS = """
# Deliberately broken: waits on a barrier phase nothing completes. Never verified.
kernel endless(x: global T[B, N, D], c: global T[B, K, D], out: global i32[B, N])
  domain T in {bf16, f16}, B >= 1, N >= 1, K >= 1, D in {64, 128, 256}
  grid (t, b) over (cdiv(N, 128), B)
  cta warps 4
  barrier never: mbarrier count 1
  role all warps 0..4:
    reg i: i32[128] layout rows
    fill i, value=0
    mbarrier.wait never, parity=0
    store out[b, t * 128 : +128] <- i, oob=skip
"""


@requires_gpu
@pytest.mark.parametrize(("label", "text", "status", "timeout"),
                         [("faulting", FAULTING, "fault", 60), ("endless", ENDLESS, "timeout", 15)])  # fmt: skip
def test_broken_kernel_is_recorded_and_the_next_runs(label, text, status, timeout, on_h200, record) -> None:
    bad = _text_candidate(text, f"{label}.cake")
    small = {"B": 2, "N": 1000, "K": 100, "D": 128}
    started = on_h200.workers_started
    m = bench_candidate(bad, _problem(), small, "bf16", on_h200, impl=f"cake:{label}", timing=None,
                        timeout_s=timeout)  # fmt: skip
    record("faults", m)
    assert m.status == status and not m.correct, (m.status, m.error)
    after = bench_candidate(_candidate("ampere"), _problem(), small, "bf16", on_h200,
                            impl="cake:ampere (after)", timing=None)  # fmt: skip
    record("faults", after)
    assert after.status == "ok" and after.correct
    assert on_h200.workers_started == started + 1  # the broken worker was replaced, once


@requires_gpu
def test_planted_off_by_one_fails_on_the_gpu_too(on_h200, record) -> None:
    """The interpreter test's planted bug (x rows read one row late) must fail the oracle on the GPU."""
    text = (SCHEDULES / "ampere.cake").read_text()
    planted = text.replace("cp.async xs <- x[b, t * BM : +BM, :]", "cp.async xs <- x[b, t * BM + 1 : +BM, :]")
    assert planted != text
    m = bench_candidate(_text_candidate(planted, "ampere_off_by_one.cake"), _problem(),
                        {"B": 2, "N": 1000, "K": 300, "D": 128}, "bf16", on_h200, impl="cake:ampere(off-by-one)",
                        timing=None)  # fmt: skip
    record("planted", m)
    assert m.status == "wrong" and not m.correct, (m.status, m.oracle)
