"""kmeans-update's ``vector.cake``: atomic.cake's global scatter with the points' indices in `wgmma_rows`
registers and their rows in a `wgmma_acc` layout, so a quad of lanes adds 8 consecutive columns of a row
with ``red.global.add.v2.f32``. Verified for h200, run in the interpreter to the oracle's approval on
ragged shapes, a planted bug caught, compiled for h200 without spills with the vector forms in its code.
On the GPU it runs through stage 3 with atomic.cake (tests/lower/test_rows_gpu.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cake_core import pipeline, plugins
from cake_core.loop.benchmark import program_values
from cake_core.problems.kmeans_update import KMEANS_UPDATE as P
from cake_core.semantics import run_program
from cake_core.verify.runner import verify_source

SCHEDULE = Path(__file__).resolve().parents[2] / "cake_core/problems/kmeans_update/schedules/vector.cake"
#: ragged against the 256 points of a CTA and the 128 clusters of a zeroing tile
SHAPES = [({"B": 2, "N": 300, "K": 13, "D": 64}, "bf16"), ({"B": 1, "N": 517, "K": 130, "D": 256}, "f16")]


def _outputs(checked, shape: dict, dtype: str, seed: int = 5):
    inputs = P.make_inputs(shape, dtype, seed)
    result = run_program(checked, inputs, {**shape, "T": dtype}, policy="random", seed=2)
    assert result.ok and result.launches == 3, [str(f) for f in result.findings]
    return inputs, {k: result.outputs[k] for k in ("centroids", "counts")}


def test_verifies_clean_on_h200() -> None:
    diags = list(verify_source(SCHEDULE.read_text(), "vector.cake", plugins.registry().get("targets", "h200")).diagnostics)
    assert diags == [], [f"{d.code}: {d.message}" for d in diags]


@pytest.mark.parametrize(("shape", "dtype"), SHAPES, ids=["B2-N300-K13-D64-bf16", "B1-N517-K130-D256-f16"])
def test_the_interpreter_gives_the_oracles_answer(compile_cake, shape: dict, dtype: str) -> None:
    inputs, outputs = _outputs(compile_cake(SCHEDULE.read_text(), "vector.cake"), shape, dtype)
    assert P.check(inputs, outputs, shape, dtype).passed
    assert np.array_equal(outputs["counts"], P.reference(inputs, shape, dtype)["counts"])


def test_points_past_n_sent_to_cluster_0_fail_the_oracle(compile_cake, plant) -> None:
    text = plant(SCHEDULE.read_text(), "load ai <- assign[b, row : +R], oob=fill, value=-1",
                 "load ai <- assign[b, row : +R], oob=zero")
    shape, dtype = SHAPES[0]
    inputs, outputs = _outputs(compile_cake(text, "bug.cake"), shape, dtype)
    assert not P.check(inputs, outputs, shape, dtype).passed


def test_compiles_for_h200_without_spills_with_vector_reductions() -> None:
    cand = pipeline.Candidate.load(SCHEDULE, plugins.registry().get("targets", "h200"))
    spec = cand.spec(program_values(cand.check(), P, {"B": 1, "N": 1, "K": 1, "D": 128}, "bf16"))
    result = cand.compile(spec, cache=False)
    assert result.kernels and not [k for k, r in result.kernels.items() if r.spills], result.kernels
    source = cand.build(spec).source
    assert "red.global.add.v2.f32" in source and "red.global.add.f32" not in source
