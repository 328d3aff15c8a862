"""The kmeans-assign CUDA reference on a real GPU (skipped cleanly without a driver, a GPU or the runtime)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

from cake_core.hostdata import decode
from cake_core.problems.kmeans_assign import DEFAULT_CELL
from cake_core.problems.kmeans_assign import KMEANS_ASSIGN as P
from cake_core.problems.kmeans_assign import cuda_reference as cr
from cake_core.problems.kmeans_assign import oracle
from cake_core.problems.problem import METHOD_CUDA, METHOD_NUMPY

pytestmark = pytest.mark.gpu

SMALL = [
    ({"B": 2, "N": 300, "K": 37, "D": 64}, "bf16"),
    ({"B": 1, "N": 129, "K": 65, "D": 128}, "f16"),
    ({"B": 3, "N": 64, "K": 1, "D": 256}, "bf16"),
    ({"B": 1, "N": 1, "K": 130, "D": 64}, "f16"),
    ({"B": 4, "N": 1000, "K": 100, "D": 128}, "bf16"),
    ({"B": 1, "N": 513, "K": 4096, "D": 128}, "f16"),
    ({"B": 2, "N": 777, "K": 1024, "D": 256}, "bf16"),
]


def _plant(
    out: np.ndarray, x: np.ndarray, c: np.ndarray, dtype: str, rng: np.random.Generator
) -> list[tuple[int, int]]:
    """Plant wrong answers (the farthest centroid, -1, K, INT32_MAX) at up to four distinct random
    points of ``out``; returns their positions in row-major order."""
    n_count = out.shape[1]
    k = c.shape[1]
    positions = [(int(f // n_count), int(f % n_count)) for f in rng.permutation(out.size)[:4]]
    for i, (b, n) in enumerate(positions):
        if i == 0 and k > 1:
            cb = decode(c[b], dtype, np.float64)
            xv = decode(x[b, n], dtype, np.float64)
            out[b, n] = int(((cb - xv) ** 2).sum(-1).argmax())
        else:
            out[b, n] = (-1, -1, k, 2**31 - 1)[i]
    return sorted(positions)


@pytest.mark.parametrize("shape,dtype", SMALL, ids=[f"{s}-{d}" for s, d in SMALL])
def test_cuda_reference_agrees_with_numpy(
    gpu_runner: Any, gpu_arch: str, shape: dict[str, int], dtype: str
) -> None:
    inputs = P.make_inputs(shape, dtype, seed=shape["N"])
    out = P.reference(inputs, shape, dtype)["out"]
    planted = _plant(out, inputs["x"], inputs["c"], dtype, np.random.default_rng(1))
    got = cr.assess_cuda(gpu_runner, inputs["x"], inputs["c"], out, shape, dtype, arch=gpu_arch)
    want = oracle.assess_numpy(inputs["x"], inputs["c"], out, dtype)
    assert np.array_equal(got.code, want.code)
    assert np.array_equal(got.ref_idx, want.ref_idx)
    assert np.array_equal(np.isinf(got.rel_gap), np.isinf(want.rel_gap))
    finite = np.isfinite(want.rel_gap)
    np.testing.assert_allclose(got.rel_gap[finite], want.rel_gap[finite], rtol=1e-12, atol=1e-15)

    via_gpu = P.check(inputs, {"out": out}, shape, dtype, runner=gpu_runner, method=METHOD_CUDA, arch=gpu_arch)
    via_host = P.check(inputs, {"out": out}, shape, dtype)
    assert via_gpu.method == METHOD_CUDA and via_host.method == METHOD_NUMPY
    assert not via_gpu.passed and via_gpu.violations == via_host.violations == len(planted)
    assert [v.position for v in via_gpu.first] == planted
    assert via_gpu.first == via_host.first


def test_arch_read_from_runner(gpu_runner: Any, gpu_arch: str) -> None:
    assert cr.arch_of(gpu_runner) == gpu_arch


LARGE = [
    (DEFAULT_CELL.shape, "bf16"),
    (DEFAULT_CELL.shape, "f16"),
    ({"B": 4, "N": 16384, "K": 1024, "D": 256}, "bf16"),
]


@pytest.mark.parametrize("shape,dtype", LARGE, ids=[f"{s}-{d}" for s, d in LARGE])
def test_cuda_reference_at_large_shapes_catches_planted_errors(
    gpu_runner: Any, gpu_arch: str, shape: dict[str, int], dtype: str
) -> None:
    assert P.oracle_method(shape, gpu_runner) == METHOD_CUDA
    inputs = P.make_inputs(shape, dtype, seed=2024)
    x, c = inputs["x"], inputs["c"]
    b_count, n_count, k = shape["B"], shape["N"], shape["K"]

    start = time.perf_counter()
    zeros = np.zeros((b_count, n_count), np.int32)
    first = cr.assess_cuda(gpu_runner, x, c, zeros, shape, dtype, arch=gpu_arch)
    seconds = time.perf_counter() - start
    print(f"\nCUDA reference at {shape} {dtype}: {seconds:.2f} s in all, run phase {first.device_seconds} s")
    ref = first.ref_idx
    assert ((ref >= 0) & (ref < k)).all()

    # An independent check of the reference's argmin on a slice: numpy on 2048 points of one batch.
    b = b_count - 1
    part = oracle.nearest_numpy(x[b : b + 1, :2048], c[b : b + 1], dtype)
    assert np.array_equal(part[0], ref[b, :2048])

    passed = P.check(inputs, {"out": ref}, shape, dtype, runner=gpu_runner)  # arch read from the runner
    assert passed.method == METHOD_CUDA and passed.passed and passed.worst_excess == 0.0
    assert passed.checked == b_count * n_count

    out = ref.copy()
    planted = _plant(out, x, c, dtype, np.random.default_rng(7))
    report = P.check(inputs, {"out": out}, shape, dtype, runner=gpu_runner, arch=gpu_arch)
    assert report.method == METHOD_CUDA and not report.passed
    assert report.violations == len(planted)
    assert [v.position for v in report.first] == planted
    assert report.seconds < cr.timeout_for(shape)


def test_cuda_reference_breaks_ties_to_the_smallest_index(gpu_runner: Any, gpu_arch: str) -> None:
    shape = {"B": 1, "N": 70, "K": 140, "D": 64}
    inputs = P.make_inputs(shape, "bf16", seed=9)
    c = inputs["c"]
    for dup in (3, 5, 33, 70):  # same thread, another thread of the half-warp, another tile
        c[0, dup] = c[0, 2]
    inputs["x"][0, :10] = c[0, 2]  # points sitting on the duplicated centroid
    got = cr.assess_cuda(
        gpu_runner, inputs["x"], c, np.zeros((1, 70), np.int32), shape, "bf16", arch=gpu_arch
    )
    assert (got.ref_idx[0, :10] == 2).all()
    assert np.array_equal(got.ref_idx, P.reference(inputs, shape, "bf16")["out"])
