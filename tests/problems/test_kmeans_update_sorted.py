"""kmeans-update's sorted schedule (``schedules/sorted.cake``: a counting sort by cluster written in Cake IR,
then ``segment.add`` over the sorted copy): verified for h200; in the interpreter its sorted keys are the
assignments sorted, its sorted copy holds every point once, and its answer passes the oracle on small ragged
shapes; a planted bug in the scan is caught; clusters past its scan's shared memory are refused; on the GPU it
runs through stage 3 (``bench_candidate``: fresh inputs, poisoned outputs, the full oracle), marked ``gpu``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cake_core import pipeline, plugins
from cake_core.errors import CakeUserError
from cake_core.hostdata import decode
from cake_core.loop.benchmark import bench_candidate
from cake_core.lower.program import program_sizes
from cake_core.problems.kmeans_update import KMEANS_UPDATE as P
from cake_core.runtime.plan import Timing
from cake_core.semantics import run_program
from cake_core.verify.runner import verify_source

SCHEDULE = Path(__file__).resolve().parents[2] / "cake_core/problems/kmeans_update/schedules/sorted.cake"
#: N and K ragged against the 128-row tiles; few clusters (long runs) and many (runs across tiles)
SHAPES = [({"B": 2, "N": 300, "K": 13, "D": 64}, "bf16"), ({"B": 1, "N": 517, "K": 130, "D": 128}, "f16")]
ON_GPU = [({"B": 2, "N": 1001, "K": 37, "D": 64}, "bf16"), ({"B": 3, "N": 517, "K": 130, "D": 128}, "f16"),
          ({"B": 1, "N": 4099, "K": 1024, "D": 256}, "bf16")]  # fmt: skip


def _run(compile_cake, shape: dict, dtype: str, text: str | None = None, seed: int = 4):
    checked = compile_cake(text if text is not None else SCHEDULE.read_text(), "sorted.cake")
    inputs = P.make_inputs(shape, dtype, seed)
    result = run_program(checked, inputs, {**shape, "T": dtype}, policy="random", seed=3)
    return inputs, result


def test_verifies_clean_on_h200() -> None:
    target = plugins.registry().get("targets", "h200")
    diags = list(verify_source(SCHEDULE.read_text(), "sorted.cake", target).diagnostics)
    assert diags == [], [f"{d.code}: {d.message}" for d in diags]


@pytest.mark.parametrize(("shape", "dtype"), SHAPES, ids=["-".join(map(str, s.values())) + f"-{d}" for s, d in SHAPES])
def test_the_interpreter_sorts_and_gives_the_oracles_answer(compile_cake, shape: dict, dtype: str) -> None:
    inputs, result = _run(compile_cake, shape, dtype)
    assert result.ok and result.launches == 7, [str(f) for f in result.findings]
    # the counting sort: keys are the assignments in order, and the sorted copy holds every point once
    assert np.array_equal(result.buffers["keys"], np.sort(inputs["assign"], axis=1))
    x = decode(inputs["x"], dtype)
    for b in range(shape["B"]):
        order = np.argsort(result.buffers["keys"][b], kind="stable")
        got = result.buffers["xs"][b][order]
        assert np.array_equal(np.sort(got, axis=0), np.sort(x[b][np.argsort(inputs["assign"][b])], axis=0))
    outputs = {k: result.outputs[k] for k in ("centroids", "counts")}
    report = P.check(inputs, outputs, shape, dtype)
    assert report.passed, report.summary()


def test_a_scan_that_counts_each_cluster_into_its_own_first_slot_fails(compile_cake, plant) -> None:
    text = plant(SCHEDULE.read_text(), "for d in 1 .. K:", "for d in 0 .. K:")  # inclusive: slots one run late
    inputs, result = _run(compile_cake, *SHAPES[0], text=text)
    assert result.ok  # every slot moves one cluster on: runs land in their neighbours' sums (the last past N)
    report = P.check(inputs, {k: result.outputs[k] for k in ("centroids", "counts")}, *SHAPES[0])
    assert not report.passed and report.first[0].tensor == "centroids"


def test_more_clusters_than_the_scan_holds_are_outside_the_domain(compile_cake) -> None:
    checked = compile_cake(SCHEDULE.read_text(), "sorted.cake")
    with pytest.raises(CakeUserError, match=r"K=1025 is outside the domain .*K <= 1024"):
        program_sizes(checked, {"B": 1, "N": 10, "K": 1025, "D": 64, "T": "bf16"})


@pytest.mark.gpu
@pytest.mark.parametrize(("shape", "dtype"), ON_GPU, ids=["-".join(map(str, s.values())) + f"-{d}" for s, d in ON_GPU])
def test_passes_the_oracle_on_the_gpu(gpu_runner, record, shape: dict, dtype: str) -> None:
    cand = pipeline.Candidate.load(SCHEDULE, plugins.registry().get("targets", "h200"))
    m = bench_candidate(cand, P, shape, dtype, gpu_runner, impl="cake:sorted", commit="test",
                        timing=Timing(warmup=1, reps=3), timeout_s=120)  # fmt: skip
    record("kmeans-update-sorted", m)
    assert (m.status, m.correct) == ("ok", True), (m.status, m.error, m.oracle)
