"""kmeans-assign: the nearest centroid of every point (the assignment step of K-means)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

import attrs
import numpy as np

from cake_core.errors import CakeUserError
from cake_core.hostdata import random_values, storage_dtype
from cake_core.problems.kmeans_assign import oracle
from cake_core.problems.kmeans_assign.baseline import FLASH_KMEANS
from cake_core.problems.kmeans_assign.cells import CHECK_CELLS, DEFAULT_CELL
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


@attrs.frozen
class KMeansAssign:
    """``out[b, n] = argmin_k ||x[b, n] - c[b, k]||^2`` for inputs in bf16 or f16, fp32 accumulation.

    The oracle accepts, for every point, any index in ``[0, K)`` whose squared distance exceeds the
    float64 minimum by at most ``rtol * (||x||^2 + ||c_min||^2)`` (the size of the rounding an fp32
    ``||x||^2 - 2 x.c + ||c||^2`` may commit, with a wide margin). It is computed with numpy on the host
    while ``B*N*K*D <= numpy_limit`` (or when no GPU runner is given, however long that takes), and by
    the problem's own float64 CUDA reference on the runner's GPU above that.
    """

    rtol: float = 1e-4
    numpy_limit: int = 1 << 28

    name: ClassVar[str] = "kmeans-assign"
    summary: ClassVar[str] = (
        "nearest-centroid assignment: out[b, n] = argmin_k ||x[b, n] - c[b, k]||^2 "
        "(bf16/f16 inputs, fp32 accumulation, int32 indices)"
    )
    dtypes: ClassVar[tuple[str, ...]] = _FLOAT_INPUTS
    sizes: ClassVar[tuple[SizeDecl, ...]] = (
        SizeDecl("B", 1, doc="independent problems (batches)"),
        SizeDecl("N", 1, doc="points per batch"),
        SizeDecl("K", 1, doc="centroids per batch"),
        SizeDecl("D", 1, choices=(64, 128, 256), doc="dimensions of a point"),
    )
    tensors: ClassVar[tuple[TensorDecl, ...]] = (
        TensorDecl("x", "input", _FLOAT_INPUTS, ("B", "N", "D"), doc="points"),
        TensorDecl("c", "input", _FLOAT_INPUTS, ("B", "K", "D"), doc="centroids"),
        TensorDecl("out", "output", ("i32",), ("B", "N"), doc="index of each point's nearest centroid"),
    )
    default_cell: ClassVar[Cell] = DEFAULT_CELL
    cells: ClassVar[tuple[Cell, ...]] = CHECK_CELLS
    #: flash-kmeans with ||x||^2 given, autotuned: its fastest form
    baseline: ClassVar[Baseline | None] = FLASH_KMEANS

    # -- inputs and work ------------------------------------------------------------------------------

    def make_inputs(self, shape: Mapping[str, int], dtype: str, seed: int) -> dict[str, np.ndarray]:
        """Standard-normal points and centroids, rounded to ``dtype``; the same for the same seed.

        Generated one batch at a time, so host memory beyond the arrays themselves stays small.
        """
        s = validate_cell(self, shape, dtype)
        rng = np.random.default_rng(seed)
        store = storage_dtype(dtype)
        x = np.empty((s["B"], s["N"], s["D"]), dtype=store)
        c = np.empty((s["B"], s["K"], s["D"]), dtype=store)
        for b in range(s["B"]):
            x[b] = random_values(rng, (s["N"], s["D"]), dtype)
            c[b] = random_values(rng, (s["K"], s["D"]), dtype)
        return {"x": x, "c": c}

    def flops(self, shape: Mapping[str, int]) -> int:
        """``2*B*N*K*D``: the distance work (one multiply-add per point, centroid and dimension)."""
        return 2 * int(shape["B"]) * int(shape["N"]) * int(shape["K"]) * int(shape["D"])

    def min_bytes(self, shape: Mapping[str, int], dtype: str) -> int:
        """x and c read once, out written once."""
        b, n, k, d = (int(shape[s]) for s in ("B", "N", "K", "D"))
        e = storage_dtype(dtype).itemsize
        return (b * n * d + b * k * d) * e + b * n * 4

    def macs(self, shape: Mapping[str, int]) -> int:
        """``B*N*K*D``: what decides between the numpy and the CUDA oracle."""
        return self.flops(shape) // 2

    # -- reference and oracle -------------------------------------------------------------------------

    def reference(
        self, inputs: Mapping[str, np.ndarray], shape: Mapping[str, int], dtype: str
    ) -> dict[str, np.ndarray]:
        """``out``: the float64 nearest centroid of every point, ties to the smallest index (numpy)."""
        s = validate_cell(self, shape, dtype)
        self._validate_inputs(inputs, s, dtype)
        return {"out": oracle.nearest_numpy(inputs["x"], inputs["c"], dtype)}

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

        ``method`` forces ``numpy-fp64`` or ``cuda-fp64-reference`` (the latter needs ``runner``);
        ``arch`` overrides the architecture the CUDA reference is compiled for (read from ``runner``
        otherwise).
        """
        start = time.perf_counter()
        s = validate_cell(self, shape, dtype)
        self._validate_inputs(inputs, s, dtype)
        chosen = method or self.oracle_method(s, runner)
        if chosen not in ORACLE_METHODS:
            raise CakeUserError(f"unknown oracle method `{chosen}` (choices: {', '.join(ORACLE_METHODS)})")
        if chosen == METHOD_CUDA and runner is None:
            raise CakeUserError("the CUDA reference oracle needs a GPU runner")
        tolerance = oracle.tolerance_text(self.rtol)
        checked = s["B"] * s["N"]
        malformed = structural_violations(outputs_of(self), outputs, s, dtype)
        if malformed:
            return failed_report(malformed, checked, chosen, tolerance, time.perf_counter() - start)
        x, c, cand = inputs["x"], inputs["c"], outputs["out"]
        if chosen == METHOD_CUDA:
            from cake_core.problems.kmeans_assign.cuda_reference import assess_cuda

            assert runner is not None
            assessment = assess_cuda(runner, x, c, cand, s, dtype, arch=arch)
        else:
            assessment = oracle.assess_numpy(x, c, cand, dtype)
        return oracle.make_report(
            assessment, x, c, cand, dtype, self.rtol, chosen, time.perf_counter() - start
        )

    def _validate_inputs(self, inputs: Mapping[str, np.ndarray], shape: Mapping[str, int], dtype: str) -> None:
        require_valid_inputs(self, inputs, shape, dtype)


#: the instance the plugin registers
KMEANS_ASSIGN = KMeansAssign()
