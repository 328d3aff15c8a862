"""The agent contract (*provisional*): a backend that proposes candidate kernels, round after round.

``cake run`` calls :meth:`Agent.propose` once per round with the best candidates so far and the findings
routed back to them; the run records each proposal (its text, parent and how it was made), filters it, and
benchmarks the most promising. The first round's parents are the seeds: the problem's committed schedules, or
the user's ``--from`` files. An agent must be deterministic for a given ``rng``: a resumed run replays no
round it has recorded, but the next round's proposals must not depend on anything but the recorded past.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import attrs

if TYPE_CHECKING:
    from cake_core.ir.nodes import Module
    from cake_core.loop.records import Finding, RunInfo
    from cake_core.target import Target


@attrs.frozen
class Parent:
    """A candidate an agent may build on: its module, hash, and its time (measured, else predicted)."""

    module: Module
    hash: str
    name: str
    ms: float | None
    measured: bool
    how: str = ""  # how it was made, as its proposal said (an agent may keep a tactic chain there)


@attrs.frozen
class Proposal:
    """One proposed candidate: the module, the parent it was made from, and how (one line, e.g. a tactic chain)."""

    module: Module
    how: str
    parent: str | None = None  # the parent's hash


@attrs.frozen
class Feedback:
    """A routed finding about a candidate (whatever its destination: a GPU failure the verifier missed is news
    for the agent too), with that candidate's hash and how it was made (its proposal's ``how``), so that an
    agent can tell which of its moves the finding is about."""

    finding: Finding
    hash: str
    how: str


@runtime_checkable
class Agent(Protocol):
    name: str

    def propose(self, run: RunInfo, parents: Sequence[Parent], feedback: Sequence[Feedback], target: Target,
                count: int, rng: random.Random, known: frozenset[str]) -> tuple[Sequence[Proposal], int]:  # fmt: skip
        """Up to ``count`` new candidates and the tokens it spent making them (0 for an agent that uses no
        language model), given the run (its problem and cell), the best ``parents``, the findings about
        candidates so far, and the structural hashes of every candidate recorded (a proposal with one of them
        is dropped by the loop)."""
        ...
