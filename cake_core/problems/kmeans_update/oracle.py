"""The kmeans-update reference and oracle, in float64 with numpy, batch by batch.

For every batch ``b`` and cluster ``k`` with ``n = #{i : assign[b, i] == k}`` points:

- ``counts[b, k]`` must equal ``n`` exactly;
- where ``n > 0``, every ``centroids[b, k, d]`` must lie within
  ``2 * (n + 1) * 2^-24 * S / n`` of the float64 mean, with ``S = sum_i |x[b, i, d]|`` over the
  cluster's points. That is twice the bound on the rounding of any order of fp32 additions of the
  ``n`` values (``(n - 1) u S``) and of the final division (``u |mean|``), ``u = 2^-24``: it admits
  atomics in any order, segmented sums, pairwise sums and reciprocal multiplication, and nothing
  that drops or adds a point (which moves the mean by about ``|x| / n``, far more);
- where ``n == 0`` (an empty cluster), the centroid is the previous one, ``c[b, k, :]`` converted to
  f32 (exact from bf16 and f16): it must be bit-for-bit that value.
"""

from __future__ import annotations

import math
import os

import attrs
import numpy as np

from cake_core.hostdata import decode
from cake_core.problems.problem import OracleReport, Violation

#: unit roundoff of fp32
U32 = 2.0**-24
#: how many violations a report describes in detail
FIRST_VIOLATIONS = 8


def tolerance_text() -> str:
    return (
        "counts exact; centroid of a cluster of n > 0 points within 2 * (n + 1) * 2^-24 * sum|x| / n of the "
        "fp64 mean per dimension; an empty cluster keeps its previous centroid exactly"
    )


@attrs.frozen(eq=False)
class BatchTruth:
    """Float64 facts about one batch: per cluster the count, the sum and the sum of magnitudes."""

    counts: np.ndarray  # int64 [K]
    sums: np.ndarray  # float64 [K, D]
    abs_sums: np.ndarray  # float64 [K, D]

    def means(self, previous: np.ndarray) -> np.ndarray:
        """Float64 means; an empty cluster takes ``previous`` (its old centroid)."""
        n = self.counts[:, None].astype(np.float64)
        return np.where(n > 0, self.sums / np.where(n > 0, n, 1.0), previous)


def batch_truth(x: np.ndarray, assign: np.ndarray, k: int, dtype: str) -> BatchTruth:
    """Per-cluster count, float64 sum and sum of |x| for one batch (``x`` storage [N, D], ``assign`` [N])."""
    xb = decode(x, dtype, np.float64)
    a = assign.astype(np.int64)
    counts = np.bincount(a, minlength=k)[:k]
    d = xb.shape[1]
    sums = np.empty((k, d))
    abs_sums = np.empty((k, d))
    for j in range(d):
        col = xb[:, j]
        sums[:, j] = np.bincount(a, weights=col, minlength=k)[:k]
        abs_sums[:, j] = np.bincount(a, weights=np.abs(col), minlength=k)[:k]
    return BatchTruth(counts, sums, abs_sums)


def truths(x: np.ndarray, assign: np.ndarray, k: int, dtype: str) -> tuple[BatchTruth, ...]:
    """The :class:`BatchTruth` of every batch: what judging any number of outputs for one input needs.
    Batches are worked out on up to 8 threads (numpy's loops release the GIL): seconds per batch of 65536
    points of 128 dimensions."""
    from concurrent.futures import ThreadPoolExecutor

    batches = x.shape[0]
    workers = max(1, min(8, os.cpu_count() or 1, batches))
    if workers == 1:
        return tuple(batch_truth(x[b], assign[b], k, dtype) for b in range(batches))
    with ThreadPoolExecutor(workers) as ex:
        return tuple(ex.map(lambda b: batch_truth(x[b], assign[b], k, dtype), range(batches)))


def reference(x: np.ndarray, assign: np.ndarray, c: np.ndarray, dtype: str) -> dict[str, np.ndarray]:
    """``centroids`` f32 [B, K, D] (means rounded once from float64) and ``counts`` i32 [B, K]."""
    batches, k, d = c.shape
    centroids = np.empty((batches, k, d), dtype=np.float32)
    counts = np.empty((batches, k), dtype=np.int32)
    for b in range(batches):
        t = batch_truth(x[b], assign[b], k, dtype)
        centroids[b] = t.means(decode(c[b], dtype, np.float64)).astype(np.float32)
        counts[b] = t.counts
    return {"centroids": centroids, "counts": counts}


def assess(
    x: np.ndarray, assign: np.ndarray, c: np.ndarray, centroids: np.ndarray, counts: np.ndarray, dtype: str,
    method: str, seconds_start: float, known: tuple[BatchTruth, ...] | None = None,
) -> OracleReport:  # fmt: skip
    """Judge every element of ``centroids`` and ``counts`` (against ``known``, the inputs' :func:`truths`,
    when the caller has them already)."""
    import time

    batches, k, d = c.shape
    first: list[Violation] = []
    bad = 0
    worst = 0.0
    for b in range(batches):
        t = known[b] if known is not None else batch_truth(x[b], assign[b], k, dtype)
        prev = decode(c[b], dtype, np.float64)
        got_n = counts[b].astype(np.int64)
        wrong_n = got_n != t.counts
        bad += int(wrong_n.sum())
        if wrong_n.any():
            worst = math.inf
        for kk in np.flatnonzero(wrong_n)[: max(0, FIRST_VIOLATIONS - len(first))]:
            first.append(Violation(
                "counts", (b, int(kk)), int(got_n[kk]), int(t.counts[kk]), math.inf,
                f"cluster {int(kk)} has {int(t.counts[kk])} points, the candidate counted {int(got_n[kk])}",
            ))  # fmt: skip
        n = t.counts[:, None].astype(np.float64)
        mean = t.means(prev)
        allowed = np.where(n > 0, 2.0 * (n + 1.0) * U32 * t.abs_sums / np.where(n > 0, n, 1.0), 0.0)
        got = centroids[b].astype(np.float64)
        with np.errstate(invalid="ignore"):
            err = np.abs(got - mean)
            excess = np.where(allowed > 0, err / np.where(allowed > 0, allowed, 1.0), np.where(err > 0, np.inf, 0.0))
        excess = np.where(np.isfinite(got), excess, np.inf)
        violating = ~(excess <= 1.0)
        bad += int(violating.sum())
        if excess.size:
            worst = max(worst, float(np.nanmax(np.where(np.isnan(excess), np.inf, excess))))
        for kk, dd in np.argwhere(violating)[: max(0, FIRST_VIOLATIONS - len(first))]:
            kk, dd = int(kk), int(dd)
            if t.counts[kk] == 0:
                detail = (f"cluster {kk} is empty: its centroid keeps the previous one, {prev[kk, dd]:.9g}, "
                          f"not {got[kk, dd]:.9g}")  # fmt: skip
            else:
                detail = (f"the mean of the {int(t.counts[kk])} points of cluster {kk} is {mean[kk, dd]:.9g} in "
                          f"dimension {dd}; the candidate's {got[kk, dd]:.9g} is off by {err[kk, dd]:.3g}, allowed "
                          f"{allowed[kk, dd]:.3g}")  # fmt: skip
            first.append(Violation("centroids", (b, kk, dd), float(got[kk, dd]), float(mean[kk, dd]),
                                   float(excess[kk, dd]), detail))  # fmt: skip
    return OracleReport(
        passed=bad == 0, checked=int(centroids.size + counts.size), violations=bad, worst_excess=worst,
        first=tuple(first), method=method, tolerance=tolerance_text(), seconds=time.perf_counter() - seconds_start,
    )  # fmt: skip
