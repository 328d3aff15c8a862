"""cake-tactics-core: registers the core schedule tactics (tile shapes, ring depth, shared-memory layout, staging,
tensorize, warp specialization, pipe operands, persistent scheduling, register rebalancing)."""

from __future__ import annotations

from collections.abc import Callable

from cake_core.hookspecs import hookimpl
from cake_core.loop.tactic import Tactic

from cake_tactics_core.persistent import Persistent
from cake_tactics_core.pipe_operand import PipeOperand
from cake_tactics_core.registers import Registers
from cake_tactics_core.ring_depth import RingDepth
from cake_tactics_core.smem_layout import SmemLayout
from cake_tactics_core.staging import Staging
from cake_tactics_core.tensorize import Tensorize
from cake_tactics_core.tile_shapes import TileShapes
from cake_tactics_core.warp_specialize import WarpSpecialize

__all__ = [
    "Persistent", "PipeOperand", "Registers", "RingDepth", "SmemLayout", "Staging", "Tensorize", "TileShapes",
    "WarpSpecialize", "cake_register_tactics",
]  # fmt: skip


@hookimpl
def cake_register_tactics(register: Callable[[Tactic], None]) -> None:
    """The tactics of this distribution."""
    for tactic in (
        TileShapes(), RingDepth(), SmemLayout(), Staging(), Tensorize(), WarpSpecialize(), PipeOperand(),
        Persistent(), Registers(),
    ):  # fmt: skip
        register(tactic)
