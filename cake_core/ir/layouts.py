"""Register-tile layouts: how a tile's elements are spread over a role instance's threads.

A layout is the author's commitment to a fragment shape; the compiler derives which thread holds
which element from it. Each layout knows its arguments, the tile shapes it can hold, and how many
32-bit registers a thread needs for it (a lower bound the register rules use).
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from cake_core.ir.types import DType


@attrs.frozen
class LayoutInfo:
    """A layout applied to one tile: per-thread storage and how the tile splits over warps."""

    name: str
    args: tuple[int, ...]
    shape: tuple[int, ...]
    dtype: DType
    threads: int  # threads of the role instance
    regs_per_thread: int
    warp_grid: tuple[int, int] = (1, 1)
    # per-warp sub-tile (rows, cols) for warp-distributed layouts
    warp_tile: tuple[int, ...] = ()


class LayoutError(ValueError):
    pass


def _words(elems: int, dtype: DType) -> int:
    return max(1, -(-elems * dtype.bytes // 4))


def _grid(args: Sequence[int], warps: int, name: str) -> tuple[int, int]:
    if len(args) != 2:
        raise LayoutError(f"`{name}` takes a warp grid: `{name}(WM, WN)`")
    wm, wn = args
    if wm <= 0 or wn <= 0 or wm * wn != warps:
        raise LayoutError(f"`{name}({wm}, {wn})` covers {wm * wn} warps, but the role instance has {warps}")
    return wm, wn


def resolve(name: str, args: Sequence[int], shape: Sequence[int], dtype: DType, warps: int) -> LayoutInfo:
    """Check that ``shape`` fits layout ``name(args)`` over ``warps`` warps and describe it."""
    threads = warps * 32
    shape = tuple(shape)
    args = tuple(args)
    if name == "rows":
        # element row r lives in thread r % threads (rows wrap around the instance's threads)
        if args:
            raise LayoutError("`rows` takes no arguments")
        if len(shape) not in (1, 2):
            raise LayoutError("`rows` holds a vector [R] or a matrix [R, C]")
        per_row = shape[1] if len(shape) == 2 else 1
        rows_per_thread = -(-shape[0] // threads)
        return LayoutInfo(name, args, shape, dtype, threads, _words(rows_per_thread * per_row, dtype))
    if name in ("mma_acc", "mma_a", "mma_b", "mma_rows"):
        wm, wn = _grid(args, warps, name)
        if name == "mma_rows":
            if len(shape) != 1 or shape[0] % (16 * wm):
                raise LayoutError(f"`mma_rows({wm}, {wn})` holds [M] with M a multiple of {16 * wm}")
            mi = shape[0] // wm // 16
            return LayoutInfo(name, args, shape, dtype, threads, 2 * mi, (wm, wn), (shape[0] // wm,))
        if len(shape) != 2:
            raise LayoutError(f"`{name}` holds a matrix")
        rows, cols = shape
        if name == "mma_acc":
            if rows % (16 * wm) or cols % (8 * wn):
                raise LayoutError(
                    f"`mma_acc({wm}, {wn})` needs rows a multiple of {16 * wm} and columns a multiple "
                    f"of {8 * wn} (m16n8 fragments per warp); the tile is [{rows}, {cols}]"
                )
            mi, ni = rows // wm // 16, cols // wn // 8
            return LayoutInfo(
                name, args, shape, dtype, threads, mi * ni * _words(4, dtype), (wm, wn), (rows // wm, cols // wn)
            )
        if cols != 16:
            raise LayoutError(f"`{name}` holds a k16 slice: [rows, 16], not [{rows}, {cols}]")
        if name == "mma_a":
            if rows % (16 * wm):
                raise LayoutError(f"`mma_a({wm}, {wn})` needs rows a multiple of {16 * wm}")
            mi = rows // wm // 16
            return LayoutInfo(name, args, shape, dtype, threads, mi * 4, (wm, wn), (rows // wm, 16))
        if rows % (8 * wn):
            raise LayoutError(f"`mma_b({wm}, {wn})` needs rows (the N side) a multiple of {8 * wn}")
        ni = rows // wn // 8
        return LayoutInfo(name, args, shape, dtype, threads, ni * 2, (wm, wn), (rows // wn, 16))
    if name in ("wgmma_acc", "wgmma_rows"):
        # one warpgroup; rows in blocks of 64 (one m64 wgmma each), warp w of the group owning rows
        # 16w..16w+15 of every block, as mma.sync's m16n8 fragments repeated over N
        if args:
            raise LayoutError(f"`{name}` takes no arguments")
        if warps != 4:
            raise LayoutError(f"`{name}` belongs to one warpgroup (4 warps), the role instance has {warps}")
        if name == "wgmma_rows":
            if len(shape) != 1 or shape[0] % 64:
                raise LayoutError("`wgmma_rows` holds [M], M a multiple of 64: one value per accumulator row")
            blocks = shape[0] // 64
            return LayoutInfo(name, args, shape, dtype, threads, 2 * blocks, (4, 1), (16,))
        if len(shape) != 2 or shape[0] % 64 or shape[1] % 8 or not (8 <= shape[1] <= 256):
            raise LayoutError("`wgmma_acc` holds [M, N]: M a multiple of 64, N a multiple of 8 up to 256")
        blocks = shape[0] // 64
        return LayoutInfo(name, args, shape, dtype, threads, blocks * shape[1] // 2, (4, 1), (16, shape[1]))
    raise LayoutError(
        f"unknown layout `{name}` (known: rows, mma_acc, mma_a, mma_b, mma_rows, wgmma_acc, wgmma_rows)"
    )


KNOWN = ("rows", "mma_acc", "mma_a", "mma_b", "mma_rows", "wgmma_acc", "wgmma_rows")
