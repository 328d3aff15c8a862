"""The built-in problems ``knn`` and ``knn-ip``: the k best points of every query, by squared Euclidean
distance or by inner product (one problem class, two metrics).

A built-in plugin: the plugin manager registers this module like any external one. knn's schedules:
``fused_topk.cake`` streams tiles of points through shared memory (cp.async), scores them with mma.sync and
keeps a fused top-k in registers; ``hopper.cake`` does the same with TMA and wgmma; ``naive.cake`` scores
one point at a time; ``hopper_split.cake`` splits the points over 4 CTAs per query tile, folds each wgmma
accumulator from registers into per-thread lists (no shared round trip, no CTA-wide barrier) and merges.
knn-ip's (``ip/schedules/hopper.cake``, ``hopper_split.cake``) are the same scoring -q.x.
"""

from __future__ import annotations

from collections.abc import Callable

from cake_core.hookspecs import hookimpl
from cake_core.problems.knn.cells import BENCH_CELLS, CHECK_CELLS, DEFAULT_CELL
from cake_core.problems.knn.ip import KNN_IP
from cake_core.problems.knn.problem import KNN, Knn
from cake_core.problems.problem import Problem

__all__ = ["BENCH_CELLS", "CHECK_CELLS", "DEFAULT_CELL", "KNN", "KNN_IP", "Knn", "cake_register_problems"]


@hookimpl
def cake_register_problems(register: Callable[[Problem], None]) -> None:
    """Register ``knn`` and ``knn-ip``."""
    register(KNN)
    register(KNN_IP)
