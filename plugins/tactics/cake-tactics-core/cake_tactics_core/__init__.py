"""cake-tactics-core: registers the core schedule tactics (tile shapes, ring depth, shared-memory layout, staging,
persistent scheduling, register rebalancing)."""

from __future__ import annotations

from collections.abc import Callable

from cake_core.hookspecs import hookimpl
from cake_core.loop.tactic import Tactic

from cake_tactics_core.persistent import Persistent
from cake_tactics_core.registers import Registers
from cake_tactics_core.ring_depth import RingDepth
from cake_tactics_core.smem_layout import SmemLayout
from cake_tactics_core.staging import Staging
from cake_tactics_core.tile_shapes import TileShapes

__all__ = ["Persistent", "Registers", "RingDepth", "SmemLayout", "Staging", "TileShapes", "cake_register_tactics"]


@hookimpl
def cake_register_tactics(register: Callable[[Tactic], None]) -> None:
    """The tactics of this distribution."""
    for tactic in (TileShapes(), RingDepth(), SmemLayout(), Staging(), Persistent(), Registers()):
        register(tactic)
