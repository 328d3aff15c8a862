"""bench/cost_rank.py without a GPU: its Spearman correlation, which cases it ranks and which it calls
worst, the inputs it shares between kernels, and its summary table."""

from __future__ import annotations

import importlib
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
