"""The built-in problem ``kmeans-assign``: nearest-centroid assignment, the hot step of K-means.

A built-in plugin: the plugin manager registers this module like any external one.
"""

from __future__ import annotations

from collections.abc import Callable

from cake_core.hookspecs import hookimpl
from cake_core.problems.kmeans_assign.cells import CHECK_CELLS, DEFAULT_CELL
from cake_core.problems.kmeans_assign.problem import KMEANS_ASSIGN, KMeansAssign
from cake_core.problems.problem import Problem

__all__ = ["CHECK_CELLS", "DEFAULT_CELL", "KMEANS_ASSIGN", "KMeansAssign", "cake_register_problems"]


@hookimpl
def cake_register_problems(register: Callable[[Problem], None]) -> None:
    """Register ``kmeans-assign``."""
    register(KMEANS_ASSIGN)
