"""``cake run --agent``: rounds of proposals built on the best so far, deduplicated by structure, stopped by the
candidate budget, recorded with their parent and how they were made, and the same for the same ``--seed``.

The agent here is a test's: it re-tiles the best parent (an Ampere-path schedule) with settings of
``AMPERE_SWEEP`` it draws from the round's ``rng``."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest
from cake_core import plugins
from cake_core.hookspecs import hookimpl
from cake_core.ir.transform import set_consts
from cake_core.loop.agent import Feedback, Parent, Proposal
from cake_core.loop.ledger import Ledger
from cake_core.loop.records import Budgets, RunInfo
from cake_core.loop.run import RunOptions, run
from cake_core.problems.kmeans_assign.cells import AMPERE_SWEEP
from cake_core.runtime import device

SCHEDULES = Path(__file__).resolve().parents[2] / "cake_core" / "problems" / "kmeans_assign" / "schedules"


class Retile:
    name = "retile"

    def __init__(self) -> None:
        self.feedback_seen: list[int] = []

    def propose(self, run: RunInfo, parents: Sequence[Parent], feedback: Sequence[Feedback], target: object,
                count: int, rng: random.Random, known: frozenset[str]) -> tuple[list[Proposal], int]:  # fmt: skip
        self.feedback_seen.append(len(feedback))
        best = parents[0]
        picks = rng.sample(range(len(AMPERE_SWEEP)), k=count)
        out = [Proposal(set_consts(best.module, AMPERE_SWEEP[i], kernel="assign"), f"retile {AMPERE_SWEEP[i]}",
                        best.hash) for i in picks]  # fmt: skip
        out.append(Proposal(best.module, "the parent again (a duplicate the loop must drop)", best.hash))
        return out, 10 * count


@pytest.fixture
def agent(monkeypatch: pytest.MonkeyPatch) -> Retile:
    monkeypatch.setattr(device, "driver_status", lambda **_: (False, "the CPU path, by the test"))
    retile = Retile()

    class Plugin:
        @staticmethod
        @hookimpl
        def cake_register_agents(register) -> None:  # type: ignore[no-untyped-def]
            register(retile)

    plugins.reset()
    monkeypatch.setattr(plugins, "_REGISTRY", plugins.load(extra=[Plugin()]))
    return retile


def _run(out: Path, seed: int, budget: int) -> None:
    opts = RunOptions("kmeans-assign", "h200", out, seed=seed, agent="retile", workers=1,
                      sources=(SCHEDULES / "ampere.cake",), budgets=Budgets(candidates=budget))  # fmt: skip
    run(opts, log=lambda _: None)


def test_rounds_build_on_the_best_and_stop_at_the_budget(agent: Retile, tmp_path: Path) -> None:
    _run(tmp_path / "a", seed=5, budget=6)
    db = sqlite3.connect(tmp_path / "a" / "ledger.sqlite")
    rows = db.execute("SELECT round, origin, parent, how FROM candidates ORDER BY id").fetchall()
    assert len(rows) == 6  # the budget
    assert rows[0][:2] == (0, "from")
    seed_hash = db.execute("SELECT hash FROM candidates WHERE id = 1").fetchone()[0]
    assert {r[1] for r in rows[1:]} == {"agent:retile"} and all(r[3].startswith("retile ") for r in rows[1:])
    assert rows[1][2] == seed_hash  # round 1 is built on the seed, the only candidate then
    assert [r[0] for r in db.execute("SELECT round FROM rounds ORDER BY round")] == sorted({r[0] for r in rows})
    assert db.execute("SELECT SUM(tokens) FROM rounds").fetchone()[0] > 0
    assert len(agent.feedback_seen) >= 1


def test_the_same_seed_makes_the_same_run_and_another_seed_another(agent: Retile, tmp_path: Path) -> None:
    for name, seed in (("a", 5), ("b", 5), ("c", 6)):
        _run(tmp_path / name, seed=seed, budget=5)
    a, b, c = (Ledger.open(tmp_path / n, {}).contents() for n in "abc")
    assert a == b
    assert a["candidates"] != c["candidates"]


def test_with_an_agent_and_no_from_the_run_starts_from_the_naive_schedule(agent: Retile, tmp_path: Path) -> None:
    opts = RunOptions("kmeans-assign", "h200", tmp_path / "run", agent="retile", workers=1,
                      budgets=Budgets(candidates=1))  # fmt: skip
    run(opts, log=lambda _: None)
    rows = sqlite3.connect(tmp_path / "run" / "ledger.sqlite").execute("SELECT name, origin FROM candidates").fetchall()
    assert rows == [("naive", "seed")]


def test_without_feedback_the_agent_gets_no_findings_and_they_are_still_recorded(
    agent: Retile, tmp_path: Path
) -> None:
    """--no-feedback (the ablation): the findings are routed and recorded as ever, the agent is handed none;
    the choice is recorded with the run, as its seed is."""
    refused = Path(__file__).resolve().parents[1] / "adversarial" / "oob_write.cake"
    for name, feedback in (("on", True), ("off", False)):
        agent.feedback_seen.clear()
        opts = RunOptions("kmeans-assign", "h200", tmp_path / name, seed=5, agent="retile", workers=1,
                          sources=(SCHEDULES / "ampere.cake", refused), budgets=Budgets(candidates=6),
                          feedback=feedback)  # fmt: skip
        run(opts, log=lambda _: None)
        findings = sqlite3.connect(tmp_path / name / "ledger.sqlite").execute("SELECT COUNT(*) FROM findings")
        assert findings.fetchone()[0] > 0
        assert agent.feedback_seen and (max(agent.feedback_seen) > 0) == feedback
    # the run records the choice, and a resumed run reads it from there (as it reads the seed and the agent)
    meta = dict(sqlite3.connect(tmp_path / "off" / "ledger.sqlite").execute("SELECT key, value FROM meta"))
    assert meta["feedback"] == "false"


def test_an_agent_with_nothing_new_ends_the_run_and_the_summary_says_so(agent: Retile, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A round whose proposals are all recorded already ends the run (no budget did), and the summary says why."""

    def again(run: RunInfo, parents: Sequence[Parent], *_: object) -> tuple[list[Proposal], int]:
        return [Proposal(parents[0].module, "the parent again", parents[0].hash)], 0

    monkeypatch.setattr(agent, "propose", again)
    opts = RunOptions("kmeans-assign", "h200", tmp_path / "run", agent="retile", workers=1,
                      sources=(SCHEDULES / "ampere.cake",))  # fmt: skip
    summary = run(opts, log=lambda _: None)
    assert summary.stopped == "the agent proposed nothing new in round 1 (1 proposal(s), all recorded)"
