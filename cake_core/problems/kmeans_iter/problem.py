"""kmeans-iter: one whole Lloyd iteration of K-means (assignment, then centroid update)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

import attrs
import numpy as np

from cake_core.errors import CakeUserError
from cake_core.hostdata import encode, random_values, storage_dtype
from cake_core.problems.kmeans_assign import oracle as assign_oracle
from cake_core.problems.kmeans_assign.problem import KMeansAssign
from cake_core.problems.kmeans_iter import oracle
from cake_core.problems.kmeans_iter.baseline import FLASH_KMEANS_ITER
from cake_core.problems.kmeans_iter.cells import CHECK_CELLS, DEFAULT_CELL
from cake_core.problems.problem import (
    METHOD_CUDA, METHOD_NUMPY, Baseline, Cell, OracleReport, SizeDecl, TensorDecl, failed_report, outputs_of,
    require_valid_inputs, structural_violations, validate_cell,
)  # fmt: skip

if TYPE_CHECKING:
    from cake_core.runtime.worker import GpuRunner

_FLOAT_INPUTS = ("bf16", "f16")


@attrs.frozen
class KMeansIter:
    """``assign[b, n] = argmin_k ||x[b, n] - c[b, k]||^2``, then ``centroids[b, k]`` = the mean of the points
    assigned to ``k``.

    Inputs: points ``x`` [B, N, D] and centroids ``c`` [B, K, D] in bf16 or f16. Outputs: ``assign``
    [B, N] i32 and ``centroids`` [B, K, D] **in the input type** — fp32 sums and one fp32 division per
    element, rounded once to bf16/f16, as flash-kmeans's iteration (``_euclid_iter``) returns them, so
    that they feed the next iteration as its ``c``. **An empty cluster keeps its old centroid** (``c[b, k]``
    bit for bit). **Ties** as kmeans-assign states them: the reference takes the smallest index, and the
    oracle accepts any index within ``rtol * (||x||^2 + ||c_min||^2)`` of the float64 minimum; the
    centroids are judged against the means of the clusters the candidate's own assignments form
    (:mod:`cake_core.problems.kmeans_iter.oracle`).

    The assignments are judged with numpy up to ``B*N*K*D = assign_numpy_limit`` and by kmeans-assign's
    CUDA reference above it when a GPU runner is given; the centroids with numpy up to
    ``B*N*D = numpy_limit``.
    """

    rtol: float = 1e-4
    assign_numpy_limit: int = 1 << 28
    numpy_limit: int = 1 << 31
    empty_fraction: float = 0.125  # of the clusters make_inputs places out of every point's reach

    name: ClassVar[str] = "kmeans-iter"
    summary: ClassVar[str] = (
        "one K-means iteration: assign[b, n] = nearest centroid, centroids[b, k] = mean of its points (fp32 "
        "sums, rounded to the input type; an empty cluster keeps its centroid)"
    )
    dtypes: ClassVar[tuple[str, ...]] = _FLOAT_INPUTS
    #: kmeans-assign's domain (B, N, K >= 1; D in {64, 128, 256})
    sizes: ClassVar[tuple[SizeDecl, ...]] = KMeansAssign.sizes
    tensors: ClassVar[tuple[TensorDecl, ...]] = (
        TensorDecl("x", "input", _FLOAT_INPUTS, ("B", "N", "D"), doc="points"),
        TensorDecl("c", "input", _FLOAT_INPUTS, ("B", "K", "D"), doc="centroids of this iteration"),
        TensorDecl("assign", "output", ("i32",), ("B", "N"), doc="index of each point's nearest centroid"),
        TensorDecl("centroids", "output", _FLOAT_INPUTS, ("B", "K", "D"),
                   doc="new centroids (fp32 sums in any order, rounded to the input type)", reproducible=False),
    )  # fmt: skip
    default_cell: ClassVar[Cell] = DEFAULT_CELL
    cells: ClassVar[tuple[Cell, ...]] = CHECK_CELLS
    #: flash-kmeans's iteration with ||x||^2 given, autotuned
    baseline: ClassVar[Baseline | None] = FLASH_KMEANS_ITER

    # -- inputs and work ------------------------------------------------------------------------------

    def make_inputs(self, shape: Mapping[str, int], dtype: str, seed: int) -> dict[str, np.ndarray]:
        """Standard-normal points and centroids rounded to ``dtype``, except a random ``empty_fraction`` of
        the centroids (at least one when ``K >= 2``), moved by +8 in every dimension: no point is nearest
        to them, so every cell exercises the empty-cluster rule. The same for the same seed."""
        s = validate_cell(self, shape, dtype)
        rng = np.random.default_rng(seed)
        store = storage_dtype(dtype)
        b_, n_, k_, d_ = s["B"], s["N"], s["K"], s["D"]
        x = np.empty((b_, n_, d_), dtype=store)
        c = np.empty((b_, k_, d_), dtype=store)
        far = max(1, int(k_ * self.empty_fraction)) if k_ >= 2 else 0
        for b in range(b_):
            x[b] = random_values(rng, (n_, d_), dtype)
            values = rng.standard_normal((k_, d_))
            values[rng.permutation(k_)[:far]] += 8.0
            c[b] = encode(values.astype(np.float32), dtype)
        return {"x": x, "c": c}

    def flops(self, shape: Mapping[str, int]) -> int:
        """``2*B*N*K*D`` of distances, ``B*N*D`` additions into the sums and ``B*K*D`` divisions."""
        b, n, k, d = (int(shape[s]) for s in ("B", "N", "K", "D"))
        return 2 * b * n * k * d + b * n * d + b * k * d

    def min_bytes(self, shape: Mapping[str, int], dtype: str) -> int:
        """x and c read once; assign and centroids written once."""
        b, n, k, d = (int(shape[s]) for s in ("B", "N", "K", "D"))
        e = storage_dtype(dtype).itemsize
        return b * n * d * e + 2 * b * k * d * e + b * n * 4

    # -- reference and oracle -------------------------------------------------------------------------

    def reference(
        self, inputs: Mapping[str, np.ndarray], shape: Mapping[str, int], dtype: str
    ) -> dict[str, np.ndarray]:
        """``assign`` (the float64 nearest centroid, ties to the smallest index) and ``centroids`` (the float64
        means of those clusters rounded to ``dtype``; an empty cluster keeps ``c``), with numpy."""
        s = validate_cell(self, shape, dtype)
        self._validate_inputs(inputs, s, dtype)
        assign = assign_oracle.nearest_numpy(inputs["x"], inputs["c"], dtype)
        return {"assign": assign, "centroids": oracle.reference_centroids(inputs["x"], assign, inputs["c"], dtype)}

    def check(
        self,
        inputs: Mapping[str, np.ndarray],
        outputs: Mapping[str, np.ndarray],
        shape: Mapping[str, int],
        dtype: str,
        *,
        runner: GpuRunner | None = None,
    ) -> OracleReport:
        """Judge every element of ``assign`` (kmeans-assign's rule) and of ``centroids`` (against the means of
        the candidate's clusters); see :mod:`.oracle`."""
        start = time.perf_counter()
        s = validate_cell(self, shape, dtype)
        self._validate_inputs(inputs, s, dtype)
        points = s["B"] * s["N"] * s["D"]
        if points > self.numpy_limit:
            raise CakeUserError(
                f"kmeans-iter judges centroids with numpy up to B*N*D = {self.numpy_limit} point elements; this "
                f"cell has {points}"
            )
        macs = points * s["K"]
        method = METHOD_CUDA if runner is not None and macs > self.assign_numpy_limit else METHOD_NUMPY
        malformed = structural_violations(outputs_of(self), outputs, s, dtype)
        if malformed:
            return failed_report(malformed, s["B"] * (s["N"] + s["K"] * s["D"]), method,
                                 oracle.centroid_tolerance_text(dtype), time.perf_counter() - start)  # fmt: skip
        x, c, cand = inputs["x"], inputs["c"], outputs["assign"]
        if method == METHOD_CUDA:
            from cake_core.problems.kmeans_assign.cuda_reference import assess_cuda

            assert runner is not None
            assessment = assess_cuda(runner, x, c, cand, s, dtype)
        else:
            assessment = assign_oracle.assess_numpy(x, c, cand, dtype)
        judged = assign_oracle.make_report(assessment, x, c, cand, dtype, self.rtol, method, 0.0, tensor="assign")
        centroids = oracle.assess_centroids(x, cand, c, outputs["centroids"], dtype)
        return oracle.combine(judged, centroids, dtype, start)

    def _validate_inputs(self, inputs: Mapping[str, np.ndarray], shape: Mapping[str, int], dtype: str) -> None:
        require_valid_inputs(self, inputs, shape, dtype)


#: the instance the plugin registers
KMEANS_ITER = KMeansIter()
