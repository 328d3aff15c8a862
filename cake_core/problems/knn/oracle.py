"""The knn oracle: per-(query, rank) float64 assessments, from numpy or the CUDA reference, and the report.

A point's score ``s(q, x)`` is ``||q - x||^2`` (metric ``l2``) or ``-q.x`` (metric ``ip``): smaller is
nearer. For every query ``(b, m)`` and rank ``j`` with candidate index ``c = out[b, m, j]`` the oracle asks:

- is ``c`` in ``[0, N)``, and not already returned at an earlier rank of the row?
- do at most ``j`` points ``x[n]`` score below ``thr_j = s(q, x[c]) - rtol * (||q||^2 + ||x[c]||^2)``?

The second is ``s(q, x[c]) - s_(j) <= tol_j`` with ``s_(j)`` the ``j``-th smallest score (from 0):
every rank passing means the first ``j + 1`` answers are ``j + 1`` distinct points none of which scores
worse than the true ``j``-th by more than the tolerance: the right set, in ascending order, near-ties
either way. The tolerance is the size of the rounding an fp32 ``||x||^2 - 2 q.x`` (or ``q.x``) may
commit over D <= 256 products, with a wide margin. Scores of the returned points are summed directly;
scores of all points come from the expansion ``||q||^2 + ||x||^2 - 2 q.x``, whose float64 rounding is
far below the tolerance.

An :class:`Assessment` holds these facts per element and, per row, the *near list*: the points scoring
below the row's *reach* (the largest ``s(q, x[c]) + tol`` of its judged elements), sorted: what gives
the true ``j``-th score where the answer is right or nearly so, for the excess and the report. Both methods
produce one (:func:`assess_numpy` here, ``cuda_reference.assess_cuda`` on a GPU) and
:func:`make_report` judges it, identically for both.
"""

from __future__ import annotations

import attrs
import numpy as np

from cake_core.hostdata import decode
from cake_core.problems.problem import OracleReport, Violation

#: the element was judged: it passes when at most ``j`` points score below its threshold
CODE_JUDGED = 0
#: the candidate's index is outside ``[0, N)``
CODE_OUT_OF_RANGE = 1
#: the index was already returned at an earlier rank of the row
CODE_REPEATED = 2
#: the score or the threshold is not finite (inputs holding inf or NaN)
CODE_NOT_FINITE = 3
#: how many violations a report describes in detail
FIRST_VIOLATIONS = 8
#: entries of a row's near list beyond ``K``
NEAR_EXTRA = 64
# float64 elements of one block of the score matrix (16 MiB)
_CHUNK_ELEMENTS = 1 << 21


def near_capacity(k: int) -> int:
    """How many points a row's near list keeps: ``k + NEAR_EXTRA``."""
    return int(k) + NEAR_EXTRA


@attrs.frozen(eq=False)
class Assessment:
    """Float64 facts about a candidate's ``out`` [B, M, K] (see the module documentation).

    ``nearer`` counts the points scoring below ``thr``, capped at ``cap + 1`` (``cap`` the near list's
    capacity); ``fill`` counts the points below the row's reach (:func:`reach`); the near list
    (``near_s`` scores, ``near_i`` indices, [B, M, cap], ascending, ``inf`` / ``-1`` past its end) is
    kept only where ``fill <= cap``.
    """

    code: np.ndarray  # int32 [B, M, K]: CODE_*
    score: np.ndarray  # float64 [B, M, K]: s(q, x[out]) summed directly
    thr: np.ndarray  # float64 [B, M, K]: score - rtol * (||q||^2 + ||x[out]||^2); -inf unless judged
    nearer: np.ndarray  # int64 [B, M, K]
    fill: np.ndarray  # int64 [B, M]
    near_s: np.ndarray  # float64 [B, M, cap]
    near_i: np.ndarray  # int64 [B, M, cap]
    device_seconds: float | None = None  # the GPU worker's run phase, for the CUDA reference


def score_words(inner: bool) -> str:
    return "-q.x" if inner else "||q - x||^2"


def tolerance_text(rtol: float, inner: bool) -> str:
    """The acceptance rule in words, as reports state it."""
    return (
        f"out[b, m, :] distinct indices in [0, N); rank j: at most j points score below "
        f"s(q, x[out_j]) - {rtol:g} * (||q||^2 + ||x[out_j]||^2), s = {score_words(inner)} in fp64"
    )


def reach(code: np.ndarray, score: np.ndarray, thr: np.ndarray) -> np.ndarray:
    """Per row: the largest ``score + tol`` (``2 score - thr``) of its judged elements, ``-inf`` if none."""
    with np.errstate(invalid="ignore", over="ignore"):
        return np.where(code == CODE_JUDGED, 2.0 * score - thr, -np.inf).max(axis=-1)


def _rows_per_block(n: int, k: int, d: int) -> int:
    return max(1, min(_CHUNK_ELEMENTS // max(1, n), _CHUNK_ELEMENTS // max(1, k * d)))


def _scores(qb: np.ndarray, xb: np.ndarray, qq: np.ndarray, xx: np.ndarray, inner: bool) -> np.ndarray:
    """Float64 scores [rows, N] of queries ``qb`` against points ``xb`` by the expansion."""
    dots = qb @ xb.T
    return -dots if inner else qq[:, None] + xx[None, :] - 2.0 * dots


def nearest_numpy(q: np.ndarray, x: np.ndarray, k: int, dtype: str, inner: bool) -> np.ndarray:
    """The float64 ``k`` best points of every query, best first, ties to the smaller index: int32 [B, M, k]."""
    batches, m, n, d = q.shape[0], q.shape[1], x.shape[1], q.shape[2]
    out = np.empty((batches, m, k), dtype=np.int32)
    rows = _rows_per_block(n, 1, d)
    for b in range(batches):
        xb, qb = decode(x[b], dtype, np.float64), decode(q[b], dtype, np.float64)
        xx, qq = np.einsum("nd,nd->n", xb, xb), np.einsum("md,md->m", qb, qb)
        for r0 in range(0, m, rows):
            s = _scores(qb[r0 : r0 + rows], xb, qq[r0 : r0 + rows], xx, inner)
            out[b, r0 : r0 + rows] = _best(s, k)
    return out


def _best(s: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` smallest of every row of ``s``, ascending, ties to the smaller index (no full sort)."""
    if k >= s.shape[1]:
        return np.argsort(s, axis=1, kind="stable")[:, :k]
    kth = np.partition(s, k - 1, axis=1)[:, k - 1 : k]
    out = np.empty((s.shape[0], k), dtype=np.int64)
    for r in range(s.shape[0]):
        idx = np.flatnonzero(s[r] <= kth[r])  # every point tied with the k-th is a candidate
        out[r] = idx[np.lexsort((idx, s[r, idx]))[:k]]
    return out


def assess_numpy(q: np.ndarray, x: np.ndarray, cand: np.ndarray, dtype: str, inner: bool, rtol: float) -> Assessment:
    """The assessment of ``cand`` [B, M, K] computed on the host, block by block of queries, in float64.

    ``rtol`` is rounded to float32 first, as the CUDA reference receives it.
    """
    rtol = float(np.float32(rtol))
    batches, m, k = cand.shape
    n, d = x.shape[1], x.shape[2]
    cap = near_capacity(k)
    a = Assessment(
        code=np.empty((batches, m, k), np.int32), score=np.empty((batches, m, k)), thr=np.empty((batches, m, k)),
        nearer=np.empty((batches, m, k), np.int64), fill=np.empty((batches, m), np.int64),
        near_s=np.full((batches, m, cap), np.inf), near_i=np.full((batches, m, cap), -1, np.int64),
    )  # fmt: skip
    take = min(n, cap + 1)  # the smallest scores that decide every count up to cap + 1
    rows = _rows_per_block(n, k, d)
    for b in range(batches):
        xb, qb_all = decode(x[b], dtype, np.float64), decode(q[b], dtype, np.float64)
        xx = np.einsum("nd,nd->n", xb, xb)
        for r0 in range(0, m, rows):
            qb = qb_all[r0 : r0 + rows]
            r1 = r0 + qb.shape[0]
            qq = np.einsum("md,md->m", qb, qb)
            c = cand[b, r0:r1].astype(np.int64)
            in_range = (c >= 0) & (c < n)
            safe = np.where(in_range, c, 0)
            repeats = np.tril(c[:, :, None] == c[:, None, :], -1).any(axis=2)
            xc = xb[safe]
            with np.errstate(invalid="ignore", over="ignore"):
                s_c = -np.einsum("md,mkd->mk", qb, xc) if inner else np.einsum("mkd->mk", (qb[:, None, :] - xc) ** 2)
                t = s_c - rtol * (qq[:, None] + xx[safe])
                s_all = _scores(qb, xb, qq, xx, inner)
            finite = np.isfinite(t)
            code = np.where(~in_range, CODE_OUT_OF_RANGE, np.where(repeats, CODE_REPEATED,
                            np.where(finite, CODE_JUDGED, CODE_NOT_FINITE)))  # fmt: skip
            thr = np.where(code == CODE_JUDGED, t, -np.inf)
            limit = reach(code, s_c, thr)
            everything = np.tile(np.arange(n), (len(qb), 1))
            part = np.argpartition(s_all, take - 1, axis=1)[:, :take] if take < n else everything
            pv = np.take_along_axis(s_all, part, axis=1)
            order = np.lexsort((part, pv), axis=1)
            pv, part = np.take_along_axis(pv, order, axis=1), np.take_along_axis(part, order, axis=1)
            with np.errstate(invalid="ignore"):
                fill = (s_all < limit[:, None]).sum(axis=1)
            counts = np.stack([np.searchsorted(pv[r], thr[r], side="left") for r in range(len(qb))])
            a.code[b, r0:r1], a.score[b, r0:r1], a.thr[b, r0:r1], a.fill[b, r0:r1] = code, s_c, thr, fill
            a.nearer[b, r0:r1] = np.minimum(counts, cap + 1)
            for r in np.flatnonzero(fill <= cap):
                a.near_s[b, r0 + r, : fill[r]] = pv[r, : fill[r]]
                a.near_i[b, r0 + r, : fill[r]] = part[r, : fill[r]]
    return a


def _excess(a: Assessment, ok: np.ndarray) -> np.ndarray:
    """Per element: ``(s(q, x[out_j]) - s_(j)) / tol_j`` (0 where negative) where ``s_(j)`` is known.

    ``s_(j)`` is the near list's ``j``-th entry where the list is kept and that long; where it is kept but
    shorter, ``s_(j)`` is at least the row's reach, so the gap is at most ``score - reach <= 0``. In rows
    whose list overflowed, passing elements count as 1 (at most their allowance) and failing ones as inf;
    elements not judged are inf.
    """
    k = a.code.shape[-1]
    cap = a.near_s.shape[-1]
    j = np.arange(k)
    kept = (a.fill <= cap)[..., None]
    known = kept & (j < a.fill[..., None])
    limit = reach(a.code, a.score, a.thr)[..., None]
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        tol = a.score - a.thr
        s_j = np.where(known, a.near_s[..., :k], limit)
        rel = np.maximum(a.score - s_j, 0.0) / tol
        rel = np.where(kept, rel, np.where(ok, 1.0, np.inf))
    rel = np.where(ok, np.minimum(rel, 1.0), np.maximum(rel, np.nextafter(1.0, 2.0)))  # agree with the verdict
    return np.where((a.code == CODE_JUDGED) & ~np.isnan(rel), rel, np.inf)


def _detail(a: Assessment, cand: np.ndarray, pos: tuple[int, int, int], n: int, inner: bool) -> tuple[int | None, str]:
    """The true ``j``-th point where known, and the violation in words."""
    b, m, j = pos
    got, code = int(cand[b, m, j]), int(a.code[b, m, j])
    if code == CODE_OUT_OF_RANGE:
        return None, f"index {got} is outside [0, {n})"
    if code == CODE_REPEATED:
        return None, f"index {got} was already returned at rank {int(np.argmax(cand[b, m, :j] == got))}"
    if code == CODE_NOT_FINITE:
        return None, f"index {got}: its score or threshold is not finite (inputs hold inf or NaN)"
    tol = a.score[b, m, j] - a.thr[b, m, j]
    count = int(a.nearer[b, m, j])
    cap = a.near_s.shape[-1]
    many = f"more than {cap}" if count > cap else str(count)
    text = (
        f"rank {j}: s(q, x[{got}]) = {a.score[b, m, j]:.9g} ({score_words(inner)}); {many} points score below "
        f"it by more than the tolerance {tol:.3g}, at most {j} may"
    )
    if a.fill[b, m] <= cap and j < a.fill[b, m]:
        true_i = int(a.near_i[b, m, j])
        return true_i, text + f"; the {j}-th best is x[{true_i}] with {a.near_s[b, m, j]:.9g}"
    return None, text


def make_report(
    a: Assessment, cand: np.ndarray, n: int, inner: bool, rtol: float, method: str, seconds: float
) -> OracleReport:
    """Judge every element of ``a`` and describe the first violations."""
    k = cand.shape[-1]
    ok = (a.code == CODE_JUDGED) & (a.nearer <= np.arange(k))
    excess = _excess(a, ok)
    bad = ~ok
    first = []
    for pos in np.argwhere(bad)[:FIRST_VIOLATIONS]:
        p = (int(pos[0]), int(pos[1]), int(pos[2]))
        expected, detail = _detail(a, cand, p, n, inner)
        first.append(Violation("out", p, int(cand[p]), expected, float(excess[p]), detail))
    return OracleReport(
        passed=not bad.any(), checked=int(cand.size), violations=int(bad.sum()),
        worst_excess=float(excess.max()) if excess.size else 0.0, first=tuple(first), method=method,
        tolerance=tolerance_text(rtol, inner), seconds=seconds,
    )  # fmt: skip
