"""cake-tactics-core: registers the core schedule tactics (tile shapes, ring depth, shared-memory layout, staging,
wgmma)."""

from __future__ import annotations

from collections.abc import Callable

from cake_core.hookspecs import hookimpl
from cake_core.loop.tactic import Tactic

from cake_tactics_core.ring_depth import RingDepth
from cake_tactics_core.smem_layout import SmemLayout
from cake_tactics_core.staging import Staging
from cake_tactics_core.tile_shapes import TileShapes
from cake_tactics_core.wgmma import Wgmma

__all__ = ["RingDepth", "SmemLayout", "Staging", "TileShapes", "Wgmma", "cake_register_tactics"]


@hookimpl
def cake_register_tactics(register: Callable[[Tactic], None]) -> None:
    """The tactics of this distribution."""
    for tactic in (TileShapes(), RingDepth(), SmemLayout(), Staging(), Wgmma()):
        register(tactic)
