"""cake-tactics-core: registers the core schedule tactics (tile shapes, ring depth, shared-memory layout,
staging, cp.async pipelining, tensorize, warp specialization, wgmma, pipe operands, persistent tiles, register
rebalancing, epilogue overlap, split reduction, consumer warpgroups, TMA in one role)."""

from __future__ import annotations

from collections.abc import Callable

from cake_core.hookspecs import hookimpl
from cake_core.loop.tactic import Tactic

from cake_tactics_core.cp_async_pipeline import CpAsyncPipeline
from cake_tactics_core.overlap import EpilogueOverlap
from cake_tactics_core.persistent import Persistent
from cake_tactics_core.pipe_operand import PipeOperand
from cake_tactics_core.registers import Registers
from cake_tactics_core.ring_depth import RingDepth
from cake_tactics_core.smem_layout import SmemLayout
from cake_tactics_core.split import SplitReduction
from cake_tactics_core.staging import Staging
from cake_tactics_core.tensorize import Tensorize
from cake_tactics_core.tile_shapes import TileShapes
from cake_tactics_core.tma import Tma
from cake_tactics_core.warp_specialize import WarpSpecialize
from cake_tactics_core.warpgroups import Warpgroups
from cake_tactics_core.wgmma import Wgmma

__all__ = [
    "CpAsyncPipeline", "EpilogueOverlap", "Persistent", "PipeOperand", "Registers", "RingDepth", "SmemLayout",
    "SplitReduction", "Staging", "Tensorize", "TileShapes", "Tma", "WarpSpecialize", "Warpgroups", "Wgmma",
    "cake_register_tactics",
]


@hookimpl
def cake_register_tactics(register: Callable[[Tactic], None]) -> None:
    """The tactics of this distribution."""
    for tactic in (TileShapes(), RingDepth(), SmemLayout(), Staging(), Tensorize(), WarpSpecialize(), Wgmma(),
                   PipeOperand(), Persistent(), Registers(), EpilogueOverlap(), SplitReduction(), Warpgroups(),
                   Tma(), CpAsyncPipeline()):  # fmt: skip
        register(tactic)
