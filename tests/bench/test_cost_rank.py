"""bench/cost_rank.py without a GPU: its Spearman correlation, which cases it ranks and which it calls
worst, the inputs it shares between kernels, and its summary table."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def cost_rank():
    sys.path.insert(0, str(BENCH))
    try:
        yield importlib.import_module("cost_rank")
    finally:
        sys.path.remove(str(BENCH))


def test_ranks_average_ties(cost_rank) -> None:
    assert cost_rank.ranks([3.0, 1.0, 2.0]).tolist() == [3.0, 1.0, 2.0]
    assert cost_rank.ranks([1.0, 2.0, 2.0, 5.0]).tolist() == [1.0, 2.5, 2.5, 4.0]


def test_spearman_of_monotone_and_reversed_orders(cost_rank) -> None:
    x = [0.1, 0.5, 0.2, 3.0, 1.0]
    assert cost_rank.spearman(x, [v**3 + 7 for v in x]) == pytest.approx(1.0)
    assert cost_rank.spearman(x, [-v for v in x]) == pytest.approx(-1.0)


def test_spearman_matches_the_textbook_formula_without_ties(cost_rank) -> None:
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=40), rng.normal(size=40)
    rx, ry = cost_rank.ranks(x), cost_rank.ranks(y)
    n = len(x)
    textbook = 1 - 6 * float(((rx - ry) ** 2).sum()) / (n * (n * n - 1))
    assert cost_rank.spearman(x, y) == pytest.approx(textbook)


def test_spearman_with_ties_is_the_pearson_correlation_of_average_ranks(cost_rank) -> None:
    x, y = [1.0, 2.0, 2.0, 3.0, 4.0], [2.0, 1.0, 3.0, 3.0, 5.0]
    expected = float(np.corrcoef([1, 2.5, 2.5, 4, 5], [2, 1, 3.5, 3.5, 5])[0, 1])
    assert cost_rank.spearman(x, y) == pytest.approx(expected)


def test_spearman_refuses_sequences_it_cannot_rank(cost_rank) -> None:
    with pytest.raises(ValueError):
        cost_rank.spearman([1.0], [1.0])
    with pytest.raises(ValueError):
        cost_rank.spearman([1.0, 2.0], [1.0, 2.0, 3.0])


def _row(impl, group, pred, meas, status="ok", correct=True):
    return {"impl": impl, "group": group, "pred_ms": pred, "bound": "tensor", "measured_ms": meas,
            "correct": correct, "status": status, "rank_pred": None, "rank_meas": None}  # fmt: skip


def test_rank_shape_ranks_only_measured_correct_sweep_and_hopper_cases(cost_rank) -> None:
    rows = [
        _row("a", "sweep", 1.0, 1.0), _row("b", "sweep", 2.0, 3.0), _row("c", "sweep", 3.0, 2.0),
        _row("h", "hopper", 0.5, 0.4), _row("naive", "extra", 9.0, 0.1),
        _row("wrong", "sweep", 0.1, 0.2, status="wrong", correct=False), _row("late", "sweep", 5.0, None, "not-measured"),
    ]  # fmt: skip
    out = cost_rank.rank_shape(rows)
    assert out["ranked"] == 4 and out["failed"] == ["wrong"] and out["not_measured"] == 1
    assert out["spearman"] == pytest.approx(0.8)  # one swap among four: 1 - 6 * 2 / 60
    assert [w["impl"] for w in out["worst"]][:2] == ["b", "c"]  # the swapped pair, a rank apart each
    assert rows[4]["rank_pred"] is None  # the extra point is never ranked


def test_the_cases_are_the_sweep_and_the_hopper_schedules_and_naive_as_an_extra(cost_rank) -> None:
    cases = cost_rank.cases()
    groups = [g for _, g, _ in cases]
    assert groups.count("sweep") == 48 and groups.count("hopper") == 2 and groups.count("extra") == 1
    assert len({impl for impl, _, _ in cases}) == len(cases)


def test_the_table_names_the_worst_cases_and_the_gate(cost_rank, capsys) -> None:
    rows = [_row("a", "sweep", 1.0, 1.0), _row("b", "sweep", 2.0, 3.0), _row("c", "sweep", 3.0, 2.0),
            _row("h", "hopper", 0.5, 0.4)]  # fmt: skip
    shape = {"label": "reference", "shape": {"B": 1}, **cost_rank.rank_shape(rows), "cases": rows}
    record = {"model": "roofline 0", "gpu": "GPU", "commit": "c", "seconds": {}, "shapes": [shape],
              "average": 0.8, "gate": 0.7, "goal": 0.85, "gate_met": True}  # fmt: skip
    cost_rank.print_table(record)
    out = capsys.readouterr().out
    assert "spearman 0.8 over 4 ranked" in out and "worst ranked" in out and "gate met" in out


# --------------------------------------------------------------------------------------------------- --records


def _run(impl: str, ms: float | None, correct: bool = True, dtype: str = "bf16", **shape: int) -> dict:
    return {"problem": "kmeans-update", "shape": shape or {"B": 1, "N": 4096, "K": 100, "D": 64}, "dtype": dtype,
            "gpu": "NVIDIA H200", "impl": impl, "median_ms": ms, "correct": correct, "commit": "abc1234"}  # fmt: skip


def test_measured_cells_keep_each_schedules_lowest_correct_run(cost_rank) -> None:
    runs = [_run("cake:atomic", 0.30), _run("cake:atomic", 0.25), _run("cake:vector", 0.10, correct=False),
            _run("cake:vector", None), _run("flash-kmeans", 0.05), _run("cake:vector", 0.20, dtype="f16")]  # fmt: skip
    cells = cost_rank.measured_cells(runs)
    assert {dt: sorted(c) for (_, dt), c in cells.items()} == {"bf16": ["atomic"], "f16": ["vector"]}
    assert next(iter(cells.values()))["atomic"] == (0.25, "abc1234")


def test_records_rank_the_committed_schedules_offline(cost_rank, tmp_path, monkeypatch, capsys) -> None:
    """Two cells of kmeans-update measured in the H200's order (vector before atomic, as every record has it):
    the installed model orders them the same way; a cell of one schedule is listed but not ranked."""
    runs = [_run("cake:vector", 0.11), _run("cake:atomic", 0.12), _run("cake:sorted", 0.5),
            _run("cake:vector", 0.13, B=8, N=16384, K=100, D=128), _run("cake:atomic", 0.14, B=8, N=16384, K=100, D=128),
            _run("cake:atomic", 0.30, B=4, N=30011, K=4093, D=256), _run("cake:gone", 0.01)]  # fmt: skip
    src = tmp_path / "runs.json"
    src.write_text(json.dumps(runs))
    monkeypatch.setattr(sys, "argv", ["cost_rank.py", "--records", str(src), "--out", str(tmp_path), "--label", "t"])
    assert cost_rank.main() == 0
    (path,) = tmp_path.glob("*-h200-cost-rank-kmeans-update-t.json")
    record = json.loads(path.read_text())
    assert record["problem"] == "kmeans-update" and record["dry_run"] and record["sources"] == ["runs.json"]
    assert [c["ranked"] for c in record["shapes"]] == [3, 2, 1]  # `gone` is no committed schedule
    assert record["cells_ranked"] == 2 and record["average"] == 1.0
    cases = [x for c in record["shapes"] for x in c["cases"]]
    factor = np.exp(np.mean([abs(np.log(x["pred_ms"] / x["measured_ms"])) for x in cases]))
    assert len(cases) == 6 and record["error_factor"] == pytest.approx(factor, abs=1e-3) and factor > 1
    assert "average spearman 1.0 over 2 cells" in capsys.readouterr().out


@pytest.mark.parametrize(("runs", "said"), [
    ([_run("cake:atomic", 0.3), {**_run("cake:hopper", 0.4), "problem": "kmeans-iter"}],
     "error: the records must be benchmark runs of one problem"),
    ([{**_run("cake:atomic", 0.3), "problem": "nope"}], "error: cannot rank the records: unknown problem `nope`"),
    ([_run("cake:atomic", 0.3, B=1)], "error: cannot rank the records: kernel `zero` has no specialization"),
])  # fmt: skip
def test_records_it_cannot_use_are_one_line(cost_rank, tmp_path, monkeypatch, capsys, runs, said) -> None:
    src = tmp_path / "runs.json"
    src.write_text(json.dumps(runs))
    monkeypatch.setattr(sys, "argv", ["cost_rank.py", "--records", str(src), "--out", str(tmp_path)])
    assert cost_rank.main() == 2
    err = capsys.readouterr().err
    assert err.startswith(said) and err.count("\n") == 1
