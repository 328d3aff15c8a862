"""knn and knn-ip: the k best points of every query, by squared Euclidean distance or by inner product."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

import attrs
import numpy as np

from cake_core.errors import CakeUserError
from cake_core.hostdata import random_values, storage_dtype
from cake_core.problems.knn import oracle
from cake_core.problems.knn.baseline import TORCH_FP32_IP, TORCH_FP32_L2
from cake_core.problems.knn.cells import CHECK_CELLS, DEFAULT_CELL
from cake_core.problems.problem import (
    METHOD_CUDA,
    METHOD_NUMPY,
    ORACLE_METHODS,
    Baseline,
    Cell,
    OracleReport,
    SizeDecl,
    TensorDecl,
    failed_report,
    outputs_of,
    require_valid_inputs,
    structural_violations,
    validate_cell,
)

if TYPE_CHECKING:
    from cake_core.runtime.worker import GpuRunner

_FLOAT_INPUTS = ("bf16", "f16")
#: the list lengths a schedule compiles for (the top-k state is sized by K). The committed schedules keep
#: their lists in registers and take K <= 32: fused_topk's kernel for h200 (D=128, f16) takes 118 registers
#: at K=10 and 200 at K=32, and at K=64 hits 255 with 20 bytes of spills, at K=100 720 bytes (measured
#: 2026-12-02 with NVRTC); K > 32 needs lists in shared memory or a threshold-and-buffer selection
K_CHOICES = (1, 2, 4, 8, 10, 16, 32, 64, 100, 128)
#: the metrics: each is its own problem (``knn``, ``knn-ip``)
METRICS = {"l2": "knn", "ip": "knn-ip"}


@attrs.frozen
class Knn:
    """``out[b, m, :]``: the ``K`` points of ``x[b]`` best for ``q[b, m]``, best first.

    ``metric`` ``l2``: nearest by squared Euclidean distance (problem ``knn``); ``ip``: largest inner
    product (problem ``knn-ip``). Each metric is its own problem, so a schedule, a cell and ``cake run``
    name one thing; the two share everything else. Queries ``q`` [B, M, D] and points ``x`` [B, N, D] in
    bf16 or f16, fp32 accumulation, indices ``out`` [B, M, K] in i32; ``K <= N``. Ties between equal
    scores may go either way and in either order; the reference breaks them to the smaller index. The
    oracle (:mod:`cake_core.problems.knn.oracle`) accepts any distinct in-range indices with at most
    ``j`` points scoring better than rank ``j`` by more than ``rtol * (||q||^2 + ||x||^2)``. It runs
    with numpy while ``B*M*N*D <= numpy_limit``, or without a GPU runner up to ``host_limit``; above,
    on the runner's GPU with the problem's own float64 CUDA reference.
    """

    metric: str = attrs.field(default="l2", validator=attrs.validators.in_(tuple(METRICS)))
    rtol: float = 1e-4
    numpy_limit: int = 1 << 28
    host_limit: int = 1 << 32

    dtypes: ClassVar[tuple[str, ...]] = _FLOAT_INPUTS
    sizes: ClassVar[tuple[SizeDecl, ...]] = (
        SizeDecl("B", 1, doc="independent problems (batches)"),
        SizeDecl("M", 1, doc="queries per batch"),
        SizeDecl("N", 1, doc="points per batch (at least K)"),
        SizeDecl("D", 1, choices=(64, 128, 256), doc="dimensions of a point"),
        SizeDecl("K", 1, choices=K_CHOICES, doc="neighbours per query"),
    )
    tensors: ClassVar[tuple[TensorDecl, ...]] = (
        TensorDecl("q", "input", _FLOAT_INPUTS, ("B", "M", "D"), doc="queries"),
        TensorDecl("x", "input", _FLOAT_INPUTS, ("B", "N", "D"), doc="points"),
        TensorDecl("out", "output", ("i32",), ("B", "M", "K"), doc="indices of the K best points, best first"),
    )
    default_cell: ClassVar[Cell] = DEFAULT_CELL
    cells: ClassVar[tuple[Cell, ...]] = CHECK_CELLS

    @property
    def name(self) -> str:
        return METRICS[self.metric]

    @property
    def inner(self) -> bool:
        """Whether the score is the inner product (else the squared Euclidean distance)."""
        return self.metric == "ip"

    @property
    def baseline(self) -> Baseline:
        """torch's ``q @ x.T`` + ``topk`` with fp32 scores, for this metric (:mod:`cake_core.problems.knn.baseline`)."""
        return TORCH_FP32_IP if self.inner else TORCH_FP32_L2

    @property
    def summary(self) -> str:
        if self.inner:
            return ("k best by inner product: out[b, m, :] = the K points of x[b] with the largest q[b, m] . x, "
                    "largest first (bf16/f16 inputs, fp32 accumulation, int32 indices)")  # fmt: skip
        return ("k nearest neighbours: out[b, m, :] = the K points of x[b] nearest to q[b, m] by squared Euclidean "
                "distance, nearest first (bf16/f16 inputs, fp32 accumulation, int32 indices)")  # fmt: skip

    def _cell(self, shape: Mapping[str, int], dtype: str) -> dict[str, int]:
        s = validate_cell(self, shape, dtype)
        if s["K"] > s["N"]:
            raise CakeUserError(f"problem `{self.name}` needs K <= N: K={s['K']} neighbours of N={s['N']} points")
        return s

    # -- inputs and work ------------------------------------------------------------------------------

    def make_inputs(self, shape: Mapping[str, int], dtype: str, seed: int) -> dict[str, np.ndarray]:
        """Standard-normal queries and points, rounded to ``dtype``; the same for the same seed."""
        s = self._cell(shape, dtype)
        rng = np.random.default_rng(seed)
        store = storage_dtype(dtype)
        q = np.empty((s["B"], s["M"], s["D"]), dtype=store)
        x = np.empty((s["B"], s["N"], s["D"]), dtype=store)
        for b in range(s["B"]):
            q[b] = random_values(rng, (s["M"], s["D"]), dtype)
            x[b] = random_values(rng, (s["N"], s["D"]), dtype)
        return {"q": q, "x": x}

    def flops(self, shape: Mapping[str, int]) -> int:
        """``2*B*M*N*D``: the distance work (the selection is not counted)."""
        return 2 * self.macs(shape)

    def macs(self, shape: Mapping[str, int]) -> int:
        """``B*M*N*D``: what decides whether the numpy oracle runs."""
        return int(shape["B"]) * int(shape["M"]) * int(shape["N"]) * int(shape["D"])

    def min_bytes(self, shape: Mapping[str, int], dtype: str) -> int:
        """q and x read once, out written once."""
        b, m, n, d, k = (int(shape[s]) for s in ("B", "M", "N", "D", "K"))
        e = storage_dtype(dtype).itemsize
        return (b * m * d + b * n * d) * e + b * m * k * 4

    # -- reference and oracle -------------------------------------------------------------------------

    def reference(
        self, inputs: Mapping[str, np.ndarray], shape: Mapping[str, int], dtype: str
    ) -> dict[str, np.ndarray]:
        """``out``: the float64 K best points, best first, ties to the smaller index (numpy, up to ``host_limit``)."""
        s = self._cell(shape, dtype)
        if self.macs(s) > self.host_limit:
            raise CakeUserError(f"`{self.name}`'s numpy reference runs up to B*M*N*D = {self.host_limit} "
                                f"multiply-adds; this cell has {self.macs(s)}")  # fmt: skip
        self._validate_inputs(inputs, s, dtype)
        return {"out": oracle.nearest_numpy(inputs["q"], inputs["x"], s["K"], dtype, self.inner)}

    def oracle_method(self, shape: Mapping[str, int], runner: GpuRunner | None) -> str:
        """Which method :meth:`check` uses at ``shape``: numpy up to ``numpy_limit`` or without a runner."""
        return METHOD_CUDA if runner is not None and self.macs(shape) > self.numpy_limit else METHOD_NUMPY

    def check(
        self,
        inputs: Mapping[str, np.ndarray],
        outputs: Mapping[str, np.ndarray],
        shape: Mapping[str, int],
        dtype: str,
        *,
        runner: GpuRunner | None = None,
        method: str | None = None,
        arch: str | None = None,
    ) -> OracleReport:
        """Judge every element of ``outputs["out"]``.

        ``method`` forces ``numpy-fp64`` or ``cuda-fp64-reference`` (the latter needs ``runner``); ``arch``
        overrides the architecture the CUDA reference is compiled for (read from ``runner`` otherwise).
        """
        start = time.perf_counter()
        s = self._cell(shape, dtype)
        chosen = method or self.oracle_method(s, runner)
        if chosen not in ORACLE_METHODS:
            raise CakeUserError(f"unknown oracle method `{chosen}` (choices: {', '.join(ORACLE_METHODS)})")
        if chosen == METHOD_CUDA and runner is None:
            raise CakeUserError(f"`{self.name}`'s CUDA reference oracle needs a GPU runner")
        if chosen == METHOD_NUMPY and self.macs(s) > self.host_limit:
            raise CakeUserError(
                f"`{self.name}`'s oracle runs on the host up to B*M*N*D = {self.host_limit} multiply-adds; this cell "
                f"has {self.macs(s)}: give it a GPU runner (its CUDA reference judges any cell)"
            )
        self._validate_inputs(inputs, s, dtype)
        tolerance = oracle.tolerance_text(self.rtol, self.inner)
        malformed = structural_violations(outputs_of(self), outputs, s, dtype)
        if malformed:
            return failed_report(malformed, s["B"] * s["M"] * s["K"], chosen, tolerance, time.perf_counter() - start)
        q, x, cand = inputs["q"], inputs["x"], outputs["out"]
        if chosen == METHOD_CUDA:
            from cake_core.problems.knn.cuda_reference import assess_cuda

            assert runner is not None
            found = assess_cuda(runner, q, x, cand, s, dtype, self.inner, self.rtol, arch=arch)
        else:
            found = oracle.assess_numpy(q, x, cand, dtype, self.inner, self.rtol)
        return oracle.make_report(found, cand, s["N"], self.inner, self.rtol, chosen, time.perf_counter() - start)

    def _validate_inputs(self, inputs: Mapping[str, np.ndarray], shape: Mapping[str, int], dtype: str) -> None:
        require_valid_inputs(self, inputs, shape, dtype)


#: the instance the plugin registers for ``knn`` (``knn-ip``'s is in :mod:`cake_core.problems.knn.ip`)
KNN = Knn()
