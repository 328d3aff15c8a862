"""Adversarial evaluation (issue 12, item 7): candidates that cheat, and the defences that keep each out of
the ranking.

``tests/adversarial/*.cake`` holds one kmeans-assign candidate per cheat, each the smallest edit of a
committed schedule, its header saying what it does wrong and what catches it. Here:

* without a GPU: each file is that small edit; stage 2 (``cake verify --problem``) catches the ones it
  can, with the diagnostic named in :data:`STAGE_TWO`, and two pass every stage-2 gate (they must be
  caught on the GPU); stage 3's defences work through the real worker machinery on a scripted fake GPU
  (``adversarial_gpu.ScriptedGpu``): a run that differs from the run before on the same inputs is
  ``nondeterministic``, a median below the floor ``quarantined``, a hang a ``timeout`` after which the
  runner serves the next candidate; NaN and Inf are named, differing elements counted;
* ``cake run --from`` every file, as a user would (a subprocess): the run ends (exit 0), stage 2 records
  the ones it catches rejected, and none of those is reported best; without a GPU the two that pass stage 2
  are ranked by the cost model, which predicts both below the floor;
* on an H200 (``gpu``-marked, skipped cleanly without one): every adversarial file measured with
  :func:`~cake_core.loop.benchmark.bench_candidate` at the default cell ends failed (:data:`ON_THE_GPU`), and
  the honest Hopper schedule ends ``ok`` above the floor, also right after the endless one; ``cake run
  --bench-rejected`` over all of them and ``hopper.cake`` records every adversarial dispatch failed the same way
  and reports the honest kernel best.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import cake_core
from cake_core import cli, pipeline, plugins
from cake_core.cost.floor import floor_ms
from cake_core.loop.benchmark import STATUSES, bench_candidate, differing_elements, nonfinite_text
from cake_core.runtime.device import requires_gpu
from cake_core.runtime.plan import Plan, TensorSpec, Timing

HERE = Path(__file__).resolve().parent
ADVERSARIAL = HERE.parent / "adversarial"
SCHEDULES = Path(cake_core.__file__).resolve().parent / "problems" / "kmeans_assign" / "schedules"
TARGET = "h200"

#: the first error stage 2 reports for each file (``None``: it passes every stage-2 gate)
STAGE_TWO = {
    "oob_write": "CR108",  # static rules: an out-of-bounds store
    "endless": "CR122",  # static rules (protocol replay): a pipe stage taken and never released
    "unwritten_output": "CS009",  # interpreter gate: the oracle rejects `out`
    "stale_scratch": "CS002",  # interpreter gate: `c_sq` read, never written
    "zeros_only": "CS009",
    "nan_scores": "CS009",
    "uninit_smem": "CR127",  # static rules: a read of shared memory nothing writes
    "small_shapes_only": None,  # right at the gate's sizes (K <= 257), wrong at K = 1024
    "beats_floor": None,  # right at the gate's sizes (B <= 2), skips 30 of 32 batches at the default cell
}
#: what stage 3 records for each file at the default cell on an H200 (measured 2026-12-01,
#: bench/results/2026-12-01-h200-adversarial.json)
ON_THE_GPU = {
    "oob_write": {"fault"},  # CUDA_ERROR_ILLEGAL_ADDRESS; the next candidate runs in a fresh worker
    "endless": {"timeout"},
    "unwritten_output": {"error"},  # `out` never written is planned as an input: the worker refuses the run
    "stale_scratch": {"wrong"},
    "zeros_only": {"wrong"},
    "nan_scores": {"wrong"},
    # measured nondeterministic (17017 of 2097152 indices differed between two runs on the same inputs); two runs
    # that happen to agree leave it to the oracle
    "uninit_smem": {"nondeterministic", "wrong"},
    "small_shapes_only": {"wrong"},
    "beats_floor": {"wrong"},  # wrong on the check run already, so never timed: the floor decides after the check
}
FILES = sorted(STAGE_TWO)


def test_every_file_is_here_and_every_status_is_known() -> None:
    assert sorted(p.stem for p in ADVERSARIAL.glob("*.cake")) == FILES == sorted(ON_THE_GPU)
    assert set().union(*ON_THE_GPU.values()) <= set(STATUSES) - {"ok"}


@pytest.mark.parametrize("name", FILES)
def test_each_file_is_a_small_edit_of_a_committed_schedule(name: str) -> None:
    text = (ADVERSARIAL / f"{name}.cake").read_text()
    base = re.search(r"derived from (\w+)\.cake", text)
    assert base and "Caught by:" in text, "the header says what the file derives from and what catches it"
    code = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    original = (SCHEDULES / f"{base[1]}.cake").read_text().splitlines()
    assert {line for line in original if line.lstrip().startswith("#")} <= set(text.splitlines())  # comments kept
    original_code = [line for line in original if not line.lstrip().startswith("#")]
    changed = [d for d in difflib.unified_diff(original_code, code, lineterm="", n=0)
               if d[:1] in "+-" and not d.startswith(("+++", "---"))]  # fmt: skip
    assert 1 <= len(changed) <= 4, changed  # one or two lines edited, added or removed


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # nan_scores makes NaN on purpose
@pytest.mark.parametrize("name", FILES)
def test_stage_two_catches_what_it_can(name: str, capsys) -> None:
    rc = cli.main(["verify", str(ADVERSARIAL / f"{name}.cake"), "--target", TARGET, "--problem", "kmeans-assign",
                   "--json"])  # fmt: skip
    errors = [d for d in json.loads(capsys.readouterr().out) if d["severity"] == "error"]
    if STAGE_TWO[name] is None:
        # passes every stage-2 gate: only stage 3 on a GPU can catch it (test_adversarial_candidate_on_the_gpu)
        assert (rc, errors) == (0, [])
    else:
        assert rc == 1 and errors[0]["code"] == STAGE_TWO[name], errors[:1]


# -------------------------------------------------------------------------------- the defences, without a GPU

SMALL = {"B": 2, "N": 1000, "K": 100, "D": 128}


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """``(runner, say)``: a runner whose worker is ``adversarial_gpu.ScriptedGpu``; ``say(word)`` sets how
    it behaves from the next run on."""
    from cake_core.runtime.worker import GpuRunner

    script = tmp_path / "script"
    monkeypatch.syspath_prepend(str(HERE))  # the spawned worker imports the backend from here
    from adversarial_gpu import SCRIPT_ENV

    monkeypatch.setenv(SCRIPT_ENV, str(script))
    runner = GpuRunner(backend="adversarial_gpu:ScriptedGpu", check_driver=False, start_timeout_s=60)
    yield runner, script.write_text
    runner.close()


def _hopper() -> pipeline.Candidate:
    return pipeline.Candidate(pipeline.load(SCHEDULES / "hopper.cake"), plugins.registry().get("targets", TARGET))


def _bench(runner, **kw):
    reg = plugins.registry()
    problem = reg.get("problems", "kmeans-assign")
    floor = floor_ms(problem, SMALL, "bf16", reg.get("targets", TARGET))
    return bench_candidate(_hopper(), problem, SMALL, "bf16", runner, impl="cake:hopper", commit="test",
                           timing=Timing(warmup=1, reps=3), floor_ms=floor, **kw)  # fmt: skip


def test_an_honest_run_is_ok_and_records_the_floor(scripted) -> None:
    runner, say = scripted
    say("honest")
    m = _bench(runner)
    assert (m.status, m.correct, m.differing) == ("ok", True, 0), m.error
    assert 0 < m.floor_ms < 1.0 <= m.median_ms and len(m.oracle) == 2


def test_two_runs_that_differ_on_the_same_inputs_are_nondeterministic(scripted) -> None:
    runner, say = scripted
    say("flaky")
    m = _bench(runner)
    assert (m.status, m.correct, m.differing, m.median_ms) == ("nondeterministic", False, 1, None)
    assert m.error == "two runs on the same inputs differ bit for bit: 1 of 2000 elements of `out`"


def test_a_median_below_the_floor_is_quarantined_though_the_answer_is_right(scripted) -> None:
    runner, say = scripted
    say("fast")
    m = _bench(runner)
    assert (m.status, m.correct, m.median_ms) == ("quarantined", False, 1e-6)
    assert m.error.startswith("quarantined: beats the floor: measured 1e-06 ms, the least this cell can take on h200")
    assert m.oracle[-1].startswith("after timing: passed")  # the evidence is kept; the verdict is the floor's


def test_a_hang_is_a_timeout_and_the_runner_serves_the_next_candidate(scripted) -> None:
    runner, say = scripted
    say("hang")
    m = _bench(runner, timeout_s=5)
    assert (m.status, m.correct) == ("timeout", False) and "no result within 5 s" in m.error
    say("honest")
    after = _bench(runner)
    assert (after.status, after.correct) == ("ok", True)
    assert runner.workers_started == 2  # the hung worker was killed and replaced, once


def test_nan_and_inf_are_named() -> None:
    plan = Plan("p", {}, [TensorSpec("y", "f32", (4,), "output"), TensorSpec("s", "bf16", (2,), "output"),
                          TensorSpec("i", "i32", (2,), "output")], [])  # fmt: skip
    y = np.array([1.0, np.nan, np.inf, -np.inf], dtype=np.float32)
    s = np.array([0x7FC0, 0x3F80], dtype=np.uint16)  # bf16 NaN, 1.0
    assert nonfinite_text(plan, {"y": y, "s": s, "i": np.array([-1, 2], dtype=np.int32)}) == (
        "`y` holds 1 NaN and 2 Inf of 4 elements; `s` holds 1 NaN and 0 Inf of 2 elements")
    assert nonfinite_text(plan, {"y": np.zeros(4, dtype=np.float32)}) is None


def test_differences_are_counted_bit_for_bit() -> None:
    nan = np.array([np.nan, 0.0, -0.0], dtype=np.float32)
    assert differing_elements({"y": nan}, {"y": nan.copy()}) == {"y": 0}  # NaN equals itself bit for bit
    assert differing_elements({"y": nan}, {"y": np.array([np.nan, -0.0, -0.0], dtype=np.float32)}) == {"y": 1}
    assert differing_elements({"y": nan}, {}) == {"y": 3}


# -------------------------------------------------------------------------------- on an H200

DEFAULT = {"B": 32, "N": 65536, "K": 1024, "D": 128}


@pytest.fixture(scope="module")
def on_h200(gpu_runner):
    """The session's runner, where a cubin compiled for the h200 target runs on its GPU."""
    from cake_core.runtime.device import arch_runs_on

    arch = plugins.registry().get("targets", TARGET).nvrtc_arch
    if not arch_runs_on(arch, gpu_runner.device_info().compute_capability):
        pytest.skip(f"these candidates are compiled for {TARGET} ({arch}); this GPU cannot run them")
    return gpu_runner


def _measure_file(path: Path, runner, **kw):
    reg = plugins.registry()
    problem = reg.get("problems", "kmeans-assign")
    target = reg.get("targets", TARGET)
    cand = pipeline.Candidate(pipeline.load(path), target)
    return bench_candidate(cand, problem, DEFAULT, "bf16", runner, impl=f"cake:{path.stem}",
                           timing=Timing(warmup=2, reps=10), floor_ms=floor_ms(problem, DEFAULT, "bf16", target),
                           **kw)  # fmt: skip


@requires_gpu
@pytest.mark.parametrize("name", FILES)
def test_adversarial_candidate_on_the_gpu(name: str, on_h200, record) -> None:
    m = _measure_file(ADVERSARIAL / f"{name}.cake", on_h200, timeout_s=20)
    record("adversarial", m)
    print(f"{name}: {m.status}: {m.error}")
    assert not m.correct and m.status in ON_THE_GPU[name], (m.status, m.error, m.oracle)


@requires_gpu
def test_the_honest_kernel_is_ok_above_the_floor_after_an_endless_one(on_h200, record) -> None:
    hang = _measure_file(ADVERSARIAL / "endless.cake", on_h200, timeout_s=10)
    assert hang.status == "timeout"
    m = _measure_file(SCHEDULES / "hopper.cake", on_h200, timeout_s=120)
    record("adversarial", m)
    assert (m.status, m.correct, m.differing) == ("ok", True, 0), (m.status, m.error)
    assert m.median_ms > m.floor_ms


# -------------------------------------------------------------------------------- cake run --from, as a user would


def _cake_run(out: Path, *args: str, gpu: bool) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if not gpu:
        env["CUDA_VISIBLE_DEVICES"] = ""  # the CPU path, also on a machine with a GPU
    files = [str(ADVERSARIAL / f"{name}.cake") for name in FILES]
    cake = [sys.executable, "-c", "import sys; from cake_core.cli import main; sys.exit(main())"]  # the `cake` script
    return subprocess.run([*cake, "run", "kmeans-assign", "--target", TARGET, "--from", *files, *args, "--out", str(out)],
                          capture_output=True, text=True, env=env, timeout=900)  # fmt: skip


def _ledger(out: Path) -> sqlite3.Connection:
    db = sqlite3.connect(out / "ledger.sqlite")
    db.row_factory = sqlite3.Row
    return db


def test_cake_run_from_every_file_without_a_gpu(tmp_path: Path) -> None:
    done = _cake_run(tmp_path, gpu=False)
    assert done.returncode == 1, done.stderr  # every one refused: the run ends, with no best kernel
    assert "no candidate passed stage 2" in done.stdout
    record = json.loads((tmp_path / "run.json").read_text())
    assert record["summary"]["stages"]["benchmark"].startswith("skipped: no GPU here")
    status = {c["name"]: (c["status"], c["gate"]) for c in record["candidates"]}
    assert sorted(status) == FILES  # every file went through the run: none stopped it
    gates = {"CR": "verify", "CS": "interp"}
    for name, code in STAGE_TWO.items():
        if code is None:
            # passes the verifier and the interpreter gate (small shapes), but the cost model's estimate at the
            # run's cell is below the floor no implementation can beat: refused by the floor gate
            assert status[name] == ("rejected", "floor")
        else:
            assert status[name] == ("rejected", gates[code[:2]])
            first = _ledger(tmp_path).execute("SELECT d.code FROM diagnostics d JOIN candidates c ON c.id = d.candidate "
                                              "WHERE c.name = ? AND d.severity = 'error' ORDER BY d.stage DESC, d.seq",
                                              (name,)).fetchone()  # fmt: skip
            assert first["code"] == code
    assert record["summary"]["best"] is None
    reg = plugins.registry()
    floor = floor_ms(reg.get("problems", "kmeans-assign"), DEFAULT, "bf16", reg.get("targets", TARGET))
    predicted = {c["name"]: c["predicted_ms"] for c in record["candidates"]}
    assert predicted["beats_floor"] < floor and predicted["small_shapes_only"] < floor


@requires_gpu
def test_cake_run_on_the_gpu(on_h200, tmp_path: Path) -> None:
    done = _cake_run(tmp_path, str(SCHEDULES / "hopper.cake"), "--bench-rejected", "--gpu-timeout", "20", gpu=True)
    assert done.returncode == 0, done.stderr
    print(done.stdout)
    record = json.loads((tmp_path / "run.json").read_text())
    dispatched = {r["name"]: (r["status"], r["correct"]) for r in _ledger(tmp_path).execute(
        "SELECT c.name, d.status, d.correct FROM dispatches d JOIN candidates c ON c.id = d.candidate")}  # fmt: skip
    assert sorted(dispatched) == sorted([*FILES, "hopper"])  # every one dispatched, none stopped the run
    for name in FILES:
        assert dispatched[name][0] in ON_THE_GPU[name] and not dispatched[name][1], (name, dispatched[name])
    assert dispatched["hopper"] == ("ok", 1)
    assert record["summary"]["best"] == "hopper" and record["summary"]["measured"] is True
