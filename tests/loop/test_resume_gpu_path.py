"""``--resume`` on the GPU path (a worker process with a fake backend that answers right): a run interrupted
after some dispatches ends, once resumed, with the same best kernel and ledger contents as an uninterrupted
run, and the measurements already recorded come from the ledger instead of being taken again, with the seconds
each step of them took."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cake_core.hookspecs import hookimpl
from cake_core.loop.ledger import Ledger
from cake_core.loop.records import Budgets
from cake_core.loop.run import RunOptions, run


class Interrupt:
    """An observer that stops the run (as Ctrl-C would) after ``after`` new measurements, counting them."""

    def __init__(self, after: int | None = None) -> None:
        self.after, self.new, self.resumed, self.phases = after, [], [], []

    @hookimpl
    def cake_measured(self, candidate, measurement, resumed) -> None:  # type: ignore[no-untyped-def]
        if candidate is None:  # the problem's baseline (the fake backend has none to run)
            return
        (self.resumed if resumed else self.new).append(measurement.impl)
        self.phases.append(measurement.phases)
        if self.after is not None and len(self.new) == self.after:
            raise KeyboardInterrupt


def _opts(out: Path, **kw) -> RunOptions:  # type: ignore[no-untyped-def]
    return RunOptions("kmeans-assign", "h200", out, seed=3, workers=1, budgets=Budgets(), **kw)


def test_resume_takes_measurements_from_the_ledger(reference_gpu, small_cell, tmp_path: Path) -> None:
    whole = run(_opts(tmp_path / "whole"), log=lambda _: None)
    assert whole.measured and whole.best is not None and whole.best_ms is not None

    first = Interrupt(after=2)
    with pytest.raises(KeyboardInterrupt):
        run(_opts(tmp_path / "cut"), observers=[first], log=lambda _: None)
    assert len(first.new) == 2
    again = Interrupt()
    summary = run(_opts(tmp_path / "cut", resume=True), observers=[again], log=lambda _: None)
    assert again.resumed == first.new  # the two recorded dispatches, read back, not repeated
    assert set(again.new).isdisjoint(first.new) and len(again.new) == 3
    assert (summary.best, summary.best_ms) == (whole.best, whole.best_ms)
    assert Ledger.open(tmp_path / "cut", {}).contents() == Ledger.open(tmp_path / "whole", {}).contents()
    steps = {"prepare", "sass", "run", "again", "oracle", "timed", "oracle-after"}
    assert len(again.phases) == 5 and all(steps <= set(p) for p in again.phases)  # read back, and taken anew
    findings = [json.loads(r["measurement"])["sass"] for r in Ledger.open(tmp_path / "whole", {}).rows(
        "SELECT measurement FROM dispatches WHERE candidate IS NOT NULL")]  # fmt: skip
    assert len(findings) == 5  # cuobjdump ran beside the (fake) GPU work, and its finding is in every record
    assert all(f["available"] and f["error"] is None and f["present"] == f["claims"] for f in findings), findings
    assert sum(bool(f["claims"]) for f in findings) >= 3  # every committed schedule but the naive one claims some


def test_a_ledger_written_before_phases_were_recorded_gains_their_column(tmp_path: Path) -> None:
    ledger = Ledger.create(tmp_path, {"problem": "kmeans-assign", "target": "h200"})
    ledger.db.execute("ALTER TABLE dispatches DROP COLUMN phases_seconds")
    ledger.close()
    opened = Ledger.open(tmp_path, {"problem": "kmeans-assign"})
    assert "phases_seconds" in {r["name"] for r in opened.db.execute("PRAGMA table_info(dispatches)")}
