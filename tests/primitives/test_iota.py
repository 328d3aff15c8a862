"""`iota`: consecutive row indices in a `rows` register tile. Its type rules, its CPU semantics (a start
that depends on the CTA), a lowering that compiles for h200, and the GPU's answer equal to the
interpreter's (marked ``gpu``)."""

from __future__ import annotations

import numpy as np
import pytest

from cake_core import pipeline, plugins
from cake_core.lower.program import build_plan
from cake_core.semantics import run_program

#: R = 96 rows over 64 threads: the second row of half the threads does not exist
IOTA = """
kernel iota_k(o: global i32[N])
  domain N >= 1
  const R = 96
  grid (t) over (cdiv(N, R))
  cta warps 2
  role all warps 0..2:
    reg k: i32[R] layout rows
    LINE
    store o[t * R : +R] <- k, oob=skip
"""
GOOD = "iota k, start=t * R + 5"


def test_each_row_gets_start_plus_its_index(compile_cake) -> None:
    result = run_program(compile_cake(IOTA.replace("LINE", GOOD)), {"o": np.full(200, -9, np.int32)}, {})
    assert result.ok, [str(f) for f in result.findings]
    assert np.array_equal(result.outputs["o"], np.arange(200) + 5)


def test_start_defaults_to_zero(compile_cake) -> None:
    result = run_program(compile_cake(IOTA.replace("LINE", "iota k")), {"o": np.full(96, -9, np.int32)}, {})
    assert np.array_equal(result.outputs["o"], np.arange(96))


@pytest.mark.parametrize(("line", "message"), [
    ("reg f: f32[R] layout rows\n    iota f", "integer indices"),
    ("reg m: i32[R, 2] layout rows\n    iota m", "a [R] tile of indices"),
])  # fmt: skip
def test_type_rules(check, line: str, message: str) -> None:
    checked = check(IOTA.replace("LINE", line))
    assert not checked.ok and any(message in d.message for d in checked.diagnostics), [
        d.message for d in checked.diagnostics
    ]


def _candidate() -> pipeline.Candidate:
    return pipeline.Candidate(pipeline.load_text(IOTA.replace("LINE", GOOD), "iota.cake"),
                              plugins.registry().get("targets", "h200"))  # fmt: skip


def test_the_lowering_compiles_for_h200_without_spills() -> None:
    cand = _candidate()
    spec = cand.spec({"N": 200})
    assert "+ 5" in cand.build(spec).source
    result = cand.compile(spec, cache=False)
    assert result.kernels and not [name for name, k in result.kernels.items() if k.spills]


@pytest.mark.gpu
def test_the_gpu_gives_the_interpreters_answer(gpu_runner) -> None:
    cand, sizes = _candidate(), {"N": 1000}
    spec = cand.spec(sizes)
    plan = build_plan(cand.build(spec), cand.compile(spec, cache=False).cubin, sizes)
    got = gpu_runner.run(plan, {})  # `o` is the plan's output: the runner poisons it (-1) before the run
    assert got.ok, (got.status, got.error)
    want = run_program(cand.check(), {"o": np.full(1000, -1, np.int32)}, sizes)
    assert np.array_equal(got.outputs["o"], want.outputs["o"]) and want.outputs["o"][-1] == 1004
