"""The cells of knn: the default one and every cell a candidate is checked on."""

from __future__ import annotations

from cake_core.problems.problem import Cell


def _cell(b: int, m: int, n: int, d: int, k: int, dtype: str = "bf16", note: str = "") -> Cell:
    return Cell({"B": b, "M": m, "N": n, "D": d, "K": k}, dtype, note)


#: the baseline's cell: 4096 queries against 2^20 points of 128 dimensions, 10 neighbours
DEFAULT_CELL = _cell(1, 4096, 1 << 20, 128, 10,
                     note="the baseline, PyTorch q @ x.T + topk with fp32 scores: about 92 ms on an H200")

#: every cell a candidate must pass, the default first
CHECK_CELLS: tuple[Cell, ...] = (
    DEFAULT_CELL,
    _cell(4, 1000, 100003, 128, 10, note="M and N ragged (N prime)"),
    _cell(8, 512, 65536, 64, 1, note="k = 1: nearest neighbour only; D=64"),
    _cell(1, 4096, 262144, 128, 32, note="k = 32: the largest lists"),
    _cell(2, 2048, 131072, 256, 16, note="D=256"),
    _cell(1, 4096, 1 << 20, 128, 10, "f16", note="the default cell in f16"),
)

#: the benchmark's cells (bench/knn.py), f16 as the issue's baseline figure: the headline shape with k in
#: {1, 10, 100}, then ragged sizes, a small database, D=64 and D=256
BENCH_CELLS: tuple[Cell, ...] = (
    _cell(1, 4096, 1 << 20, 128, 10, "f16", note="headline; torch q @ x.T + topk about 85 ms on an H200"),
    _cell(1, 4096, 1 << 20, 128, 1, "f16", note="headline shape, nearest neighbour only"),
    _cell(1, 4096, 1 << 20, 128, 100, "f16", note="headline shape, k = 100"),
    _cell(1, 3001, 999983, 128, 10, "f16", note="ragged: M and N prime"),
    _cell(1, 4096, 65536, 128, 10, "f16", note="small database"),
    _cell(1, 4096, 1 << 20, 64, 10, "f16", note="D=64"),
    _cell(1, 4096, 1 << 20, 256, 10, "f16", note="D=256"),
)
