"""The kmeans-assign oracle: per-point float64 assessments, from numpy or the CUDA reference, and the report.

For every point ``(b, n)`` with candidate index ``i = out[b, n]`` the oracle asks, in float64 on the
decoded inputs:

- is ``i`` in ``[0, K)``?
- is ``d(x, c[i]) - d(x, c[m]) <= rtol * (||x||^2 + ||c[m]||^2)``, where ``m`` is the float64 argmin
  and ``d`` the squared Euclidean distance?

An :class:`Assessment` holds, per point, the float64 argmin ``ref_idx``, a ``code`` (judged, out of
range, not finite) and ``rel_gap = (d(x, c[i]) - d(x, c[m])) / (||x||^2 + ||c[m]||^2)``. Both methods
produce one (:func:`assess_numpy` here, ``cuda_reference.assess_cuda`` on a GPU) and
:func:`make_report` applies the tolerance, identically for both.
"""

from __future__ import annotations

import math

import attrs
import numpy as np

from cake_core.errors import CakeInternalError
from cake_core.hostdata import decode
from cake_core.problems.problem import OracleReport, Violation

#: the point was judged: its verdict is ``rel_gap <= rtol``
CODE_JUDGED = 0
#: the candidate's index is outside ``[0, K)``
CODE_OUT_OF_RANGE = 1
#: a distance or the scale is not finite (inputs holding inf or NaN)
CODE_NOT_FINITE = 3
#: the reference's own argmin is outside ``[0, K)``: a bug of the reference, never the candidate's
CODE_REFERENCE_BUG = 4

#: how many violations a report describes in detail
FIRST_VIOLATIONS = 8

# float64 elements of one block of the distance matrix in the numpy path (16 MiB)
_CHUNK_ELEMENTS = 1 << 21


@attrs.frozen(eq=False)
class Assessment:
    """Per-point float64 facts about a candidate's ``out`` [B, N] (all three arrays have that shape)."""

    ref_idx: np.ndarray  # int32: the float64 argmin, ties to the smallest index
    rel_gap: np.ndarray  # float64: (d(x, c[out]) - d(x, c[ref])) / (||x||^2 + ||c[ref]||^2); inf unless judged
    code: np.ndarray  # int32: CODE_* per point
    device_seconds: float | None = None  # the GPU worker's run phase, for the CUDA reference


def tolerance_text(rtol: float) -> str:
    """The acceptance rule in words, as reports state it."""
    return (
        f"out in [0, K) and d(x, c[out]) - min_k d(x, c[k]) <= {rtol:g} * (||x||^2 + ||c_min||^2), "
        "squared distances in fp64"
    )


def _rel_gap(gap: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """``gap / scale`` with the conventions of the CUDA reference where ``scale`` is zero."""
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(scale > 0, gap / np.where(scale > 0, scale, 1.0), np.where(gap > 0, np.inf, 0.0))
    return rel


def _batch_nearest(xb: np.ndarray, cb: np.ndarray, cc: np.ndarray) -> np.ndarray:
    """Float64 argmin over centroids for each row of ``xb`` [n, D] against ``cb`` [K, D] (``cc`` = norms)."""
    k = cb.shape[0]
    rows = max(1, _CHUNK_ELEMENTS // k)
    out = np.empty(xb.shape[0], dtype=np.int32)
    for r0 in range(0, xb.shape[0], rows):
        dist = cc[None, :] - 2.0 * (xb[r0 : r0 + rows] @ cb.T)
        out[r0 : r0 + rows] = np.argmin(dist, axis=1)
    return out


def nearest_numpy(x: np.ndarray, c: np.ndarray, dtype: str) -> np.ndarray:
    """The float64 nearest-centroid index of every point: int32 [B, N] (ties to the smallest index)."""
    batches, n = x.shape[0], x.shape[1]
    out = np.empty((batches, n), dtype=np.int32)
    for b in range(batches):
        xb = decode(x[b], dtype, np.float64)
        cb = decode(c[b], dtype, np.float64)
        out[b] = _batch_nearest(xb, cb, np.einsum("kd,kd->k", cb, cb))
    return out


def assess_numpy(x: np.ndarray, c: np.ndarray, cand: np.ndarray, dtype: str) -> Assessment:
    """The assessment of ``cand`` [B, N] computed on the host, batch by batch, in float64.

    The argmin comes from ``||c||^2 - 2 x.c`` (a BLAS product); both distances the verdict compares
    are then summed directly as ``(x - c)^2``, so a correct index has a gap of exactly zero.
    """
    batches, n = x.shape[0], x.shape[1]
    k = c.shape[1]
    ref_idx = np.empty((batches, n), dtype=np.int32)
    rel_gap = np.empty((batches, n), dtype=np.float64)
    code = np.empty((batches, n), dtype=np.int32)
    rows = max(1, _CHUNK_ELEMENTS // k)
    for b in range(batches):
        cb = decode(c[b], dtype, np.float64)
        cc = np.einsum("kd,kd->k", cb, cb)
        xb_all = decode(x[b], dtype, np.float64)
        for r0 in range(0, n, rows):
            r1 = min(n, r0 + rows)
            xb = xb_all[r0:r1]
            ref = _batch_nearest(xb, cb, cc)
            chosen = cand[b, r0:r1].astype(np.int64)
            in_range = (chosen >= 0) & (chosen < k)
            safe = np.where(in_range, chosen, ref)
            with np.errstate(invalid="ignore", over="ignore"):
                d_min = np.einsum("nd,nd->n", xb - cb[ref], xb - cb[ref])
                d_chosen = np.einsum("nd,nd->n", xb - cb[safe], xb - cb[safe])
                scale = np.einsum("nd,nd->n", xb, xb) + cc[ref]
                gap = d_chosen - d_min
            finite = np.isfinite(gap) & np.isfinite(scale)
            ref_idx[b, r0:r1] = ref
            rel_gap[b, r0:r1] = np.where(in_range & finite, _rel_gap(gap, scale), np.inf)
            code[b, r0:r1] = np.where(in_range, np.where(finite, CODE_JUDGED, CODE_NOT_FINITE), CODE_OUT_OF_RANGE)
    return Assessment(ref_idx, rel_gap, code)


def describe_point(
    x: np.ndarray, c: np.ndarray, dtype: str, position: tuple[int, int], chosen: int, rtol: float
) -> tuple[int, float, str]:
    """Recompute one point on the host in float64: (nearest index, excess, the verdict in words).

    Distances to every centroid are summed directly, independent of either assessment.
    """
    b, n = position
    xv = decode(x[b, n], dtype, np.float64)
    cb = decode(c[b], dtype, np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        dist = np.einsum("kd,kd->k", cb - xv, cb - xv)
    m = int(np.argmin(dist))
    k = cb.shape[0]
    if not 0 <= chosen < k:
        return m, math.inf, f"index {chosen} is outside [0, {k}) (the nearest centroid is {m})"
    allowed = rtol * (float(xv @ xv) + float(cb[m] @ cb[m]))
    gap = float(dist[chosen] - dist[m])
    if not (math.isfinite(gap) and math.isfinite(allowed)):
        return m, math.inf, f"index {chosen}: distances are not finite (inputs hold inf or NaN)"
    excess = gap / allowed if allowed > 0 else (math.inf if gap > 0 else 0.0)
    return m, excess, (
        f"index {chosen} is not a nearest centroid: d(x, c[{chosen}]) = {dist[chosen]:.9g} exceeds "
        f"d(x, c[{m}]) = {dist[m]:.9g} (the minimum) by {gap:.3g}, allowed {allowed:.3g} "
        f"= {rtol:g} * (||x||^2 + ||c[{m}]||^2)"
    )


def make_report(
    assessment: Assessment,
    x: np.ndarray,
    c: np.ndarray,
    cand: np.ndarray,
    dtype: str,
    rtol: float,
    method: str,
    seconds: float,
    tensor: str = "out",
) -> OracleReport:
    """Apply the tolerance to every point of ``assessment`` and describe the first violations."""
    code, rel = assessment.code, assessment.rel_gap
    if (code == CODE_REFERENCE_BUG).any():
        bad = np.argwhere(code == CODE_REFERENCE_BUG)[0]
        raise CakeInternalError(f"the {method} oracle produced an invalid argmin at {bad.tolist()}")
    judged = code == CODE_JUDGED
    with np.errstate(invalid="ignore"):
        ok = judged & (rel <= rtol)
        excess = np.where(judged, rel / rtol, np.inf)
    excess = np.where(np.isnan(excess), np.inf, excess)
    bad = ~ok
    count = int(bad.sum())
    first: list[Violation] = []
    for pos in np.argwhere(bad)[:FIRST_VIOLATIONS]:
        b, n = int(pos[0]), int(pos[1])
        chosen = int(cand[b, n])
        m, point_excess, detail = describe_point(x, c, dtype, (b, n), chosen, rtol)
        first.append(Violation(tensor, (b, n), chosen, m, point_excess, detail))
    worst = float(excess.max()) if excess.size else 0.0
    return OracleReport(
        passed=count == 0,
        checked=int(code.size),
        violations=count,
        worst_excess=max(worst, 0.0),
        first=tuple(first),
        method=method,
        tolerance=tolerance_text(rtol),
        seconds=seconds,
    )
