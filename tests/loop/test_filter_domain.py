"""Stage 2 sets aside a schedule whose domain does not take the run's cell (knn's hopper_split_big.cake is
written for K in {64, 100, 128}): gate ``domain``, routed to the candidate as ``out-of-domain``, not to the
verifier as a compile escape."""

from __future__ import annotations

from pathlib import Path

from cake_core.loop.filter import FilterJob, filter_candidate

NAIVE = Path(__file__).resolve().parents[2] / "cake_core" / "problems" / "kmeans_assign" / "schedules" / "naive.cake"


def test_a_cell_outside_the_schedules_domain_is_set_aside_not_blamed_on_the_compiler() -> None:
    text = NAIVE.read_text().replace("D in {64, 128, 256}", "D in {64}")
    assert text != NAIVE.read_text()
    cell = {"B": 1, "N": 300, "K": 20, "D": 128}
    out = filter_candidate(FilterJob(0, text, "narrow.cake", "kmeans-assign", "h200", cell, "bf16"))
    assert (out.status, out.gate) == ("rejected", "domain"), (out.status, out.gate, out.reason)
    assert "its domain does not take the run's cell" in out.reason and "D=128" in out.reason
    same = filter_candidate(FilterJob(0, text, "narrow.cake", "kmeans-assign", "h200", {**cell, "D": 64}, "bf16"))
    assert same.status == "compiled", same.reason
