"""The ``search`` agent: an evolutionary search over tactic chains.

Each round it builds moves on the parents the loop hands it (the best candidates so far):

- a **mutation** applies one more tactic application to a parent (every application of every registered tactic
  whose precondition holds there, :meth:`cake_core.loop.tactic.Tactic.applications`);
- a **crossover** recombines two parents' chains: the base parent's module takes steps of the other's chain
  that it does not have yet (a random non-empty subset, in the donor's order, each applied only where the
  tactic still offers it).

Moves are drawn without replacement with the round's ``rng``, weighted by the parent's rank; the first drawn
mutation of each tactic on the first parent leads, so every tactic that offers the best parent something is built
each round (0.3.0: a warp specialization was crowded out by a dozen constant changes, and a campaign seed never
split its kernel). The modules they make that are new by structural hash (not a parent, nor a candidate on a
parent's way from its root, nor a refused candidate, nor another proposal) are estimated by the cost model, and
the best ``count`` are proposed, fastest predicted first, leaving out those predicted :data:`HOPELESS` times
slower than the fastest the round knows (0.3.0: from naive.cake six of a round's eight GPU benchmarks went to
variants of a 200 ms kernel beside a 3 ms one). Routed findings steer it: an application whose candidate a finding refused is not
tried again; where a parent was measured, the fastest one (the win) gets half the proposals: its own mutations
and crossovers, and its steps carried to the other parents.

A move that makes a schedule no faster by the cost model than its parent may still open the way to one that is:
warp specialization with mma.sync consumers predicts slower than the single-role kernel it splits, and only
the wgmma it then admits is faster. For such a move the agent looks one step further, at the applications of
the tactics that offered nothing on the parent and offer something now (the moves it *enabled*); where the
best of them beats the parent's estimate, the two steps are proposed together (``move`` "through"), at most
:data:`THROUGH_LIMIT` a round. Nothing is compiled or measured for the step in between.

Every chain is recorded in the proposal's ``how`` (:mod:`cake_agent_search.chain`) and read back from the
parents' and findings' ``how``: the agent keeps no state between rounds, and uses no clock and no iteration
order of a set, so a ``--seed`` gives one run and a resumed run continues it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence

import attrs
from cake_core import plugins
from cake_core.ir import nodes as n
from cake_core.ir.hashing import structural_hash
from cake_core.loop.agent import Feedback, Parent, Proposal
from cake_core.loop.records import RunInfo
from cake_core.loop.tactic import Application, Tactic
from cake_core.target import Target

from cake_agent_search.chain import Chain, chain_of, replay
from cake_agent_search.rank import Ranker
from cake_agent_search.steer import Refused, measured_win, refused

#: how many new modules the cost model ranks for each proposal asked for
POOL_FACTOR = 3
#: the share of a parent's weight that goes to its crossovers (where it has any)
CROSSOVER_SHARE = 0.3
#: how many moves that do not beat their parent a round looks one enabled step past
THROUGH_LIMIT = 4
#: a module predicted this many times slower than the fastest the round knows (a parent's estimate or a module
#: it made) is not proposed, unless it builds on the measured win: a GPU benchmark of it would be spent on a
#: kernel the cost model already rules out
HOPELESS = 4.0


@attrs.frozen
class Move:
    """A way to make a child: steps to apply to the base parent's module (a crossover's steps are each applied
    only where still offered)."""

    base: int  # index into the parents
    steps: tuple[Application, ...]
    kind: str  # "mutate" or "crossover"
    weight: float
    donor: int | None = None


@attrs.frozen
class Built:
    """A move made into a module, with its chain and the cost model's estimate."""

    module: n.Module
    hash: str
    chain: Chain
    base: int
    exploit: bool
    ms: float | None = None


class SearchAgent:
    """The ``search`` agent (the module docstring says how it proposes)."""

    name = "search"

    def __init__(self, tactics: Sequence[Tactic] | None = None) -> None:
        #: the tactics to draw from; ``None``: the registered ones (looked up on each call)
        self.tactics = tuple(tactics) if tactics is not None else None

    def propose(self, run: RunInfo, parents: Sequence[Parent], feedback: Sequence[Feedback], target: Target,
                count: int, rng: random.Random, known: frozenset[str] = frozenset()) -> tuple[list[Proposal], int]:  # fmt: skip
        if count <= 0 or not parents:
            return [], 0
        reg = plugins.registry()
        tactics = {t.name: t for t in (self.tactics if self.tactics is not None else reg.values("tactics"))}
        refusal = refused(feedback)
        chains = [chain_of(p) for p in parents]
        win = measured_win(parents)
        moves, offering = _moves(parents, chains, tactics, target, refusal, rng)
        keys = [math.log(1.0 - rng.random()) / m.weight for m in moves]  # Efraimidis-Spirakis, larger first
        order = _every_tactic_first([moves[i] for i in sorted(range(len(moves)), key=lambda i: (-keys[i], i))])
        on_win = [win is not None and win in (m.base, m.donor) for m in order]
        exploit = [m for m, w in zip(order, on_win) if w]
        others = [m for m, w in zip(order, on_win) if not w]
        need = (count + 1) // 2 if exploit else 0
        seen = {p.hash for p in parents} | {h for c in chains for h in (c.root, *c.lineage)} | set(refusal.hashes)
        seen |= known  # every candidate the run has recorded
        built = _build(exploit, POOL_FACTOR * need, parents, chains, tactics, target, seen, True)
        built += _build(others, POOL_FACTOR * count, parents, chains, tactics, target, seen, False)
        ranker = Ranker.for_run(run, target, reg)
        built = [attrs.evolve(b, ms=ranker.estimate(b.module)) for b in built]
        parent_ms = [ranker.estimate(p.module) for p in parents]
        built = _through(built, parent_ms, offering, tactics, target, ranker, refusal, seen)
        known_ms = [ms for ms in (*parent_ms, *(b.ms for b in built)) if not ranker.order(ms)[0]]
        if known_ms:
            built = [b for b in built if b.exploit or b.ms is None or b.ms <= HOPELESS * min(known_ms)]
        ranked = sorted(range(len(built)), key=lambda i: (ranker.order(built[i].ms), i))
        chosen = [i for i in ranked if built[i].exploit][:need]
        chosen += [i for i in ranked if i not in chosen][: count - len(chosen)]
        chosen.sort(key=lambda i: (ranker.order(built[i].ms), i))
        return [Proposal(built[i].module, built[i].chain.how(), parents[built[i].base].hash) for i in chosen], 0


def _moves(parents: Sequence[Parent], chains: Sequence[Chain], tactics: Mapping[str, Tactic], target: Target,
           refusal: Refused, rng: random.Random) -> tuple[list[Move], list[set[str]]]:  # fmt: skip
    """Every mutation of every parent and one crossover per ordered pair of parents (its subset of the donor's
    steps drawn from ``rng``), in a stable order, weighted by the base parent's rank; and for each parent, the
    tactics that offer it something."""
    out: list[Move] = []
    offering: list[set[str]] = []
    for i, p in enumerate(parents):
        rank_weight = 1.0 / (i + 1)
        offered = [a for name in sorted(tactics) for a in tactics[name].applications(p.module, target)]
        offering.append({a.tactic for a in offered})
        mutations = [a for a in offered if a.key not in refusal.keys]
        crossovers = []
        have = set(chains[i].keys)
        for j in range(len(parents)):
            if j == i:
                continue
            donor = [s for s in chains[j].steps if s.key not in have and s.key not in refusal.keys]
            if not donor:
                continue
            picked = tuple(s for s in donor if rng.random() < 0.5) or (donor[rng.randrange(len(donor))],)
            crossovers.append((j, picked))
        share = CROSSOVER_SHARE if crossovers and mutations else (1.0 if crossovers else 0.0)
        out += [Move(i, (a,), "mutate", rank_weight * (1 - share) / len(mutations)) for a in mutations]
        out += [Move(i, steps, "crossover", rank_weight * share / len(crossovers), j) for j, steps in crossovers]
    return out, offering


def _every_tactic_first(order: Sequence[Move]) -> list[Move]:
    """``order`` with, first, the first mutation of each tactic on the first parent that has moves in it (in
    their drawn order): every tactic that offers the best parent something is built each round, however many
    applications another tactic offers (a rare structural move is not crowded out by constant changes)."""
    if not order:
        return []
    base = min(m.base for m in order)
    first: dict[str, int] = {}
    for i, m in enumerate(order):
        if m.base == base and m.kind == "mutate":
            first.setdefault(m.steps[0].tactic, i)
    lead = set(first.values())
    return [order[i] for i in sorted(lead)] + [m for i, m in enumerate(order) if i not in lead]


def _through(built: list[Built], parent_ms: Sequence[float | None], offering: Sequence[set[str]],
             tactics: Mapping[str, Tactic], target: Target, ranker: Ranker, refusal: Refused,
             seen: set[str]) -> list[Built]:  # fmt: skip
    """``built``, where up to :data:`THROUGH_LIMIT` mutations that do not beat their parent's estimate are replaced
    by the mutation and the best move it enabled, if that beats the parent (the module docstring says why)."""
    out, looked = [], 0
    for b in built:
        base_ms = parent_ms[b.base]
        stuck = base_ms is not None and (b.ms is None or b.ms >= base_ms) and b.chain.move == "mutate"
        if not stuck or looked >= THROUGH_LIMIT:
            out.append(b)
            continue
        looked += 1
        best: Built | None = None
        for name in sorted(set(tactics) - offering[b.base]):
            for app in tactics[name].applications(b.module, target):
                if app.key in refusal.keys:
                    continue
                module = tactics[name].apply(b.module, target, app)
                h = structural_hash(module)
                if h in seen:
                    continue
                ms = ranker.estimate(module)
                if ms is not None and ms < base_ms and (best is None or ranker.order(ms) < ranker.order(best.ms)):
                    chain = attrs.evolve(b.chain, steps=(*b.chain.steps, app), move="through")
                    best = Built(module, h, chain, b.base, b.exploit, ms)
        if best is not None:
            seen.add(best.hash)
        out.append(best if best is not None else b)
    return out


def _build(moves: Sequence[Move], limit: int, parents: Sequence[Parent], chains: Sequence[Chain],
           tactics: Mapping[str, Tactic], target: Target, seen: set[str], exploit: bool) -> list[Built]:  # fmt: skip
    """Up to ``limit`` new modules from ``moves``, in order; ``seen`` (hashes) grows with each one made."""
    out: list[Built] = []
    for m in moves:
        if len(out) >= limit:
            break
        module, applied = replay(parents[m.base].module, m.steps, tactics, target)
        if not applied:
            continue
        h = structural_hash(module)
        if h in seen:
            continue
        seen.add(h)
        donor = parents[m.donor].hash if m.donor is not None else None
        out.append(Built(module, h, chains[m.base].then(parents[m.base].hash, applied, m.kind, donor), m.base, exploit))
    return out

