"""CS010: the interpreter reports output elements no store of the run wrote, at the grid or the loop
that should have covered them; buffers, inputs and complete outputs are not findings."""

from __future__ import annotations

import numpy as np

from cake_core.problems.kmeans_assign import KMEANS_ASSIGN
from cake_core.semantics import SEMANTICS_CODES, run_program


def _line(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def _run(checked, shape):
    inputs = KMEANS_ASSIGN.make_inputs(shape, "bf16", 3)
    inputs.pop("out", None)
    return run_program(checked, inputs, {**shape, "T": "bf16"})


def test_a_floor_grid_leaves_the_last_rows_unwritten(compile_cake, schedule_text):
    text = schedule_text("naive").replace("grid (t, b) over (cdiv(N, R), B)", "grid (t, b) over (N / R, B)")
    result = _run(compile_cake(text, "naive_floor.cake"), {"B": 1, "N": 130, "K": 3, "D": 64})
    (f,) = result.by_code("CS010")
    assert f.kernel == "assign" and f.loc.line == _line(text, "grid (t, b) over (N / R, B)")
    assert "2 of the 130 elements of output `out`" in f.message and "`out[0, 128]`" in f.message
    assert "this grid" in f.label
    assert SEMANTICS_CODES["CS010"].slug == "output-never-written"


def test_whole_tiles_and_complete_outputs_are_clean(compile_cake, schedule_text):
    text = schedule_text("naive").replace("grid (t, b) over (cdiv(N, R), B)", "grid (t, b) over (N / R, B)")
    checked = compile_cake(text, "naive_floor.cake")
    assert "CS010" not in _run(checked, {"B": 1, "N": 128, "K": 3, "D": 64}).codes
    assert "CS010" not in _run(compile_cake(schedule_text("naive"), "naive.cake"), {"B": 1, "N": 130, "K": 3,
                                                                                      "D": 64}).codes  # fmt: skip


def test_an_output_given_as_input_is_not_checked(compile_cake, schedule_text):
    text = schedule_text("naive").replace("grid (t, b) over (cdiv(N, R), B)", "grid (t, b) over (N / R, B)")
    shape = {"B": 1, "N": 130, "K": 3, "D": 64}
    inputs = KMEANS_ASSIGN.make_inputs(shape, "bf16", 3)
    inputs["out"] = np.zeros((1, 130), dtype=np.int32)
    result = run_program(compile_cake(text, "naive_floor.cake"), inputs, {**shape, "T": "bf16"})
    assert "CS010" not in result.codes


LOOPED = """\
kernel zero(out: global f32[B, K, D])
  domain B >= 1, K >= 1, D in {64, 128}
  const R = 128, DC = 32
  grid (t, b) over (cdiv(K, R), B)
  cta warps 4
  role all warps 0..4:
    reg z: f32[R, DC] layout rows
    fill z, value=0.0
    for dc in 0 .. D / DC - 1:
      store out[b, t * R : +R, dc * DC : +DC] <- z, oob=skip
"""


def test_a_short_column_loop_is_named(compile_cake):
    result = run_program(compile_cake(LOOPED, "looped.cake"), {}, {"B": 1, "K": 5, "D": 64})
    (f,) = result.by_code("CS010")
    assert f.loc.line == _line(LOOPED, "for dc in") and "this loop" in f.label
    assert "160 of the 320 elements" in f.message and "`out[0, 0, 32]`" in f.message
