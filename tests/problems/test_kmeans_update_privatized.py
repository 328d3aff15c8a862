"""kmeans-update's privatized schedule (``schedules/privatized.cake``: per-CTA sums in shared memory, one
global atomic per cluster and column per CTA): verified for h200, run in the interpreter to the oracle's
approval on small ragged shapes, clusters past its shared accumulator refused, a planted bug caught; and on
the GPU through stage 3 (``bench_candidate``: fresh inputs, poisoned outputs, the full oracle), marked ``gpu``."""

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

SCHEDULE = Path(__file__).resolve().parents[2] / "cake_core/problems/kmeans_update/schedules/privatized.cake"
#: ragged against every tile: N past one CTA's 8192 points, K past one 128-row flush, D from 64 to 256
SHAPES = [
    ({"B": 2, "N": 300, "K": 13, "D": 64}, "bf16"),
    ({"B": 1, "N": 8300, "K": 130, "D": 128}, "f16"),
    ({"B": 1, "N": 517, "K": 1024, "D": 256}, "bf16"),
]


def _checked(compile_cake, text: str | None = None):
    return compile_cake(text if text is not None else SCHEDULE.read_text(), "privatized.cake")


def test_verifies_clean_on_h200() -> None:
    target = plugins.registry().get("targets", "h200")
    diags = list(verify_source(SCHEDULE.read_text(), "privatized.cake", target).diagnostics)
    assert diags == [], [f"{d.code}: {d.message}" for d in diags]


@pytest.mark.parametrize(("shape", "dtype"), SHAPES, ids=lambda v: "-".join(f"{k}{x}" for k, x in v.items())
                         if isinstance(v, dict) else v)  # fmt: skip
def test_the_interpreter_gives_the_oracles_answer(compile_cake, shape: dict, dtype: str) -> None:
    inputs = P.make_inputs(shape, dtype, 5)
    result = run_program(_checked(compile_cake), inputs, {**shape, "T": dtype}, policy="random", seed=2)
    assert result.ok and result.launches == 3, [str(f) for f in result.findings]
    outputs = {k: result.outputs[k] for k in ("centroids", "counts")}
    report = P.check(inputs, outputs, shape, dtype)
    assert report.passed, report.summary()
    assert np.array_equal(outputs["counts"], P.reference(inputs, shape, dtype)["counts"])


def test_counts_flushed_by_every_column_slice_fail_the_oracle(compile_cake, plant) -> None:
    text = plant(SCHEDULE.read_text(), "      if s == 0:\n        load zc <- cnt[k0 : +R]\n        atomic.add",
                 "      if s >= 0:\n        load zc <- cnt[k0 : +R]\n        atomic.add")  # fmt: skip
    shape, dtype = SHAPES[0]
    inputs = P.make_inputs(shape, dtype, 6)
    result = run_program(_checked(compile_cake, text), inputs, {**shape, "T": dtype})
    report = P.check(inputs, {k: result.outputs[k] for k in ("centroids", "counts")}, shape, dtype)
    assert not report.passed and report.first[0].tensor == "counts"


def test_more_clusters_than_the_shared_accumulator_holds_are_outside_the_domain(compile_cake) -> None:
    checked = _checked(compile_cake)
    assert program_sizes(checked, {"B": 1, "N": 10, "K": 1024, "D": 64, "T": "bf16"})["K"] == 1024
    with pytest.raises(CakeUserError, match=r"K=1025 is outside the domain .*K <= 1024"):
        program_sizes(checked, {"B": 1, "N": 10, "K": 1025, "D": 64, "T": "bf16"})


@pytest.mark.gpu
@pytest.mark.parametrize(("shape", "dtype"), [(s, dt) for s, _ in SHAPES for dt in ("bf16", "f16")],
                         ids=lambda v: "-".join(f"{k}{x}" for k, x in v.items()) if isinstance(v, dict) else v)  # fmt: skip
def test_passes_the_oracle_on_the_gpu(gpu_runner, shape: dict, dtype: str) -> None:
    reg = plugins.registry()
    cand = pipeline.Candidate.load(SCHEDULE, reg.get("targets", "h200"))
    m = bench_candidate(cand, P, shape, dtype, gpu_runner, impl="cake:privatized", commit="test",
                        timing=Timing(warmup=1, reps=3), timeout_s=120)  # fmt: skip
    assert (m.status, m.correct) == ("ok", True), (m.status, m.error, m.oracle)
    assert len(m.oracle) == 3, m.oracle  # fp32 sums by atomics: judged in both untimed runs and after timing
