"""The baseline of kmeans-update: flash-kmeans's sorted centroid update, its sort included, ``BLOCK_N`` tuned.

flash-kmeans 0.3.1's ``triton_centroid_update_sorted_euclid(x, cluster_ids, old_centroids, BLOCK_N=...,
centroid_sums=..., centroid_cnts=..., calculate_new=...)`` sorts the assignments of every batch, sums the
points of each cluster in fp32 and counts them into the buffers it is handed (which it expects zeroed),
then, with ``calculate_new``, divides and rounds the centroids to ``x``'s type. kmeans-update wants fp32
centroids, which no rounded result passes, so the timed call makes every output of the problem itself:
it zeroes the fp32 sums and the problem's ``counts`` (int32, handed to flash-kmeans as its counts
buffer), runs the update with ``calculate_new=False``, and divides as flash-kmeans does (counts clamped
to 1, an empty cluster keeping its old centroid, in fp32) into ``centroids``.

``BLOCK_N`` (points per Triton program) is flash-kmeans's one tuning knob; :func:`tuned_sorted_update`
times each choice and keeps the fastest. :data:`FLASH_KMEANS_UPDATE` is the
:class:`~cake_core.problems.problem.Baseline` the problem names and :func:`flash_kmeans_update` its entry,
run in the GPU worker, which tunes once per cell and process; ``bench/kmeans_update.py`` builds the same
call with :func:`tuned_sorted_update`, timed by its own clock. torch and flash_kmeans are imported lazily.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cake_core.problems.problem import Baseline

__all__ = ["BLOCK_N_CHOICES", "FLASH_KMEANS_UPDATE", "flash_kmeans_update", "sorted_update", "tuned_sorted_update"]

#: the ``BLOCK_N`` values the baseline is tuned over (flash-kmeans's default is 256)
BLOCK_N_CHOICES = (128, 256)

#: what kmeans-update is measured against
FLASH_KMEANS_UPDATE = Baseline(
    name="flash-kmeans",
    summary="flash-kmeans triton_centroid_update_sorted_euclid, its sort included, into fp32 sums and the "
    "counts, then the fp32 division (empty clusters keep c), BLOCK_N tuned before timing",
    entry="cake_core.problems.kmeans_update.baseline:flash_kmeans_update",
    requires=("torch", "triton", "flash_kmeans"),
)

#: BLOCK_N chosen per (shape, dtype, device) in this process: the worker calls the entry twice per cell
_TUNED: dict[tuple[Any, ...], int] = {}


def sorted_update(
    x: Any, assign: Any, c: Any, centroids: Any, counts: Any, sums: Any, block_n: int
) -> Callable[[], None]:
    """The call that computes ``centroids`` (fp32 [B, K, D]) and ``counts`` (int32 [B, K]) from ``x`` [B, N, D],
    ``assign`` (int32 [B, N]) and ``c`` [B, K, D] with flash-kmeans's sorted update at ``block_n``; ``sums``
    (fp32 [B, K, D]) is its scratch, zeroed by the call as ``counts`` is."""
    import torch
    from flash_kmeans.centroid_update_triton import triton_centroid_update_sorted_euclid

    def call() -> None:
        sums.zero_()
        counts.zero_()
        triton_centroid_update_sorted_euclid(x, assign, c, BLOCK_N=block_n, centroid_sums=sums,
                                             centroid_cnts=counts, calculate_new=False)  # fmt: skip
        n = counts[..., None]
        torch.where(n > 0, sums / n.clamp(min=1), c.float(), out=centroids)

    return call


def tuned_sorted_update(
    x: Any,
    assign: Any,
    c: Any,
    centroids: Any,
    counts: Any,
    sums: Any,
    time_ms: Callable[[Callable[[], None]], float],
    choices: Sequence[int] = BLOCK_N_CHOICES,
) -> tuple[Callable[[], None], int]:
    """:func:`sorted_update` at the fastest of ``choices`` by ``time_ms(call)`` (each called, so compiled,
    before it is timed), and that ``BLOCK_N``."""
    best: tuple[float, int, Callable[[], None]] | None = None
    for block_n in choices:
        call = sorted_update(x, assign, c, centroids, counts, sums, block_n)
        call()  # Triton compiles this BLOCK_N outside the timing
        ms = time_ms(call)
        if best is None or ms < best[0]:
            best = (ms, block_n, call)
    if best is None:
        raise ValueError("no BLOCK_N to tune over")
    return best[2], best[1]


def _event_ms(call: Callable[[], None], reps: int = 5) -> float:
    """The median of ``reps`` calls timed by CUDA events on torch's current stream (enough to rank choices)."""
    import torch

    samples = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    return statistics.median(samples)


def flash_kmeans_update(
    inputs: Mapping[str, Any], outputs: Mapping[str, Any], shape: Mapping[str, int], dtype: str
) -> Callable[[], None]:
    """Prepare flash-kmeans on CUDA tensors ``x``, ``assign`` and ``c``: allocate its fp32 sums, tune ``BLOCK_N``
    (once per cell in this process) and return the call that writes ``centroids`` and ``counts``."""
    import torch

    x, assign, c = inputs["x"], inputs["assign"], inputs["c"]
    centroids, counts = outputs["centroids"], outputs["counts"]
    sums = torch.empty(centroids.shape, dtype=torch.float32, device=centroids.device)
    key = (tuple(sorted(shape.items())), dtype, str(x.device))
    if key in _TUNED:
        call = sorted_update(x, assign, c, centroids, counts, sums, _TUNED[key])
        call()  # compiled before anything is timed (a cached kernel: a cheap call)
        return call
    call, _TUNED[key] = tuned_sorted_update(x, assign, c, centroids, counts, sums, _event_ms)
    return call
