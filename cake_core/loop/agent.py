"""The agent contract (*provisional*): a backend that proposes candidate kernels."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from cake_core.ir.nodes import Module
    from cake_core.target import Target


@runtime_checkable
class Agent(Protocol):
    name: str

    def propose(
        self, parents: Sequence[Module], feedback: Sequence[str], target: Target, count: int
    ) -> list[Module]:
        """Up to ``count`` new candidates, given the best ``parents`` and routed feedback on them."""
        ...
