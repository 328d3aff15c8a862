"""The built-in problem ``kmeans-iter``: one whole K-means iteration, assignment then centroid update.

A built-in plugin: the plugin manager registers this module like any external one. Its schedules
(``schedules/*.cake``) run the two steps as separate launches (``naive.cake``) or fuse the scatter of
each point into its cluster's sums with the assignment, so that ``x`` is read once (``fused.cake``).
"""

from __future__ import annotations

from collections.abc import Callable

from cake_core.hookspecs import hookimpl
from cake_core.problems.kmeans_iter.cells import CHECK_CELLS, DEFAULT_CELL
from cake_core.problems.kmeans_iter.problem import KMEANS_ITER, KMeansIter
from cake_core.problems.problem import Problem

__all__ = ["CHECK_CELLS", "DEFAULT_CELL", "KMEANS_ITER", "KMeansIter", "cake_register_problems"]


@hookimpl
def cake_register_problems(register: Callable[[Problem], None]) -> None:
    """Register ``kmeans-iter``."""
    register(KMEANS_ITER)
