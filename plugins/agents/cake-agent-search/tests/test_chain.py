"""A tactic chain survives the ledger: written to a proposal's ``how`` as one line, read back the same, and
replayed from its root to the candidate it made."""

from __future__ import annotations

from cake_agent_search.chain import Chain, chain_of, read_chain, replay
from cake_core.ir.hashing import structural_hash
from cake_core.loop.tactic import Application


def test_a_chain_round_trips_through_its_how_on_one_line() -> None:
    steps = (Application("test-ladder", "assign.R", {"value": 64}), Application("other", "k.x", {"s": "a", "n": 2}))
    chain = Chain("abc", steps, "crossover", donor="def", lineage=("p1", "p2"))
    how = chain.how()
    assert "\n" not in how
    assert read_chain(how) == chain
    assert read_chain(Chain("abc").then("abc", steps[:1], "mutate").how()) == Chain("abc", steps[:1], "mutate")
    # a child's lineage is its parent's, then the parent (a root is not its own ancestor)
    assert chain.then("p3", (), "mutate").lineage == ("p1", "p2", "p3")


def test_another_how_is_not_a_chain_and_a_seed_is_the_root_of_its_own(seed) -> None:
    assert read_chain("read from naive.cake") is None
    assert read_chain('{"agent": "other", "chain": []}') is None
    assert read_chain("[1, 2]") is None
    naive = seed("naive")
    assert chain_of(naive) == Chain(naive.hash)


def test_replay_applies_what_each_tactic_still_offers(seed, registry, const_ladder) -> None:
    naive, ladder = seed("naive"), const_ladder()
    target = registry.get("targets", "h200")
    up, down, twice = (Application("test-ladder", "assign.R", {"value": v}) for v in (256, 64, 32))
    module, applied = replay(naive.module, (down, twice, up), {"test-ladder": ladder}, target)
    # 128 -> 64 -> 32; 256 is not a rung next to 32, so it is not applied
    assert applied == (down, twice)
    assert [c.value.value for c in module.kernels[1].consts] == [32]
    assert structural_hash(module) != naive.hash
    assert replay(naive.module, (up,), {}, target) == (naive.module, ())  # the tactic is not installed
