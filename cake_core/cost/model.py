"""The cost-model contract (*provisional*: members may be added before cake-core 1.0).

Borrowed from TVM MetaSchedule: a model ranks candidates with ``predict`` and learns from measured
results with ``update``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from cake_core.ir.nodes import Module
    from cake_core.target import Target


@runtime_checkable
class CostModel(Protocol):
    name: str
    version: str

    def predict(
        self, candidates: Sequence[Module], target: Target, shape: Mapping[str, int]
    ) -> list[float]:
        """Predicted run time in milliseconds of each candidate at ``shape``."""
        ...

    def update(self, candidates: Sequence[Module], measured_ms: Sequence[float]) -> None:
        """Learn from measured times of the same candidates."""
        ...
