"""Register-tile layouts as declarations (``cake_core.ir.layouts``): the core's, looked up by name."""

from __future__ import annotations

import pytest
from cake_core.ir.layouts import CORE_LAYOUTS, LayoutError, LayoutInfo, TileLayout, fitting_per, resolve
from cake_core.ir.types import DType


def test_the_core_declares_seven_layouts_in_a_fixed_order() -> None:
    assert list(CORE_LAYOUTS) == ["rows", "mma_acc", "mma_a", "mma_b", "mma_rows", "wgmma_acc", "wgmma_rows"]
    assert all(isinstance(lay, TileLayout) and lay.name == name and lay.doc for name, lay in CORE_LAYOUTS.items())


@pytest.mark.parametrize(
    ("name", "args", "shape", "warps", "regs", "grid", "tile"),
    [
        ("rows", (), (128, 4), 4, 4, (1, 1), ()),
        ("mma_acc", (2, 2), (64, 64), 4, 32, (2, 2), (32, 32)),
        ("mma_a", (2, 2), (64, 16), 4, 8, (2, 2), (32, 16)),
        ("mma_b", (2, 2), (64, 16), 4, 8, (2, 2), (32, 16)),
        ("mma_rows", (2, 2), (64,), 4, 4, (2, 2), (32,)),
        ("wgmma_acc", (), (64, 128), 4, 64, (4, 1), (16, 128)),
        ("wgmma_rows", (), (128,), 4, 4, (4, 1), (16,)),
    ],
)  # fmt: skip
def test_each_core_layout_places_a_tile(
    name: str, args: tuple, shape: tuple, warps: int, regs: int, grid: tuple, tile: tuple
) -> None:
    info = resolve(name, args, shape, DType.F32, warps)
    assert info == LayoutInfo(name, args, shape, DType.F32, warps * 32, regs, grid, tile)


def test_a_tile_that_does_not_fit_is_told_why() -> None:
    with pytest.raises(LayoutError, match=r"`mma_acc\(2, 2\)` needs rows a multiple of 32"):
        resolve("mma_acc", (2, 2), (48, 64), DType.F32, 4)
    with pytest.raises(LayoutError, match=r"belongs to one warpgroup \(4 warps\), the role instance has 8"):
        resolve("wgmma_acc", (), (64, 64), DType.F32, 8)


def test_an_unknown_layout_lists_the_known_ones_of_the_mapping_given() -> None:
    with pytest.raises(LayoutError, match=r"^unknown layout `quad` \(known: rows, mma_acc, mma_a, mma_b, "):
        resolve("quad", (), (128,), DType.F32, 4)
    only_rows = {"rows": CORE_LAYOUTS["rows"]}
    with pytest.raises(LayoutError, match=r"^unknown layout `mma_acc` \(known: rows\)$"):
        resolve("mma_acc", (2, 2), (64, 64), DType.F32, 4, only_rows)


def test_fitting_per_is_the_largest_other_instance_size_that_splits_the_role_and_holds_the_tile() -> None:
    assert fitting_per("wgmma_acc", (), (64, 64), DType.F32, 8, 8) == 4
    assert fitting_per("wgmma_acc", (), (64, 64), DType.F32, 12, 12) == 4
    assert fitting_per("mma_acc", (2, 4), (64, 64), DType.F32, 16, 4) == 8
    assert fitting_per("wgmma_acc", (), (64, 64), DType.F32, 6, 6) is None  # 4 does not split 6 warps
    assert fitting_per("wgmma_acc", (), (48, 64), DType.F32, 8, 8) is None  # no size holds 48 rows
    assert fitting_per("rows", (), (128,), DType.F32, 4, 4) == 2  # `per` itself is never the answer
