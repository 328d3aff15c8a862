"""``cake run``'s progress as the user watches it: an observer of the run's hooks that counts each stage's
outcomes, keeps the best kernel so far and the budget left, and shows them as a rich live display on a
terminal, or as one plain line per event anywhere else (a CI log, a test). It never raises.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from cake_core.hookspecs import hookimpl
from cake_core.loop.records import DESTINATIONS, CandidateInfo, FilterOutcome, Finding, RunInfo, RunSummary
from cake_core.loop.report import baseline_name, cell_text, fmt_ms, is_timed, result_line

if TYPE_CHECKING:
    from cake_core.loop.benchmark import Measurement


class Progress:
    """The observer: register it with ``registry.manager.register(progress, name="cake-progress")`` and run
    the loop inside ``with progress:`` (which starts and stops the live display on a terminal)."""

    def __init__(self, console: Console, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.console = console
        self.clock = clock
        self.live: Live | None = None
        self.lock = threading.RLock()
        self.run: RunInfo | None = None
        self.resumed = False
        self.started: float | None = None
        self.generated = 0
        self.rejected: collections.Counter[str] = collections.Counter()  # by gate
        self.compiled = 0
        self.measured: set[int] = set()  # candidate ids with a correct time
        self.failed: set[int] = set()  # candidate ids that failed on the GPU
        self.rejected_ids: set[int] = set()  # rejected by stage 2: never the best, even if benchmarked anyway
        self.benchmarks = 0  # dispatches of candidates: the GPU benchmarks spent
        self.baseline: tuple[str, float | None, str] | None = None  # impl, time, status
        self.findings: collections.Counter[str] = collections.Counter()  # by destination
        self.best_measured: tuple[str, float] | None = None
        self.best_predicted: tuple[str, float, str] | None = None  # name, time, bound
        self.summary: RunSummary | None = None
        self.last = ""  # the latest event, as a line

    # -- the display's lifetime --------------------------------------------------------------------------

    @property
    def plain(self) -> bool:
        """Whether events are printed as lines (the console is not a terminal) rather than shown live."""
        return not self.console.is_terminal

    def __enter__(self) -> Progress:
        if not self.plain:
            self._guard(self._start, locked=False)
        return self

    def __exit__(self, *_: object) -> None:
        if self.live is not None:
            self._guard(self.live.stop, locked=False)  # its last refresh shows the final state
            self.live = None

    def _start(self) -> None:
        # redrawn at each event, never by a thread of its own: stage 2 forks its worker processes, and a fork
        # while another thread holds a lock can leave the child waiting on it forever
        self.live = Live(console=self.console, get_renderable=self.render, auto_refresh=False, transient=False)
        self.live.start()

    def _guard(self, action: Callable[..., None], *args: Any, locked: bool = True) -> None:
        """Run ``action`` (holding the state's lock where ``locked``: the live display renders from another
        thread); a failure becomes one line on the console (an observer must not stop the run)."""
        try:
            if locked:
                with self.lock:
                    action(*args)
            else:
                action(*args)
        except Exception as exc:  # noqa: BLE001 - an observer must never raise
            try:
                self.console.print(f"progress: cannot show an event ({type(exc).__name__}: {exc})", markup=False,
                                   highlight=False, soft_wrap=True)  # fmt: skip
            except Exception:  # noqa: BLE001, S110 - not even a broken console may stop the run
                pass

    def _say(self, line: str, resumed: bool = False) -> None:
        """One event: a line of its own where the console is no terminal, else the live display's last line
        (the display is redrawn)."""
        self.last = line + (" (from the ledger)" if resumed else "")
        if self.plain:
            self.console.print(self.last, markup=False, highlight=False, emoji=False, soft_wrap=True)
        elif self.live is not None:
            self.live.refresh()

    def note(self, line: str) -> None:
        """A line the loop wants the user to see (e.g. a duplicate candidate it dropped)."""
        self._guard(self._say, line)

    # -- the hooks ---------------------------------------------------------------------------------------

    @hookimpl
    def cake_run_started(self, run: RunInfo, resumed: bool) -> None:
        self._guard(self._started, run, resumed)

    @hookimpl
    def cake_candidate_generated(self, run: RunInfo, candidate: CandidateInfo, resumed: bool) -> None:
        self._guard(self._generated, candidate, resumed)

    @hookimpl
    def cake_candidate_filtered(self, run: RunInfo, candidate: CandidateInfo, outcome: FilterOutcome,
                                resumed: bool) -> None:  # fmt: skip
        self._guard(self._filtered, candidate, outcome, resumed)

    @hookimpl
    def cake_measured(self, run: RunInfo, candidate: CandidateInfo | None, measurement: Measurement,
                      resumed: bool) -> None:  # fmt: skip
        self._guard(self._measured, candidate, measurement, resumed)

    @hookimpl
    def cake_finding_routed(self, run: RunInfo, finding: Finding, resumed: bool) -> None:
        self._guard(self._routed, finding, resumed)

    @hookimpl
    def cake_run_finished(self, run: RunInfo, summary: RunSummary) -> None:
        self._guard(self._finished, summary)

    # -- what each event changes -------------------------------------------------------------------------

    def _started(self, run: RunInfo, resumed: bool) -> None:
        self.run, self.resumed, self.started = run, resumed, self.clock()
        verb = "resuming" if resumed else "run"
        self._say(f"{verb} {run.problem} on {run.target}: seed {run.seed}, cell {cell_text(run.cell)}; out {run.out}")

    def _generated(self, candidate: CandidateInfo, resumed: bool) -> None:
        self.generated += 1
        self._say(f"generated: {candidate.name} ({candidate.origin}, round {candidate.round})", resumed)

    def _filtered(self, candidate: CandidateInfo, outcome: FilterOutcome, resumed: bool) -> None:
        if outcome.status == "rejected":
            self.rejected[outcome.gate or "?"] += 1
            self.rejected_ids.add(candidate.id)
            self._say(f"rejected at {outcome.gate}: {candidate.name}: {outcome.reason}", resumed)
            return
        self.compiled += 1
        est = outcome.estimate
        if est is None:
            self._say(f"compiled: {candidate.name}", resumed)
            return
        if self.best_predicted is None or est.ms < self.best_predicted[1]:
            self.best_predicted = (candidate.name, est.ms, est.bound)
        kind = "calibrated" if est.calibrated else "uncalibrated"
        self._say(f"compiled: {candidate.name}, predicted {fmt_ms(est.ms)} ({est.bound}-bound, {kind})", resumed)

    def _measured(self, candidate: CandidateInfo | None, m: Measurement, resumed: bool) -> None:
        timed = is_timed(m.correct, m.status, m.median_ms)
        if candidate is None:
            impl = baseline_name(m.impl)
            self.baseline = (impl, m.median_ms if timed else None, m.status)
            what = f"{fmt_ms(m.median_ms)} on {m.gpu}" if timed else f"{m.status}: {m.error}"
            self._say(f"baseline: {impl} {what}", resumed)
            return
        self.benchmarks += 1
        if not timed:
            self.failed.add(candidate.id)
            self._say(f"failed on the GPU: {candidate.name}: {m.status}: {m.error}", resumed)
            return
        self.measured.add(candidate.id)
        if candidate.id in self.rejected_ids:
            self._say(f"measured: {candidate.name} {fmt_ms(m.median_ms)} on {m.gpu} (rejected by stage 2)", resumed)
            return
        if self.best_measured is None or m.median_ms < self.best_measured[1]:  # type: ignore[operator]
            self.best_measured = (candidate.name, m.median_ms)
        self._say(f"measured: {candidate.name} {fmt_ms(m.median_ms)} on {m.gpu}", resumed)

    def _routed(self, finding: Finding, resumed: bool) -> None:
        self.findings[finding.destination] += 1
        at = f" at {finding.location}" if finding.location else ""
        self._say(f"finding for the {finding.destination}: {finding.kind}: {finding.message}{at}", resumed)

    def _finished(self, summary: RunSummary) -> None:
        self.summary = summary
        self._say(f"finished: {result_line(summary)}")

    # -- the live display ------------------------------------------------------------------------------

    def best_text(self) -> str:
        """The best kernel so far: by measured time where any was measured, else by predicted time."""
        if self.best_measured is not None:
            name, ms = self.best_measured
            text = f"{name} {fmt_ms(ms)} measured"
            if self.baseline is not None and self.baseline[1]:
                text += f" ({self.baseline[1] / ms:.2f}x the baseline)"
            return text
        if self.best_predicted is not None:
            name, ms, bound = self.best_predicted
            return f"{name} {fmt_ms(ms)} predicted ({bound}-bound; nothing measured yet)"
        return "none yet"

    def budget_text(self) -> str:
        """Each budget of the run against what this display has seen spent (the final summary's, once known)."""
        if self.run is None:
            return "—"
        budgets = self.run.budgets
        spent = self.summary.spent if self.summary is not None else None
        elapsed = self.clock() - self.started if self.started is not None else 0.0
        seen = {
            "candidates": (spent.candidates if spent else self.generated, ""),
            "gpu_benchmarks": (spent.gpu_benchmarks if spent else self.benchmarks, ""),
            "gpu_seconds": (spent.gpu_seconds if spent else None, " s"),
            "wall_seconds": (spent.wall_seconds if spent else elapsed, " s"),
            "agent_tokens": (spent.agent_tokens if spent else None, ""),
        }
        parts = []
        for name, (used, unit) in seen.items():
            limit = getattr(budgets, name)
            label = name.replace("_", " ")
            if limit is None:
                continue
            if used is None:  # not seen by an observer: the final summary says
                parts.append(f"{label}: {limit:g}{unit} budget")
            else:
                parts.append(f"{label}: {max(limit - used, 0):.4g}{unit} left of {limit:g}{unit}")
        if not parts:
            return "unlimited"
        session = " (this session)" if self.resumed and spent is None else ""
        return "; ".join(parts) + session

    def render(self) -> Any:
        """The live display: one row per stage's counts, the best so far, the budget left (or, should that
        fail, one line that says so: the display redraws from its own thread, where nothing may raise)."""
        try:
            return self._render()
        except Exception as exc:  # noqa: BLE001
            return Text(f"progress: cannot show the display ({type(exc).__name__}: {exc})")

    def _render(self) -> Any:
        with self.lock:
            table = Table.grid(padding=(0, 2))
            table.add_column(style="bold")
            table.add_column()
            gates = ", ".join(f"{g} {n}" for g, n in sorted(self.rejected.items()))
            routed = [d for d in DESTINATIONS if self.findings[d]] + sorted(set(self.findings) - set(DESTINATIONS))
            table.add_row("generated", str(self.generated))
            table.add_row("rejected", f"{sum(self.rejected.values())}" + (f" ({gates})" if gates else ""))
            table.add_row("compiled", str(self.compiled))
            table.add_row("measured", f"{len(self.measured)} on the GPU, {len(self.failed)} failed there")
            if self.baseline is not None:
                impl, ms, status = self.baseline
                table.add_row("baseline", f"{impl} {fmt_ms(ms)}" if ms is not None else f"{impl} {status}")
            table.add_row("findings", ", ".join(f"{d} {self.findings[d]}" for d in routed) or "none")
            table.add_row("best", self.best_text())
            table.add_row("budget", self.budget_text())
            head = "cake run" if self.run is None else f"cake run {self.run.problem} on {self.run.target}"
            parts: list[Any] = [Text(head, style="bold"), table]
            if self.last:
                final = self.summary is not None  # the last line of the run is shown whole
                parts.append(Text(self.last, style="" if final else "dim", overflow="fold" if final else "ellipsis",
                                  no_wrap=not final))  # fmt: skip
            return Group(*parts)
