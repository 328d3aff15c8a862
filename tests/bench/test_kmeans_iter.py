"""bench/kmeans_iter.py without a GPU: its table reports the lowest run's ratio to the baseline of the same run
and the best fraction of the compute floor, says `unavailable` and `WRONG` plainly, and bad input or a
machine without torch and CUDA is one error line."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _tool():
    sys.path.insert(0, str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location("kmeans_iter_bench", ROOT / "bench" / "kmeans_iter.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def _rec(impl: str, run: int, ms: float | None, correct: bool | None = True, status: str = "ok") -> dict:
    return {"shape": {"B": 1, "N": 8, "K": 2, "D": 64}, "dtype": "bf16", "impl": impl, "run": run, "median_ms": ms,
            "correct": correct, "status": status, "fraction_of_compute_floor": 0.5 / ms if ms else None}  # fmt: skip


def test_the_ratio_is_the_lowest_runs_against_the_same_runs_baseline() -> None:
    records = [_rec("cake:fused", 0, 1.0), _rec("baseline:flash-kmeans", 0, 2.0),
               _rec("cake:fused", 1, 1.5), _rec("baseline:flash-kmeans", 1, 2.2)]  # fmt: skip
    fused, base = _tool().table(records)
    assert fused["impl"] == "cake:fused" and fused["runs_ms"] == [1.0, 1.5] and fused["verdict"] == "ok"
    assert fused["ratio"] == 2.2 / 1.5 and fused["fraction_of_compute_floor"] == 0.5
    assert base["ratio"] == 1.0


def test_an_unavailable_baseline_and_a_wrong_impl_are_said_plainly() -> None:
    records = [_rec("cake:fused", 0, 1.0, correct=False),
               _rec("baseline:flash-kmeans", 0, None, correct=None, status="unavailable")]  # fmt: skip
    fused, base = _tool().table(records)
    assert (fused["verdict"], fused["ratio"]) == ("WRONG", None)
    assert (base["verdict"], base["runs_ms"], base["fraction_of_compute_floor"]) == ("unavailable", [], None)


def test_an_unknown_schedule_is_one_error_line(capsys) -> None:
    assert _tool().main(["--schedules", "fused,no-such-schedule"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: no schedule `no-such-schedule`")


def test_without_torch_and_a_gpu_it_is_one_error_line(capsys, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # importing it fails, as where it is not installed
    assert _tool().main(["--schedules", "fused"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: this benchmark needs torch with a CUDA GPU")


def test_bad_counts_and_budgets_are_one_error_line(capsys) -> None:
    for argv in (["--jobs", "0"], ["--reps", "0"], ["--budget-ms", "0"]):
        assert _tool().main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: --jobs, --reps and --runs"), argv
