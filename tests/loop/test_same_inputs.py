"""Stage 3 makes each input set once per run: every candidate (and the baseline) is checked and timed on the
same data, and a 512 MiB input is not drawn again for each candidate."""

from __future__ import annotations

import collections
from pathlib import Path

import numpy as np
import pytest
from cake_core.loop.records import Budgets
from cake_core.loop.run import RunOptions, run
from cake_core.problems.kmeans_assign.problem import KMeansAssign
from cake_core.problems.problem import SameInputs


def test_inputs_are_made_once_per_seed_read_only_and_forgotten_for_a_new_shape() -> None:
    made = collections.Counter()
    problem = KMeansAssign()
    real = problem.make_inputs

    class Counting:
        name = problem.name

        def make_inputs(self, shape, dtype, seed):  # type: ignore[no-untyped-def]
            made[(shape["N"], seed)] += 1
            return real(shape, dtype, seed)

    same = SameInputs(Counting())  # type: ignore[arg-type]
    cell = {"B": 1, "N": 64, "K": 8, "D": 64}
    a = same.make_inputs(cell, "bf16", 0)
    assert same.make_inputs(cell, "bf16", 0) is a and same.make_inputs(cell, "bf16", 1) is not a
    assert made == {(64, 0): 1, (64, 1): 1}
    with pytest.raises(ValueError):
        a["x"][0, 0, 0] = 1
    np.testing.assert_array_equal(a["x"], real(cell, "bf16", 0)["x"])
    same.make_inputs({**cell, "N": 65}, "bf16", 0)
    same.make_inputs(cell, "bf16", 0)  # the first shape's were dropped for the second's: made again
    assert made[(64, 0)] == 2
    assert same.name == problem.name  # everything else is the problem's


def test_a_run_makes_each_input_set_once(reference_gpu, small_cell, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    seeds = collections.Counter()
    real = KMeansAssign.make_inputs

    def counting(self, shape, dtype, seed):  # type: ignore[no-untyped-def]
        if dict(shape) == small_cell:  # the run's cell (the interpreter gate makes its own, smaller ones)
            seeds[seed] += 1
        return real(self, shape, dtype, seed)

    monkeypatch.setattr(KMeansAssign, "make_inputs", counting)
    summary = run(RunOptions("kmeans-assign", "h200", tmp_path / "run", seed=4, workers=1, budgets=Budgets()),
                  log=lambda _: None)  # fmt: skip
    assert summary.spent.gpu_benchmarks == 5
    assert seeds == {4: 1, 5: 1}  # checked on seed 4, timed on seed 5: once each for five candidates


def test_a_runner_keeps_every_input_set_made_before_and_after_it_is_given() -> None:
    kept: list[dict] = []

    class Runner:
        def keep(self, arrays):  # type: ignore[no-untyped-def]
            assert all(not a.flags.writeable for a in arrays.values())
            kept.append(arrays)

    same = SameInputs(KMeansAssign())
    cell = {"B": 1, "N": 64, "K": 8, "D": 64}
    first = same.make_inputs(cell, "bf16", 0)
    same.keep_in(Runner())
    assert kept == [first]
    second = same.make_inputs(cell, "bf16", 1)
    same.make_inputs(cell, "bf16", 1)  # made before: kept already
    assert [id(k) for k in kept] == [id(first), id(second)]
