"""``cake run``'s progress: the observer driven by calling its hooks with the loop's records, as the run calls
them — one exact line per event off a terminal, a live display on one, stage counts, the best so far and the
budget left, registered through the plugin manager, and never an exception out of a hook."""

from __future__ import annotations

import io

from rich.console import Console

from cake_core import plugins
from cake_core.loop.benchmark import Measurement
from cake_core.loop.progress import Progress
from cake_core.loop.records import (
    Budgets,
    CandidateInfo,
    EstimateSummary,
    FilterOutcome,
    Finding,
    RunInfo,
    RunSummary,
    Spent,
)

CELL = {"shape": {"B": 2, "N": 1000}, "dtype": "f16"}
RUN = RunInfo("kmeans-assign", "hopper", "runs/k", 7, Budgets(candidates=10, gpu_benchmarks=4, wall_seconds=60),
              CELL)  # fmt: skip


def candidate(i: int, name: str) -> CandidateInfo:
    return CandidateInfo(i, f"{i:064x}", name, 0, "seed", f"schedules/{name}.cake", f"// {name}\n")


def measurement(impl: str, ms: float | None, status: str = "ok") -> Measurement:
    return Measurement("kmeans-assign", {"B": 2}, "f16", "NVIDIA H200", "hopper", "2026-12-01T10:00:00Z", "abc", impl,
                       0, ms, [] if ms is None else [ms], status == "ok", status,
                       None if status == "ok" else "3 elements differ")  # fmt: skip


def estimate(ms: float, bound: str) -> EstimateSummary:
    return EstimateSummary("roofline 0.1.0", False, ms, bound, {bound: ms})


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def drive(p: Progress, clock: Clock) -> None:
    """A small run: three candidates (one from the ledger of a killed session), one rejected, the baseline and
    three benchmarks (one wrong, one of the rejected candidate, benchmarked all the same), two findings."""
    naive, tma, bad = candidate(1, "naive"), candidate(2, "hopper_tma"), candidate(3, "bad_ring")
    p.cake_run_started(run=RUN, resumed=True)
    p.cake_candidate_generated(run=RUN, candidate=naive, resumed=True)
    p.cake_candidate_generated(run=RUN, candidate=tma, resumed=False)
    p.cake_candidate_generated(run=RUN, candidate=bad, resumed=False)
    compiled = FilterOutcome("compiled", estimate=estimate(0.5, "dram"))
    p.cake_candidate_filtered(run=RUN, candidate=naive, outcome=compiled, resumed=True)
    compiled = FilterOutcome("compiled", estimate=estimate(0.19, "tensor"))
    p.cake_candidate_filtered(run=RUN, candidate=tma, outcome=compiled, resumed=False)
    p.cake_candidate_filtered(run=RUN, candidate=bad, outcome=FilterOutcome("rejected", "verify", "E0412 ring `r` is "
                              "read before it is acquired"), resumed=False)  # fmt: skip
    clock.now += 12
    p.cake_measured(run=RUN, candidate=None, measurement=measurement("baseline:flash-kmeans", 0.41), resumed=False)
    p.cake_measured(run=RUN, candidate=naive, measurement=measurement("cake:naive", None, "wrong"), resumed=False)
    p.cake_measured(run=RUN, candidate=tma, measurement=measurement("cake:hopper_tma", 0.2), resumed=False)
    p.cake_measured(run=RUN, candidate=bad, measurement=measurement("cake:bad_ring", 0.05), resumed=False)
    p.cake_finding_routed(run=RUN, finding=Finding("candidate", "rejected", "E0412 ring `r` is read before it is "
                                                   "acquired", 0, 3, "bad_ring.cake:12:5"), resumed=False)  # fmt: skip
    p.cake_finding_routed(run=RUN, finding=Finding("verifier", "wrong-on-gpu", "verified clean but wrong", 0, 1),
                          resumed=False)  # fmt: skip


SUMMARY = RunSummary("hopper_tma", f"{2:064x}", 0.2, 0.19, "flash-kmeans", 0.41, 2.05, True, {}, None,
                     Spent(candidates=3, gpu_benchmarks=2, gpu_seconds=3.5, wall_seconds=20.0))  # fmt: skip


def plain_console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=False, width=60, color_system=None), out


def test_off_a_terminal_each_event_is_one_plain_line() -> None:
    console, out = plain_console()
    clock = Clock()
    with Progress(console, clock=clock) as p:
        drive(p, clock)
        p.cake_run_finished(run=RUN, summary=SUMMARY)
    assert out.getvalue().splitlines() == [
        "resuming kmeans-assign on hopper: seed 7, cell shape B=2 N=1000, dtype f16; out runs/k",
        "generated: naive (seed, round 0) (from the ledger)",
        "generated: hopper_tma (seed, round 0)",
        "generated: bad_ring (seed, round 0)",
        "compiled: naive, predicted 0.5 ms (dram-bound, uncalibrated) (from the ledger)",
        "compiled: hopper_tma, predicted 0.19 ms (tensor-bound, uncalibrated)",
        "rejected at verify: bad_ring: E0412 ring `r` is read before it is acquired",
        "baseline: flash-kmeans 0.41 ms on NVIDIA H200",
        "failed on the GPU: naive: wrong: 3 elements differ",
        "measured: hopper_tma 0.2 ms on NVIDIA H200",
        "measured: bad_ring 0.05 ms on NVIDIA H200 (rejected by stage 2)",
        "finding for the candidate: rejected: E0412 ring `r` is read before it is acquired at bad_ring.cake:12:5",
        "finding for the verifier: wrong-on-gpu: verified clean but wrong",
        "finished: best `hopper_tma` 0.2 ms measured; baseline `flash-kmeans` 0.41 ms; speed-up 2.05x",
    ]


def test_the_display_counts_each_stage_and_shows_the_best_so_far_and_the_budget_left() -> None:
    console, _ = plain_console()
    clock = Clock()
    p = Progress(console, clock=clock)
    drive(p, clock)
    shown = Console(file=io.StringIO(), width=140, record=True, color_system=None)
    shown.print(p.render())
    lines = [line.rstrip() for line in shown.export_text().splitlines()]
    assert lines == [
        "cake run kmeans-assign on hopper",
        "generated  3",
        "rejected   1 (verify 1)",
        "compiled   2",
        "measured   2 on the GPU, 1 failed there",
        "baseline   flash-kmeans 0.41 ms",
        "findings   candidate 1, verifier 1",
        "best       hopper_tma 0.2 ms measured (2.05x the baseline)",
        "budget     candidates: 7 left of 10; gpu benchmarks: 1 left of 4; wall seconds: 48 s left of 60 s (this "
        "session)",
        "finding for the verifier: wrong-on-gpu: verified clean but wrong",
    ]  # fmt: skip
    p.cake_run_finished(run=RUN, summary=SUMMARY)  # the run's own account of what it spent replaces the display's
    assert p.budget_text() == "candidates: 7 left of 10; gpu benchmarks: 2 left of 4; wall seconds: 40 s left of 60 s"


def test_before_anything_is_measured_the_best_is_the_best_predicted() -> None:
    console, _ = plain_console()
    p = Progress(console)
    assert p.best_text() == "none yet"
    p.cake_run_started(run=RUN, resumed=False)
    for i, ms in ((1, 0.3), (2, 0.25), (3, 0.4)):
        p.cake_candidate_filtered(run=RUN, candidate=candidate(i, f"c{i}"),
                                  outcome=FilterOutcome("compiled", estimate=estimate(ms, "dram")), resumed=False)
    assert p.best_text() == "c2 0.25 ms predicted (dram-bound; nothing measured yet)"
    unlimited = RunInfo("kmeans-assign", "hopper", "runs/k", 0, Budgets(gpu_seconds=30), CELL)
    p.cake_run_started(run=unlimited, resumed=False)
    assert p.budget_text() == "gpu seconds: 30 s budget"


def test_on_a_terminal_the_display_is_live_and_ends_on_the_final_state() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120, color_system=None)
    clock = Clock()
    with Progress(console, clock=clock) as p:
        assert p.live is not None and p.live.is_started
        drive(p, clock)
        p.cake_run_finished(run=RUN, summary=SUMMARY)
    assert p.live is None
    text = out.getvalue()
    assert "hopper_tma 0.2 ms measured (2.05x the baseline)" in text
    assert "finished: best `hopper_tma` 0.2 ms measured" in text
    # no line per event on a terminal: an event shows as the display's last line until the next one redraws it
    assert text.count("generated: naive") <= 1 and "generated: naive" not in text.rsplit("\x1b[1A", 1)[-1]


def test_it_is_an_observer_plugin_whose_hooks_match_their_specs() -> None:
    console, out = plain_console()
    registry = plugins.registry()
    registry.manager.register(Progress(console), name="cake-progress")
    registry.manager.hook.cake_run_started(run=RUN, resumed=False)
    registry.manager.hook.cake_run_finished(run=RUN, summary=SUMMARY)
    assert out.getvalue().splitlines() == [
        "run kmeans-assign on hopper: seed 7, cell shape B=2 N=1000, dtype f16; out runs/k",
        "finished: best `hopper_tma` 0.2 ms measured; baseline `flash-kmeans` 0.41 ms; speed-up 2.05x",
    ]


class Broken(io.StringIO):
    def write(self, text: str) -> int:
        raise OSError("the terminal went away")


def test_a_hook_never_raises() -> None:
    console, out = plain_console()
    p = Progress(console)
    p.cake_candidate_filtered(run=RUN, candidate=None, outcome="not an outcome",  # type: ignore[arg-type]
                              resumed=False)
    assert out.getvalue().splitlines() == [
        "progress: cannot show an event (AttributeError: 'str' object has no attribute 'status')"
    ]
    p.rejected = None  # type: ignore[assignment]  # a display that cannot render says so in its place
    shown = Console(file=io.StringIO(), width=200, record=True, color_system=None)
    shown.print(p.render())
    assert shown.export_text().strip() == ("progress: cannot show the display (AttributeError: 'NoneType' object has "
                                           "no attribute 'items')")  # fmt: skip
    broken = Progress(Console(file=Broken(), force_terminal=False))
    broken.cake_run_started(run=RUN, resumed=False)  # the line cannot be written, nor the notice: nothing raises
    assert broken.run is RUN
