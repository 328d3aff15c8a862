"""A move that is no faster by the cost model than its parent, but enables one that is, is proposed together with
that move ("through"): from the tensorized naive kmeans-assign schedule, warp specialization (mma.sync consumers,
predicted slower) is proposed with the wgmma it enables (predicted faster), with the installed tactics."""

from __future__ import annotations

import random

from cake_agent_search.agent import SearchAgent
from cake_agent_search.chain import read_chain, replay
from cake_core import plugins
from cake_core.ir.hashing import structural_hash
from cake_core.loop.agent import Parent
from cake_core.loop.tactic import Application


def test_warp_specialization_is_proposed_through_to_wgmma(seed, run_info) -> None:
    reg = plugins.registry()
    tactics, target = reg.by_name("tactics"), reg.get("targets", "h200")
    naive = seed("naive")
    tensorize = Application("tensorize", "assign:all:k", {"BN": 128, "fold": "registers"})
    module, applied = replay(naive.module, (tensorize,), tactics, target)
    assert applied == (tensorize,)
    parent = Parent(module, structural_hash(module), "tensorized", None, False, "")
    proposals, _ = SearchAgent().propose(run_info, [parent], [], target, 8, random.Random("0:1"))
    through = [read_chain(p.how) for p in proposals]
    through = [c for c in through if c is not None and c.move == "through"]
    assert [[s.tactic for s in c.steps] for c in through if c.steps[0].tactic == "warp-specialize"] == [
        ["warp-specialize", "wgmma"]
    ]
    # the proposal is what its chain makes from the parent (a resumed run rebuilds it from the how)
    chain = next(c for c in through if c.steps[0].tactic == "warp-specialize")
    made = next(p for p in proposals if read_chain(p.how) == chain)
    assert structural_hash(replay(parent.module, chain.steps, tactics, target)[0]) == structural_hash(made.module)
