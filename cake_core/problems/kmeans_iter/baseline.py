"""The baseline of kmeans-iter: flash-kmeans's Euclidean Lloyd iteration ``_euclid_iter``, autotuned, ||x||^2 given.

``flash_kmeans.kmeans_triton_impl._euclid_iter(x, x_sq, centroids, use_heuristic)`` is one iteration of
its ``batch_kmeans_Euclid``: the Triton assignment, then the sorted centroid update (a sort of the
assignments, fp32 sums and counts, one division, an empty cluster keeping its old centroid, the result
cast to the input type), then the largest centroid shift. All of it is timed, plus the copy of its two
results into the problem's outputs (it allocates its own). ``||x||^2`` is computed once per fit by its
callers, so it is given here, outside the timed call; the assignment kernel is autotuned
(``use_heuristic=False``) before anything is timed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from cake_core.problems.kmeans_assign.baseline import squared_norms
from cake_core.problems.problem import Baseline

__all__ = ["FLASH_KMEANS_ITER", "flash_kmeans_iter"]

#: what kmeans-iter is measured against
FLASH_KMEANS_ITER = Baseline(
    name="flash-kmeans",
    summary="flash-kmeans _euclid_iter (assign, sorted update, shift), autotuned, ||x||^2 given (computed untimed)",
    entry="cake_core.problems.kmeans_iter.baseline:flash_kmeans_iter",
    requires=("torch", "triton", "flash_kmeans"),
)


def flash_kmeans_iter(
    inputs: Mapping[str, Any], outputs: Mapping[str, Any], shape: Mapping[str, int], dtype: str
) -> Callable[[], None]:
    """Prepare flash-kmeans on CUDA tensors ``x`` [B, N, D] and ``c`` [B, K, D]: compute ``||x||^2``, autotune,
    and return the call that runs one iteration and copies its results into ``assign`` and ``centroids``."""
    from flash_kmeans.kmeans_triton_impl import _euclid_iter

    x, c = inputs["x"], inputs["c"]
    x_sq = squared_norms(x)

    def iterate() -> None:
        centroids, _shift, ids = _euclid_iter(x, x_sq, c, use_heuristic=False)
        outputs["assign"].copy_(ids)
        outputs["centroids"].copy_(centroids)

    iterate()  # autotunes before anything is timed
    return iterate
