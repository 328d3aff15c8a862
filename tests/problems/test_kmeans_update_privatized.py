"""kmeans-update's privatized schedules (per-CTA sums in shared memory, one global atomic per cluster and
column per CTA): ``privatized.cake`` (each thread loads its own point's columns) and ``staged.cake`` (points
staged through shared memory by double-buffered ``cp.async``). Each is verified for h200 and run in the
interpreter to the oracle's approval on small ragged shapes; clusters past the shared accumulator are
refused; planted bugs are caught; and on the GPU each runs through stage 3 (``bench_candidate``: fresh
inputs, poisoned outputs, the full oracle), marked ``gpu``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cake_core import pipeline, plugins
from cake_core.errors import CakeUserError
from cake_core.loop.benchmark import bench_candidate
from cake_core.lower.program import program_sizes
from cake_core.problems.kmeans_update import KMEANS_UPDATE as P
from cake_core.runtime.plan import Timing
from cake_core.semantics import run_program
from cake_core.verify.runner import verify_source

SCHEDULES = Path(__file__).resolve().parents[2] / "cake_core/problems/kmeans_update/schedules"
NAMES = ("privatized", "staged")
#: ragged against every tile: N past one CTA's 8192 points (staged: both buffers, two CTAs), K past one
#: 128-row flush or at the accumulator's 1024, D from 64 to 256; the interpreter takes seconds per shape
INTERPRETED = [
    ("privatized", {"B": 2, "N": 300, "K": 13, "D": 64}, "bf16"),
    ("privatized", {"B": 1, "N": 517, "K": 1024, "D": 256}, "f16"),
    ("staged", {"B": 1, "N": 8300, "K": 130, "D": 128}, "f16"),
    ("staged", {"B": 2, "N": 300, "K": 13, "D": 64}, "bf16"),
]
#: on the GPU: one cell per D (one compile each), both element types among them
ON_GPU = [({"B": 2, "N": 300, "K": 13, "D": 64}, "bf16"), ({"B": 3, "N": 8300, "K": 130, "D": 128}, "f16"),
          ({"B": 1, "N": 20001, "K": 1024, "D": 256}, "bf16")]  # fmt: skip


def _text(name: str) -> str:
    return (SCHEDULES / f"{name}.cake").read_text()


def _outputs(checked, shape: dict, dtype: str, seed: int = 5):
    inputs = P.make_inputs(shape, dtype, seed)
    result = run_program(checked, inputs, {**shape, "T": dtype}, policy="random", seed=2)
    outputs = {k: result.outputs[k] for k in ("centroids", "counts")} if result.ok else None
    return inputs, result, outputs


@pytest.mark.parametrize("name", NAMES)
def test_verifies_clean_on_h200(name: str) -> None:
    target = plugins.registry().get("targets", "h200")
    diags = list(verify_source(_text(name), f"{name}.cake", target).diagnostics)
    assert diags == [], [f"{d.code}: {d.message}" for d in diags]


@pytest.mark.parametrize(("name", "shape", "dtype"), INTERPRETED,
                         ids=[f"{n}-{'-'.join(map(str, s.values()))}-{d}" for n, s, d in INTERPRETED])  # fmt: skip
def test_the_interpreter_gives_the_oracles_answer(compile_cake, name: str, shape: dict, dtype: str) -> None:
    inputs, result, outputs = _outputs(compile_cake(_text(name), f"{name}.cake"), shape, dtype)
    assert result.ok and result.launches == 3, [str(f) for f in result.findings]
    report = P.check(inputs, outputs, shape, dtype)
    assert report.passed, report.summary()
    assert np.array_equal(outputs["counts"], P.reference(inputs, shape, dtype)["counts"])


@pytest.mark.parametrize("name", NAMES)
def test_counts_flushed_by_every_column_slice_fail_the_oracle(compile_cake, plant, name: str) -> None:
    text = plant(_text(name), "      if s == 0:\n        load zc <- cnt[k0 : +R]\n        atomic.add",
                 "      if s >= 0:\n        load zc <- cnt[k0 : +R]\n        atomic.add")  # fmt: skip
    shape, dtype = INTERPRETED[0][1:]
    inputs, result, outputs = _outputs(compile_cake(text, "bug.cake"), shape, dtype, seed=6)
    report = P.check(inputs, outputs, shape, dtype)
    assert not report.passed and report.first[0].tensor == "counts"


def test_reading_a_tile_whose_copy_is_still_in_flight_is_caught(compile_cake, plant) -> None:
    text = plant(_text("staged"), "cp.async.wait pending=1\n      bar.sync\n      load ai <- assign[b, r0",
                 "cp.async.wait pending=2\n      bar.sync\n      load ai <- assign[b, r0")  # fmt: skip
    _, result, _ = _outputs(compile_cake(text, "bug.cake"), *INTERPRETED[0][1:])
    assert not result.ok and "CS003" in result.codes, [str(f) for f in result.findings]
    assert "before its copy completed" in result.findings[0].message


@pytest.mark.parametrize("name", NAMES)
def test_more_clusters_than_the_shared_accumulator_holds_are_outside_the_domain(compile_cake, name: str) -> None:
    checked = compile_cake(_text(name), f"{name}.cake")
    assert program_sizes(checked, {"B": 1, "N": 10, "K": 1024, "D": 64, "T": "bf16"})["K"] == 1024
    with pytest.raises(CakeUserError, match=r"K=1025 is outside the domain .*K <= 1024"):
        program_sizes(checked, {"B": 1, "N": 10, "K": 1025, "D": 64, "T": "bf16"})


@pytest.mark.gpu
@pytest.mark.parametrize(("name", "shape", "dtype"), [(n, s, d) for n in NAMES for s, d in ON_GPU],
                         ids=[f"{n}-{'-'.join(map(str, s.values()))}-{d}" for n in NAMES for s, d in ON_GPU])  # fmt: skip
def test_passes_the_oracle_on_the_gpu(gpu_runner, record, name: str, shape: dict, dtype: str) -> None:
    reg = plugins.registry()
    cand = pipeline.Candidate.load(SCHEDULES / f"{name}.cake", reg.get("targets", "h200"))
    m = bench_candidate(cand, P, shape, dtype, gpu_runner, impl=f"cake:{name}", commit="test",
                        timing=Timing(warmup=1, reps=3), timeout_s=120)  # fmt: skip
    record("kmeans-update-privatized", m)
    assert (m.status, m.correct) == ("ok", True), (m.status, m.error, m.oracle)
    assert len(m.oracle) == 3, m.oracle  # fp32 sums by atomics: judged in both untimed runs and after timing
