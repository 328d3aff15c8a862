"""knn: the k nearest points of every query by squared Euclidean distance (brute force, batched)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

import attrs
import numpy as np

from cake_core.errors import CakeUserError
from cake_core.hostdata import random_values, storage_dtype
from cake_core.problems.knn import oracle
from cake_core.problems.knn.cells import CHECK_CELLS, DEFAULT_CELL
from cake_core.problems.problem import (
    METHOD_NUMPY,
    Cell,
    OracleReport,
    SizeDecl,
    TensorDecl,
    failed_report,
    inputs_of,
    outputs_of,
    structural_violations,
    validate_cell,
)

if TYPE_CHECKING:
    from cake_core.runtime.worker import GpuRunner

_FLOAT_INPUTS = ("bf16", "f16")
#: the list lengths a schedule compiles for (the top-k state is sized by K)
K_CHOICES = (1, 2, 4, 8, 10, 16, 32)


@attrs.frozen
class Knn:
    """``out[b, m, :]``: the ``K`` points of ``x[b]`` nearest to ``q[b, m]``, nearest first.

    Queries ``q`` [B, M, D] and points ``x`` [B, N, D] in bf16 or f16, fp32 accumulation, indices
    ``out`` [B, M, K] in i32; ``K <= N``. Ties between equal distances may go either way; the
    reference breaks them to the smaller index. The oracle (:mod:`cake_core.problems.knn.oracle`)
    accepts any distinct in-range indices whose float64 distance at each rank is within
    ``rtol * (||q||^2 + ||x||^2)`` of the true distance at that rank; it runs with numpy up to
    ``numpy_limit`` multiply-adds (``B*M*N*D``). There is no GPU reference yet, so larger cells are
    refused with a clear error, with or without a runner.
    """

    rtol: float = 1e-4
    numpy_limit: int = 1 << 32

    name: ClassVar[str] = "knn"
    summary: ClassVar[str] = (
        "k nearest neighbours: out[b, m, :] = the K points of x[b] nearest to q[b, m] by squared Euclidean "
        "distance, nearest first (bf16/f16 inputs, fp32 accumulation, int32 indices)"
    )
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
        TensorDecl("out", "output", ("i32",), ("B", "M", "K"), doc="indices of the K nearest points, nearest first"),
    )
    default_cell: ClassVar[Cell] = DEFAULT_CELL
    cells: ClassVar[tuple[Cell, ...]] = CHECK_CELLS

    def _cell(self, shape: Mapping[str, int], dtype: str) -> dict[str, int]:
        s = validate_cell(self, shape, dtype)
        if s["K"] > s["N"]:
            raise CakeUserError(f"problem `knn` needs K <= N: K={s['K']} neighbours of N={s['N']} points")
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
        """``out``: the float64 K nearest points, nearest first, ties to the smaller index (numpy)."""
        s = self._cell(shape, dtype)
        self._numpy_ok(s, None)
        self._validate_inputs(inputs, s, dtype)
        return {"out": oracle.nearest_numpy(inputs["q"], inputs["x"], s["K"], dtype)}

    def check(
        self,
        inputs: Mapping[str, np.ndarray],
        outputs: Mapping[str, np.ndarray],
        shape: Mapping[str, int],
        dtype: str,
        *,
        runner: GpuRunner | None = None,
    ) -> OracleReport:
        """Judge every element of ``outputs["out"]`` (numpy, float64)."""
        s = self._cell(shape, dtype)
        self._numpy_ok(s, runner)
        self._validate_inputs(inputs, s, dtype)
        malformed = structural_violations(outputs_of(self), outputs, s, dtype)
        if malformed:
            return failed_report(malformed, s["B"] * s["M"] * s["K"], METHOD_NUMPY, oracle.tolerance_text(self.rtol))
        return oracle.assess(inputs["q"], inputs["x"], outputs["out"], dtype, self.rtol, METHOD_NUMPY)

    def _numpy_ok(self, s: Mapping[str, int], runner: GpuRunner | None) -> None:
        macs = self.macs(s)
        if macs > self.numpy_limit:
            raise CakeUserError(
                f"knn's oracle runs with numpy up to B*M*N*D = {self.numpy_limit} multiply-adds; this cell has "
                f"{macs} and there is no GPU reference for it yet"
                + (" (a GPU runner does not help)" if runner is not None else "")
            )

    def _validate_inputs(self, inputs: Mapping[str, np.ndarray], shape: Mapping[str, int], dtype: str) -> None:
        bad = structural_violations(inputs_of(self), inputs, shape, dtype)
        if bad:
            raise CakeUserError(f"inputs of `{self.name}` at {dict(shape)} {dtype}: {bad[0].detail}")


#: the instance the plugin registers
KNN = Knn()
