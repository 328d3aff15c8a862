"""The cells of kmeans-iter: the default one and every cell a candidate is checked on."""

from __future__ import annotations

from cake_core.problems.kmeans_assign.cells import kmeans_cell
from cake_core.problems.problem import Cell


#: the K-Means reference cell (kmeans-assign's and flash-kmeans's), one whole iteration
DEFAULT_CELL = kmeans_cell(32, 65536, 1024, 128, note="reference cell: assignment and update of one Lloyd iteration")

#: every cell a candidate must pass, the default first
CHECK_CELLS: tuple[Cell, ...] = (
    DEFAULT_CELL,
    kmeans_cell(1, 65521, 1024, 128, note="one batch; N prime: ragged last tile of points"),
    kmeans_cell(8, 16384, 100, 128, note="K not a multiple of any tile; many points on each cluster"),
    kmeans_cell(4, 32768, 4096, 128, note="many clusters, few points each"),
    kmeans_cell(16, 32768, 1024, 64, note="D=64"),
    kmeans_cell(4, 16384, 1024, 256, note="D=256: twice the shared memory per row"),
    kmeans_cell(32, 65536, 1024, 128, "f16", note="the reference cell in f16"),
)
