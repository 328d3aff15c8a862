"""bench/kmeans_update.py without a GPU: its command line (bad input is one error line and exit 2, before
torch is imported), its cells, the shape of its records and its table of lowest-run ratios."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from cake_core import plugins
from cake_core.problems.problem import Cell, validate_cell

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def ku():
    sys.path.insert(0, str(BENCH))
    try:
        yield importlib.import_module("kmeans_update")
    finally:
        sys.path.remove(str(BENCH))


class _Report:
    def __init__(self, passed: bool) -> None:
        self.passed = passed

    def summary(self) -> str:
        return "passed" if self.passed else "FAILED: 1 of 9"


SHAPE = {"B": 1, "N": 7000, "K": 200, "D": 64}
CTX = {"problem": plugins.registry().get("problems", "kmeans-update"), "cell": Cell(SHAPE, "bf16"), "gpu": "GPU",
       "commit": "abc"}  # fmt: skip


def test_defaults_resolve_the_schedules_to_files(ku) -> None:
    args = ku.parse([])
    assert args.runs == 3 and args.impls == list(ku.IMPLS) and args.dtypes == ["bf16", "f16"]
    assert all(name.startswith("cake:") and path.is_file() for name, path in args.schedules.items())
    assert ku.parse(["--impls", "torch", "--schedules", "nope"]).schedules == {}  # no cake: not resolved


@pytest.mark.parametrize(("argv", "says"), [
    (["--runs", "0"], "--runs must be at least 1"),
    (["--reps", "-3"], "--reps must be at least 1"),
    (["--jobs", "0"], "--jobs must be at least 1"),
    (["--schedules", "nope"], "no schedule `nope`"),
    (["--impls", "cake,faiss"], "--impls takes some of"),
    (["--dtypes", "f32"], "--dtypes takes some of"),
    (["--cells", "tiny"], "--cells is `all` or `reference`"),
    (["--fk-block-n", "100"], "powers of two"),
    (["--fk-block-n", "a,b"], "takes integers"),
    (["--runs", "x"], "invalid int value"),
    (["--bogus"], "unrecognized arguments"),
])  # fmt: skip
def test_bad_input_is_one_error_line(ku, capsys, argv: list[str], says: str) -> None:
    assert ku.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and says in err[0], err


def test_cells_are_the_reference_then_four_shapes_in_both_types_all_in_the_domain(ku) -> None:
    problem = plugins.registry().get("problems", "kmeans-update")
    every = ku.cells("all", ["bf16", "f16"])
    assert len(every) == 10 and ku.cells("reference", ["f16"]) == [(problem.default_cell.shape, "f16")]
    for shape, dtype in every:
        validate_cell(problem, shape, dtype)
    assert any(s["N"] % 128 and s["K"] % 128 for s, _ in every)  # ragged points and clusters
    assert {s["D"] for s, _ in every} == {64, 128, 256}


def test_a_record_carries_every_field_and_its_verdict(ku) -> None:
    rec = ku.record(CTX, "torch", 1, [2.0, 1.0, 3.0], _Report(True))
    assert set(ku.FIELDS) <= set(rec) and rec["problem"] == "kmeans-update" and rec["shape"] == SHAPE
    assert (rec["median_ms"], rec["correct"], rec["status"], rec["run"], rec["dtype"]) == (2.0, True, "ok", 1, "bf16")
    assert rec["gbps"] == pytest.approx(CTX["problem"].min_bytes(SHAPE, "bf16") / 2e-3 / 1e9)
    wrong = ku.record(CTX, "cake:atomic", 0, [1.0], _Report(False))
    assert (wrong["correct"], wrong["status"], wrong["oracle"]) == (False, "wrong", "FAILED: 1 of 9")
    gone = ku.record(CTX, "flash-kmeans", 0, [], None, status="unavailable", error="unavailable: not installed")
    assert set(ku.FIELDS) <= set(gone) and (gone["median_ms"], gone["correct"], gone["gbps"]) == (None, None, None)


def test_the_table_reports_the_lowest_runs_ratio_to_flash_kmeans(ku) -> None:
    recs = [ku.record(CTX, impl, run, [ms], _Report(ok))
            for impl, run, ms, ok in [("flash-kmeans", 0, 2.0, True), ("flash-kmeans", 1, 1.0, True),
                                      ("cake:atomic", 0, 0.5, True), ("cake:atomic", 1, 0.8, True),
                                      ("torch", 0, 4.0, True), ("torch", 1, 4.0, False)]]  # fmt: skip
    lines = {line.split()[5]: line for line in ku.table(recs)[1:]}  # after B=, N=, K=, D= and the type
    assert "1.25x lowest" in lines["cake:atomic"]  # run 1: 1.0 / 0.8 (run 0 gives 4x)
    assert "0.25x lowest" in lines["torch"] and lines["torch"].endswith("ok/wrong")
    assert "1.00x lowest" in lines["flash-kmeans"]


@pytest.mark.parametrize(("why", "status"), [("unavailable: flash-kmeans 0.3.1 is not installed", "unavailable"),
                                             ("unsupported: K=4093 is outside the domain", "unsupported"),
                                             ("RuntimeError: cuLaunchKernel: 700", "error")])  # fmt: skip
def test_an_implementation_that_cannot_run_is_recorded_with_why(ku, why: str, status: str) -> None:
    rec = ku._one(CTX, "cake:privatized", 2, why, judge=None, args=None, flush=None)
    assert set(ku.FIELDS) <= set(rec) and (rec["status"], rec["error"], rec["run"]) == (status, why, 2)
    assert rec["correct"] is None and rec["median_ms"] is None
