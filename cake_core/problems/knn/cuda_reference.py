"""The independent float64 CUDA reference of the knn oracle, for cells too large for numpy.

``reference.cu`` (beside this module) is compiled after kmeans-assign's reference (its decoding, warp
sums and ``cake_ref_sqnorm`` serve both). One :class:`~cake_core.runtime.plan.Plan` launches, in order:
``cake_ref_sqnorm`` for ``||q||^2`` and for ``||x||^2``, ``cake_knn_candidates`` (each returned index:
its code, its float64 score summed directly and its threshold), ``cake_knn_sort`` (each row's
thresholds in ascending order) and ``cake_knn_count`` (every query against every point, a register-tiled
float64 product: a histogram of the points below the row's thresholds, and the list of the points
within the row's reach while it has room). The host turns that into an
:class:`~cake_core.problems.knn.oracle.Assessment` (:func:`assessment_from`), exactly what the numpy
path computes, and the same report is made from it.

At the default cell (4096 queries x 2^20 points x 128) ``cake_knn_count`` does 5.5e11 float64
multiply-adds: 16 ms at the H200's float64 vector peak; with two shared loads per four FMAs and no
software pipelining expect 60-100 ms. Moving ``x`` (256 MiB) to the worker dominates one assessment.
"""

from __future__ import annotations

import functools
import importlib.resources
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from cake_core.errors import CakeInternalError
from cake_core.problems.kmeans_assign import cuda_reference as kmeans_reference
from cake_core.problems.knn.oracle import Assessment, near_capacity
from cake_core.runtime.plan import KernelLaunch, Plan, ScalarArg, TensorArg, TensorSpec

if TYPE_CHECKING:
    from cake_core.runtime.worker import GpuRunner

SOURCE_NAME = "reference.cu"
SQNORM = kmeans_reference.SQNORM
CANDIDATES, SORT, COUNT = "cake_knn_candidates", "cake_knn_sort", "cake_knn_count"
THREADS = 256
QUERY_TILE = 64  # QT in reference.cu
POINT_TILE = 64  # PT in reference.cu
#: blocks cake_knn_count aims for (the database is split until there are about this many)
TARGET_BLOCKS = 1024
_FETCH = ("code", "score", "thr", "hist", "fill", "near_s", "near_i")


@functools.cache
def reference_source() -> str:
    """kmeans-assign's reference followed by knn's: one header-free CUDA C++ text for NVRTC."""
    own = importlib.resources.files(__package__).joinpath(SOURCE_NAME).read_text(encoding="utf-8")
    return kmeans_reference.reference_source() + "\n" + own


@functools.cache
def compiled_reference(arch: str) -> bytes:
    """The reference compiled by NVRTC for ``arch`` (cached per process)."""
    from cake_core.runtime.nvrtc import compile_cuda

    return compile_cuda(reference_source(), arch, name="knn_reference.cu").cubin


def split_points(shape: Mapping[str, int]) -> tuple[int, int]:
    """``(splits, chunk)``: into how many chunks of ``chunk`` points (a multiple of the point tile)
    ``cake_knn_count`` splits each batch's database so that the grid has about :data:`TARGET_BLOCKS`."""
    b, m, n = int(shape["B"]), int(shape["M"]), int(shape["N"])
    tiles = -(-m // QUERY_TILE)
    point_tiles = -(-n // POINT_TILE)
    splits = max(1, min(point_tiles, -(-TARGET_BLOCKS // (tiles * b))))
    chunk = -(-point_tiles // splits) * POINT_TILE
    return -(-n // chunk), chunk


def build_plan(shape: Mapping[str, int], dtype: str, inner: bool, rtol: float, cubin: bytes) -> Plan:
    """The launch plan of one assessment at ``shape``.

    Inputs ``q``, ``x`` (``dtype``) and ``cand`` (i32 [B, M, K], the candidate's output); outputs
    ``code`` i32, ``score`` and ``thr`` f64 (each [B, M, K]), ``hist`` i32 [B, M, K], ``fill`` i32
    [B, M], ``near_s`` f64 and ``near_i`` i32 [B, M, cap] (``hist`` and ``fill`` poisoned with zeros:
    they start counting from there).
    """
    b, m, n, d, k = (int(shape[s]) for s in ("B", "M", "N", "D", "K"))
    rows, elements, cap = b * m, b * m * k, near_capacity(k)
    is_f16, metric = ScalarArg(1 if dtype == "f16" else 0), ScalarArg(1 if inner else 0)
    tiles = -(-m // QUERY_TILE)
    splits, chunk = split_points(shape)
    tensors = (
        TensorSpec("q", dtype, (b, m, d), "input"),
        TensorSpec("x", dtype, (b, n, d), "input"),
        TensorSpec("cand", "i32", (b, m, k), "input"),
        TensorSpec("qq", "f64", (b, m), "scratch"),
        TensorSpec("xx", "f64", (b, n), "scratch"),
        TensorSpec("sorted", "f64", (b, m, k), "scratch"),
        TensorSpec("code", "i32", (b, m, k), "output", poison=-1),
        TensorSpec("score", "f64", (b, m, k), "output"),
        TensorSpec("thr", "f64", (b, m, k), "output"),
        TensorSpec("hist", "i32", (b, m, k), "output", poison=0),
        TensorSpec("fill", "i32", (b, m), "output", poison=0),
        TensorSpec("near_s", "f64", (b, m, cap), "output"),
        TensorSpec("near_i", "i32", (b, m, cap), "output"),
    )
    block = (THREADS, 1, 1)
    warps = THREADS // 32

    def sqnorm(src: str, dst: str, count: int) -> KernelLaunch:
        args = (TensorArg(src), TensorArg(dst), ScalarArg(count, "i64"), ScalarArg(d), is_f16)
        return KernelLaunch(SQNORM, (-(-count // warps), 1, 1), block, args)

    launches = (
        sqnorm("q", "qq", rows),
        sqnorm("x", "xx", b * n),
        KernelLaunch(CANDIDATES, (-(-elements // warps), 1, 1), block, (
            TensorArg("q"), TensorArg("x"), TensorArg("cand"), TensorArg("qq"), TensorArg("xx"), TensorArg("code"),
            TensorArg("score"), TensorArg("thr"), ScalarArg(elements, "i64"), ScalarArg(m), ScalarArg(n),
            ScalarArg(k), ScalarArg(d), is_f16, metric, ScalarArg(rtol, "f32"),
        )),
        KernelLaunch(SORT, (-(-elements // THREADS), 1, 1), block,
                     (TensorArg("thr"), TensorArg("sorted"), ScalarArg(elements, "i64"), ScalarArg(k))),
        KernelLaunch(COUNT, (tiles * splits, b, 1), block, (
            TensorArg("q"), TensorArg("x"), TensorArg("qq"), TensorArg("xx"), TensorArg("score"), TensorArg("thr"),
            TensorArg("sorted"), TensorArg("hist"),
            TensorArg("fill"), TensorArg("near_s"), TensorArg("near_i"), ScalarArg(m), ScalarArg(n), ScalarArg(k),
            ScalarArg(d), is_f16, metric, ScalarArg(tiles), ScalarArg(chunk), ScalarArg(cap),
        )),
    )  # fmt: skip
    label = f"knn{'-ip' if inner else ''} oracle B={b} M={m} N={n} D={d} K={k} {dtype}"
    return Plan(label, {"main": cubin}, tensors, launches)


def assessment_from(arrays: Mapping[str, np.ndarray], shape: Mapping[str, int]) -> Assessment:
    """The :class:`Assessment` the reference's outputs (``arrays``, by the names of :func:`build_plan`) hold.

    Per row, ``hist[p]`` counts the points whose score has exactly ``p`` of the row's sorted thresholds
    at or below it, so the points below threshold ``t`` number ``sum(hist[:i + 1])`` with ``i`` the
    count of thresholds below ``t``. The near list is sorted here by (score, index); a row whose list overflowed
    (``fill > cap``) keeps no list.
    """
    b, m, k = (int(shape[s]) for s in ("B", "M", "K"))
    cap = near_capacity(k)
    thr = np.asarray(arrays["thr"], np.float64).reshape(b * m, k)
    hist = np.asarray(arrays["hist"], np.int64).reshape(b * m, k)
    before = np.concatenate([np.zeros((b * m, 1), np.int64), np.cumsum(hist, axis=1)], axis=1)
    ordered = np.sort(thr, axis=1)
    below = np.stack([np.searchsorted(ordered[r], thr[r], side="left") for r in range(b * m)]) if b * m else thr
    nearer = np.take_along_axis(before, below.astype(np.int64) + 1, axis=1)
    fill = np.asarray(arrays["fill"], np.int64).reshape(b * m)
    near_s = np.asarray(arrays["near_s"], np.float64).reshape(b * m, cap).copy()
    near_i = np.asarray(arrays["near_i"], np.int64).reshape(b * m, cap).copy()
    empty = np.arange(cap)[None, :] >= np.where(fill <= cap, fill, 0)[:, None]  # an overflowed list is dropped
    near_s[empty], near_i[empty] = np.inf, -1
    order = np.lexsort((near_i, near_s), axis=1)
    return Assessment(
        code=np.asarray(arrays["code"], np.int32).reshape(b, m, k),
        score=np.asarray(arrays["score"], np.float64).reshape(b, m, k),
        thr=thr.reshape(b, m, k),
        nearer=np.minimum(nearer, cap + 1).reshape(b, m, k),
        fill=fill.reshape(b, m),
        near_s=np.take_along_axis(near_s, order, axis=1).reshape(b, m, cap),
        near_i=np.take_along_axis(near_i, order, axis=1).reshape(b, m, cap),
    )


def timeout_for(shape: Mapping[str, int]) -> float:
    """kmeans-assign's limit for the same float64 work (``B*M*N*D`` multiply-adds)."""
    return kmeans_reference.timeout_for({"B": shape["B"], "N": shape["M"], "K": shape["N"], "D": shape["D"]})


def assess_cuda(runner: GpuRunner, q: np.ndarray, x: np.ndarray, cand: np.ndarray, shape: Mapping[str, int],
                dtype: str, inner: bool, rtol: float, *, arch: str | None = None,
                timeout_s: float | None = None) -> Assessment:  # fmt: skip
    """What the reference finds about ``cand`` on ``runner``'s GPU (compiled for ``arch``, else the runner's).

    A run that does not complete raises :class:`CakeInternalError`: the reference reads nothing out of
    bounds whatever ``cand`` holds, so a fault or a timeout is never the candidate's doing.
    """
    cubin = compiled_reference(arch or kmeans_reference.arch_of(runner))
    plan = build_plan(shape, dtype, inner, rtol, cubin)
    inputs = {"q": q, "x": x, "cand": np.ascontiguousarray(cand, dtype=np.int32)}
    result: Any = runner.run(plan, inputs, fetch=_FETCH,
                             timeout_s=timeout_s if timeout_s is not None else timeout_for(shape))  # fmt: skip
    if result.status != "ok":
        raise CakeInternalError(f"the knn CUDA reference ended with {result.status}: {result.error}")
    return attrs.evolve(assessment_from(result.outputs, shape),
                        device_seconds=getattr(result, "phases_s", {}).get("run_s"))  # fmt: skip
