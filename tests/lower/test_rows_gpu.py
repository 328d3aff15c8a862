"""The schedules of the `rows` vocabulary on the GPU, through stage 3 as `cake bench` runs them
(:func:`~cake_core.loop.benchmark.bench_candidate`: fresh random inputs, outputs poisoned before each run,
two runs, timing, the problem's full oracle before and after): kmeans-update's ``atomic.cake``,
``vector.cake`` and ``gather.cake`` and knn's ``naive.cake`` and ``fused_topk.cake``, at small ragged
shapes in bf16 and f16; and the tiny kernels of test_rows.py / test_rows_topk.py / test_vector_access.py
(vector reductions and loads, wgmma layouts), whose GPU outputs must equal the interpreter's (bit for
bit where the order of additions is fixed: ties included). Marked ``gpu``: skipped cleanly without an
NVIDIA driver; the code is compiled for h200 (run them on an H100/H200).
With ``CAKE_RESULTS_DIR`` set every stage-3 measurement is also written there.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from cake_core import pipeline, plugins
from cake_core.hostdata import encode
from cake_core.loop.benchmark import bench_candidate
from cake_core.lower.program import build_plan
from cake_core.runtime.plan import Timing
from cake_core.semantics import run_program

HERE = Path(__file__).resolve().parent
PROBLEMS = HERE.parents[1] / "cake_core" / "problems"
TARGET = "h200"

#: (problem, schedule, cells): every size ragged against the schedules' tiles (128 rows, 64 points)
CASES = [
    ("kmeans-update", "kmeans_update/schedules/atomic.cake",
     [{"B": 2, "N": 1001, "K": 37, "D": 64}, {"B": 1, "N": 333, "K": 130, "D": 128},
      {"B": 3, "N": 517, "K": 5, "D": 256}]),
    ("kmeans-update", "kmeans_update/schedules/vector.cake",
     [{"B": 2, "N": 1001, "K": 37, "D": 64}, {"B": 1, "N": 333, "K": 130, "D": 128},
      {"B": 3, "N": 517, "K": 5, "D": 256}]),
    ("kmeans-update", "kmeans_update/schedules/gather.cake",
     [{"B": 2, "N": 1001, "K": 37, "D": 64}, {"B": 3, "N": 517, "K": 130, "D": 128}]),
    ("knn", "knn/schedules/naive.cake",
     [{"B": 2, "M": 129, "N": 1003, "D": 64, "K": 10}, {"B": 1, "M": 77, "N": 300, "D": 256, "K": 1}]),
    ("knn", "knn/schedules/fused_topk.cake",
     [{"B": 2, "M": 129, "N": 1003, "D": 64, "K": 10}, {"B": 1, "M": 200, "N": 517, "D": 128, "K": 32},
      {"B": 1, "M": 77, "N": 300, "D": 256, "K": 1}, {"B": 3, "M": 300, "N": 65, "D": 128, "K": 16}]),
]  # fmt: skip
PARAMS = [(p, s, cell, dt) for p, s, cells in CASES for cell in cells for dt in ("bf16", "f16")]


@pytest.mark.gpu
@pytest.mark.parametrize(("problem", "schedule", "cell", "dtype"), PARAMS,
                         ids=[f"{s.split('/')[-1][:-5]}-{'-'.join(map(str, c.values()))}-{d}" for _, s, c, d in PARAMS])
def test_schedule_passes_the_oracle_on_the_gpu(problem: str, schedule: str, cell: dict, dtype: str, gpu_runner,
                                                record) -> None:  # fmt: skip
    reg = plugins.registry()
    cand = pipeline.Candidate.load(PROBLEMS / schedule, reg.get("targets", TARGET))
    m = bench_candidate(cand, reg.get("problems", problem), cell, dtype, gpu_runner, impl=f"cake:{Path(schedule).stem}",
                        commit="test", timing=Timing(warmup=1, reps=3), timeout_s=120)  # fmt: skip
    record("rows", m)
    assert (m.status, m.correct) == ("ok", True), (m.status, m.error, m.oracle)
    # kmeans-update's centroids are fp32 sums in atomic order: judged in both untimed runs, then after timing
    assert len(m.oracle) == (3 if problem == "kmeans-update" else 2), m.oracle


def _tests(name: str) -> ModuleType:
    """A sibling test module (its kernels), loaded by path."""
    spec = importlib.util.spec_from_file_location(f"cake_rows_{name}", HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _gpu_and_interpreter(runner, text: str, sizes: dict, inputs: dict) -> tuple[dict, dict]:
    """The outputs of a one-kernel module on the GPU (h200 code, outputs poisoned first) and in the interpreter."""
    cand = pipeline.Candidate(pipeline.load_text(text, "rows.cake"), plugins.registry().get("targets", TARGET))
    spec = cand.spec(sizes)
    plan = build_plan(cand.build(spec), cand.compile(spec, cache=False).cubin, sizes)
    got = runner.run(plan, inputs)
    assert got.ok, (got.status, got.error)
    want = run_program(cand.check(), inputs, sizes)
    assert want.ok, [str(f) for f in want.findings]
    return got.outputs, want.outputs


@pytest.mark.gpu
def test_loads_and_stores_through_shared_memory_match_the_interpreter(gpu_runner) -> None:
    a = np.random.default_rng(1).standard_normal((250, 8)).astype(np.float32)  # 3 CTAs of 96 rows, the last ragged
    got, want = _gpu_and_interpreter(gpu_runner, _tests("test_rows").COPY, {"N": 250, "C": 8, "T": "f32"}, {"a": a})
    assert np.array_equal(got["o"], want["o"]) and np.array_equal(got["o"], a)


@pytest.mark.gpu
def test_an_mma_accumulator_stored_to_shared_memory_matches_the_interpreter(gpu_runner) -> None:
    rng = np.random.default_rng(2)
    a, b = (rng.standard_normal(s).astype(np.float16) for s in ((64, 16), (32, 16)))
    got, want = _gpu_and_interpreter(gpu_runner, _tests("test_rows").MMA_TO_SHARED, {"T": "f16"}, {"a": a, "b": b})
    # the same products of f16 values, summed in another order
    assert np.allclose(got["o"], want["o"], rtol=1e-5, atol=1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("k", [1, 5])
def test_top_k_lists_match_the_interpreter_ties_and_nans_included(gpu_runner, k: int) -> None:
    rng = np.random.default_rng(3 + k)
    s = rng.integers(-3, 4, size=(250, 53)).astype(np.float32)  # integer scores: exact, many ties
    s[rng.random(s.shape) < 0.05] = np.nan  # never candidates
    bias = rng.integers(0, 3, size=53).astype(np.float32)
    sizes = {"R0": 250, "C0": 53, "KK": k}
    got, want = _gpu_and_interpreter(gpu_runner, _tests("test_rows_topk").TOPK, sizes, {"s": s, "bias": bias})
    assert np.array_equal(got["out"], want["out"]) and np.array_equal(got["out1"], want["out"])
    assert np.array_equal(want["out1"], want["out"])


@pytest.mark.gpu
@pytest.mark.parametrize("op", ["atomic.add", "segment.add"])
def test_scatters_into_shared_memory_match_the_interpreter(gpu_runner, op: str) -> None:
    rng = np.random.default_rng(4)
    v = rng.integers(-50, 50, size=(250, 4)).astype(np.int32)  # integer sums: exact in any order
    ix = np.sort(rng.integers(-3, 70, size=250)).astype(np.int32)  # runs; -3..-1 and 64..69 are skipped
    text = _tests("test_rows").SEGMENTS.replace("OP", op)
    got, want = _gpu_and_interpreter(gpu_runner, text, {"N": 250, "C": 4, "V": "i32"}, {"v": v, "ix": ix})
    assert np.array_equal(got["d"], want["d"])
    keep = (ix >= 0) & (ix < 64)
    assert want["d"].sum() == v[keep].sum()


def _scatter_inputs(n: int, k: int, c: int, t: str, seed: int, counts: bool) -> dict:
    rng = np.random.default_rng(seed)
    v = rng.integers(-8, 9, size=(n, c)).astype(np.float32)  # small integers: exact sums in any order
    out = {"v": encode(v, t),
           "ix": rng.integers(-2, k + 2, size=n).astype(np.int32),  # some outside d: skipped
           "d": rng.integers(-4, 5, size=(k, c)).astype(np.float32)}  # fmt: skip
    if counts:
        out["cnt"] = rng.integers(0, 3, size=k).astype(np.int32)
    return out


@pytest.mark.gpu
@pytest.mark.parametrize(("c", "w", "cols", "t"), [(8, 8, ":", "f32"), (6, 6, ":", "bf16"), (8, 4, "1 : +4", "f32"),
                                                   (8, 4, "4 : +4", "bf16")])  # fmt: skip
def test_vector_scatter_of_rows_matches_the_interpreter(gpu_runner, c, w, cols, t):
    vec = _tests("test_vector_access")
    inputs = _scatter_inputs(250, 37, c, t, seed=c + w, counts=False)  # 4 CTAs of 64 rows, the last ragged
    sizes = {"N": 250, "K": 37, "C": c, "T": t}
    got, want = _gpu_and_interpreter(gpu_runner, vec._kernel(vec.ROWS, c, w, cols), sizes, inputs)
    assert np.array_equal(got["d"], want["d"])


@pytest.mark.gpu
@pytest.mark.parametrize("t", ["f32", "bf16"])
def test_wgmma_layout_scatter_matches_the_interpreter(gpu_runner, t):
    vec = _tests("test_vector_access")
    inputs = _scatter_inputs(300, 21, 16, t, seed=7, counts=True)  # 3 warpgroups of 128 rows, the last ragged
    sizes = {"N": 300, "K": 21, "C": 16, "T": t}
    got, want = _gpu_and_interpreter(gpu_runner, vec._kernel(vec.WGMMA, 16), sizes, inputs)
    assert np.array_equal(got["d"], want["d"]) and np.array_equal(got["cnt"], want["cnt"])
