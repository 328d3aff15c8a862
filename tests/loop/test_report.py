"""``report.md``: built from small ledgers written by hand through :class:`~cake_core.loop.ledger.Ledger` as
``cake run`` writes them — a run without a GPU (ranked by predicted time) and a run that measured its candidates
and the problem's baseline — with its sections, its tables and valid PNG plots."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest

from cake_core.loop.ledger import Ledger, dumps
from cake_core.loop.records import RunSummary, Spent
from cake_core.loop.report import result_line, write_report

# -- two run ledgers ------------------------------------------------------------------------------------------

CELL = {"shape": {"B": 2, "N": 1000, "K": 100, "D": 128}, "dtype": "f16"}
META = {"problem": "kmeans-assign", "target": "hopper", "cell": CELL, "seed": 7, "agent": None, "from": [],
        "budgets": {"candidates": 20, "gpu_benchmarks": None, "benchmark_top": 4}}
VERSIONS = [("distribution", "cake-core", "0.1.0"), ("distribution", "cake-cost-roofline", "0.1.0"),
            ("target", "hopper", "sha256:0123abcd")]  # fmt: skip
MODEL = "roofline 0.1.0"


def terms(dram: float, tensor: float) -> dict[str, float]:
    return {"dram": dram, "l2": dram / 3, "shared": 0.01, "tensor": tensor, "fp32": 0.002, "issue": 0.004,
            "sync": 0.003, "latency": 0.002, "launch": 0.003}  # fmt: skip


#: name -> (how stage 2 ended: (status, gate, reason), estimate (ms, bound, dram, tensor) or None)
CANDIDATES: dict[str, tuple[tuple[str, str | None, str | None], tuple[float, str, float, float] | None]] = {
    "naive": (("compiled", None, None), (0.5, "dram", 0.45, 0.01)),
    "hopper_tma": (("compiled", None, None), (0.19, "tensor", 0.05, 0.16)),
    "ampere_mma": (("compiled", None, None), (0.3, "dram", 0.25, 0.1)),
    "bad_ring": (("rejected", "verify", "E0412 ring `r` is read before its stage is `acquired`"), None),
    "wrong_mask": (("rejected", "interp", "E0901 output `assign` differs at (0, 17) | ragged N=999"), None),
}


def insert_candidates(ledger: Ledger, estimates: bool) -> dict[str, int]:
    ids = {}
    with ledger.transaction() as db:
        for i, (name, ((status, gate, reason), est)) in enumerate(CANDIDATES.items(), 1):
            db.execute("INSERT INTO candidates VALUES (?, ?, ?, 0, 'seed', NULL, ?, ?, ?, '2026-12-01T10:00:00')",
                       (i, f"{i:02d}" + "ab" * 31, name, f"schedules/{name}.cake", f"schedules/{name}.cake",
                        f"// {name}\n"))  # fmt: skip
            est = est if estimates else None
            estimate = None if est is None else {"model": MODEL, "calibrated": False, "ms": est[0], "bound": est[1],
                                                 "terms": terms(est[2], est[3])}  # fmt: skip
            db.execute("INSERT INTO filtered VALUES (?, ?, ?, ?, NULL, ?, ?, ?, 0.5, 1.0, '2026-12-01T10:00:01')",
                       (i, status, gate, reason, None if estimate is None else dumps(estimate),
                        None if est is None else est[0], None if est is None else est[1]))  # fmt: skip
            ids[name] = i
    return ids


def finding(ledger: Ledger, candidate: int | None, destination: str, kind: str, message: str,
            location: str | None, reproducer: str | None, evidence: dict[str, Any]) -> None:  # fmt: skip
    with ledger.transaction() as db:
        db.execute("INSERT INTO findings (round, candidate, destination, kind, message, location, evidence, "
                   "reproducer, recorded_at) VALUES (0, ?, ?, ?, ?, ?, ?, ?, '2026-12-01T10:00:02')",
                   (candidate, destination, kind, message, location, dumps(evidence), reproducer))  # fmt: skip


def dispatch(ledger: Ledger, candidate: int | None, impl: str, status: str, samples: list[float]) -> None:
    correct = status == "ok"
    median = sorted(samples)[len(samples) // 2] if samples and correct else None
    measurement = {"impl": impl, "status": status, "correct": correct, "median_ms": median, "samples": samples,
                   "error": None if correct else "412 of 200000 elements differ"}  # fmt: skip
    with ledger.transaction() as db:
        cur = db.execute("INSERT INTO dispatches (candidate, impl, run, status, correct, median_ms, gpu, measurement, "
                         "seconds, recorded_at) VALUES (?, ?, 0, ?, ?, ?, 'NVIDIA H200', ?, 2.0, "
                         "'2026-12-01T10:00:03')", (candidate, impl, status, int(correct), median, dumps(measurement)))
        db.executemany("INSERT INTO samples VALUES (?, ?, ?)", [(cur.lastrowid, i, ms) for i, ms in enumerate(samples)])


def cpu_run(out: Path, sessions: int = 1, estimates: bool = True) -> tuple[Ledger, RunSummary]:
    """A run without a GPU: three compiled candidates ranked by predicted time (``estimates``: a cost model is
    installed), two rejected; ``sessions``: how many sessions made it (a killed one resumed)."""
    ledger = Ledger.create(out, META)
    ledger.set_versions(VERSIONS)
    for _ in range(sessions):
        ledger.begin_session(["cake", "run", "kmeans-assign", "--target", "hopper"])
    ids = insert_candidates(ledger, estimates)
    finding(ledger, ids["bad_ring"], "candidate", "rejected", "E0412 ring `r` is read before its stage is acquired",
            "bad_ring.cake:12:5", "ring r: smem[2]\nuse r  // E0412\n", {"gate": "verify"})
    finding(ledger, ids["wrong_mask"], "candidate", "rejected", "E0901 output `assign` differs | at (0, 17)",
            None, "tile t\n", {"gate": "interp", "shape": {"N": 999}})
    finding(ledger, None, "vocabulary", "unexpressible", "no primitive for a masked TMA store", None, None, {})
    summary = RunSummary(best="hopper_tma", best_hash=f"{ids['hopper_tma']:02d}" + "ab" * 31, best_ms=None,
                         best_predicted_ms=0.19, baseline=None, baseline_ms=None, speedup=None, measured=False,
                         stages={"generate": "5 distinct candidates", "filter": "3 of 5 pass",
                                 "benchmark": "skipped: no GPU here"},
                         stopped=None, spent=Spent(candidates=5))  # fmt: skip
    return ledger, summary


def gpu_run(out: Path) -> tuple[Ledger, RunSummary]:
    """A run that measured the baseline and three candidates, one of them wrong on the GPU."""
    ledger, _ = cpu_run(out)
    ids = {r["name"]: r["id"] for r in ledger.rows("SELECT id, name FROM candidates")}
    dispatch(ledger, None, "baseline:flash-kmeans", "ok", [0.41, 0.40, 0.42])
    dispatch(ledger, ids["naive"], "cake:naive", "ok", [0.61, 0.60, 0.62])
    dispatch(ledger, ids["ampere_mma"], "cake:ampere_mma", "wrong", [])
    dispatch(ledger, ids["hopper_tma"], "cake:hopper_tma", "ok", [0.21, 0.20, 0.22])
    finding(ledger, ids["ampere_mma"], "verifier", "wrong-on-gpu", "verified clean but wrong on NVIDIA H200",
            None, "// ampere_mma\n", {"status": "wrong"})
    finding(ledger, ids["naive"], "cost-model", "misranked", "predicted 0.5 ms, measured 0.61 ms", None, None,
            {"predicted_ms": 0.5, "measured_ms": 0.61})
    summary = RunSummary(best="hopper_tma", best_hash=f"{ids['hopper_tma']:02d}" + "ab" * 31, best_ms=0.21,
                         best_predicted_ms=0.19, baseline="flash-kmeans", baseline_ms=0.41, speedup=0.41 / 0.21,
                         measured=True, stages={"benchmark": "3 candidates measured on NVIDIA H200"}, stopped=None,
                         spent=Spent(candidates=5, gpu_benchmarks=3, gpu_seconds=6.0))  # fmt: skip
    return ledger, summary


# -- the tests ---------------------------------------------------------------------------------------------


def png_size(path: Path) -> tuple[int, int]:
    """The width and height of a valid PNG that shows something: a user error in the test where it is not."""
    import matplotlib.image

    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", f"{path} is not a PNG"
    assert len(data) > 8000, f"{path} holds {len(data)} bytes: too little for a plot"
    pixels = matplotlib.image.imread(path)
    assert pixels.std() > 0.05, f"{path} is (nearly) one colour"
    return struct.unpack(">II", data[16:24])


def sections(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("#")]


def test_a_run_without_a_gpu_says_nothing_was_benchmarked_and_ranks_by_predicted_time(tmp_path: Path) -> None:
    ledger, summary = cpu_run(tmp_path)
    path = write_report(tmp_path, ledger, summary)
    text = path.read_text()
    assert path == tmp_path / "report.md"
    assert sections(text) == [
        "# cake run: kmeans-assign on hopper", "## The run", "### Versions in use", "## The result", "## Candidates",
        "## Findings", "### To the candidate (2)", "### To the IR vocabulary (1)", "## Plots",
        "### Predicted time per compiled candidate", "### The best kernel under the roofline (best predicted)",
    ]  # fmt: skip
    assert "| cell | dtype f16, shape B=2 D=128 K=100 N=1000 |" in text
    assert "| seed | 7 |" in text
    assert "| budgets | benchmark_top 4, candidates 20 |" in text
    assert "| agent | — |" in text
    assert "| target | hopper | sha256:0123abcd |" in text
    assert "**Nothing was benchmarked; best by predicted time `hopper_tma` 0.19 ms predicted.**" in text
    assert "`hopper_tma` is predicted tensor-bound by roofline 0.1.0 (uncalibrated)." in text
    assert "speed-up" not in text
    table = [line for line in text.splitlines() if line.startswith("| ") and "` | seed |" in line]
    assert table == [
        "| 1 | `hopper_tma` | seed | compiled | — | 0.19 ms | tensor | — | — |",
        "| 2 | `ampere_mma` | seed | compiled | — | 0.3 ms | dram | — | — |",
        "| 3 | `naive` | seed | compiled | — | 0.5 ms | dram | — | — |",
        "| — | `bad_ring` | seed | rejected | verify: E0412 ring `r` is read before its stage is `acquired` | — | — | — "
        "| — |",
        "| — | `wrong_mask` | seed | rejected | interp: E0901 output `assign` differs at (0, 17) \\| ragged N=999 | — "
        "| — | — | — |",
    ]  # fmt: skip
    assert "- **rejected** `bad_ring` at `bad_ring.cake:12:5`: E0412 ring `r` is read before its stage is acquired" \
        in text  # fmt: skip
    assert "  ```cake\n  ring r: smem[2]\n  use r  // E0412\n  ```" in text
    assert "- **unexpressible**: no primitive for a masked TMA store" in text
    assert "![Predicted time per compiled candidate](plots/predicted.png)" in text
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == ["predicted.png", "roofline.png"]
    for png in (tmp_path / "plots").iterdir():
        width, height = png_size(png)
        assert width >= 400 and height >= 200


def test_a_measured_run_reports_the_best_time_the_baseline_and_the_speed_up(tmp_path: Path) -> None:
    ledger, summary = gpu_run(tmp_path)
    (tmp_path / "plots").mkdir()
    (tmp_path / "plots" / "predicted.png").write_bytes(b"a plot of an earlier report")
    text = write_report(tmp_path, ledger, summary).read_text()
    assert "**Best `hopper_tma` 0.21 ms measured; baseline `flash-kmeans` 0.41 ms; speed-up 1.95x.**" in text
    assert "`hopper_tma` (02ababababab) was measured on NVIDIA H200, the median of 3 samples; the cost model " \
           "predicted 0.19 ms." in text  # fmt: skip
    assert "The baseline `flash-kmeans` was measured in the same run." in text
    assert "Nothing was benchmarked" not in text
    assert "Spent: 5 candidate(s), 3 GPU benchmark(s), 0 agent token(s)." in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and "` | seed |" in line]
    assert rows[:3] == [
        "| 1 | `hopper_tma` | seed | measured | — | 0.19 ms | tensor | 0.21 ms | yes |",
        "| 2 | `naive` | seed | measured | — | 0.5 ms | dram | 0.61 ms | yes |",
        "| — | `ampere_mma` | seed | failed-on-gpu | gpu: wrong: 412 of 200000 elements differ | 0.3 ms | dram | — | no |",
    ]  # fmt: skip
    assert [h for h in sections(text) if h.startswith("### To")] == [
        "### To the candidate (2)", "### To the verifier (1)", "### To the cost model (1)",
        "### To the IR vocabulary (1)",
    ]  # fmt: skip
    assert '  evidence: `{"measured_ms": 0.61, "predicted_ms": 0.5}`' in text
    for name in ("best-time.png", "predicted-vs-measured.png", "roofline.png"):
        assert f"(plots/{name})" in text
        png_size(tmp_path / "plots" / name)
    assert "### The best kernel under the roofline (best measured)" in text
    assert not (tmp_path / "plots" / "predicted.png").exists()  # the earlier report's plot is gone
    assert "in the order they ran; a cross marks a benchmark that failed; the dashed line is the baseline." in text
    assert "Bars: the terms of the estimate of the kernel's longest launch (the bound it hits in red; a log axis " \
           "where they span decades); lines: the predicted total and the measured time." in text  # fmt: skip


def test_a_resumed_run_has_the_same_report_as_an_uninterrupted_one(tmp_path: Path) -> None:
    """A run made in three sessions (killed twice, resumed) and one made in one: the same report and plots."""
    (tmp_path / "once").mkdir()
    (tmp_path / "resumed").mkdir()
    once = write_report(tmp_path / "once", *cpu_run(tmp_path / "once"))
    resumed = write_report(tmp_path / "resumed", *cpu_run(tmp_path / "resumed", sessions=3))
    assert once.read_text() == resumed.read_text()
    for png in ("predicted.png", "roofline.png"):
        assert (tmp_path / "once" / "plots" / png).read_bytes() == (tmp_path / "resumed" / "plots" / png).read_bytes()


def test_a_plot_without_data_is_not_drawn_and_the_report_says_why(tmp_path: Path) -> None:
    ledger, summary = cpu_run(tmp_path, estimates=False)
    text = write_report(tmp_path, ledger, summary).read_text()
    assert "Not drawn: no candidate has a predicted time (no cost model, or none compiled)." in text
    assert "Not drawn: its estimate carries no terms." in text
    assert not (tmp_path / "plots").exists()


def test_a_run_with_no_compiled_candidate_has_no_best_kernel(tmp_path: Path) -> None:
    ledger, summary = cpu_run(tmp_path, estimates=False)
    summary = RunSummary(None, None, None, None, None, None, None, False, {}, "candidates budget (5) spent",
                         Spent(candidates=5))  # fmt: skip
    text = write_report(tmp_path, ledger, summary).read_text()
    assert "**No candidate passed stage 2; there is no best kernel (stopped: candidates budget (5) spent).**" in text
    assert "Not drawn: there is no best kernel." in text


def test_a_run_stopped_before_its_first_candidate_says_none_was_generated(tmp_path: Path) -> None:
    ledger, _ = cpu_run(tmp_path, estimates=False)
    summary = RunSummary(None, None, None, None, None, None, None, False, {}, "wall seconds budget (60.0) spent",
                         Spent(candidates=0, wall_seconds=61.0))  # fmt: skip
    line = result_line(summary)
    assert line == "no candidate was generated; there is no best kernel (stopped: wall seconds budget (60.0) spent)"
    assert "**No candidate was generated; there is no best kernel" in write_report(tmp_path, ledger, summary).read_text()


@pytest.mark.parametrize("status", ["wrong", "fault"])
def test_a_baseline_without_a_time_is_said_so(tmp_path: Path, status: str) -> None:
    ledger, _ = cpu_run(tmp_path)
    ids: dict[str, Any] = {r["name"]: r["id"] for r in ledger.rows("SELECT id, name FROM candidates")}
    dispatch(ledger, None, "baseline:flash-kmeans", status, [])
    dispatch(ledger, ids["naive"], "cake:naive", "ok", [0.5])
    summary = RunSummary("naive", f"{ids['naive']:02d}" + "ab" * 31, 0.5, 0.5, None, None, None, True, {},
                         None, Spent(candidates=5, gpu_benchmarks=1))  # fmt: skip
    text = write_report(tmp_path, ledger, summary).read_text()
    assert f"The baseline `flash-kmeans` has no time ({status}: 412 of 200000 elements differ), so there is no " \
           "speed-up." in text  # fmt: skip
    png_size(tmp_path / "plots" / "best-time.png")


def test_a_measured_run_without_a_baseline_says_there_is_no_speed_up(tmp_path: Path) -> None:
    ledger, _ = cpu_run(tmp_path)
    dispatch(ledger, 1, "cake:naive", "ok", [0.5])
    summary = RunSummary("naive", "01" + "ab" * 31, 0.5, 0.5, None, None, None, True, {}, None,
                         Spent(candidates=5, gpu_benchmarks=1))  # fmt: skip
    text = write_report(tmp_path, ledger, summary).read_text()
    assert "**Best `naive` 0.5 ms measured.**" in text
    assert "No baseline was measured, so there is no speed-up." in text


def test_a_candidate_benchmarked_though_rejected_or_wrong_once_is_not_ranked(tmp_path: Path) -> None:
    """``--bench-rejected`` times a candidate stage 2 rejected; a candidate may be right in one dispatch and
    wrong in another: the table shows their times, and neither is ranked."""
    ledger, summary = gpu_run(tmp_path)
    ids = {r["name"]: r["id"] for r in ledger.rows("SELECT id, name FROM candidates")}
    dispatch(ledger, ids["bad_ring"], "cake:bad_ring", "ok", [0.05])
    with ledger.transaction() as db:
        db.execute("UPDATE dispatches SET run = 1 WHERE impl = 'cake:naive'")
    dispatch(ledger, ids["naive"], "cake:naive", "wrong", [])
    text = write_report(tmp_path, ledger, summary).read_text()
    rows = [line for line in text.splitlines() if line.startswith("| ") and "` | seed |" in line]
    assert rows == [
        "| 1 | `hopper_tma` | seed | measured | — | 0.19 ms | tensor | 0.21 ms | yes |",
        "| — | `ampere_mma` | seed | failed-on-gpu | gpu: wrong: 412 of 200000 elements differ | 0.3 ms | dram | — | no |",
        "| — | `naive` | seed | failed-on-gpu | gpu: wrong: 412 of 200000 elements differ | 0.5 ms | dram | 0.61 ms "
        "| no |",
        "| — | `bad_ring` | seed | rejected | verify: E0412 ring `r` is read before its stage is `acquired` | — | — "
        "| 0.05 ms | yes |",
        "| — | `wrong_mask` | seed | rejected | interp: E0901 output `assign` differs at (0, 17) \\| ragged N=999 | — "
        "| — | — | — |",
    ]  # fmt: skip
