"""``report.md`` of a run directory: the run, its result, every candidate, the routed findings and the plots,
all read back from the run's ledger (plus the run's summary).

Nothing in the report depends on when or in how many sessions the run was made (no wall-clock time but the
dates), so the report of a resumed run equals that of an uninterrupted one. The plots are matplotlib PNGs
under ``plots/``: the best measured time against GPU benchmarks spent, predicted against measured time, and
the best kernel under the roofline; a run that measured nothing draws each candidate's predicted time instead.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from cake_core.loop.ledger import Ledger
from cake_core.loop.records import DESTINATIONS, RunSummary

#: the order in which the roofline plot lists an estimate's terms (any other term follows, by name)
TERM_ORDER = ("dram", "l2", "shared", "tensor", "fp32", "issue", "sync", "latency", "launch")

#: the destination of a routed finding, as a heading says it
DESTINATION_TITLES = {"candidate": "the candidate", "verifier": "the verifier", "cost-model": "the cost model",
                      "vocabulary": "the IR vocabulary"}  # fmt: skip

#: how the candidates table orders statuses (within one, by time: measured, else predicted)
RANK_GROUPS = {"measured": 0, "compiled": 1, "failed-on-gpu": 2, "rejected": 3, "unfiltered": 4}

#: the plots a report may draw, under ``plots/`` (a report written again removes those it no longer draws)
PLOTS = ("best-time.png", "predicted-vs-measured.png", "predicted.png", "roofline.png")

#: the most bars the predicted-time plot draws (the best ones)
MOST_BARS = 40


# -- what the report and the progress display both say ----------------------------------------------------


def is_timed(correct: Any, status: str, median_ms: float | None) -> bool:
    """Whether a dispatch is a usable time: correct, not failed or quarantined, and timed."""
    return bool(correct) and status == "ok" and median_ms is not None


def baseline_name(impl: str) -> str:
    """The baseline's name in a dispatch's ``impl`` (``baseline:NAME``)."""
    return impl.removeprefix("baseline:")


def fmt_ms(ms: float | None) -> str:
    return "—" if ms is None else f"{ms:.4g} ms"


def cell_text(cell: Mapping[str, Any]) -> str:
    """A problem cell in one line: ``shape B=2 N=1000, dtype f16``."""
    parts = []
    for key, value in cell.items():
        if isinstance(value, Mapping):
            value = " ".join(f"{k}={v}" for k, v in value.items())
        parts.append(f"{key} {value}")
    return ", ".join(parts)


def no_best_text(summary: RunSummary) -> str:
    """Why a run has no best kernel: none of its candidates passed stage 2, or it stopped before the first
    (a wall-seconds budget the baseline's preparation and timing used up, say)."""
    if summary.spent.candidates == 0:
        return "no candidate was generated; there is no best kernel"
    return "no candidate passed stage 2; there is no best kernel"


def result_line(summary: RunSummary) -> str:
    """How the run ended, in one sentence: the best kernel and its time, the baseline and the speed-up."""
    if summary.best is None:
        head = no_best_text(summary)
    elif summary.measured and summary.best_ms is not None:
        head = f"best `{summary.best}` {fmt_ms(summary.best_ms)} measured"
        if summary.baseline is not None:
            head += f"; baseline `{summary.baseline}` {fmt_ms(summary.baseline_ms)}"
        if summary.speedup is not None:
            head += f"; speed-up {summary.speedup:.2f}x"
    else:
        head = (f"nothing was benchmarked; best by predicted time `{summary.best}` "
                f"{fmt_ms(summary.best_predicted_ms)} predicted")  # fmt: skip
    if summary.stopped:
        head += f" (stopped: {summary.stopped})"
    return head


# -- the ledger, as the report reads it --------------------------------------------------------------------


@attrs.frozen
class Dispatch:
    """One stage-3 dispatch: a candidate's (``candidate`` is its id) or the baseline's (``None``)."""

    id: int
    candidate: int | None
    impl: str
    status: str
    correct: bool
    median_ms: float | None
    gpu: str | None
    error: str | None
    samples: int

    @property
    def timed(self) -> bool:
        return is_timed(self.correct, self.status, self.median_ms)


@attrs.frozen
class Entry:
    """One candidate as the report shows it."""

    id: int
    name: str
    hash: str
    origin: str
    status: str  # unfiltered (stage 2 has not decided), rejected, compiled, measured, failed-on-gpu
    reason: str | None  # the gate and its first diagnostic, or how it failed on the GPU
    predicted_ms: float | None
    bound: str | None
    estimate: dict[str, Any] | None
    dispatches: tuple[Dispatch, ...]

    @property
    def measured_ms(self) -> float | None:
        """The best correct time of its dispatches (shown even for a candidate that is not ``measured``: one
        stage 2 rejected but was benchmarked all the same, or one that failed in another dispatch)."""
        times = [d.median_ms for d in self.dispatches if d.timed]
        return min(times) if times else None  # type: ignore[type-var]

    @property
    def correct(self) -> str | None:
        """``yes`` where every dispatch was correct, ``no`` where one was not, ``None`` where none ran."""
        return None if not self.dispatches else "yes" if all(d.timed for d in self.dispatches) else "no"

    def rank_key(self) -> tuple[int, float, int]:
        group = RANK_GROUPS.get(self.status, len(RANK_GROUPS))
        ms = self.measured_ms if self.status == "measured" else self.predicted_ms
        return group, math.inf if ms is None else ms, self.id


def read_dispatches(ledger: Ledger) -> list[Dispatch]:
    """Every dispatch in the order it was made."""
    rows = ledger.rows("SELECT d.*, (SELECT count(*) FROM samples s WHERE s.dispatch = d.id) AS n "
                       "FROM dispatches d ORDER BY d.id")  # fmt: skip
    return [Dispatch(r["id"], r["candidate"], r["impl"], r["status"], bool(r["correct"]), r["median_ms"], r["gpu"],
                     json.loads(r["measurement"]).get("error"), r["n"]) for r in rows]  # fmt: skip


def read_entries(ledger: Ledger, dispatches: Sequence[Dispatch]) -> list[Entry]:
    """Every candidate, ranked: measured by time, then compiled by predicted time, then the rest."""
    rows = ledger.rows("SELECT c.id, c.name, c.hash, c.origin, f.status, f.gate, f.reason, f.estimate, "
                       "f.estimate_ms, f.bound FROM candidates c LEFT JOIN filtered f ON f.candidate = c.id "
                       "ORDER BY c.id")  # fmt: skip
    entries = []
    for r in rows:
        mine = tuple(d for d in dispatches if d.candidate == r["id"])
        failed = [d for d in mine if not d.timed]
        status, reason = r["status"] or "unfiltered", None
        if status == "rejected":
            reason = f"{r['gate']}: {r['reason']}" if r["gate"] else r["reason"]
        elif failed:
            status = "failed-on-gpu"
            reason = f"gpu: {failed[0].status}" + (f": {failed[0].error}" if failed[0].error else "")
        elif mine:
            status = "measured"
        estimate = json.loads(r["estimate"]) if r["estimate"] else None
        entries.append(Entry(r["id"], r["name"], r["hash"], r["origin"], status, reason, r["estimate_ms"], r["bound"],
                             estimate, mine))  # fmt: skip
    return sorted(entries, key=Entry.rank_key)


# -- the plots ---------------------------------------------------------------------------------------------


def _figure(width: float, height: float) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _finish(ax: Any, path: Path, xlabel: str, ylabel: str, title: str, *, legend: bool = True) -> Path:
    """Label the plot and write it as a PNG (without the matplotlib version in it: the same plot, the same bytes)."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    if legend:
        ax.legend(fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    ax.figure.savefig(path, format="png", metadata={"Software": None})
    return path


def plot_best_against_benchmarks(path: Path, dispatches: Sequence[Dispatch], eligible: set[int],
                                 baseline: tuple[str, float] | None) -> Path | None:  # fmt: skip
    """(a) The best measured time after each GPU benchmark of a candidate, the baseline as a line. Only the
    times of ``eligible`` candidates (those measured correct every time) can be the best."""
    from matplotlib.ticker import MaxNLocator

    mine = [d for d in dispatches if d.candidate is not None]
    if not any(d.timed and d.candidate in eligible for d in mine):
        return None
    fig = _figure(7, 4)
    ax = fig.add_subplot()
    xs, best, points = [], [], []
    for i, d in enumerate(mine, 1):
        if d.timed and d.candidate in eligible:
            points.append((i, d.median_ms))
        current = min((p[1] for p in points), default=None)
        if current is not None:
            xs.append(i)
            best.append(current)
    ax.scatter([p[0] for p in points], [p[1] for p in points], s=14, color="0.6", label="each benchmark", zorder=2)
    ax.step(xs, best, where="post", color="tab:blue", label="best so far", zorder=3)
    failed = [i for i, d in enumerate(mine, 1) if not d.timed]
    if failed:
        ax.scatter(failed, [0.03] * len(failed), marker="x", color="tab:red", transform=ax.get_xaxis_transform(),
                   label="failed on the GPU", zorder=3)  # fmt: skip
    if baseline is not None:
        ax.axhline(baseline[1], color="tab:orange", linestyle="--",
                   label=f"baseline {baseline[0]} {fmt_ms(baseline[1])}")
    ax.set_ylim(bottom=0)
    ax.set_xlim(0.5, len(mine) + 0.5)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    return _finish(ax, path, "GPU benchmarks spent", "time (ms)", "best measured time against GPU benchmarks spent")


def plot_predicted_against_measured(path: Path, entries: Sequence[Entry]) -> Path | None:
    """(b) Each measured candidate's predicted time against its measured time, log-log, with y = x."""
    points = [(e.measured_ms, e.predicted_ms, e.name) for e in entries if e.status == "measured"
              and e.measured_ms is not None and e.predicted_ms is not None and e.predicted_ms > 0]  # fmt: skip
    if not points:
        return None
    fig = _figure(6, 6)
    ax = fig.add_subplot()
    ax.scatter([p[0] for p in points], [p[1] for p in points], s=18, color="tab:blue", zorder=3)
    for x, y, name in points:
        ax.annotate(name, (x, y), xytext=(4, 3), textcoords="offset points", fontsize=7)
    values = [v for p in points for v in p[:2]]
    lo, hi = min(values) / 2, max(values) * 2
    ax.plot([lo, hi], [lo, hi], color="0.5", linestyle="--", label="predicted = measured")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    return _finish(ax, path, "measured time (ms)", "predicted time (ms)", "predicted against measured time")


def plot_predicted(path: Path, entries: Sequence[Entry]) -> Path | None:
    """Each compiled candidate's predicted time, best first (the plot of a run that measured nothing)."""
    ranked = sorted((e for e in entries if e.predicted_ms is not None), key=lambda e: (e.predicted_ms, e.id))
    if not ranked:
        return None
    shown = ranked[:MOST_BARS]
    fig = _figure(7, max(2.5, 0.3 * len(shown) + 1.2))
    ax = fig.add_subplot()
    ys = range(len(shown))
    ax.barh(list(ys), [e.predicted_ms for e in shown], color="tab:blue")
    ax.set_yticks(list(ys), [f"{e.name} ({e.bound})" if e.bound else e.name for e in shown], fontsize=8)
    ax.invert_yaxis()
    more = f", the best {len(shown)} of {len(ranked)}" if len(ranked) > len(shown) else ""
    title = f"predicted time per compiled candidate (nothing measured{more})"
    return _finish(ax, path, "predicted time (ms)", "", title, legend=False)


def plot_roofline(path: Path, entry: Entry) -> Path | None:
    """(c) A kernel's estimate under the roofline: each term of its estimate as a bar, the predicted total and
    (where measured) the measured time as lines."""
    terms = {k: v for k, v in ((entry.estimate or {}).get("terms") or {}).items() if isinstance(v, int | float)}
    if not terms:
        return None
    names = [t for t in TERM_ORDER if t in terms] + sorted(set(terms) - set(TERM_ORDER))
    fig = _figure(7, 4)
    ax = fig.add_subplot()
    bound = (entry.estimate or {}).get("bound")
    ax.bar(names, [terms[n] for n in names], color=["tab:red" if n == bound else "tab:blue" for n in names])
    if entry.predicted_ms is not None:
        ax.axhline(entry.predicted_ms, color="0.4", linestyle="--", label=f"predicted {fmt_ms(entry.predicted_ms)}")
    if entry.measured_ms is not None:
        ax.axhline(entry.measured_ms, color="tab:green", label=f"measured {fmt_ms(entry.measured_ms)}")
    shown = [v for v in [*terms.values(), entry.predicted_ms, entry.measured_ms] if v is not None and v > 0]
    if shown and max(shown) > 100 * min(shown):  # spans decades: small terms would be invisible on a linear axis
        ax.set_yscale("log")
    model = (entry.estimate or {}).get("model", "the cost model")
    kind = "calibrated" if (entry.estimate or {}).get("calibrated") else "uncalibrated"
    ax.tick_params(axis="x", labelsize=8)
    return _finish(ax, path, "term of the estimate", "ms", f"{entry.name} under the roofline ({model}, {kind}; bound: "
                   f"{bound})", legend=entry.predicted_ms is not None or entry.measured_ms is not None)  # fmt: skip


# -- the markdown ------------------------------------------------------------------------------------------


def _cell(value: Any) -> str:
    """A value as one markdown table cell."""
    text = "—" if value is None or value == "" else str(value)
    return " ".join(text.split()).replace("|", "\\|")


def _table(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return lines


def _value(value: Any) -> str:
    """A ``meta`` value in a table cell: a mapping as :func:`cell_text` says it (unset keys left out), a list
    joined, text as it is, nothing as ``—``."""
    if isinstance(value, Mapping):
        return cell_text({k: v for k, v in value.items() if v is not None}) or "—"
    if isinstance(value, list):
        return ", ".join(_value(v) for v in value) or "—"
    return "—" if value is None else str(value)


def _run_section(ledger: Ledger) -> list[str]:
    meta = {k: v for k, v in ledger.meta().items() if k != "schema"}
    started = ledger.one("SELECT min(started_at) AS at FROM sessions")
    out = ["## The run", ""]
    out += _table(("key", "value"), [(k, _value(meta[k])) for k in sorted(meta)])
    if started is not None and started["at"]:
        out += ["", f"Started on {started['at'][:10]}."]
    versions = ledger.rows("SELECT kind, name, version FROM versions ORDER BY kind, name")
    if versions:
        out += ["", "### Versions in use", ""]
        out += _table(("kind", "name", "version"), [tuple(r) for r in versions])
    return out


def _result_section(summary: RunSummary, entries: Sequence[Entry], dispatches: Sequence[Dispatch]) -> list[str]:
    line = result_line(summary)
    out = ["## The result", "", f"**{line[:1].upper() + line[1:]}.**", ""]
    best = next((e for e in entries if e.hash == summary.best_hash), None)
    if not summary.measured:
        out.append("No GPU of the target's architecture ran the candidates, so they are ranked by the cost model's "
                   "predicted time, not by a measurement.")  # fmt: skip
        if best is not None and best.estimate is not None:
            kind = "calibrated" if best.estimate.get("calibrated") else "uncalibrated"
            model = best.estimate.get("model", "the cost model")
            out.append(f"`{best.name}` is predicted {best.bound}-bound by {model} ({kind}).")
    elif best is not None:
        timed = [d for d in best.dispatches if d.timed]
        where = f" on {timed[0].gpu}" if timed and timed[0].gpu else ""
        samples = f", the median of {timed[0].samples} samples" if timed and timed[0].samples else ""
        out.append(f"`{best.name}` ({best.hash[:12]}) was measured{where}{samples}; the cost model predicted "
                   f"{fmt_ms(best.predicted_ms)}.")  # fmt: skip
        if summary.baseline is not None and summary.baseline_ms is not None:
            out.append(f"The baseline `{summary.baseline}` was measured in the same run.")
        else:
            failed = [d for d in dispatches if d.candidate is None and not d.timed]
            out.append(f"The baseline `{baseline_name(failed[0].impl)}` has no time ({failed[0].status}: "
                       f"{failed[0].error}), so there is no speed-up." if failed else
                       "No baseline was measured, so there is no speed-up.")  # fmt: skip
    if summary.stages:
        out += ["", "Stages:", ""] + [f"- **{k}**: {v}" for k, v in summary.stages.items()]
    spent = summary.spent
    out += ["", f"Spent: {spent.candidates} candidate(s), {spent.gpu_benchmarks} GPU benchmark(s), "
                f"{spent.agent_tokens} agent token(s)."]  # fmt: skip
    return out


def _candidates_section(entries: Sequence[Entry]) -> list[str]:
    ranked = {e.id: i for i, e in enumerate((e for e in entries if e.status in ("measured", "compiled")), 1)}
    rows = [(ranked.get(e.id), f"`{e.name}`", e.origin, e.status, e.reason, fmt_ms(e.predicted_ms), e.bound,
             fmt_ms(e.measured_ms), e.correct) for e in entries]  # fmt: skip
    out = ["## Candidates", "", f"{len(entries)} candidate(s), ranked by measured time, then by predicted time.", ""]
    return out + _table(("#", "name", "origin", "status", "gate: reason", "predicted", "bound", "measured",
                         "correct"), rows)  # fmt: skip


def _findings_section(ledger: Ledger, names: Mapping[int, str]) -> list[str]:
    rows = ledger.rows("SELECT * FROM findings ORDER BY id")
    out = ["## Findings", ""]
    if not rows:
        return out + ["No findings were routed.", ""]
    order = list(DESTINATIONS) + sorted({r["destination"] for r in rows} - set(DESTINATIONS))
    for dest in order:
        mine = [r for r in rows if r["destination"] == dest]
        if not mine:
            continue
        out += [f"### To {DESTINATION_TITLES.get(dest, dest)} ({len(mine)})", ""]
        for r in mine:
            about = f" `{names[r['candidate']]}`" if r["candidate"] in names else ""
            at = f" at `{r['location']}`" if r["location"] else ""
            out.append(f"- **{r['kind']}**{about}{at}: {' '.join(r['message'].split())}")
            evidence = json.loads(r["evidence"]) if r["evidence"] else {}
            if r["reproducer"] or evidence:
                out += ["", "  <details><summary>reproducer and evidence</summary>", ""]
                if r["reproducer"]:
                    out += ["  ```cake"] + [f"  {line}".rstrip() for line in r["reproducer"].splitlines()]
                    out += ["  ```", ""]
                if evidence:
                    out += [f"  evidence: `{json.dumps(evidence, sort_keys=True)}`", ""]
                out += ["  </details>", ""]
        out.append("")
    return out


def _plots(plots: Path, summary: RunSummary, entries: Sequence[Entry],
           dispatches: Sequence[Dispatch]) -> list[tuple[str, Path | None, str]]:  # fmt: skip
    """Draw the plots: (title, the PNG or None, what it shows or why it is missing)."""
    best = next((e for e in entries if e.hash == summary.best_hash), None)
    drawn: list[tuple[str, Path | None, str]] = []

    def draw(title: str, png: Path | None, shows: str, missing: str) -> None:
        drawn.append((title, png, shows if png is not None else f"Not drawn: {missing}."))

    baseline = (summary.baseline, summary.baseline_ms) if summary.baseline and summary.baseline_ms else None
    candidates = [d for d in dispatches if d.candidate is not None]
    if candidates:
        draw("Best time against GPU benchmarks spent",
             plot_best_against_benchmarks(plots / "best-time.png", dispatches,
                                          {e.id for e in entries if e.status == "measured"}, baseline),
             "The best correct median time after each benchmark of a candidate, in the order they ran"
             + ("; a cross marks a benchmark that failed" if any(not d.timed for d in candidates) else "")
             + ("; the dashed line is the baseline." if baseline else "."),
             "no benchmark of a candidate gave a correct time")  # fmt: skip
        draw("Predicted against measured time", plot_predicted_against_measured(plots / "predicted-vs-measured.png",
                                                                                entries),
             "Each measured candidate's predicted time against its measured time (log-log); on the dashed line the "
             "cost model is exact.", "no candidate has both a prediction and a measured time")  # fmt: skip
    else:
        draw("Predicted time per compiled candidate", plot_predicted(plots / "predicted.png", entries),
             "The cost model's predicted time of each compiled candidate, best first, with the bound it hits.",
             "no candidate has a predicted time (no cost model, or none compiled)")  # fmt: skip
    which = "measured" if best is not None and best.measured_ms is not None else "predicted"
    draw(f"The best kernel under the roofline (best {which})",
         plot_roofline(plots / "roofline.png", best) if best is not None else None,
         "Bars: the terms of the estimate of the kernel's longest launch (the bound it hits in red; a log axis where "
         "they span decades); lines: the predicted total" + (" and the measured time." if which == "measured" else "."),
         "there is no best kernel" if best is None else "its estimate carries no terms")  # fmt: skip
    return drawn


def write_report(out: Path, ledger: Ledger, summary: RunSummary) -> Path:
    """Write ``out/report.md`` and its plots under ``out/plots/``; return the report's path."""
    dispatches = read_dispatches(ledger)
    entries = read_entries(ledger, dispatches)
    meta = ledger.meta()
    title = f"# cake run: {meta.get('problem', '?')} on {meta.get('target', '?')}"
    lines = [title, ""] + _run_section(ledger) + [""] + _result_section(summary, entries, dispatches) + [""]
    lines += _candidates_section(entries) + [""] + _findings_section(ledger, {e.id: e.name for e in entries})
    lines += ["## Plots", ""]
    for stale in PLOTS:
        (out / "plots" / stale).unlink(missing_ok=True)
    for heading, png, caption in _plots(out / "plots", summary, entries, dispatches):
        lines += [f"### {heading}", ""]
        if png is not None:
            lines += [f"![{heading}]({png.relative_to(out).as_posix()})", ""]
        lines += [caption, ""]
    path = out / "report.md"
    path.write_text("\n".join(lines).rstrip() + "\n", encoding="utf-8")
    return path

