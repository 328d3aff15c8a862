"""bench/knn.py without a GPU: its command line (defaults, one error line for bad input), the records it
writes and the table it prints."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from cake_core.problems.knn import BENCH_CELLS, KNN, KNN_IP

ROOT = Path(__file__).resolve().parents[2]


def _tool() -> SimpleNamespace:
    sys.path.insert(0, str(ROOT / "bench"))  # as `python bench/knn.py` has it
    return SimpleNamespace(**runpy.run_path(str(ROOT / "bench" / "knn.py"), run_name="knn_bench"))


def test_defaults_cover_every_cell_both_metrics_and_the_committed_schedule() -> None:
    args = _tool().parse_args([])
    assert args.cell_list == list(BENCH_CELLS) and args.metric_list == ["l2", "ip"]
    assert args.impl_list == ["torch", "torch-fp32"]
    # `auto`: per cell the first of the register-list and the shared-list split schedules that takes it
    for metric in ("l2", "ip"):
        labels = [[label for label, _ in g] for g in args.schedule_paths[metric]]
        assert labels == [["hopper_split", "hopper_split_big"]]
    assert args.schedule_paths["l2"][0][1][1] != args.schedule_paths["ip"][0][1][1]  # each metric's own file
    assert args.cell_budget_s == 12.0 and args.compile_workers >= 1
    assert all(path.exists() for groups in args.schedule_paths.values() for g in groups for _, path in g)
    named = _tool().parse_args(["--schedules", "hopper", "--ip-schedules", "auto,hopper"])
    assert [[label for label, _ in g] for g in named.schedule_paths["l2"]] == [["hopper"]]
    assert len(named.schedule_paths["ip"]) == 2
    picked = _tool().parse_args(["--cells", "0,3", "--metrics", "ip", "--impls", "none", "--schedules", ""])
    assert picked.cell_list == [BENCH_CELLS[0], BENCH_CELLS[3]] and picked.impl_list == []


@pytest.mark.parametrize("argv,words", [
    (["--cells", "7"], "--cells takes `all` or indices 0..6"),
    (["--cells", "first"], "--cells takes"),
    (["--metrics", "cosine"], "--metrics takes l2 and/or ip"),
    (["--impls", "faiss"], "--impls takes torch, torch-fp32 or none"),
    (["--runs", "0"], "--runs, --reps and --compile-workers must be at least 1"),
    (["--cell-budget-s", "0"], "--cell-budget-s positive"),
    (["--schedules", "no_such_schedule"], "no schedule file no_such_schedule"),
])  # fmt: skip
def test_bad_input_is_one_error_line(argv, words, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        _tool().parse_args(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert words in err[-1] and "Traceback" not in "\n".join(err)


class _Report:
    def __init__(self, passed: bool) -> None:
        self.passed = passed

    def summary(self) -> str:
        return "passed" if self.passed else "FAILED"


def test_records_and_table() -> None:
    tool = _tool()
    cell = BENCH_CELLS[0]
    common = {"gpu": "H200", "commit": "abc", "date": "2026-12-02"}
    recs = [
        tool.make_record(KNN, cell, "torch", 0, [80.0, 90.0, 85.0], _Report(True), **common),
        tool.make_record(KNN, cell, "torch-fp32", 0, [100.0], _Report(True), **common),
        tool.make_record(KNN, cell, "cake:fused_topk", 0, [20.0, 22.0], _Report(False), **common),
        tool.make_record(KNN_IP, cell, "cake:x", 0, [], None, status="unsupported", error="K=100", **common),
    ]
    r = recs[0]
    assert {k: r[k] for k in ("problem", "dtype", "impl", "run", "median_ms", "correct", "status")} == {
        "problem": "knn", "dtype": "f16", "impl": "torch", "run": 0, "median_ms": 85.0, "correct": True, "status": "ok"}
    assert r["shape"] == cell.shape and r["tflops"] == pytest.approx(KNN.flops(cell.shape) / 85e-3 / 1e12)
    assert r["target"] is None and recs[2]["target"] == "h200"
    assert recs[3]["median_ms"] is None and recs[3]["correct"] is False and recs[3]["oracle"] is None
    lines = tool.table(recs)
    assert len(lines) == 5
    assert lines[3].split()[-2:] == ["4.05x", "WRONG"]  # 85 ms / 21 ms: the faster correct torch baseline
    assert lines[4].split()[-1] == "unsupported" and lines[4].startswith("knn-ip")


def test_the_commit_comes_from_cake_commit_where_set(monkeypatch) -> None:
    tool = _tool()
    monkeypatch.setenv("CAKE_COMMIT", "1234abc")
    assert tool.record_commit(lambda: "stale") == "1234abc"
    monkeypatch.setenv("CAKE_COMMIT", " ")
    assert tool.record_commit(lambda: "fffd56a") == "fffd56a"
    monkeypatch.delenv("CAKE_COMMIT")
    assert tool.record_commit(lambda: "fffd56a+uncommitted") == "fffd56a+uncommitted"
