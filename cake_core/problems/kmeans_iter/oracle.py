"""The kmeans-iter oracle: kmeans-assign's judgement of the assignments, then the centroids judged against
the update computed from the candidate's own assignments.

Assignments (``assign`` [B, N]): exactly kmeans-assign's rule (:mod:`cake_core.problems.kmeans_assign.oracle`),
through its numpy or CUDA float64 assessment: any index in ``[0, K)`` within ``rtol * (||x||^2 + ||c_min||^2)``
of the float64 minimum distance passes, so a near-tie may go either way.

Centroids (``centroids`` [B, K, D], the input element type ``T``): the float64 facts of each cluster come
from kmeans-update's :func:`~cake_core.problems.kmeans_update.oracle.batch_truth` over the points the
*candidate* put in it, so a legal tie choice changes the mean it is held to, not its verdict. For a
cluster of ``n > 0`` points with float64 mean ``m`` and ``S = sum |x|`` per dimension, the candidate's
value may differ from ``m`` by

    ``A + u_T * (|m| + A) + eta_T``,   ``A = 2 * (n + 1) * 2^-24 * S / n``

``A`` is kmeans-update's allowance for fp32 sums in any order and one division; the rest is one
rounding of that fp32 mean to ``T`` (``u_T`` = 2^-8 for bf16, 2^-11 for f16; ``eta_T`` half the
spacing of ``T``'s subnormals). An empty cluster (``n == 0``) keeps its previous centroid: the
candidate's element must be ``c[b, k, d]`` bit for bit.

The float64 facts of a batch are kept for the last few (points, assignments) pairs, by digest: a benchmark
judges several implementations on the same inputs, whose assignments mostly agree, and the facts of a
reference-cell batch take a fifth of a second of numpy each.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict

import numpy as np

from cake_core.hostdata import decode, encode
from cake_core.problems.kmeans_assign.oracle import FIRST_VIOLATIONS
from cake_core.problems.kmeans_update.oracle import U32, BatchTruth, batch_truth
from cake_core.problems.problem import OracleReport, Violation

#: unit roundoff of each centroid type, and half the spacing of its subnormals
ROUNDING = {"bf16": (2.0**-8, 2.0**-134), "f16": (2.0**-11, 2.0**-25)}


def centroid_tolerance_text(dtype: str) -> str:
    u, _ = ROUNDING[dtype]
    return (
        f"a cluster of the candidate's n > 0 points: within A + {u:g} * (|mean| + A) + eta of the fp64 mean, "
        f"A = 2 * (n + 1) * 2^-24 * sum|x| / n (fp32 sums, one division, one rounding to {dtype}); an empty "
        "cluster keeps its previous centroid bit for bit"
    )


#: batch facts by (points digest, assignments digest, K, dtype), the most recently used last
_TRUTHS: OrderedDict[tuple, BatchTruth] = OrderedDict()
_KEEP = 64


def _digest(a: np.ndarray) -> bytes:
    a = np.ascontiguousarray(a)
    return hashlib.blake2b(memoryview(a).cast("B"), digest_size=16).digest() + repr((a.dtype.str, a.shape)).encode()


def _truth(x: np.ndarray, assign: np.ndarray, k: int, dtype: str) -> BatchTruth:
    """:func:`batch_truth`, computed once for each distinct (points, assignments) among the last few."""
    key = (_digest(x), _digest(assign), k, dtype)
    got = _TRUTHS.get(key)
    if got is None:
        got = _TRUTHS[key] = batch_truth(x, assign, k, dtype)
        while len(_TRUTHS) > _KEEP:
            _TRUTHS.popitem(last=False)
    else:
        _TRUTHS.move_to_end(key)
    return got


def reference_centroids(x: np.ndarray, assign: np.ndarray, c: np.ndarray, dtype: str) -> np.ndarray:
    """The float64 means over ``assign``'s clusters rounded to ``dtype`` through f32, as a kernel's store
    rounds (an empty cluster: ``c``)."""
    out = np.empty_like(c)
    for b in range(c.shape[0]):
        t = batch_truth(x[b], assign[b], c.shape[1], dtype)
        out[b] = np.where(t.counts[:, None] > 0, encode(t.means(decode(c[b], dtype, np.float64)), dtype), c[b])
    return out


def assess_centroids(
    x: np.ndarray, assign: np.ndarray, c: np.ndarray, centroids: np.ndarray, dtype: str
) -> tuple[int, int, float, list[Violation]]:
    """(elements checked, violations, worst excess, first violations) of ``centroids`` against the means of
    the clusters ``assign`` forms; indices outside ``[0, K)`` (already violations of ``assign``) are left out."""
    batches, k, d = c.shape
    u, eta = ROUNDING[dtype]
    bad, worst, first = 0, 0.0, []
    for b in range(batches):
        a = assign[b]
        keep = (a >= 0) & (a < k)
        t = _truth(x[b][keep], a[keep], k, dtype)
        n = t.counts[:, None].astype(np.float64)
        full = n > 0
        mean = t.sums / np.where(full, n, 1.0)
        slack = 2.0 * (n + 1.0) * U32 * t.abs_sums / np.where(full, n, 1.0)
        allowed = slack + u * (np.abs(mean) + slack) + eta
        got = decode(centroids[b], dtype, np.float64)
        with np.errstate(invalid="ignore"):
            err = np.abs(got - mean)
            excess = np.where(full, err / allowed, np.where(centroids[b].view(np.uint16) == c[b].view(np.uint16), 0.0, np.inf))
        excess = np.where(np.isnan(excess), np.inf, excess)
        violating = ~(excess <= 1.0)
        bad += int(violating.sum())
        worst = max(worst, float(excess.max(initial=0.0)))
        prev = decode(c[b], dtype, np.float64)
        for kk, dd in np.argwhere(violating)[: max(0, FIRST_VIOLATIONS - len(first))]:
            kk, dd = int(kk), int(dd)
            if not full[kk, 0]:
                detail = (f"cluster {kk} has no point: its centroid keeps the previous one, {prev[kk, dd]:.9g}, "
                          f"not {got[kk, dd]:.9g}")  # fmt: skip
                expected = prev[kk, dd]
            else:
                detail = (f"the {int(t.counts[kk])} points the candidate assigned to cluster {kk} have the mean "
                          f"{mean[kk, dd]:.9g} in dimension {dd}; its {got[kk, dd]:.9g} is off by {err[kk, dd]:.3g}, "
                          f"allowed {allowed[kk, dd]:.3g}")  # fmt: skip
                expected = mean[kk, dd]
            first.append(Violation("centroids", (b, kk, dd), float(got[kk, dd]), float(expected),
                                   float(excess[kk, dd]), detail))  # fmt: skip
    return int(centroids.size), bad, worst, first


def combine(assignments: OracleReport, centroids: tuple[int, int, float, list[Violation]], dtype: str,
            start: float) -> OracleReport:  # fmt: skip
    """One report over both outputs: the assignments' first violations, then the centroids'."""
    checked, bad, worst, first = centroids
    return OracleReport(
        passed=assignments.passed and bad == 0,
        checked=assignments.checked + checked,
        violations=assignments.violations + bad,
        worst_excess=max(assignments.worst_excess, worst),
        first=(*assignments.first, *first)[:FIRST_VIOLATIONS],
        method=assignments.method,
        tolerance=f"assign: {assignments.tolerance}; centroids: {centroid_tolerance_text(dtype)}",
        seconds=time.perf_counter() - start,
    )

