"""Vector clocks: happens-before between the role instances and asynchronous operations of one CTA.

A clock maps each component (a role instance, an asynchronous operation or a lane of them) to the
last of its events the holder has seen; synchronization joins clocks.
"""

from __future__ import annotations

VC = dict[int, int]


def join(into: VC, other: VC) -> None:
    """``into = max(into, other)`` per component."""
    for k, v in other.items():
        if into.get(k, 0) < v:
            into[k] = v
