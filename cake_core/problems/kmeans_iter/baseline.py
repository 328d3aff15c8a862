"""The baseline of kmeans-iter: flash-kmeans's Euclidean Lloyd iteration (``_euclid_iter``), autotuned, ||x||^2 given.

flash-kmeans 0.3.1's ``kmeans_triton_impl._euclid_iter(x, x_sq, centroids, use_heuristic)`` is one
iteration of its ``batch_kmeans_Euclid`` in three steps: the Triton assignment
(``euclid_assign_triton``), the sorted centroid update (``triton_centroid_update_sorted_euclid``: a sort
of the assignments, fp32 sums and counts, one division, an empty cluster keeping its old centroid, the
result cast to the input type), then the largest centroid shift. ``_euclid_iter`` is private, so the
timed call makes the same three calls through the public functions, the assignment straight into the
problem's ``assign`` (the new centroids, which the update allocates, are copied into ``centroids``).
``||x||^2`` is computed once per fit by its callers, so it is given here, outside the timed call; the
assignment kernel is autotuned (``use_heuristic=False``) before anything is timed.
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
    summary="flash-kmeans's iteration as _euclid_iter makes it (assign, sorted update, shift), autotuned, ||x||^2 "
    "given (computed untimed)",
    entry="cake_core.problems.kmeans_iter.baseline:flash_kmeans_iter",
    requires=("torch", "triton", "flash_kmeans"),
)


def flash_kmeans_iter(
    inputs: Mapping[str, Any], outputs: Mapping[str, Any], shape: Mapping[str, int], dtype: str
) -> Callable[[], None]:
    """Prepare flash-kmeans on CUDA tensors ``x`` [B, N, D] and ``c`` [B, K, D]: compute ``||x||^2``, autotune,
    and return the call that runs one iteration into the outputs ``assign`` and ``centroids``."""
    from flash_kmeans.assign_euclid_triton import euclid_assign_triton
    from flash_kmeans.centroid_update_triton import triton_centroid_update_sorted_euclid

    x, c, assign = inputs["x"], inputs["c"], outputs["assign"]
    x_sq = squared_norms(x)

    def iterate() -> None:
        euclid_assign_triton(x, c, x_sq, out=assign, use_heuristic=False)
        centroids = triton_centroid_update_sorted_euclid(x, assign, c)
        (centroids - c).norm(dim=-1).max()  # the shift _euclid_iter returns for its convergence test
        outputs["centroids"].copy_(centroids)

    iterate()  # autotunes before anything is timed
    return iterate
