"""kmeans-update's gather schedule (``schedules/gather.cake``: a counting sort of point indices by cluster,
each cluster's run of slots taken from a per-batch cursor, then the rows gathered from x in sorted order
and summed run by run with ``segment.gather_add``): verified for h200; in the interpreter its order is a
permutation of the points that keeps each cluster's points together, and its answer passes the oracle on
small ragged shapes, with one huge cluster too; a planted bug in the scatter is caught; any K is in its
domain; compiled for h200 without spills, a warp's lanes reading a row together and adding each run with
vector reductions. On the GPU (marked ``gpu``) the skewed case passes the oracle; the problem's own cells
run through stage 3 in tests/lower/test_rows_gpu.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cake_core import pipeline, plugins
from cake_core.loop.benchmark import program_values
from cake_core.lower.program import build_plan, program_sizes
from cake_core.problems.kmeans_update import KMEANS_UPDATE as P
from cake_core.semantics import run_program
from cake_core.verify.runner import verify_source

SCHEDULE = Path(__file__).resolve().parents[2] / "cake_core/problems/kmeans_update/schedules/gather.cake"
#: N and K ragged against the 128-slot tiles; few clusters (long runs) and many (runs across warps)
SHAPES = [({"B": 2, "N": 300, "K": 13, "D": 64}, "bf16"), ({"B": 1, "N": 517, "K": 130, "D": 128}, "f16")]
SKEWED = ({"B": 2, "N": 1001, "K": 40, "D": 64}, "bf16")


def _skewed(shape: dict, dtype: str, seed: int) -> dict[str, np.ndarray]:
    """The problem's inputs with nine points in ten moved into one cluster (runs of hundreds of slots)."""
    inputs = P.make_inputs(shape, dtype, seed)
    rng = np.random.default_rng(seed)
    big = inputs["assign"][:, :1].copy()
    inputs["assign"] = np.where(rng.random(inputs["assign"].shape) < 0.9, big, inputs["assign"]).astype(np.int32)
    return inputs


def _run(compile_cake, shape: dict, dtype: str, inputs: dict, text: str | None = None):
    checked = compile_cake(text if text is not None else SCHEDULE.read_text(), "gather.cake")
    result = run_program(checked, inputs, {**shape, "T": dtype}, policy="random", seed=3)
    assert result.ok and result.launches == 6, [str(f) for f in result.findings]
    return result, P.check(inputs, {k: result.outputs[k] for k in ("centroids", "counts")}, shape, dtype)


def test_verifies_clean_on_h200() -> None:
    target = plugins.registry().get("targets", "h200")
    diags = list(verify_source(SCHEDULE.read_text(), "gather.cake", target).diagnostics)
    assert diags == [], [f"{d.code}: {d.message}" for d in diags]


@pytest.mark.parametrize(("shape", "dtype"), SHAPES, ids=["-".join(map(str, s.values())) + f"-{d}" for s, d in SHAPES])
def test_the_interpreter_sorts_the_indices_and_gives_the_oracles_answer(compile_cake, shape: dict, dtype: str) -> None:
    inputs = P.make_inputs(shape, dtype, 4)
    result, report = _run(compile_cake, shape, dtype, inputs)
    assert report.passed, report.summary()
    for b in range(shape["B"]):
        order = result.buffers["order"][b]
        assert np.array_equal(np.sort(order), np.arange(shape["N"]))  # every point once
        keys = inputs["assign"][b][order]
        assert np.count_nonzero(keys[1:] != keys[:-1]) + 1 == np.unique(keys).size  # one run per cluster


def test_one_huge_cluster_is_summed_right(compile_cake) -> None:
    inputs = _skewed(*SKEWED, seed=6)
    _, report = _run(compile_cake, *SKEWED, inputs)
    assert report.passed, report.summary()


def test_point_indices_one_off_fail_the_oracle(compile_cake, plant) -> None:
    text = plant(SCHEDULE.read_text(), "iota pi, start=t * R", "iota pi, start=t * R + 1")
    shape, dtype = SHAPES[0]
    _, report = _run(compile_cake, shape, dtype, P.make_inputs(shape, dtype, 4), text)
    assert not report.passed and report.first[0].tensor == "centroids"


def test_any_number_of_clusters_is_in_the_domain(compile_cake) -> None:
    checked = compile_cake(SCHEDULE.read_text(), "gather.cake")
    assert program_sizes(checked, {"B": 4, "N": 32768, "K": 4096, "D": 128, "T": "bf16"})["K"] == 4096


def test_compiles_for_h200_without_spills_with_vector_gathers() -> None:
    cand = pipeline.Candidate.load(SCHEDULE, plugins.registry().get("targets", "h200"))
    spec = cand.spec(program_values(cand.check(), P, {"B": 1, "N": 1, "K": 1, "D": 128}, "bf16"))
    result = cand.compile(spec, cache=False)
    assert result.kernels and not [k for k, r in result.kernels.items() if r.spills], result.kernels
    source = cand.build(spec).source
    segments = source[source.index("void __launch_bounds__(128) cake_segments"):]
    segments = segments[: segments.index("\n}\n")]
    # a warp's lanes read a row's 128 bf16 values 4 each, and add each run with one v4 reduction a lane
    assert "const uint2 cake_v" in segments and "red.global.add.v4.f32" in segments, segments


@pytest.mark.gpu
def test_one_huge_cluster_passes_the_oracle_on_the_gpu(gpu_runner) -> None:
    shape, dtype = SKEWED
    cand = pipeline.Candidate.load(SCHEDULE, plugins.registry().get("targets", "h200"))
    values = program_values(cand.check(), P, shape, dtype)
    spec = cand.spec(values)
    plan = build_plan(cand.build(spec), cand.compile(spec, cache=False).cubin, values)
    inputs = _skewed(shape, dtype, seed=7)
    got = gpu_runner.run(plan, inputs)  # the outputs are poisoned by the runner before the run
    assert got.ok, (got.status, got.error)
    report = P.check(inputs, {k: got.outputs[k] for k in ("centroids", "counts")}, shape, dtype)
    assert report.passed, report.summary()
