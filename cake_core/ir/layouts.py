"""Register-tile layouts: how a tile's elements are spread over a role instance's threads.

A layout is the author's commitment to a fragment shape; the compiler derives which thread holds
which element from it. Each layout knows its arguments, the tile shapes it can hold, and how many
32-bit registers a thread needs for it (a lower bound the register rules use). Layouts are declared
by plugins (:class:`TileLayout`, through ``cake_register_layouts``); the core's are :data:`CORE_LAYOUTS`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

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
    """A tile does not fit the layout it names; the message is for the kernel's author."""


@attrs.frozen
class TileLayout:
    """A declared layout: its name, a sentence on how it spreads a tile, and how it places one.

    ``place(name, args, shape, dtype, warps)`` checks that a tile of ``shape`` fits the layout with
    ``args`` over a role instance of ``warps`` warps and describes it, or raises :class:`LayoutError`
    with a message for the author. Registered through ``cake_register_layouts``; a plugin's layouts are
    for its own primitives' type rules and lowerings, which read :attr:`LayoutInfo.name`.
    """

    name: str
    doc: str
    place: Callable[[str, tuple[int, ...], tuple[int, ...], DType, int], LayoutInfo] = attrs.field(eq=False)


def _words(elems: int, dtype: DType) -> int:
    return max(1, -(-elems * dtype.bytes // 4))


def _grid(args: Sequence[int], warps: int, name: str) -> tuple[int, int]:
    if len(args) != 2:
        raise LayoutError(f"`{name}` takes a warp grid: `{name}(WM, WN)`")
    wm, wn = args
    if wm <= 0 or wn <= 0 or wm * wn != warps:
        raise LayoutError(f"`{name}({wm}, {wn})` covers {wm * wn} warps, but the role instance has {warps}")
    return wm, wn


def _rows(name: str, args: tuple[int, ...], shape: tuple[int, ...], dtype: DType, warps: int) -> LayoutInfo:
    # element row r lives in thread r % threads (rows wrap around the instance's threads)
    threads = warps * 32
    if args:
        raise LayoutError("`rows` takes no arguments")
    if len(shape) not in (1, 2):
        raise LayoutError("`rows` holds a vector [R] or a matrix [R, C]")
    per_row = shape[1] if len(shape) == 2 else 1
    rows_per_thread = -(-shape[0] // threads)
    return LayoutInfo(name, args, shape, dtype, threads, _words(rows_per_thread * per_row, dtype))


def _mma(name: str, args: tuple[int, ...], shape: tuple[int, ...], dtype: DType, warps: int) -> LayoutInfo:
    """mma.sync fragments (m16n8k16) over a WM x WN grid of warps."""
    threads = warps * 32
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


def _wgmma(name: str, args: tuple[int, ...], shape: tuple[int, ...], dtype: DType, warps: int) -> LayoutInfo:
    # one warpgroup; rows in blocks of 64 (one m64 wgmma each), warp w of the group owning rows
    # 16w..16w+15 of every block, as mma.sync's m16n8 fragments repeated over N
    threads = warps * 32
    if args:
        raise LayoutError(f"`{name}` takes no arguments")
    if warps != 4:
        raise LayoutError(f"`{name}` belongs to one warpgroup (4 warps), the role instance has {warps}")
    if name == "wgmma_rows":
        # [M]: one value per accumulator row; [M, C]: C values per row (a top-k list), slot (2 * block + h) * C + c
        if len(shape) not in (1, 2) or shape[0] % 64:
            raise LayoutError("`wgmma_rows` holds [M] or [M, C], M a multiple of 64: values per accumulator row")
        blocks = shape[0] // 64
        per_row = shape[1] if len(shape) == 2 else 1
        return LayoutInfo(name, args, shape, dtype, threads, 2 * blocks * per_row, (4, 1), (16,))
    if len(shape) != 2 or shape[0] % 64 or shape[1] % 8 or not (8 <= shape[1] <= 256):
        raise LayoutError("`wgmma_acc` holds [M, N]: M a multiple of 64, N a multiple of 8 up to 256")
    blocks = shape[0] // 64
    return LayoutInfo(name, args, shape, dtype, threads, blocks * shape[1] // 2, (4, 1), (16, shape[1]))


#: the core's layouts, in the order ``unknown layout`` lists them; registered by ``cake_core.primitives``
CORE_LAYOUTS: Mapping[str, TileLayout] = MappingProxyType({
    layout.name: layout
    for layout in (
        TileLayout("rows", "row r of the tile in thread r modulo the instance's threads", _rows),
        TileLayout("mma_acc", "mma.sync m16n8 accumulators over a warp grid `mma_acc(WM, WN)`", _mma),
        TileLayout("mma_a", "mma.sync A fragments (a k16 slice of rows) over a warp grid", _mma),
        TileLayout("mma_b", "mma.sync B fragments (a k16 slice of the N side) over a warp grid", _mma),
        TileLayout("mma_rows", "one value per row of an `mma_acc` tile, over the same warp grid", _mma),
        TileLayout("wgmma_acc", "a warpgroup's wgmma accumulator: blocks of 64 rows, up to 256 columns", _wgmma),
        TileLayout("wgmma_rows", "one value per row of a `wgmma_acc` tile", _wgmma),
    )
})  # fmt: skip


def resolve(
    name: str, args: Sequence[int], shape: Sequence[int], dtype: DType, warps: int,
    layouts: Mapping[str, TileLayout] = CORE_LAYOUTS,
) -> LayoutInfo:  # fmt: skip
    """Check that ``shape`` fits layout ``name(args)`` of ``layouts`` over ``warps`` warps and describe it."""
    layout = layouts.get(name)
    if layout is None:
        raise LayoutError(f"unknown layout `{name}` (known: {', '.join(layouts)})")
    return layout.place(name, tuple(args), tuple(shape), dtype, warps)


def fitting_per(
    name: str, args: Sequence[int], shape: Sequence[int], dtype: DType, warps: int, per: int,
    layouts: Mapping[str, TileLayout] = CORE_LAYOUTS,
) -> int | None:  # fmt: skip
    """The most warps per instance, other than ``per``, that split a role of ``warps`` warps evenly and
    over which ``shape`` fits layout ``name(args)`` of ``layouts``; None when no instance size does."""
    for size in range(warps, 0, -1):
        if warps % size or size == per:
            continue
        try:
            resolve(name, args, shape, dtype, size, layouts)
        except LayoutError:
            continue
        return size
    return None
