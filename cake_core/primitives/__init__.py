"""The core's own primitives, registered through the same hook as any plugin's."""

from __future__ import annotations

from collections.abc import Callable

from cake_core.hookspecs import hookimpl
from cake_core.ir.primitive import Primitive
from cake_core.primitives import compute, hopper, load, memory, reduce, sync, topk

CORE_PRIMITIVES: tuple[type[Primitive], ...] = (
    memory.PRIMITIVES + compute.PRIMITIVES + sync.PRIMITIVES + hopper.PRIMITIVES
    + load.PRIMITIVES + reduce.PRIMITIVES + topk.PRIMITIVES
)


@hookimpl
def cake_register_primitives(register: Callable[[Primitive], None]) -> None:
    for cls in CORE_PRIMITIVES:
        register(cls())
