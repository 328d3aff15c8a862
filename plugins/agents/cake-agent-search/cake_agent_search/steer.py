"""What the run's record tells the search where to go: the applications refused by a routed finding (not to be
tried again) and the measured win to exploit."""

from __future__ import annotations

from collections.abc import Sequence

import attrs
from cake_core.loop.agent import Feedback, Parent

from cake_agent_search.chain import read_chain

#: candidate findings that refuse a candidate besides every ``rejected-*`` gate (docs/loop.md); a compiler
#: warning does not refuse it
REFUSING_KINDS = ("below-floor", "quarantined", "confirmed-on-gpu")


def refuses(kind: str) -> bool:
    """Whether a candidate finding of this kind says the candidate was refused."""
    return kind.startswith("rejected-") or kind in REFUSING_KINDS


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
        if fb.finding.destination != "candidate" or not refuses(fb.finding.kind):
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
