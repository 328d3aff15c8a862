"""C++ views of operands that primitive lowerings build their code from.

A primitive never computes an address by hand: it asks for the view of its operand and indexes it
with local (tile) coordinates. Global views carry the tensor's extents so masks are derived, never
written; shared views carry the buffer's stage, row pitch and swizzle; register views carry the
fragment layout.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from cake_core.ir.layouts import LayoutInfo
from cake_core.ir.swizzle import SWIZZLE_BYTES
from cake_core.ir.types import DType


@attrs.frozen
class GlobalView:
    """A tile of a row-major global tensor."""

    ptr: str  # the tensor's base pointer
    dtype: DType
    extents: tuple[str, ...]  # C++ extent of every dimension
    strides: tuple[str, ...]  # C++ (long long) stride of every dimension, in elements
    starts: tuple[str, ...]  # C++ index of the tile's origin in every dimension
    tile_dims: tuple[int, ...]  # the dimensions the tile spans (Span or All), in order
    sizes: tuple[int | str, ...]  # the tile's extent in each tile dimension
    whole: tuple[bool, ...]  # per dimension: the tile covers it entirely (never out of bounds)

    def offset(self, local: Sequence[str]) -> str:
        """Element offset (long long) of the tile element at ``local`` (one index per tile dim)."""
        idx = list(self.starts)
        for d, li in zip(self.tile_dims, local, strict=True):
            idx[d] = f"({idx[d]} + {li})" if idx[d] != "0" else li
        terms = [f"(long long)({i}) * {s}" if s != "1" else f"(long long)({i})" for i, s in zip(idx, self.strides, strict=True)]
        return " + ".join(terms)

    def addr(self, local: Sequence[str]) -> str:
        return f"({self.ptr} + {self.offset(local)})"

    def read_addr(self, local: Sequence[str], cond: str) -> str:
        """The address of the element at ``local`` where ``cond`` holds, else the tensor's first element:
        a load from it never faults, so a masked read needs no branch (select what it returns)."""
        return f"(({cond}) ? {self.addr(local)} : {self.ptr})"

    def in_bounds(self, local: Sequence[str]) -> str:
        """C++ condition: the element at ``local`` exists in the tensor."""
        conds = []
        local_of = dict(zip(self.tile_dims, local, strict=True))
        for d, (start, extent) in enumerate(zip(self.starts, self.extents, strict=True)):
            if self.whole[d]:
                continue
            pos = f"{start} + {local_of[d]}" if d in local_of else start
            conds.append(f"({pos}) < {extent}")
        return " && ".join(conds) if conds else "true"


@attrs.frozen
class SharedView:
    """A tile of a (stage of a) shared buffer."""

    base: str  # pointer to the stage's first element
    dtype: DType
    strides: tuple[int, ...]  # elements, per buffer dimension (row pitch includes padding)
    starts: tuple[str, ...]
    tile_dims: tuple[int, ...]
    sizes: tuple[int | str, ...]
    swizzle: str | None
    row_bytes: int  # bytes from one row to the next
    rows: int  # rows of a stage (every dimension but the innermost): a swizzled buffer's panel height

    def index(self, local: Sequence[str]) -> list[str]:
        """The buffer index of the tile's element at ``local`` (one index per tile dimension)."""
        idx = list(self.starts)
        for d, li in zip(self.tile_dims, local, strict=True):
            idx[d] = f"({idx[d]} + {li})" if idx[d] != "0" else li
        return idx

    def offset(self, local: Sequence[str]) -> str:
        idx = self.index(local)
        return " + ".join(f"({i}) * {s}" if s != 1 else f"({i})" for i, s in zip(idx, self.strides, strict=True))

    def addr(self, local: Sequence[str]) -> str:
        return f"({self.base} + {self.offset(local)})"

    def smem_addr(self, local: Sequence[str]) -> str:
        """The shared-space address (u32) of the element at ``local``, 16-byte chunks where the buffer's swizzle
        puts them: a swizzled stage is laid out as TMA writes it, panels of the swizzle width one after the
        other (each ``rows`` rows of ``W`` bytes), and each 16-byte chunk of an address moves by the XOR of
        its chunk bits (4..) with the address bits from 7 up (one bit for 32B, two for 64B, three for 128B)."""
        if not self.swizzle:
            return f"cake_smem_addr({self.addr(local)})"
        width = SWIZZLE_BYTES[self.swizzle]
        elem = self.dtype.bytes
        per_row = width // elem
        idx = self.index(local)
        col = idx[-1]
        inner = self.strides[-2] if len(self.strides) > 1 else per_row
        row = " + ".join(f"({i}) * {s // inner}" if s != inner else f"({i})"
                         for i, s in zip(idx[:-1], self.strides[:-1], strict=True)) or "0"  # fmt: skip
        byte = f"(({col}) / {per_row}) * {self.rows * width} + ({row}) * {width} + (({col}) % {per_row}) * {elem}"
        mask = width // 16 - 1
        return f"cake_swizzled(cake_smem_addr({self.base}) + ({byte}), {mask}u)"


@attrs.frozen
class RegView:
    name: str  # the C++ array
    dtype: DType
    layout: LayoutInfo

    def flat(self, index: str) -> str:
        return f"{self.name}[{index}]"
