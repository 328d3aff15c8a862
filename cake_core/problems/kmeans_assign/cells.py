"""The cells of kmeans-assign: the default one and every cell a candidate is checked on."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from cake_core.problems.problem import Cell

if TYPE_CHECKING:
    from cake_core.ir.nodes import Module

#: the committed schedules of kmeans-assign
SCHEDULES = Path(__file__).resolve().parent / "schedules"


def kmeans_cell(b: int, n: int, k: int, d: int, dtype: str = "bf16", note: str = "") -> Cell:
    """A cell of the K-Means problems (kmeans-assign, kmeans-update, kmeans-iter share their sizes)."""
    return Cell({"B": b, "N": n, "K": k, "D": d}, dtype, note)


#: the reference cell (the one the CAKE paper and the flash-kmeans baseline use): 550 GFLOP
DEFAULT_CELL = kmeans_cell(32, 65536, 1024, 128, note="reference cell; flash-kmeans 1.525 ms on an H200")

#: every cell a candidate must pass, the default first
CHECK_CELLS: tuple[Cell, ...] = (
    DEFAULT_CELL,
    kmeans_cell(1, 65521, 1024, 128, note="one batch; N prime: ragged last tile of points"),
    kmeans_cell(8, 16384, 100, 128, note="K not a multiple of any tile: ragged last tile of centroids"),
    kmeans_cell(4, 32768, 4096, 128, note="many centroids"),
    kmeans_cell(16, 32768, 1024, 64, note="D=64"),
    kmeans_cell(4, 16384, 1024, 256, note="D=256: twice the shared memory per row"),
    kmeans_cell(32, 65536, 1024, 128, "f16", note="the reference cell in f16"),
)


def _ampere_sweep() -> tuple[dict[str, int], ...]:
    out = []
    for bm, bn, bk, s, warps in itertools.product((64, 128), (64, 128), (32, 64), (2, 3, 4), (4, 8)):
        wm, wn = (2, 2) if warps == 4 else (4, 2)
        out.append({"BM": bm, "BN": bn, "BK": bk, "S": s, "WM": wm, "WN": wn})
    return tuple(out)


#: the 48 settings of ampere.cake's constants (kernel `assign`) the GPU tests run and the cost model is
#: ranked over: tile rows, columns and k chunk, ring depth, and 4 or 8 warps
AMPERE_SWEEP: tuple[dict[str, int], ...] = _ampere_sweep()


def ampere_variant(values: Mapping[str, int]) -> tuple[Module, str]:
    """ampere.cake with the constants of its kernel `assign` set to ``values`` (one of
    :data:`AMPERE_SWEEP`), and its text: the one way the tests, the benchmarks and the cost-model ranking
    build a variant (``pipeline.Source(*ampere_variant(values))``)."""
    from cake_core.ir.parser import parse_file
    from cake_core.ir.printer import print_module
    from cake_core.ir.transform import set_consts

    module = set_consts(parse_file(SCHEDULES / "ampere.cake")[0], dict(values), kernel="assign")
    return module, print_module(module)
