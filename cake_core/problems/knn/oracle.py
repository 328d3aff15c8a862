"""The knn reference and oracle, in float64 with numpy, batch by batch and in blocks of queries.

For every query ``(b, m)`` and rank ``j`` with candidate index ``i = out[b, m, j]`` the oracle asks:

- is ``i`` in ``[0, N)``, and different from ``out[b, m, j']`` for every ``j' < j``?
- is ``d(q, x[i]) - d_(j) <= rtol * (||q||^2 + max(||x[i]||^2, ||x_(j)||^2))``, where ``d`` is the
  squared Euclidean distance and ``d_(j)``, ``x_(j)`` the ``j``-th smallest distance (from 0) and its
  point?

Every rank passing means the first ``j + 1`` answers are ``j + 1`` distinct points no farther than
the true ``j``-th nearest (up to the tolerance), for every ``j``: the right set, in ascending order.
All distances come from one float64 matrix ``||q||^2 + ||x||^2 - 2 q.x``, so a candidate that picks
exactly the reference's points has a gap of exactly zero. The tolerance is the size of the rounding
an fp32 ``||x||^2 - 2 q.x`` may commit over D <= 256 products, with a wide margin.
"""

from __future__ import annotations

import time

import numpy as np

from cake_core.hostdata import decode
from cake_core.problems.problem import OracleReport, Violation

#: how many violations a report describes in detail
FIRST_VIOLATIONS = 8
# float64 elements of one block of the distance matrix (16 MiB)
_CHUNK_ELEMENTS = 1 << 21


def tolerance_text(rtol: float) -> str:
    return (
        f"out[b, m, :] distinct indices in [0, N); rank j: d(q, x[out_j]) - d_(j) <= {rtol:g} * "
        "(||q||^2 + max(||x[out_j]||^2, ||x_(j)||^2)), d_(j) the j-th smallest squared distance, fp64"
    )


def _blocks(q: np.ndarray, x: np.ndarray, dtype: str):
    """(row offset, float64 distances [rows, N], ||q||^2 [rows], ||x||^2 [N]) per block of queries."""
    xb = decode(x, dtype, np.float64)
    xx = np.einsum("nd,nd->n", xb, xb)
    qb_all = decode(q, dtype, np.float64)
    rows = max(1, _CHUNK_ELEMENTS // max(1, xb.shape[0]))
    for r0 in range(0, qb_all.shape[0], rows):
        qb = qb_all[r0 : r0 + rows]
        qq = np.einsum("md,md->m", qb, qb)
        yield r0, qq[:, None] + xx[None, :] - 2.0 * (qb @ xb.T), qq, xx


def nearest_numpy(q: np.ndarray, x: np.ndarray, k: int, dtype: str) -> np.ndarray:
    """The float64 k nearest points of every query, ascending, ties to the smaller index: int32 [B, M, k]."""
    batches, m = q.shape[0], q.shape[1]
    out = np.empty((batches, m, k), dtype=np.int32)
    for b in range(batches):
        for r0, dist, _, _ in _blocks(q[b], x[b], dtype):
            out[b, r0 : r0 + dist.shape[0]] = np.argsort(dist, axis=1, kind="stable")[:, :k]
    return out


def assess(q: np.ndarray, x: np.ndarray, cand: np.ndarray, dtype: str, rtol: float, method: str) -> OracleReport:
    """Judge every element of ``cand`` [B, M, k] (see the module documentation)."""
    start = time.perf_counter()
    batches, _, k = cand.shape
    n = x.shape[1]
    first: list[Violation] = []
    bad = 0
    worst = 0.0
    for b in range(batches):
        for r0, dist, qq, xx in _blocks(q[b], x[b], dtype):
            rows = dist.shape[0]
            part = np.argpartition(dist, k - 1, axis=1)[:, :k] if k < n else np.tile(np.arange(n), (rows, 1))
            pv = np.take_along_axis(dist, part, axis=1)
            order = np.lexsort((part, pv), axis=1)
            true_i = np.take_along_axis(part, order, axis=1)
            true_d = np.take_along_axis(pv, order, axis=1)
            c = cand[b, r0 : r0 + rows].astype(np.int64)
            in_range = (c >= 0) & (c < n)
            safe = np.where(in_range, c, 0)
            eq = c[:, :, None] == c[:, None, :]
            repeats = np.tril(eq, -1).any(axis=2)
            with np.errstate(invalid="ignore", over="ignore"):
                got_d = np.take_along_axis(dist, safe, axis=1)
                scale = qq[:, None] + np.maximum(xx[safe], xx[true_i])
                gap = got_d - true_d
                rel = np.where(scale > 0, gap / np.where(scale > 0, scale, 1.0), np.where(gap > 0, np.inf, 0.0))
                excess = np.maximum(rel / rtol, 0.0)
            excess = np.where(np.isfinite(excess), excess, np.inf)
            excess = np.where(in_range & ~repeats, excess, np.inf)
            violating = ~(excess <= 1.0)
            bad += int(violating.sum())
            if excess.size:
                worst = max(worst, float(excess.max()))
            for r, j in np.argwhere(violating)[: max(0, FIRST_VIOLATIONS - len(first))]:
                r, j = int(r), int(j)
                got = int(c[r, j])
                if not in_range[r, j]:
                    detail = f"index {got} is outside [0, {n})"
                elif repeats[r, j]:
                    detail = f"index {got} was already returned at rank {int(np.argmax(c[r, :j] == got))}"
                else:
                    detail = (
                        f"rank {j}: d(q, x[{got}]) = {got_d[r, j]:.9g} exceeds the {j}-th smallest distance "
                        f"{true_d[r, j]:.9g} (point {int(true_i[r, j])}) by {gap[r, j]:.3g}, allowed "
                        f"{rtol * scale[r, j]:.3g}"
                    )
                first.append(Violation("out", (b, r0 + r, j), got, int(true_i[r, j]), float(excess[r, j]), detail))
    return OracleReport(
        passed=bad == 0, checked=int(cand.size), violations=bad, worst_excess=worst if cand.size else 0.0,
        first=tuple(first), method=method, tolerance=tolerance_text(rtol), seconds=time.perf_counter() - start,
    )  # fmt: skip

