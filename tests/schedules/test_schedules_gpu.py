"""The committed K-Means schedules on a GPU (marked ``gpu``; skipped cleanly without one).

* every schedule on every check cell of kmeans-assign passes the full oracle, before and after
  timing, and its cubin holds the instructions the schedule claims;
* the Ampere schedule's constant sweep: every variant the verifier accepts passes the oracle on
  (1, 65521, 1024, 128) and (8, 16384, 100, 128);
* a faulting and an endless kernel are recorded as failures and the next kernel runs in a new worker.

With ``CAKE_RESULTS_DIR`` set, every measurement is also written there (tests/conftest.py).
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from cake_core import plugins
from cake_core.ir.sema import check_module
from cake_core.ir.transform import set_consts
from cake_core.lower import build as b
from cake_core.loop.benchmark import bench_candidate
from cake_core.problems.kmeans_assign.cells import CHECK_CELLS
from cake_core.runtime.device import requires_gpu_marks
from cake_core.runtime.plan import Timing

pytestmark = requires_gpu_marks()

SCHEDULES = Path(b.__file__).resolve().parents[1] / "problems" / "kmeans_assign" / "schedules"
TARGET = "h200"
SWEEP_CELLS = ({"B": 1, "N": 65521, "K": 1024, "D": 128}, {"B": 8, "N": 16384, "K": 100, "D": 128})


def _problem():
    return plugins.registry().get("problems", "kmeans-assign")


def _checked(name: str, values: dict | None = None):
    module = b.load(SCHEDULES / f"{name}.cake").module
    if values:
        module = set_consts(module, values, kernel="assign")
    return check_module(module, b.primitives(), b.target(TARGET))


@pytest.fixture(scope="module")
def on_h200(gpu_runner):
    info = gpu_runner.device_info()
    if "H200" not in info.name and "H100" not in info.name:
        pytest.skip(f"these schedules are compiled for {TARGET}; this GPU is {info.name}")
    return gpu_runner


@pytest.mark.parametrize("cell", CHECK_CELLS, ids=[c.label for c in CHECK_CELLS])
@pytest.mark.parametrize("schedule", ["hopper", "hopper_overlap", "ampere", "naive"])
def test_schedule_passes_the_oracle(schedule, cell, on_h200, record) -> None:
    timing = Timing(warmup=1, reps=3) if schedule == "naive" else Timing(warmup=3, reps=20)
    m = bench_candidate(_checked(schedule), _problem(), b.target(TARGET), cell.shape, cell.dtype, on_h200,
                        impl=f"cake:{schedule}", timing=timing, timeout_s=300)  # fmt: skip
    record("schedules", m)
    assert m.status == "ok" and m.correct, (m.status, m.error, m.oracle)
    assert len(m.oracle) == 2  # checked before and after timing
    assert m.sass is not None and not m.sass["missing"], m.sass


def _variants():
    for bm, bn, bk, s, warps in itertools.product((64, 128), (64, 128), (32, 64), (2, 3, 4), (4, 8)):
        wm, wn = (2, 2) if warps == 4 else (4, 2)
        yield {"BM": bm, "BN": bn, "BK": bk, "S": s, "WM": wm, "WN": wn}


VARIANTS = list(_variants())


@pytest.mark.parametrize("values", VARIANTS, ids=["-".join(f"{k}{v}" for k, v in v.items()) for v in VARIANTS])
def test_ampere_sweep_variant(values, on_h200, record) -> None:
    from cake_core.verify.runner import verify

    checked = _checked("ampere", values)
    label = "cake:ampere[" + ",".join(f"{k}={v}" for k, v in values.items()) + "]"
    errors = [d for d in verify(checked.module, b.target(TARGET)) if d.is_error]
    if errors:
        record("sweep", {"impl": label, "status": "rejected-by-verifier", "errors": [d.message for d in errors]})
        pytest.skip(f"rejected by the verifier: {errors[0].code} {errors[0].message}")
    for shape in SWEEP_CELLS:
        m = bench_candidate(checked, _problem(), b.target(TARGET), shape, "bf16", on_h200, impl=label, timing=None)
        record("sweep", m)
        assert m.status == "ok" and m.correct, (label, shape, m.status, m.error)


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


@pytest.mark.parametrize(("label", "text", "status", "timeout"),
                         [("faulting", FAULTING, "fault", 60), ("endless", ENDLESS, "timeout", 15)])  # fmt: skip
def test_broken_kernel_is_recorded_and_the_next_runs(label, text, status, timeout, on_h200, record) -> None:
    tgt = b.target(TARGET)
    bad = check_module(b.load_text(text, f"{label}.cake").module, b.primitives(), tgt)
    assert bad.ok, [d.message for d in bad.diagnostics]
    small = {"B": 2, "N": 1000, "K": 100, "D": 128}
    started = on_h200.workers_started
    m = bench_candidate(bad, _problem(), tgt, small, "bf16", on_h200, impl=f"cake:{label}", timing=None,
                        timeout_s=timeout)  # fmt: skip
    record("faults", m)
    assert m.status == status and not m.correct, (m.status, m.error)
    after = bench_candidate(_checked("ampere"), _problem(), tgt, small, "bf16", on_h200,
                            impl="cake:ampere (after)", timing=None)  # fmt: skip
    record("faults", after)
    assert after.status == "ok" and after.correct
    assert on_h200.workers_started == started + 1  # the broken worker was replaced, once


def test_planted_off_by_one_fails_on_the_gpu_too(on_h200, record) -> None:
    """The interpreter test's planted bug (x rows read one row late) must fail the oracle on the GPU."""
    text = (SCHEDULES / "ampere.cake").read_text()
    planted = text.replace("cp.async xs <- x[b, t * BM : +BM, :]", "cp.async xs <- x[b, t * BM + 1 : +BM, :]")
    assert planted != text
    tgt = b.target(TARGET)
    checked = check_module(b.load_text(planted, "ampere_off_by_one.cake").module, b.primitives(), tgt)
    assert checked.ok
    m = bench_candidate(checked, _problem(), tgt, {"B": 2, "N": 1000, "K": 300, "D": 128}, "bf16", on_h200,
                        impl="cake:ampere(off-by-one)", timing=None)  # fmt: skip
    record("planted", m)
    assert m.status == "wrong" and not m.correct, (m.status, m.oracle)
