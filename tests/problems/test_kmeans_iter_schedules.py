"""kmeans-iter's schedules without a GPU: ``naive.cake`` (assignment, then atomic accumulation and a division,
as separate launches) and ``fused.cake`` (the assignment's CTA scatters its rows of x from shared memory
right after the argmin) verify clean for h200, run in the interpreter to the oracle's approval on ragged
shapes, and planted bugs fail the oracle; the fused one compiles for h200 without spills."""

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
LAUNCHES = {"naive": 5, "fused": 3}

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
        # the update scatters each point by its neighbour's assignment
        ("naive", "load ai <- assign[b, t * R : +R]", "load ai <- assign[b, t * R + 1 : +R]", "wrong clusters"),
    ],
)  # fmt: skip
def test_planted_bugs_fail_the_oracle(compile_cake, plant, name, old, new, what):
    checked = compile_cake(plant(_text(name), old, new), "bug.cake")
    _, report = _run(checked, *SHAPES[0])
    assert not report.passed, what


def test_the_fused_schedule_compiles_for_h200_without_spills():
    """(naive.cake is compiled for h200 by the GPU tests, test_kmeans_iter_gpu.py; here only the fused one,
    whose accumulator, argmin and scatter share the registers: the one that could spill.)"""
    cand = pipeline.Candidate.load(HERE / "fused.cake", plugins.registry().get("targets", "h200"))
    spec = cand.spec(program_values(cand.check(), P, {"B": 1, "N": 1, "K": 1, "D": 128}, "bf16"))
    kernels = cand.compile(spec, cache=False).kernels
    assert {k.split("__")[0] for k in kernels} == {"cake_prepare", "cake_assign_scatter", "cake_finalize"}
    assert not [k for k, r in kernels.items() if r.spills], kernels
