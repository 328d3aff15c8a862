"""The core's own IR vocabulary (primitives, the memory tiers its declarations make, register-tile
layouts), registered through the same hooks as any plugin's."""

from __future__ import annotations

from collections.abc import Callable

from cake_core.hookspecs import hookimpl
from cake_core.ir.layouts import CORE_LAYOUTS, TileLayout
from cake_core.ir.primitive import CORE_TIERS, Primitive, Tier
from cake_core.primitives import cluster, compute, gather, hopper, load, memory, pipes, reduce, sync, topk

CORE_PRIMITIVES: tuple[type[Primitive], ...] = (
    memory.PRIMITIVES + compute.PRIMITIVES + sync.PRIMITIVES + hopper.PRIMITIVES + pipes.PRIMITIVES
    + load.PRIMITIVES + gather.PRIMITIVES + reduce.PRIMITIVES + topk.PRIMITIVES + cluster.PRIMITIVES
)


@hookimpl
def cake_register_primitives(register: Callable[[Primitive], None]) -> None:
    for cls in CORE_PRIMITIVES:
        register(cls())


@hookimpl
def cake_register_tiers(register: Callable[[Tier], None]) -> None:
    for tier in CORE_TIERS:
        register(tier)


@hookimpl
def cake_register_layouts(register: Callable[[TileLayout], None]) -> None:
    for layout in CORE_LAYOUTS.values():
        register(layout)
