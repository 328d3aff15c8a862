"""The shared-memory swizzle modes a buffer may declare (``smem xs: bf16[128, 64] swizzle 128B``).

One table, read by the parser (which words are modes), the type checker (a swizzled buffer starts on
its repeating pattern), the lowering and the runtime (tensor-map boxes span one swizzle row) and rule
packs. What a mode is called in an instruction's encoding (a tensor map's enum, a matrix descriptor's
field) is the business of the primitive that encodes it.
"""

from __future__ import annotations

from types import MappingProxyType

import attrs


@attrs.frozen
class Swizzle:
    """A swizzle mode: ``bytes`` is the width of one swizzled row (a panel of a K-major tile); the
    pattern repeats every 8 such rows, and a buffer with this swizzle starts on that boundary."""

    name: str
    bytes: int

    @property
    def pattern_bytes(self) -> int:
        """Bytes after which the swizzle pattern repeats, the alignment a swizzled buffer needs."""
        return 8 * self.bytes


#: every swizzle mode, by the name a declaration writes
SWIZZLES: MappingProxyType[str, Swizzle] = MappingProxyType(
    {s.name: s for s in (Swizzle("32B", 32), Swizzle("64B", 64), Swizzle("128B", 128))}
)
#: bytes of one swizzled row, per mode
SWIZZLE_BYTES: MappingProxyType[str, int] = MappingProxyType({k: s.bytes for k, s in SWIZZLES.items()})
