"""What a round spends its GPU benchmarks on: every tactic that offers the best parent something is built (a
structural move is not crowded out by constant changes), and a module the cost model predicts many times slower
than the fastest the round knows is not proposed, unless it builds on a measured win."""

from __future__ import annotations

import random

from cake_agent_search.agent import HOPELESS, Move, SearchAgent, _every_tactic_first
from cake_agent_search.chain import read_chain
from cake_agent_search.rank import Ranker
from cake_core import plugins
from cake_core.loop.tactic import Application


def _move(base: int, tactic: str, value: int, kind: str = "mutate") -> Move:
    return Move(base, (Application(tactic, "k", {"v": value}),), kind, 1.0)


def test_the_first_parents_first_move_of_each_tactic_leads_in_drawn_order() -> None:
    drawn = [_move(1, "b", 0), _move(0, "a", 1), _move(0, "a", 2), _move(0, "c", 3, "crossover"), _move(0, "b", 4),
             _move(1, "d", 5), _move(0, "a", 6)]  # fmt: skip
    assert [m.steps[0].params["v"] for m in _every_tactic_first(drawn)] == [1, 4, 0, 2, 3, 5, 6]
    assert _every_tactic_first([]) == []


def test_from_naive_the_round_proposes_tensorize_and_none_of_the_hopeless_constant_changes(seed, run_info) -> None:
    reg = plugins.registry()
    target = reg.get("targets", "h200")
    naive = seed("naive")
    proposals, _ = SearchAgent().propose(run_info, [naive], [], target, 8, random.Random("0:1"))
    ranker = Ranker.for_run(run_info, target, reg)
    estimates = [ranker.estimate(p.module) for p in proposals]
    assert {read_chain(p.how).steps[0].tactic for p in proposals} == {"tensorize"}
    assert max(estimates) <= HOPELESS * min(estimates) < ranker.estimate(naive.module)
