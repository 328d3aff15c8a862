"""kmeans-assign: declarations, inputs, the numpy reference and the oracle (no GPU needed)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cake_core.problems.kmeans_assign as kmeans_plugin
from cake_core import plugins
from cake_core.errors import CakeUserError
from cake_core.hostdata import decode, encode
from cake_core.problems.kmeans_assign import CHECK_CELLS, DEFAULT_CELL, KMEANS_ASSIGN, KMeansAssign
from cake_core.problems.kmeans_assign import oracle
from cake_core.problems.problem import METHOD_CUDA, METHOD_NUMPY, Problem, validate_cell

P = KMEANS_ASSIGN
SMALL = {"B": 2, "N": 300, "K": 37, "D": 64}
Case = tuple[dict[str, np.ndarray], np.ndarray, str]  # inputs, their reference output, dtype


def brute_force(x: np.ndarray, c: np.ndarray, dtype: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Independent of the module under test: every distance summed directly in float64.

    Returns (distances [B, N, K], ||x||^2 [B, N], ||c||^2 [B, K]).
    """
    xf = decode(x, dtype, np.float64)
    cf = decode(c, dtype, np.float64)
    diff = xf[:, :, None, :] - cf[:, None, :, :]
    return (diff * diff).sum(-1), (xf * xf).sum(-1), (cf * cf).sum(-1)


def brute_force_ok(x: np.ndarray, c: np.ndarray, out: np.ndarray, dtype: str, rtol: float) -> np.ndarray:
    """Per point: does ``out`` satisfy the acceptance rule, judged by brute force?"""
    dist, xx, cc = brute_force(x, c, dtype)
    k = c.shape[1]
    m = dist.argmin(-1)
    d_min = np.take_along_axis(dist, m[..., None], -1)[..., 0]
    in_range = (out >= 0) & (out < k)
    d_out = np.take_along_axis(dist, np.where(in_range, out, 0)[..., None], -1)[..., 0]
    allowed = rtol * (xx + np.take_along_axis(cc, m, -1))
    return in_range & (d_out - d_min <= allowed)


# -- declarations and registration -------------------------------------------------------------------


def test_registers_through_the_plugin_hook() -> None:
    registry = plugins.load()
    assert "kmeans-assign" in registry.names("problems")
    problem = registry.get("problems", "kmeans-assign")
    assert problem is KMEANS_ASSIGN and isinstance(problem, Problem)
    info = registry.registration("problems", "kmeans-assign").plugin
    assert info.builtin and info.module == kmeans_plugin.__name__


def test_declarations() -> None:
    assert P.name == "kmeans-assign" and P.summary
    assert P.dtypes == ("bf16", "f16")
    assert [t.describe() for t in P.tensors] == [
        "x: [B, N, D] in {bf16, f16} (input)",
        "c: [B, K, D] in {bf16, f16} (input)",
        "out: [B, N] in i32 (output)",
    ]
    assert [s.describe() for s in P.sizes] == ["B >= 1", "N >= 1", "K >= 1", "D in {64, 128, 256}"]


def test_cells() -> None:
    assert DEFAULT_CELL.shape == {"B": 32, "N": 65536, "K": 1024, "D": 128} and DEFAULT_CELL.dtype == "bf16"
    assert P.default_cell == DEFAULT_CELL and P.cells == CHECK_CELLS and CHECK_CELLS[0] == DEFAULT_CELL
    listed = {(tuple(c.shape.values()), c.dtype) for c in CHECK_CELLS}
    assert listed == {
        ((32, 65536, 1024, 128), "bf16"),
        ((1, 65521, 1024, 128), "bf16"),
        ((8, 16384, 100, 128), "bf16"),
        ((4, 32768, 4096, 128), "bf16"),
        ((16, 32768, 1024, 64), "bf16"),
        ((4, 16384, 1024, 256), "bf16"),
        ((32, 65536, 1024, 128), "f16"),
    }
    for cell in CHECK_CELLS:
        validate_cell(P, cell.shape, cell.dtype)  # every listed cell lies in the domain


def test_work_counts() -> None:
    shape = DEFAULT_CELL.shape
    assert P.flops(shape) == 2 * 32 * 65536 * 1024 * 128 == 549_755_813_888
    assert P.min_bytes(shape, "bf16") == (32 * 65536 * 128 + 32 * 1024 * 128) * 2 + 32 * 65536 * 4
    assert P.min_bytes(shape, "f16") == P.min_bytes(shape, "bf16")
    assert P.macs(SMALL) == 2 * 300 * 37 * 64


# -- inputs ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype,storage", [("bf16", np.uint16), ("f16", np.float16)])
def test_make_inputs(dtype: str, storage: type) -> None:
    a = P.make_inputs(SMALL, dtype, seed=1)
    assert set(a) == {"x", "c"}
    assert a["x"].shape == (2, 300, 64) and a["c"].shape == (2, 37, 64)
    assert a["x"].dtype == storage and a["c"].dtype == storage
    for arr in a.values():
        values = decode(arr, dtype, np.float64)
        assert np.isfinite(values).all()
        assert (values != 0).mean() > 0.99  # random, never zeros
        assert 0.8 < values.std() < 1.2
    same = P.make_inputs(SMALL, dtype, seed=1)
    other = P.make_inputs(SMALL, dtype, seed=2)
    assert all(np.array_equal(a[k], same[k]) for k in a)
    assert not any(np.array_equal(a[k], other[k]) for k in a)
    assert not np.array_equal(a["x"][0], a["x"][1])  # batches differ


def test_make_inputs_rejects_cells_outside_the_domain() -> None:
    with pytest.raises(CakeUserError, match="D=100"):
        P.make_inputs({"B": 1, "N": 4, "K": 4, "D": 100}, "bf16", 0)
    with pytest.raises(CakeUserError, match="not `f32`"):
        P.make_inputs({"B": 1, "N": 4, "K": 4, "D": 64}, "f32", 0)
    with pytest.raises(CakeUserError, match="K >= 1"):
        P.make_inputs({"B": 1, "N": 4, "K": 0, "D": 64}, "bf16", 0)


# -- reference ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize(
    "shape", [SMALL, {"B": 1, "N": 1, "K": 1, "D": 128}, {"B": 3, "N": 40, "K": 257, "D": 256}]
)
def test_reference_is_the_float64_argmin(dtype: str, shape: dict[str, int]) -> None:
    inputs = P.make_inputs(shape, dtype, seed=3)
    out = P.reference(inputs, shape, dtype)["out"]
    assert out.dtype == np.int32 and out.shape == (shape["B"], shape["N"])
    dist, _, _ = brute_force(inputs["x"], inputs["c"], dtype)
    assert np.array_equal(out, dist.argmin(-1))


def test_reference_breaks_ties_to_the_smallest_index() -> None:
    shape = {"B": 1, "N": 50, "K": 8, "D": 64}
    inputs = P.make_inputs(shape, "bf16", seed=4)
    c = inputs["c"]
    c[0, 5:] = c[0, 0]  # centroids 0, 5, 6, 7 coincide
    out = P.reference(inputs, shape, "bf16")["out"]
    assert not np.isin(out, [5, 6, 7]).any()


def test_reference_chunks_large_k(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(oracle, "_CHUNK_ELEMENTS", 1000)  # forces many row blocks of the distance matrix
    shape = {"B": 2, "N": 150, "K": 300, "D": 64}
    inputs = P.make_inputs(shape, "f16", seed=5)
    dist, _, _ = brute_force(inputs["x"], inputs["c"], "f16")
    assert np.array_equal(P.reference(inputs, shape, "f16")["out"], dist.argmin(-1))
    cand = dist.argmin(-1).astype(np.int32)
    cand[1, 100] = (cand[1, 100] + 1) % 300
    cand[0, 0] = -1
    ok = brute_force_ok(inputs["x"], inputs["c"], cand, "f16", P.rtol)
    report = P.check(inputs, {"out": cand}, shape, "f16")
    assert report.violations == int((~ok).sum()) >= 1


# -- the oracle --------------------------------------------------------------------------------------


@pytest.fixture(params=["bf16", "f16"])
def case(request: pytest.FixtureRequest) -> tuple[dict[str, np.ndarray], np.ndarray, str]:
    dtype = request.param
    inputs = P.make_inputs(SMALL, dtype, seed=7)
    return inputs, P.reference(inputs, SMALL, dtype)["out"], dtype


def test_oracle_passes_the_true_argmin(case: Case) -> None:
    inputs, ref, dtype = case
    report = P.check(inputs, {"out": ref}, SMALL, dtype)
    assert report.passed, report.summary()
    assert report.checked == 2 * 300 and report.violations == 0 and report.first == ()
    assert report.worst_excess == 0.0  # the same index: a gap of exactly zero
    assert report.method == METHOD_NUMPY and "<= 0.0001 * (||x||^2 + ||c_min||^2)" in report.tolerance


def test_oracle_catches_a_single_wrong_index(case: Case) -> None:
    inputs, ref, dtype = case
    dist, _, _ = brute_force(inputs["x"], inputs["c"], dtype)
    for b, n in [(0, 0), (1, 299), (1, 123)]:
        out = ref.copy()
        out[b, n] = int(dist[b, n].argmax())  # the farthest centroid: certainly wrong
        report = P.check(inputs, {"out": out}, SMALL, dtype)
        assert not report.passed and report.violations == 1 and report.checked == 600
        (v,) = report.first
        assert v.position == (b, n) and v.got == out[b, n] and v.expected == ref[b, n]
        assert v.excess > 1 and report.worst_excess == pytest.approx(v.excess)
        assert "is not a nearest centroid" in v.detail


def test_oracle_catches_the_second_nearest_when_it_is_outside_tolerance(
    case: Case,
) -> None:
    inputs, ref, dtype = case
    dist, xx, cc = brute_force(inputs["x"], inputs["c"], dtype)
    order = np.argsort(dist, axis=-1, kind="stable")
    second = order[..., 1].astype(np.int32)
    out = second
    expected_ok = brute_force_ok(inputs["x"], inputs["c"], out, dtype, P.rtol)
    report = P.check(inputs, {"out": out}, SMALL, dtype)
    assert report.violations == int((~expected_ok).sum()) > 500


@pytest.mark.parametrize("bad", [-1, 37, 2**31 - 1, -(2**31)])
def test_oracle_rejects_out_of_range_indices(case: Case, bad: int) -> None:
    inputs, ref, dtype = case
    out = ref.copy()
    out[1, 7] = bad
    report = P.check(inputs, {"out": out}, SMALL, dtype)
    assert not report.passed and report.violations == 1 and report.worst_excess == math.inf
    (v,) = report.first
    assert v.position == (1, 7) and v.got == bad and "outside [0, 37)" in v.detail


@pytest.mark.parametrize("poison", [-1, 0x7FFFFFFF, -0x55555556])
def test_oracle_rejects_poisoned_outputs(case: Case, poison: int) -> None:
    inputs, _, dtype = case
    out = np.full((2, 300), poison, dtype=np.int32)
    report = P.check(inputs, {"out": out}, SMALL, dtype)
    assert not report.passed and report.violations == 600 and len(report.first) == oracle.FIRST_VIOLATIONS
    assert [v.position for v in report.first] == [(0, i) for i in range(oracle.FIRST_VIOLATIONS)]


def test_oracle_rejects_malformed_outputs(case: Case) -> None:
    inputs, ref, dtype = case
    for outputs, words in [
        ({}, "is missing"),
        ({"out": ref.astype(np.int64)}, "stored as int64"),
        ({"out": ref.astype(np.float32)}, "stored as float32"),
        ({"out": ref[:, :-1]}, "has shape [2, 299]"),
        ({"out": ref.T.copy()}, "has shape [300, 2]"),
    ]:
        report = P.check(inputs, outputs, SMALL, dtype)
        assert not report.passed and report.worst_excess == math.inf
        assert words in report.first[0].detail


def test_oracle_rejects_malformed_inputs(case: Case) -> None:
    inputs, ref, dtype = case
    with pytest.raises(CakeUserError, match="tensor `c` is missing"):
        P.check({"x": inputs["x"]}, {"out": ref}, SMALL, dtype)
    other = "f16" if dtype == "bf16" else "bf16"
    with pytest.raises(CakeUserError, match="stored as"):
        P.check(inputs, {"out": ref}, SMALL, other)


def _two_centroid_case(dtype: str, offset: float) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """One point x = e0; c0 = e0 (distance 0); c1 = e0 + offset * e1 (distance offset^2).

    Every value is exact in both dtypes for offset a power of two, so the relative gap of index 1 is
    exactly offset^2 / (||x||^2 + ||c0||^2) = offset^2 / 2.
    """
    shape = {"B": 1, "N": 1, "K": 2, "D": 64}
    x = np.zeros((1, 1, 64))
    x[0, 0, 0] = 1.0
    c = np.zeros((1, 2, 64))
    c[0, :, 0] = 1.0
    c[0, 1, 1] = offset
    return {"x": encode(x, dtype), "c": encode(c, dtype)}, shape


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_tolerance_boundary_is_exact(dtype: str) -> None:
    inputs, shape = _two_centroid_case(dtype, 2.0**-7)
    rel = 2.0**-14 / 2.0  # the relative gap of index 1, exactly
    out = {"out": np.array([[1]], dtype=np.int32)}
    at = KMeansAssign(rtol=rel).check(inputs, out, shape, dtype)
    assert at.passed and at.worst_excess == 1.0
    below = KMeansAssign(rtol=math.nextafter(rel, 0.0)).check(inputs, out, shape, dtype)
    assert not below.passed and below.violations == 1 and below.worst_excess > 1.0
    assert P.check(inputs, {"out": np.array([[0]], dtype=np.int32)}, shape, dtype).passed


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_default_tolerance(dtype: str) -> None:
    # relative gaps 2^-15 (3.1e-5), 2^-13 (1.2e-4) around the default 1e-4
    out = {"out": np.array([[1]], dtype=np.int32)}
    inside, shape = _two_centroid_case(dtype, 2.0**-7)
    outside, _ = _two_centroid_case(dtype, 2.0**-6)
    assert P.check(inside, out, shape, dtype).passed
    report = P.check(outside, out, shape, dtype)
    assert not report.passed and report.worst_excess == pytest.approx(2.0**-13 / 1e-4)
    assert "allowed 0.0002" in report.first[0].detail


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_oracle_accepts_exact_ties(dtype: str) -> None:
    shape = {"B": 1, "N": 64, "K": 16, "D": 128}
    inputs = P.make_inputs(shape, dtype, seed=11)
    inputs["c"][0, 9] = inputs["c"][0, 3]  # centroids 3 and 9 coincide
    ref = P.reference(inputs, shape, dtype)["out"]
    out = np.where(ref == 3, 9, ref).astype(np.int32)
    assert (ref == 3).any()
    report = P.check(inputs, {"out": out}, shape, dtype)
    assert report.passed and report.worst_excess == 0.0


def test_oracle_accepts_a_near_tie_within_tolerance() -> None:
    shape = {"B": 1, "N": 1, "K": 2, "D": 128}
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 1, 128))
    c = np.repeat(x + 0.5, 2, axis=1)
    c[0, 1, 5] += 2.0**-7  # d(x, c1) - d(x, c0) ~ 2 * 0.5 * 2^-7 ~ 0.008; allowed ~ 1e-4 * 2 * 160
    inputs = {"x": encode(x, "f16"), "c": encode(c, "f16")}
    report = P.check(inputs, {"out": np.array([[1]], dtype=np.int32)}, shape, "f16")
    assert report.passed and 0.0 < report.worst_excess < 1.0


def test_oracle_method_choice() -> None:
    small, large = SMALL, DEFAULT_CELL.shape
    runner = object()
    assert P.oracle_method(small, None) == METHOD_NUMPY
    assert P.oracle_method(large, None) == METHOD_NUMPY  # no runner: numpy, however long it takes
    assert P.oracle_method(small, runner) == METHOD_NUMPY
    assert P.oracle_method(large, runner) == METHOD_CUDA
    assert P.oracle_method({"B": 1, "N": 1 << 10, "K": 1 << 10, "D": 256}, runner) == METHOD_NUMPY  # 2^28
    assert P.oracle_method({"B": 2, "N": 1 << 10, "K": 1 << 10, "D": 256}, runner) == METHOD_CUDA
    inputs = P.make_inputs(small, "bf16", 0)
    out = P.reference(inputs, small, "bf16")
    with pytest.raises(CakeUserError, match="needs a GPU runner"):
        P.check(inputs, out, small, "bf16", method=METHOD_CUDA)
    with pytest.raises(CakeUserError, match="unknown oracle method"):
        P.check(inputs, out, small, "bf16", method="eyeballing")


# -- property: the oracle's verdict is the brute-force verdict, element by element --------------------


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[dict[str, int], str, int, list[tuple[int, int, int]]]:
    shape = {
        "B": draw(st.integers(1, 3)),
        "N": draw(st.integers(1, 40)),
        "K": draw(st.integers(1, 24)),
        "D": draw(st.sampled_from([64, 128])),
    }
    dtype = draw(st.sampled_from(["bf16", "f16"]))
    seed = draw(st.integers(0, 2**32 - 1))
    edits = draw(
        st.lists(
            st.tuples(
                st.integers(0, shape["B"] - 1),
                st.integers(0, shape["N"] - 1),
                st.integers(-2, shape["K"] + 1),
            ),
            max_size=6,
        )
    )
    return shape, dtype, seed, edits


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.sampled_from([1e-4, 1e-2, 0.3]))
def test_verdicts_match_brute_force(
    scenario: tuple[dict[str, int], str, int, list[tuple[int, int, int]]], rtol: float
) -> None:
    shape, dtype, seed, edits = scenario
    problem = KMeansAssign(rtol=rtol)
    inputs = problem.make_inputs(shape, dtype, seed)
    out = problem.reference(inputs, shape, dtype)["out"]
    assert problem.check(inputs, {"out": out}, shape, dtype).passed
    for b, n, k in edits:
        out[b, n] = k
    ok = brute_force_ok(inputs["x"], inputs["c"], out, dtype, rtol)
    report = problem.check(inputs, {"out": out}, shape, dtype)
    assert report.passed == bool(ok.all())
    assert report.violations == int((~ok).sum())
    bad_positions = [tuple(int(i) for i in p) for p in np.argwhere(~ok)][: oracle.FIRST_VIOLATIONS]
    assert [v.position for v in report.first] == bad_positions
    assert report.checked == shape["B"] * shape["N"]
