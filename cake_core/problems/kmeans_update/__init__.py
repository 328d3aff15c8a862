"""The built-in problem ``kmeans-update``: new centroids as the mean of each cluster's points.

A built-in plugin: the plugin manager registers this module like any external one. Its schedules scatter
points into per-cluster sums with ``atomic.add``: straight into global memory (``schedules/atomic.cake``),
or privatized per CTA in shared memory first (``schedules/privatized.cake``; ``schedules/staged.cake`` also
stages the points through shared memory with ``cp.async``), or sorted by cluster with a counting sort
written in Cake IR and summed run by run with ``segment.add`` (``schedules/sorted.cake``).
"""

from __future__ import annotations

from collections.abc import Callable

from cake_core.hookspecs import hookimpl
from cake_core.problems.kmeans_update.cells import CHECK_CELLS, DEFAULT_CELL
from cake_core.problems.kmeans_update.problem import KMEANS_UPDATE, KMeansUpdate
from cake_core.problems.problem import Problem

__all__ = ["CHECK_CELLS", "DEFAULT_CELL", "KMEANS_UPDATE", "KMeansUpdate", "cake_register_problems"]


@hookimpl
def cake_register_problems(register: Callable[[Problem], None]) -> None:
    """Register ``kmeans-update``."""
    register(KMEANS_UPDATE)
