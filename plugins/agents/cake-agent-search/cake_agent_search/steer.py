"""What the run's record tells the search where to go: the applications refused by a routed finding (not to be
tried again) and the measured win to exploit."""

from __future__ import annotations

from collections.abc import Sequence

import attrs
from cake_core.loop.agent import Feedback, Parent

from cake_agent_search.chain import read_chain

#: the findings about a candidate that do not say it failed (docs/loop.md): a compiler warning, the cost model
#: ranking it wrong, a rule refusing a candidate that ran correctly; every other kind (a gate refused it, the
#: GPU found it wrong or faulting, NVRTC refused it, a lowering gap) refuses the move that made it
NOT_REFUSING_KINDS = ("compiler-warning", "misranked", "refused-but-correct")


def refuses(kind: str) -> bool:
    """Whether a finding of this kind says the candidate it is about failed."""
    return kind not in NOT_REFUSING_KINDS


@attrs.frozen
class Refused:
    """What the routed findings refused: candidates (hashes) and, for this agent's, the last application of
    their chain (keys)."""

    hashes: frozenset[str] = frozenset()
    keys: frozenset[str] = frozenset()


def refused(feedback: Sequence[Feedback]) -> Refused:
    """The candidates the routed findings refused, and the last application of each of this agent's."""
    hashes, keys = set(), set()
    for fb in feedback:
        if not refuses(fb.finding.kind):
            continue
        hashes.add(fb.hash)
        chain = read_chain(fb.how)
        if chain is not None and chain.last is not None:
            keys.add(chain.last.key)
    return Refused(frozenset(hashes), frozenset(keys))


def measured_win(parents: Sequence[Parent]) -> int | None:
    """The index of the fastest measured parent (the first of equals), or ``None`` where none was measured."""
    measured = [(p.ms, i) for i, p in enumerate(parents) if p.measured and p.ms is not None]
    return min(measured)[1] if measured else None
