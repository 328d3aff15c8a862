"""The problem contract's records and helpers (cake_core.problems.problem)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cake_core.errors import CakeUserError
from cake_core.problems.problem import (
    METHOD_NUMPY,
    Cell,
    OracleReport,
    Problem,
    SizeDecl,
    TensorDecl,
    Violation,
    failed_report,
    inputs_of,
    outputs_of,
    structural_violations,
    validate_cell,
)


def test_size_decl_domain() -> None:
    b = SizeDecl("B", 1)
    assert b.contains(1) and b.contains(10**9) and not b.contains(0)
    assert not b.contains(True) and not b.contains(2.0)  # type: ignore[arg-type]
    assert b.contains(np.int64(3))
    d = SizeDecl("D", 1, choices=(64, 128, 256))
    assert d.contains(128) and not d.contains(96)
    assert b.describe() == "B >= 1"
    assert d.describe() == "D in {64, 128, 256}"


def test_tensor_decl() -> None:
    x = TensorDecl("x", "input", ("bf16", "f16"), ("B", "N", "D"))
    out = TensorDecl("out", "output", ("i32",), ("B", "N"))
    assert x.dtype_for("f16") == "f16" and out.dtype_for("bf16") == "i32"
    with pytest.raises(CakeUserError, match="cannot hold `f32`"):
        x.dtype_for("f32")
    assert x.shape_for({"B": 2, "N": 3, "D": 4}) == (2, 3, 4)
    with pytest.raises(CakeUserError, match="needs size `D`"):
        x.shape_for({"B": 2, "N": 3})
    assert x.describe() == "x: [B, N, D] in {bf16, f16} (input)"
    assert out.describe() == "out: [B, N] in i32 (output)"
    with pytest.raises(ValueError):
        TensorDecl("y", "sideways", ("f32",), ("B",))
    with pytest.raises(ValueError):
        TensorDecl("y", "input", ("float7",), ("B",))


def test_cell_is_a_hashable_value() -> None:
    a = Cell({"B": 32, "N": 8}, "bf16")
    b = Cell([("B", 32), ("N", 8)], "bf16")
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a.shape == {"B": 32, "N": 8}
    assert a.label == str(a) == "B=32 N=8 bf16"
    with pytest.raises(ValueError):
        Cell({"B": 1}, "float7")


class _Toy:
    """A minimal problem object, to test the helpers against the protocol alone."""

    name = "toy"
    summary = "copies"
    dtypes = ("f16",)
    sizes = (SizeDecl("N", 1), SizeDecl("D", 1, choices=(8,)))
    tensors = (
        TensorDecl("a", "input", ("f16",), ("N", "D")),
        TensorDecl("b", "output", ("f16",), ("N", "D")),
    )
    default_cell = Cell({"N": 4, "D": 8}, "f16")
    cells = (default_cell,)

    def make_inputs(self, shape, dtype, seed):  # type: ignore[no-untyped-def]
        return {"a": np.ones((shape["N"], shape["D"]), np.float16)}

    def flops(self, shape):  # type: ignore[no-untyped-def]
        return 0

    def min_bytes(self, shape, dtype):  # type: ignore[no-untyped-def]
        return 4 * shape["N"] * shape["D"]

    def reference(self, inputs, shape, dtype):  # type: ignore[no-untyped-def]
        return {"b": inputs["a"].copy()}

    def check(self, inputs, outputs, shape, dtype, *, runner=None):  # type: ignore[no-untyped-def]
        raise NotImplementedError


def test_protocol_is_runtime_checkable() -> None:
    assert isinstance(_Toy(), Problem)

    class NotAProblem:
        name = "x"

    assert not isinstance(NotAProblem(), Problem)


def test_validate_cell() -> None:
    toy = _Toy()
    assert validate_cell(toy, {"N": np.int64(5), "D": 8}, "f16") == {"N": 5, "D": 8}
    with pytest.raises(CakeUserError, match="element types f16, not `bf16`"):
        validate_cell(toy, {"N": 5, "D": 8}, "bf16")
    with pytest.raises(CakeUserError, match=r"D=7 is outside .*D in \{8\}"):
        validate_cell(toy, {"N": 5, "D": 7}, "f16")
    with pytest.raises(CakeUserError, match="N >= 1"):
        validate_cell(toy, {"N": 0, "D": 8}, "f16")
    with pytest.raises(CakeUserError, match="needs size `D`"):
        validate_cell(toy, {"N": 5}, "f16")
    with pytest.raises(CakeUserError, match="has no size `Q`"):
        validate_cell(toy, {"N": 5, "D": 8, "Q": 1}, "f16")
    assert [t.name for t in inputs_of(toy)] == ["a"] and [t.name for t in outputs_of(toy)] == ["b"]


def test_structural_violations() -> None:
    toy = _Toy()
    shape = {"N": 4, "D": 8}
    good = {"b": np.zeros((4, 8), np.float16)}
    assert structural_violations(outputs_of(toy), good, shape, "f16") == []
    cases = {
        "is missing": {},
        "not a numpy array": {"b": [[0.0] * 8] * 4},
        "has shape [8, 4]": {"b": np.zeros((8, 4), np.float16)},
        "stored as float32": {"b": np.zeros((4, 8), np.float32)},
    }
    for words, outputs in cases.items():
        (v,) = structural_violations(outputs_of(toy), outputs, shape, "f16")
        assert words in v.detail and v.tensor == "b" and v.excess == math.inf


def test_reports() -> None:
    v = Violation("out", (1, 2), 3, 4, 5.5, "index 3 is not a nearest centroid")
    report = OracleReport(False, 100, 1, 5.5, (v,), METHOD_NUMPY, "tol")
    line = report.summary()
    assert line.startswith("FAILED: 1 of 100") and "out[1, 2]" in line and "[numpy-fp64]" in line
    assert OracleReport(True, 100, 0, 0.5, (), METHOD_NUMPY, "tol").summary().startswith("passed")
    with pytest.raises(ValueError):
        OracleReport(True, 1, 0, 0.0, (), "guesswork", "tol")
    failed = failed_report([v], 100, METHOD_NUMPY, "tol")
    assert not failed.passed and failed.violations == 1 and failed.worst_excess == math.inf
