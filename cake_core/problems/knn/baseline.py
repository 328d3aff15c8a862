"""The baseline of knn and knn-ip: torch's ``q @ x.T`` with fp32 scores, then ``topk``.

The scores are computed in fp32: ``q`` and ``x`` are converted inside the timed call, then ``baddbmm``
gives ``||x||^2 - 2 q . x`` for L2 (``||q||^2`` is the same for every point of a query, so it is left
out) and ``bmm`` gives ``q . x`` for the inner product; ``topk`` picks the ``K`` best of every row,
best first, and its indices are copied into ``out``. Scoring in the input type instead (cuBLAS
accumulates in fp32 but rounds the scores to f16/bf16) is faster but wrong by the fp64 oracle, so the
fp32 form is the honest baseline. fp32 matrix products here are full fp32 as long as torch's
``allow_tf32`` is off, its default.

:func:`torch_topk` is the one implementation of the scoring (``bench/knn.py`` times it in both forms,
``torch`` and ``torch-fp32``); :func:`torch_fp32_l2` and :func:`torch_fp32_ip` are the entries the two
problems' :class:`~cake_core.problems.problem.Baseline` records name, run in the GPU worker. torch is
imported lazily, in the calls.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from cake_core.problems.kmeans_assign.baseline import squared_norms
from cake_core.problems.problem import Baseline

__all__ = ["TORCH_FP32_IP", "TORCH_FP32_L2", "torch_fp32_ip", "torch_fp32_l2", "torch_topk"]

_SUMMARY = "torch {}, scores in fp32 (q and x converted inside the timed call), then topk, best first"

#: what knn is measured against
TORCH_FP32_L2 = Baseline(
    name="torch-fp32",
    summary=_SUMMARY.format("baddbmm ||x||^2 - 2 q @ x.T"),
    entry="cake_core.problems.knn.baseline:torch_fp32_l2",
    requires=("torch",),
)

#: what knn-ip is measured against
TORCH_FP32_IP = Baseline(
    name="torch-fp32",
    summary=_SUMMARY.format("bmm q @ x.T"),
    entry="cake_core.problems.knn.baseline:torch_fp32_ip",
    requires=("torch",),
)


def torch_topk(q: Any, x: Any, k: int, out: Any, *, inner: bool, fp32: bool = True) -> Callable[[], None]:
    """The call that writes into ``out`` [B, M, k] (int32) the indices of the ``k`` points of ``x`` [B, N, D]
    best for each query of ``q`` [B, M, D], best first: the largest ``q . x`` where ``inner``, else the
    smallest squared distance. ``fp32``: the scores in fp32 (the inputs converted in the call), else in
    the inputs' type."""
    import torch

    def call() -> None:
        a, b = (q.float(), x.float()) if fp32 else (q, x)
        if inner:
            best = torch.topk(torch.bmm(a, b.mT), k, dim=-1, largest=True, sorted=True).indices
        else:
            norms = squared_norms(x)[:, None, :].to(a.dtype)
            scores = torch.baddbmm(norms, a, b.mT, alpha=-2.0)
            best = torch.topk(scores, k, dim=-1, largest=False, sorted=True).indices
        out.copy_(best)

    return call


def torch_fp32_l2(
    inputs: Mapping[str, Any], outputs: Mapping[str, Any], shape: Mapping[str, int], dtype: str
) -> Callable[[], None]:
    """knn's baseline entry: :func:`torch_topk` by squared distance, fp32 scores (nothing to prepare)."""
    return torch_topk(inputs["q"], inputs["x"], int(shape["K"]), outputs["out"], inner=False)


def torch_fp32_ip(
    inputs: Mapping[str, Any], outputs: Mapping[str, Any], shape: Mapping[str, int], dtype: str
) -> Callable[[], None]:
    """knn-ip's baseline entry: :func:`torch_topk` by inner product, fp32 scores (nothing to prepare)."""
    return torch_topk(inputs["q"], inputs["x"], int(shape["K"]), outputs["out"], inner=True)
