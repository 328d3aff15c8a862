"""The observer hooks, one test each (``test_docs.py`` asks for ``test_hook_<name>``): an installed distribution,
found through its entry point like any plugin, watches one ``cake run`` (stage 3 on a worker with a fake backend
that answers right, so every stage has events) and sees every step with its typed record."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
from cake_core import plugins

ROOT = Path(__file__).resolve().parents[2]
SCHEDULES = ROOT / "cake_core" / "problems" / "kmeans_assign" / "schedules"
WRONG = ROOT / "tests" / "corpus_semantic" / "naive_argmin_base" / "wrong.cake"

OBSERVER = """
from cake_core.hookspecs import hookimpl

EVENTS = []

@hookimpl
def cake_run_started(run, resumed):
    EVENTS.append(("started", run, resumed))

@hookimpl
def cake_candidate_generated(run, candidate, resumed):
    EVENTS.append(("generated", candidate, resumed))

@hookimpl
def cake_candidate_filtered(run, candidate, outcome, resumed):
    EVENTS.append(("filtered", (candidate, outcome), resumed))

@hookimpl
def cake_measured(run, candidate, measurement, resumed):
    EVENTS.append(("measured", (candidate, measurement), resumed))

@hookimpl
def cake_finding_routed(run, finding, resumed):
    EVENTS.append(("routed", finding, resumed))

@hookimpl
def cake_run_finished(run, summary):
    EVENTS.append(("finished", summary, False))
"""

_CACHE: dict[str, Any] = {}


@pytest.fixture
def events(install_fake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, list]:
    """The events of one run, by kind (the run is made once, by the first test that asks)."""
    if "events" not in _CACHE:
        from cake_core.loop.records import Budgets
        from cake_core.loop.run import RunOptions, run
        from cake_core.problems.kmeans_assign.problem import KMeansAssign
        from cake_core.problems.problem import Cell
        from cake_core.runtime import device, worker

        dist = install_fake("cake-run-watcher", "0.1", "watcher", "cake_run_watcher", OBSERVER)
        monkeypatch.syspath_prepend(str(ROOT / "tests" / "loop"))  # the fake backend, for the worker too
        monkeypatch.setattr(device, "driver_status", lambda **_: (True, "fake"))
        monkeypatch.setattr(worker, "GpuRunner", functools.partial(worker.GpuRunner, backend="fake_gpu:ReferenceGpu",
                                                                   check_driver=False))  # fmt: skip
        monkeypatch.setattr(KMeansAssign, "default_cell", Cell({"B": 2, "N": 1000, "K": 100, "D": 128}, "bf16"))
        plugins.reset()
        sources = (SCHEDULES / "naive.cake", SCHEDULES / "ampere.cake", WRONG)
        opts = RunOptions("kmeans-assign", "h200", tmp_path / "run", workers=1, sources=sources, budgets=Budgets())
        run(opts, log=lambda _: None)
        module = __import__(dist.module)
        by_kind: dict[str, list] = {}
        for kind, payload, resumed in module.EVENTS:
            by_kind.setdefault(kind, []).append((payload, resumed))
        _CACHE["events"] = by_kind
    return _CACHE["events"]  # type: ignore[no-any-return]


def test_hook_cake_run_started(events) -> None:
    ((info, resumed),) = events["started"]
    assert (info.problem, info.target, info.seed, resumed) == ("kmeans-assign", "h200", 0, False)
    assert info.cell == {"shape": {"B": 2, "N": 1000, "K": 100, "D": 128}, "dtype": "bf16"}


def test_hook_cake_candidate_generated(events) -> None:
    got = [(c.name, c.origin, c.round, r) for c, r in events["generated"]]
    assert got == [("naive", "from", 0, False), ("ampere", "from", 0, False), ("wrong", "from", 0, False)]
    assert events["generated"][0][0].source == (SCHEDULES / "naive.cake").read_text()


def test_hook_cake_candidate_filtered(events) -> None:
    got = {c.name: o for (c, o), _ in events["filtered"]}
    assert (got["naive"].status, got["ampere"].status) == ("compiled", "compiled")
    assert got["ampere"].estimate is not None and got["ampere"].compile is not None
    assert (got["wrong"].status, got["wrong"].gate) == ("rejected", "interp")
    assert [d.code for d in got["wrong"].interp] == ["CS009"]


def test_hook_cake_measured(events) -> None:
    measured = {c.name: m for (c, m), _ in events["measured"] if c is not None}
    assert set(measured) == {"naive", "ampere"}
    assert all(m.status == "ok" and m.correct and m.gpu == "Fake GPU" for m in measured.values())


def test_hook_cake_finding_routed(events) -> None:
    findings = [f for f, _ in events["routed"]]
    rejected = [f for f in findings if f.kind == "rejected-interp"]
    assert len(rejected) == 1 and rejected[0].destination == "candidate"
    assert rejected[0].message.startswith("CS009 ") and rejected[0].reproducer == WRONG.read_text()
    assert {f.destination for f in findings} <= {"candidate", "verifier", "cost-model", "vocabulary"}


def test_hook_cake_run_finished(events) -> None:
    ((summary, _),) = events["finished"]
    assert summary.measured and summary.best in {"naive", "ampere"} and summary.best_ms is not None
    assert summary.spent.gpu_benchmarks == 2 and summary.spent.candidates == 3
