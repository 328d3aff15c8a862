"""A candidate's tactic chain, as the search agent records it in its proposal's ``how``: the structural hash of
the schedule it starts from and the applications made on the way, on one line of JSON. The ledger keeps that
line (a parent's ``how``, a finding's ``how``), so a later round, or a resumed run with a new agent object,
reads every chain back from the ledger and the agent keeps no state of its own."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import attrs
from cake_core.convert import structure, unstructure
from cake_core.ir import nodes as n
from cake_core.loop.agent import Parent
from cake_core.loop.tactic import Application, Tactic
from cake_core.target import Target

#: the ``agent`` field of a chain's JSON (another agent's ``how`` is not read as a chain)
MARK = "search"


@attrs.frozen
class Chain:
    """The applications that made a candidate from its root schedule, in order."""

    root: str  # the structural hash of the schedule the chain starts from (a seed or a --from file)
    steps: tuple[Application, ...] = attrs.field(default=(), converter=tuple)
    #: how the last steps were made: "mutate" (one application), "through" (one application and one it enabled) or
    #: "crossover"; a root: "seed"
    move: str = "seed"
    donor: str | None = None  # a crossover's other parent (the hash of the candidate its steps came from)
    #: the candidates on the way from the root (their hashes, the root aside): none is proposed again
    lineage: tuple[str, ...] = attrs.field(default=(), converter=tuple)

    @property
    def keys(self) -> list[str]:
        return [s.key for s in self.steps]

    @property
    def last(self) -> Application | None:
        return self.steps[-1] if self.steps else None

    def then(self, parent: str, steps: tuple[Application, ...], move: str, donor: str | None = None) -> Chain:
        """The chain of a child of ``parent`` (the hash of the candidate this chain made): this one, then ``steps``."""
        lineage = self.lineage + ((parent,) if parent != self.root else ())
        return Chain(self.root, self.steps + tuple(steps), move, donor, lineage)

    def how(self) -> str:
        """The chain as one line of JSON (a proposal's ``how``)."""
        data = {"agent": MARK, "move": self.move, "root": self.root, "chain": unstructure(list(self.steps))}
        if self.donor is not None:
            data["donor"] = self.donor
        if self.lineage:
            data["lineage"] = list(self.lineage)
        return json.dumps(data, sort_keys=True, separators=(",", ":"))


def read_chain(how: str) -> Chain | None:
    """The chain a ``how`` records, or ``None`` where it is not this agent's (a seed's "read from FILE")."""
    try:
        data = json.loads(how)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("agent") != MARK:
        return None
    steps = tuple(structure(s, Application) for s in data["chain"])
    return Chain(data["root"], steps, data["move"], data.get("donor"), data.get("lineage", ()))


def chain_of(parent: Parent) -> Chain:
    """A parent's chain: the one its ``how`` records, else an empty chain rooted at the parent itself."""
    return read_chain(parent.how) or Chain(parent.hash)


def replay(module: n.Module, steps: Sequence[Application], tactics: Mapping[str, Tactic],
           target: Target) -> tuple[n.Module, tuple[Application, ...]]:  # fmt: skip
    """``module`` with ``steps`` applied in order, each only where its tactic is installed and offers it at that
    point (a step another chain made may not apply here); the module and the steps that were applied."""
    applied = []
    for step in steps:
        tactic = tactics.get(step.tactic)
        if tactic is None or step.key not in {a.key for a in tactic.applications(module, target)}:
            continue
        module = tactic.apply(module, target, step)
        applied.append(step)
    return module, tuple(applied)
