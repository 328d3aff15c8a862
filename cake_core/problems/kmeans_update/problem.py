"""kmeans-update: new centroids as the mean of each cluster's points (the update step of K-means)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, ClassVar

import attrs
import numpy as np

from cake_core.errors import CakeUserError
from cake_core.hostdata import random_values, storage_dtype
from cake_core.problems.kmeans_update import oracle
from cake_core.problems.kmeans_update.baseline import FLASH_KMEANS_UPDATE
from cake_core.problems.kmeans_update.cells import CHECK_CELLS, DEFAULT_CELL
from cake_core.problems.problem import (
    METHOD_NUMPY,
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
class KMeansUpdate:
    """``centroids[b, k] = mean {x[b, i] : assign[b, i] == k}``, ``counts[b, k] = #{i : assign[b, i] == k}``.

    Inputs: points ``x`` [B, N, D] and the previous centroids ``c`` [B, K, D] in bf16 or f16, and the
    assignment of every point ``assign`` [B, N] (i32, each in ``[0, K)``). Outputs: ``centroids``
    [B, K, D] in f32 (fp32 sums, one division) and ``counts`` [B, K] in i32. **An empty cluster keeps
    its previous centroid** (``c[b, k]`` converted to f32, exactly) and a count of 0 — what
    flash-kmeans and scikit-learn's Lloyd iteration do, so that a cluster that loses every point can
    win some back.

    The oracle (:mod:`cake_core.problems.kmeans_update.oracle`) works with numpy in float64, batch by
    batch, up to ``numpy_limit`` point elements (``B*N*D``); there is no GPU reference yet, so larger
    cells are refused with a clear error, with or without a runner.
    """

    numpy_limit: int = 1 << 31
    empty_fraction: float = 0.125  # of the clusters make_inputs leaves without points

    name: ClassVar[str] = "kmeans-update"
    summary: ClassVar[str] = (
        "K-means centroid update: centroids[b, k] = mean of the points assigned to k, counts[b, k] their "
        "number; an empty cluster keeps its previous centroid (bf16/f16 points, fp32 sums, i32 counts)"
    )
    dtypes: ClassVar[tuple[str, ...]] = _FLOAT_INPUTS
    sizes: ClassVar[tuple[SizeDecl, ...]] = (
        SizeDecl("B", 1, doc="independent problems (batches)"),
        SizeDecl("N", 1, doc="points per batch"),
        SizeDecl("K", 1, doc="clusters per batch"),
        SizeDecl("D", 1, choices=(64, 128, 256), doc="dimensions of a point"),
    )
    tensors: ClassVar[tuple[TensorDecl, ...]] = (
        TensorDecl("x", "input", _FLOAT_INPUTS, ("B", "N", "D"), doc="points"),
        TensorDecl("assign", "input", ("i32",), ("B", "N"), doc="the cluster of every point, in [0, K)"),
        TensorDecl("c", "input", _FLOAT_INPUTS, ("B", "K", "D"), doc="previous centroids (kept by empty clusters)"),
        TensorDecl("centroids", "output", ("f32",), ("B", "K", "D"), doc="new centroids (fp32 sums in any order)",
                   reproducible=False),
        TensorDecl("counts", "output", ("i32",), ("B", "K"), doc="points per cluster"),
    )
    default_cell: ClassVar[Cell] = DEFAULT_CELL
    cells: ClassVar[tuple[Cell, ...]] = CHECK_CELLS
    #: flash-kmeans's sorted update, its sort included (:mod:`cake_core.problems.kmeans_update.baseline`)
    baseline: ClassVar[Baseline | None] = FLASH_KMEANS_UPDATE

    # -- inputs and work ------------------------------------------------------------------------------

    def make_inputs(self, shape: Mapping[str, int], dtype: str, seed: int) -> dict[str, np.ndarray]:
        """Standard-normal points and previous centroids; assignments uniform over the clusters except a
        random ``empty_fraction`` of them (at least one when ``K >= 2``), which get no point, so that
        every cell exercises empty clusters. The same for the same seed."""
        s = validate_cell(self, shape, dtype)
        rng = np.random.default_rng(seed)
        store = storage_dtype(dtype)
        b_, n_, k_, d_ = s["B"], s["N"], s["K"], s["D"]
        x = np.empty((b_, n_, d_), dtype=store)
        c = np.empty((b_, k_, d_), dtype=store)
        assign = np.empty((b_, n_), dtype=np.int32)
        empty = max(1, int(k_ * self.empty_fraction)) if k_ >= 2 else 0
        for b in range(b_):
            x[b] = random_values(rng, (n_, d_), dtype)
            c[b] = random_values(rng, (k_, d_), dtype)
            used = np.sort(rng.permutation(k_)[empty:])
            assign[b] = used[rng.integers(0, used.size, size=n_)]
        return {"x": x, "assign": assign, "c": c}

    def flops(self, shape: Mapping[str, int]) -> int:
        """``B*(N + K)*D``: one addition per point element, one division per centroid element."""
        return int(shape["B"]) * (int(shape["N"]) + int(shape["K"])) * int(shape["D"])

    def min_bytes(self, shape: Mapping[str, int], dtype: str) -> int:
        """x, assign and c read once; centroids and counts written once."""
        b, n, k, d = (int(shape[s]) for s in ("B", "N", "K", "D"))
        e = storage_dtype(dtype).itemsize
        return b * n * d * e + b * n * 4 + b * k * d * e + b * k * d * 4 + b * k * 4

    # -- reference and oracle -------------------------------------------------------------------------

    def reference(
        self, inputs: Mapping[str, np.ndarray], shape: Mapping[str, int], dtype: str
    ) -> dict[str, np.ndarray]:
        """``centroids`` (float64 means rounded to f32; empty clusters: the previous centroid) and ``counts``."""
        s = validate_cell(self, shape, dtype)
        self._validate_inputs(inputs, s, dtype)
        return oracle.reference(inputs["x"], inputs["assign"], inputs["c"], dtype)

    def check(
        self,
        inputs: Mapping[str, np.ndarray],
        outputs: Mapping[str, np.ndarray],
        shape: Mapping[str, int],
        dtype: str,
        *,
        runner: GpuRunner | None = None,
    ) -> OracleReport:
        """Judge every element of ``centroids`` and ``counts`` (numpy, float64; see :mod:`.oracle`)."""
        start = time.perf_counter()
        return self.judge(inputs, shape, dtype, runner=runner, start=start)(outputs)

    def judge(
        self,
        inputs: Mapping[str, np.ndarray],
        shape: Mapping[str, int],
        dtype: str,
        *,
        runner: GpuRunner | None = None,
        start: float | None = None,
    ) -> Callable[[Mapping[str, np.ndarray]], OracleReport]:
        """:meth:`check` in two steps: the float64 facts of ``inputs`` are worked out once, here, and the
        function returned judges any number of outputs for them (a benchmark judges every implementation's
        outputs for one input). The same verdicts as :meth:`check`; bad inputs fail here. A report's
        ``seconds`` count from ``start`` when given (what :meth:`check` passes), else from the judging."""
        s = validate_cell(self, shape, dtype)
        self._validate_inputs(inputs, s, dtype)
        elements = s["B"] * s["N"] * s["D"]
        if elements > self.numpy_limit:
            raise CakeUserError(
                f"kmeans-update's oracle runs with numpy up to B*N*D = {self.numpy_limit} point elements; "
                f"this cell has {elements} and there is no GPU reference for it yet"
                + (" (a GPU runner does not help)" if runner is not None else "")
            )
        checked = s["B"] * s["K"] * (s["D"] + 1)
        known = oracle.truths(inputs["x"], inputs["assign"], s["K"], dtype)

        def verdict(outputs: Mapping[str, np.ndarray]) -> OracleReport:
            begin = start if start is not None else time.perf_counter()
            malformed = structural_violations(outputs_of(self), outputs, s, dtype)
            if malformed:
                return failed_report(malformed, checked, METHOD_NUMPY, oracle.tolerance_text(),
                                     time.perf_counter() - begin)  # fmt: skip
            return oracle.assess(
                inputs["x"], inputs["assign"], inputs["c"], outputs["centroids"], outputs["counts"], dtype,
                METHOD_NUMPY, begin, known,
            )  # fmt: skip

        return verdict

    def _validate_inputs(self, inputs: Mapping[str, np.ndarray], shape: Mapping[str, int], dtype: str) -> None:
        require_valid_inputs(self, inputs, shape, dtype)
        a = inputs["assign"]
        if a.size and (int(a.min()) < 0 or int(a.max()) >= shape["K"]):
            raise CakeUserError(
                f"inputs of `{self.name}`: assignments must lie in [0, K) = [0, {shape['K']}), found "
                f"{int(a.min())}..{int(a.max())}"
            )


#: the instance the plugin registers
KMEANS_UPDATE = KMeansUpdate()
