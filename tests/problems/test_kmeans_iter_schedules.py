"""kmeans-iter's schedules without a GPU: ``naive.cake`` (assignment, then atomic accumulation and a division,
as separate launches) and ``fused.cake`` (the assignment's CTA scatters its rows of x from shared memory
right after the argmin) and ``hopper.cake`` (kmeans-assign's warp-specialized TMA + wgmma assignment whose
consumers scatter their rows, re-read into a wgmma accumulator's layout, with the argmin's indices still in
registers) verify clean for h200, run in the interpreter to the oracle's approval on ragged shapes, and
planted bugs fail the oracle; the fused and hopper ones compile for h200 without spills."""

from __future__ import annotations

from pathlib import Path

import pytest

from cake_core import pipeline, plugins
from cake_core.loop.benchmark import program_values
from cake_core.problems import kmeans_iter
from cake_core.problems.kmeans_iter import KMEANS_ITER as P
from cake_core.semantics import run_program
from cake_core.verify.runner import verify_source

HERE = Path(kmeans_iter.__file__).parent / "schedules"
LAUNCHES = {"naive": 5, "fused": 3, "hopper": 4}

#: N ragged against the 128 points of a CTA, K against the 128 centroids of a tile
SHAPES = [
    ({"B": 2, "N": 300, "K": 13, "D": 64}, "bf16"),
    ({"B": 1, "N": 129, "K": 130, "D": 128}, "f16"),
]


def _text(name: str) -> str:
    return (HERE / f"{name}.cake").read_text()


def _run(checked, shape, dtype, seed=3, **kw):
    inputs = P.make_inputs(shape, dtype, seed)
    result = run_program(checked, inputs, {**shape, "T": dtype}, **kw)
    assert not result.stopped, [str(f) for f in result.findings]
    outputs = {"assign": result.outputs["assign"], "centroids": result.outputs["centroids"]}
    return result, P.check(inputs, outputs, shape, dtype)


@pytest.mark.parametrize("name", sorted(LAUNCHES))
def test_schedule_verifies_clean_on_h200(name):
    target = plugins.registry().get("targets", "h200")
    diags = list(verify_source(_text(name), f"{name}.cake", target).diagnostics)
    assert diags == [], [f"{d.code}: {d.message}" for d in diags]


@pytest.mark.parametrize("name", sorted(LAUNCHES))
@pytest.mark.parametrize("shape,dtype", SHAPES, ids=["B2-N300-K13-D64-bf16", "B1-N129-K130-D128-f16"])
def test_schedule_gives_the_oracles_answer(compile_cake, name, shape, dtype):
    result, report = _run(compile_cake(_text(name), f"{name}.cake"), shape, dtype)
    assert result.ok and result.launches == LAUNCHES[name], [str(f) for f in result.findings]
    assert report.passed, report.summary()


@pytest.mark.parametrize(
    "name,old,new,what",
    [
        # the scatter takes the argmin of the rows past N (zero-filled points) too: phantom members
        ("fused", "atomic.add counts[b, :] <- one, ai, oob=skip", "atomic.add counts[b, :] <- one, ri, oob=skip",
         "rows past N counted"),
        # the read back no longer marks rows past N with -1
        ("fused", "load ai <- assign[b, t * BM : +BM], oob=fill, value=-1",
         "load ai <- assign[b, t * BM : +BM], oob=zero", "tail rows sent to cluster 0"),
        # empty clusters divided without the previous centroid to fall back on
        ("fused", ", c[b, t * R : +R, dc * DC : +DC], oob=zero", ", oob=zero", "empty clusters zeroed"),
        # the rows past N (zeros from TMA, but with a nearest centroid) each count 1
        ("hopper", "load one <- ones[row : +ROWS], oob=zero", "fill one, value=1", "rows past N counted"),
        # each consumer warpgroup scatters the other's rows of x with its own indices
        ("hopper", "load xv <- x[b, row : +ROWS, dc * DC : +DC], oob=zero",
         "load xv <- x[b, t * BM + (1 - self) * ROWS : +ROWS, dc * DC : +DC], oob=zero", "rows mismatched"),
        # the update scatters each point by its neighbour's assignment
        ("naive", "load ai <- assign[b, t * R : +R]", "load ai <- assign[b, t * R + 1 : +R]", "wrong clusters"),
    ],
)  # fmt: skip
def test_planted_bugs_fail_the_oracle(compile_cake, plant, name, old, new, what):
    checked = compile_cake(plant(_text(name), old, new), "bug.cake")
    _, report = _run(checked, *SHAPES[0])
    assert not report.passed, what


@pytest.mark.parametrize(
    "name,kernels",
    [("fused", {"cake_prepare", "cake_assign_scatter", "cake_finalize"}),
     ("hopper", {"cake_prepare", "cake_mark", "cake_assign_scatter", "cake_finalize"})],
)  # fmt: skip
def test_the_fused_schedules_compile_for_h200_without_spills(name, kernels):
    """(naive.cake is compiled for h200 by the GPU tests, test_kmeans_iter_gpu.py; here only the fused ones,
    whose accumulator, argmin and scatter share the registers: the ones that could spill.)"""
    cand = pipeline.Candidate.load(HERE / f"{name}.cake", plugins.registry().get("targets", "h200"))
    spec = cand.spec(program_values(cand.check(), P, {"B": 1, "N": 1, "K": 1, "D": 128}, "bf16"))
    result = cand.compile(spec, cache=False)
    assert {k.split("__")[0] for k in result.kernels} == kernels
    assert not [k for k, r in result.kernels.items() if r.spills], result.kernels
    if name == "hopper":  # the scatter's column pairs are vector reductions, its rows of x pairs of 16-bit loads
        source = cand.build(spec).source
        assert "red.global.add.v2.f32" in source and "const unsigned cake_v" in source
