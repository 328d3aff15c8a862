"""The ``scale-rows`` problem: ``out = 2 * x`` over an ``[N, D]`` tensor.

Doubling is exact in every binary float type (only the exponent changes), so the oracle needs no
tolerance: every output element must equal ``2 * x`` bit for bit, after the same rounding to the
element type. ``schedules/scale_rows.cake`` solves it with the ``scale.rows`` primitive.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

import attrs
import numpy as np
from cake_core.errors import CakeUserError
from cake_core.hostdata import decode, encode, random_values, storage_dtype
from cake_core.problems.problem import (
    METHOD_NUMPY,
    Cell,
    OracleReport,
    SizeDecl,
    TensorDecl,
    Violation,
    failed_report,
    inputs_of,
    outputs_of,
    structural_violations,
    validate_cell,
)

if TYPE_CHECKING:
    from cake_core.runtime.worker import GpuRunner

#: the scale the problem fixes (the primitive's default ``factor``)
FACTOR = 2.0
TOLERANCE = "exact: 2 * x is representable in the element type"
_FIRST = 8  # violations a report keeps


@attrs.frozen
class ScaleRowsProblem:
    """Satisfies :class:`cake_core.problems.problem.Problem`."""

    name: str = "scale-rows"
    summary: str = "out = 2 * x, every element of an [N, D] tensor (cake-example-plugin)"
    dtypes: tuple[str, ...] = ("f32", "bf16", "f16")
    sizes: tuple[SizeDecl, ...] = (
        SizeDecl("N", 1, doc="rows"),
        SizeDecl("D", 1, (64, 128), doc="columns"),
    )
    tensors: tuple[TensorDecl, ...] = (
        TensorDecl("x", "input", ("f32", "bf16", "f16"), ("N", "D"), doc="the tensor to scale"),
        TensorDecl("out", "output", ("f32", "bf16", "f16"), ("N", "D"), doc="2 * x"),
    )
    default_cell: Cell = Cell({"N": 65536, "D": 128}, "f32")
    cells: tuple[Cell, ...] = (
        Cell({"N": 65536, "D": 128}, "f32"),
        Cell({"N": 1000, "D": 64}, "bf16", note="N not a multiple of any tile"),
        Cell({"N": 1, "D": 128}, "f16", note="a single row"),
    )

    def make_inputs(self, shape: Mapping[str, int], dtype: str, seed: int) -> dict[str, np.ndarray]:
        s = validate_cell(self, shape, dtype)
        rng = np.random.default_rng(seed)
        return {"x": random_values(rng, (s["N"], s["D"]), dtype)}

    def flops(self, shape: Mapping[str, int]) -> int:
        return int(shape["N"]) * int(shape["D"])

    def min_bytes(self, shape: Mapping[str, int], dtype: str) -> int:
        return 2 * int(shape["N"]) * int(shape["D"]) * storage_dtype(dtype).itemsize

    def reference(
        self, inputs: Mapping[str, np.ndarray], shape: Mapping[str, int], dtype: str
    ) -> dict[str, np.ndarray]:
        validate_cell(self, shape, dtype)
        x = decode(inputs["x"], dtype, np.float64)
        return {"out": encode(FACTOR * x, dtype)}

    def check(
        self,
        inputs: Mapping[str, np.ndarray],
        outputs: Mapping[str, np.ndarray],
        shape: Mapping[str, int],
        dtype: str,
        *,
        runner: GpuRunner | None = None,
    ) -> OracleReport:
        """Judge every element of ``outputs["out"]`` against ``2 * x`` (numpy; ``runner`` is unused)."""
        start = time.perf_counter()
        s = validate_cell(self, shape, dtype)
        bad = structural_violations(inputs_of(self), inputs, s, dtype)
        if bad:
            raise CakeUserError(f"inputs of `{self.name}` at {s} {dtype}: {bad[0].detail}")
        checked = s["N"] * s["D"]
        malformed = structural_violations(outputs_of(self), outputs, s, dtype)
        if malformed:
            return failed_report(malformed, checked, METHOD_NUMPY, TOLERANCE, time.perf_counter() - start)
        want = decode(self.reference(inputs, s, dtype)["out"], dtype, np.float64)
        got = decode(outputs["out"], dtype, np.float64)
        wrong = ~((got == want) | (np.isnan(got) & np.isnan(want)))
        first = tuple(
            Violation(
                "out",
                tuple(int(i) for i in pos),
                float(got[tuple(pos)]),
                float(want[tuple(pos)]),
                float("inf"),
                f"got {got[tuple(pos)]!r}, expected {want[tuple(pos)]!r} (2 * x is exact)",
            )
            for pos in np.argwhere(wrong)[:_FIRST]
        )
        count = int(wrong.sum())
        return OracleReport(
            passed=count == 0,
            checked=checked,
            violations=count,
            worst_excess=float("inf") if count else 0.0,
            first=first,
            method=METHOD_NUMPY,
            tolerance=TOLERANCE,
            seconds=time.perf_counter() - start,
        )


#: the instance the plugin registers
SCALE_ROWS = ScaleRowsProblem()

__all__ = ["FACTOR", "SCALE_ROWS", "ScaleRowsProblem"]
