"""The knn / knn-ip CUDA reference on a real GPU (marked ``gpu``, skipped cleanly without a driver or GPU):
it agrees with the numpy assessment at small ragged shapes, judges a right answer right and planted
errors wrong at large cells (the headline cell included, against float64 torch where torch is there),
and a far-off answer (the reference's slow path) still finishes within its time limit."""

from __future__ import annotations

import time
from typing import Any

import attrs
import numpy as np
import pytest

from cake_core.problems.knn import DEFAULT_CELL, KNN, KNN_IP
from cake_core.problems.knn import cuda_reference as cr
from cake_core.problems.knn import oracle
from cake_core.problems.problem import METHOD_CUDA, METHOD_NUMPY

pytestmark = pytest.mark.gpu

SMALL = [
    ({"B": 2, "M": 130, "N": 1000, "D": 64, "K": 10}, "bf16", False),
    ({"B": 1, "M": 65, "N": 4099, "D": 128, "K": 100}, "f16", True),
    ({"B": 3, "M": 7, "N": 128, "D": 256, "K": 128}, "bf16", False),
    ({"B": 1, "M": 300, "N": 20000, "D": 128, "K": 1}, "f16", True),
]


def _plant(out: np.ndarray, n: int, rng: np.random.Generator) -> list[tuple[int, int, int]]:
    """Out of range, a repeat and the last rank's point swapped for an unlisted far one, at distinct rows."""
    b, m, k = out.shape
    rows = [(int(r // m), int(r % m)) for r in rng.permutation(b * m)[:3]]
    (b0, m0), (b1, m1), (b2, m2) = rows
    out[b0, m0, 0] = n
    planted = [(b0, m0, 0)]
    if k > 1:
        out[b1, m1, k - 1] = out[b1, m1, 0]
        planted.append((b1, m1, k - 1))
    if n > 2 * k:
        out[b2, m2, k - 1] = next(i for i in range(n - 1, -1, -1) if i not in set(out[b2, m2].tolist()))
        planted.append((b2, m2, k - 1))  # the highest unlisted index: almost surely far
    return sorted(planted)


@pytest.mark.parametrize("shape,dtype,inner", SMALL, ids=[f"{s}-{d}-{'ip' if i else 'l2'}" for s, d, i in SMALL])
def test_cuda_reference_agrees_with_numpy(gpu_runner: Any, gpu_arch: str, shape, dtype, inner) -> None:
    problem = KNN_IP if inner else KNN
    inputs = problem.make_inputs(shape, dtype, seed=shape["N"])
    out = problem.reference(inputs, shape, dtype)["out"]
    planted = _plant(out, shape["N"], np.random.default_rng(1))
    got = cr.assess_cuda(gpu_runner, inputs["q"], inputs["x"], out, shape, dtype, inner, problem.rtol, arch=gpu_arch)
    want = oracle.assess_numpy(inputs["q"], inputs["x"], out, dtype, inner, problem.rtol)
    for field in ("code", "nearer", "fill", "near_i"):
        assert np.array_equal(getattr(got, field), getattr(want, field)), field
    for field in ("score", "thr", "near_s"):
        np.testing.assert_allclose(getattr(got, field), getattr(want, field), rtol=1e-12, atol=1e-12)
    via_gpu = problem.check(inputs, {"out": out}, shape, dtype, runner=gpu_runner, method=METHOD_CUDA)
    via_host = problem.check(inputs, {"out": out}, shape, dtype, method=METHOD_NUMPY)
    assert via_gpu.method == METHOD_CUDA and not via_gpu.passed
    assert via_gpu.violations == via_host.violations >= len(planted) and via_gpu.first == via_host.first
    assert {v.position for v in via_gpu.first} >= set(planted)


def test_a_large_cell_against_numpy(gpu_runner: Any) -> None:
    shape, dtype = {"B": 1, "M": 256, "N": 262147, "D": 128, "K": 100}, "f16"
    problem = attrs.evolve(KNN, host_limit=1 << 34)
    inputs = problem.make_inputs(shape, dtype, seed=11)
    out = problem.reference(inputs, shape, dtype)["out"]
    assert problem.oracle_method(shape, gpu_runner) == METHOD_CUDA
    right = problem.check(inputs, {"out": out}, shape, dtype, runner=gpu_runner)
    assert right.method == METHOD_CUDA and right.passed and right.worst_excess < 1e-6, right.summary()
    planted = _plant(out, shape["N"], np.random.default_rng(2))
    wrong = problem.check(inputs, {"out": out}, shape, dtype, runner=gpu_runner)
    assert not wrong.passed and wrong.violations == len(planted)
    assert [v.position for v in wrong.first] == planted


def _torch_best(q: np.ndarray, x: np.ndarray, k: int, inner: bool) -> np.ndarray:
    """The k best by float64 scores computed with torch on the GPU, in blocks of queries."""
    torch = pytest.importorskip("torch")
    qd = torch.from_numpy(q[0].astype(np.float64)).cuda()
    xd = torch.from_numpy(x[0].astype(np.float64)).cuda()
    xx = (xd * xd).sum(1)
    out = []
    for r0 in range(0, qd.shape[0], 512):
        dots = qd[r0 : r0 + 512] @ xd.T
        score = -dots if inner else xx[None, :] - 2.0 * dots
        out.append(torch.topk(score, k, dim=1, largest=False, sorted=True).indices.int().cpu().numpy())
    del qd, xd, xx
    torch.cuda.empty_cache()
    return np.concatenate(out)[None]


@pytest.mark.parametrize("inner", [False, True], ids=["l2", "ip"])
def test_the_headline_cell(gpu_runner: Any, inner: bool, record) -> None:
    problem = KNN_IP if inner else KNN
    shape, dtype = {**DEFAULT_CELL.shape, "K": 100}, "f16"
    inputs = problem.make_inputs(shape, dtype, seed=3)
    out = _torch_best(inputs["q"], inputs["x"], shape["K"], inner)
    start = time.perf_counter()
    right = problem.check(inputs, {"out": out}, shape, dtype, runner=gpu_runner)
    seconds = time.perf_counter() - start
    record("knn_oracle", {"cell": shape, "metric": problem.metric, "answer": "torch fp64",
                          "seconds": seconds, "summary": right.summary()})  # fmt: skip
    assert right.method == METHOD_CUDA and right.passed, right.summary()
    planted = _plant(out, shape["N"], np.random.default_rng(3))
    wrong = problem.check(inputs, {"out": out}, shape, dtype, runner=gpu_runner)
    assert wrong.violations == len(planted) and [v.position for v in wrong.first] == planted


def test_a_far_off_answer_is_judged_in_time(gpu_runner: Any, record) -> None:
    """The first K points for every query: distinct and in range, but far: nearly every point scores below
    their thresholds, the reference's slow path (an atomic per point and query)."""
    shape, dtype = DEFAULT_CELL.shape, "f16"
    inputs = KNN.make_inputs(shape, dtype, seed=4)
    out = np.broadcast_to(np.arange(shape["K"], dtype=np.int32), (1, shape["M"], shape["K"])).copy()
    start = time.perf_counter()
    report = KNN.check(inputs, {"out": out}, shape, dtype, runner=gpu_runner)
    seconds = time.perf_counter() - start
    record("knn_oracle", {"cell": shape, "answer": "first K points", "seconds": seconds,
                          "summary": report.summary()})  # fmt: skip
    assert not report.passed and report.violations > 0.9 * out.size
    assert seconds < cr.timeout_for(shape)


HOPPER_CELLS = [
    ("hopper", {"B": 2, "M": 129, "N": 1003, "D": 64, "K": 10}, "bf16"),
    ("hopper", {"B": 1, "M": 200, "N": 517, "D": 128, "K": 32}, "f16"),
    ("hopper", {"B": 1, "M": 77, "N": 300, "D": 256, "K": 1}, "bf16"),
    ("hopper", {"B": 3, "M": 300, "N": 65, "D": 128, "K": 16}, "f16"),
    ("hopper_split", {"B": 2, "M": 129, "N": 1003, "D": 64, "K": 10}, "f16"),
    ("hopper_split", {"B": 1, "M": 77, "N": 300, "D": 256, "K": 16}, "bf16"),  # 5 point tiles over 4 splits
    ("hopper_split", {"B": 3, "M": 300, "N": 65, "D": 128, "K": 1}, "f16"),  # two splits with no tile
    ("hopper_split", {"B": 1, "M": 130, "N": 20011, "D": 128, "K": 16}, "bf16"),  # every quad thread's list fills
    ("ip/hopper", {"B": 2, "M": 129, "N": 1003, "D": 64, "K": 10}, "bf16"),  # knn-ip's, under ip/schedules/
    ("ip/hopper", {"B": 1, "M": 200, "N": 517, "D": 256, "K": 32}, "f16"),
    ("ip/hopper_split", {"B": 2, "M": 129, "N": 1003, "D": 64, "K": 10}, "f16"),
    ("ip/hopper_split", {"B": 1, "M": 77, "N": 300, "D": 256, "K": 16}, "bf16"),
    ("ip/hopper_split", {"B": 1, "M": 200, "N": 9001, "D": 128, "K": 1}, "f16"),
    # shared lists, k = 100: ragged M and N, the lists fill and every split's then rejects almost every tile
    ("hopper_split_big", {"B": 1, "M": 130, "N": 20011, "D": 128, "K": 100}, "f16"),
    ("ip/hopper_split_big", {"B": 2, "M": 77, "N": 3001, "D": 128, "K": 100}, "bf16"),
]


@pytest.mark.parametrize("schedule,shape,dtype", HOPPER_CELLS,
                         ids=[f"{n}-{'-'.join(map(str, s.values()))}-{d}" for n, s, d in HOPPER_CELLS])  # fmt: skip
def test_the_hopper_schedules_pass_the_oracle(gpu_runner: Any, schedule: str, shape, dtype, record) -> None:
    """schedules/hopper.cake, hopper_split.cake, hopper_split_big.cake and their knn-ip versions under
    ip/schedules/ through stage 3 (two checked runs, timing, the oracle after): hopper's wgmma accumulators
    reach the top-k fold through shared memory, hopper_split's from registers (per-thread lists merged by
    shuffles), hopper_split_big's from registers into sorted lists in shared memory."""
    from pathlib import Path

    from cake_core import pipeline, plugins
    from cake_core.loop.benchmark import bench_candidate
    from cake_core.problems import knn
    from cake_core.runtime.plan import Timing

    info = gpu_runner.device_info()
    if "H200" not in info.name and "H100" not in info.name:
        pytest.skip(f"{schedule}.cake is compiled for h200; this GPU is {info.name}")
    folder, _, name = schedule.rpartition("/")  # "ip/hopper": knn-ip's hopper.cake
    path = Path(knn.__file__).parent / folder / "schedules" / f"{name}.cake"
    cand = pipeline.Candidate.load(path, plugins.registry().get("targets", "h200"))
    problem = KNN_IP if folder == "ip" else KNN
    m = bench_candidate(cand, problem, shape, dtype, gpu_runner, impl=f"cake:{schedule}", commit="test",
                        timing=Timing(warmup=1, reps=3), timeout_s=120)  # fmt: skip
    record("knn_hopper", m)
    assert (m.status, m.correct) == ("ok", True), (m.status, m.error, m.oracle)
