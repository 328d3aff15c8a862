"""The tactic contract (*provisional*): one schedule transformation of the search space."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from cake_core.ir.nodes import Module
    from cake_core.target import Target


@runtime_checkable
class Tactic(Protocol):
    name: str

    def apply(self, module: Module, target: Target, rng: random.Random) -> Module | None:
        """A transformed copy of ``module``, or ``None`` where the tactic does not apply."""
        ...
