"""``SearchAgent.propose`` on its own: new and distinct proposals ranked by the cost model, the same for the same
``rng``, crossovers that recombine two chains, refused applications left alone, and a measured win exploited."""

from __future__ import annotations

import random
from collections.abc import Mapping

import pytest
from cake_agent_search.agent import SearchAgent
from cake_agent_search.chain import chain_of, read_chain, replay
from cake_agent_search.rank import Ranker
from cake_core.cost.model import Estimate
from cake_core.hookspecs import hookimpl
from cake_core.ir.hashing import structural_hash
from cake_core.loop.agent import Feedback, Parent
from cake_core.loop.records import Finding
from cake_core.loop.tactic import Application


def _propose(registry, run_info, parents, count=8, seed="0:1", feedback=()):
    target = registry.get("targets", "h200")
    return SearchAgent().propose(run_info, parents, list(feedback), target, count, random.Random(seed))


def _made(registry, parent: Parent, *steps: Application) -> Parent:
    """A candidate the agent made from ``parent`` by ``steps`` (a mutation chain), as the loop hands it back."""
    module, applied = replay(parent.module, steps, registry.by_name("tactics"), registry.get("targets", "h200"))
    assert applied == steps
    how = chain_of(parent).then(parent.hash, steps, "mutate").how()
    return Parent(module, structural_hash(module), "made", None, False, how)


def _rung(site: str, value: int) -> Application:
    return Application("test-ladder", site, {"value": value})


def test_proposals_are_new_distinct_chained_and_ranked_by_the_cost_model(registry, run_info, seed) -> None:
    parents = [seed("ampere"), seed("naive")]
    proposals, tokens = _propose(registry, run_info, parents)
    assert tokens == 0 and len(proposals) == 8
    hashes = [structural_hash(p.module) for p in proposals]
    assert len(set(hashes)) == len(hashes) and not set(hashes) & {p.hash for p in parents}
    by_hash = {p.hash: p for p in parents}
    tactics, target = registry.by_name("tactics"), registry.get("targets", "h200")
    for p, h in zip(proposals, hashes):
        chain = read_chain(p.how)
        base = by_hash[p.parent]
        assert chain is not None and chain.root == base.hash and len(chain.steps) == 1 and chain.move == "mutate"
        assert structural_hash(replay(base.module, chain.steps, tactics, target)[0]) == h
    ranker = Ranker.for_run(run_info, target, registry)
    estimates = [ranker.estimate(p.module) for p in proposals]
    assert all(e is not None for e in estimates) and estimates == sorted(estimates)


class RungModel:
    """A cost model of the test: ``assign``'s R counts ten times ``centroid_norms``'s, smaller is faster."""

    name, version, calibrated = "rungs", "0", False

    def estimate(self, checked, target, values: Mapping[str, int | str]) -> Estimate:
        r = {k.name: next(c.value.value for c in k.consts if c.name == "R") for k in checked.module.kernels}
        return Estimate(self.name, self.version, False, 10.0 * r["assign"] + r["centroid_norms"], "rungs", ())

    def update(self, estimates, measured_ms) -> None:
        pass


def test_the_best_predicted_moves_are_proposed_fastest_first(use_plugins, run_info, seed, const_ladder) -> None:
    class Plugin:
        @staticmethod
        @hookimpl
        def cake_register_cost_models(register) -> None:  # type: ignore[no-untyped-def]
            register(RungModel())

    reg = use_plugins(Plugin(), tactics=[const_ladder()], without=("tactics", "cost_models"))
    # naive's four moves (each R one rung down or up) predict 768, 1344, 1536 and 2688
    proposals, _ = _propose(reg, run_info, [seed("naive")], count=2)
    assert [read_chain(p.how).steps for p in proposals] == [(_rung("assign.R", 64),), (_rung("centroid_norms.R", 64),)]


def test_the_same_rng_makes_the_same_proposals_and_the_agent_keeps_no_state(registry, run_info, seed) -> None:
    parents = [seed("ampere"), seed("naive")]
    once = _propose(registry, run_info, parents, count=2, seed="7:2")
    agent, target = SearchAgent(), registry.get("targets", "h200")
    for _ in range(2):  # one agent object asked twice, as a run asks it round after round
        again = agent.propose(run_info, parents, [], target, 2, random.Random("7:2"))
        assert [(p.how, p.parent, structural_hash(p.module)) for p in again[0]] == \
               [(p.how, p.parent, structural_hash(p.module)) for p in once[0]]  # fmt: skip
    # the rng decides which moves the cost model gets to rank
    drawn = {tuple(p.how for p in _propose(registry, run_info, parents, count=1, seed=f"{s}:1")[0]) for s in range(8)}
    assert len(drawn) > 1


def test_a_crossover_recombines_two_chains(registry, run_info, seed) -> None:
    ampere = seed("ampere")
    # two chains that end where no single rung reaches from the other: BN 128 -> 64 -> 32, BK 32 -> 64 -> 128
    a = _made(registry, ampere, _rung("assign.BN", 64), _rung("assign.BN", 32))
    b = _made(registry, ampere, _rung("assign.BK", 64), _rung("assign.BK", 128))
    tactics, target = registry.by_name("tactics"), registry.get("targets", "h200")
    crossed = []
    for s in range(6):
        for p in _propose(registry, run_info, [a, b], count=20, seed=f"{s}:1")[0]:
            chain = read_chain(p.how)
            if chain.move != "crossover":
                continue
            base, donor = (a, b) if p.parent == a.hash else (b, a)
            assert chain.donor == donor.hash and chain.root == ampere.hash
            assert chain.steps[:2] == chain_of(base).steps
            new = chain.steps[2:]
            assert new and all(s in chain_of(donor).steps for s in new)
            assert structural_hash(replay(ampere.module, chain.steps, tactics, target)[0]) == structural_hash(p.module)
            crossed.append(chain)
    # BN at 32 and BK at 128 together: both chains in one
    assert any(len(c.steps) == 4 for c in crossed)


def _refusal(p, kind: str = "rejected-verify") -> Feedback:
    h = structural_hash(p.module)
    return Feedback(Finding("candidate", kind, "refused by the test", 1, 2), h, p.how)


def test_a_refused_application_is_not_proposed_again(registry, run_info, seed) -> None:
    naive = seed("naive")
    first, _ = _propose(registry, run_info, [naive])
    assert len(first) == 4  # every rung of R in both kernels
    refused = first[0]
    key = read_chain(refused.how).last.key
    # a compiler warning does not refuse a candidate: the same four come back
    again, _ = _propose(registry, run_info, [naive], feedback=[_refusal(refused, "compiler-warning")])
    assert [p.how for p in again] == [p.how for p in first]
    after, _ = _propose(registry, run_info, [naive], feedback=[_refusal(refused)])
    assert [p.how for p in after] == [p.how for p in first[1:]]
    # nor is it carried into a crossover: a parent whose chain holds it does not give it to another
    holder = _made(registry, naive, *read_chain(refused.how).steps)
    other = _made(registry, naive, read_chain(first[1].how).last)
    for p in _propose(registry, run_info, [other, holder], feedback=[_refusal(refused)])[0]:
        chain = read_chain(p.how)
        assert key not in chain.keys or p.parent == holder.hash


@pytest.mark.parametrize("measured", [True, False])
def test_a_measured_win_gets_half_the_proposals(registry, run_info, seed, measured: bool) -> None:
    # naive measured faster than ampere: the cost model alone would build on ampere (predicted ~15x faster)
    naive, ampere = seed("naive", 1.0, measured), seed("ampere", 3.0, measured)
    proposals, _ = _propose(registry, run_info, [naive, ampere], count=4)
    on_naive = [p for p in proposals if p.parent == naive.hash or read_chain(p.how).donor == naive.hash]
    assert len(on_naive) == (2 if measured else 0)


def test_nothing_to_build_on_proposes_nothing(registry, run_info, seed) -> None:
    assert _propose(registry, run_info, []) == ([], 0)
    assert _propose(registry, run_info, [seed("naive")], count=0) == ([], 0)


def test_a_candidate_on_the_way_from_the_root_is_not_proposed_again(registry, run_info, seed) -> None:
    naive = seed("naive")
    down = _made(registry, naive, _rung("assign.R", 64))
    further = _made(registry, down, _rung("assign.R", 32))  # its one move back up is `down` itself
    assert read_chain(further.how).lineage == (down.hash,)
    proposals, _ = _propose(registry, run_info, [further])
    hashes = {structural_hash(p.module) for p in proposals}
    # R in assign: 32 -> 16 (32 -> 64 is `down`); R in centroid_norms: 128 -> 64 or 256
    assert len(proposals) == 3 and not hashes & {naive.hash, down.hash, further.hash}
    assert all(read_chain(p.how).lineage == (down.hash, further.hash) for p in proposals)
