"""`topk.update` and `topk.reduce` lowered to CUDA and compiled by NVRTC without a GPU, and both knn schedules
compiled for h200 without spills. What the code computes is checked on the GPU (test_rows_gpu.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cake_core import pipeline, plugins
from cake_core.errors import NotLoweredError
from cake_core.loop.benchmark import program_values
from cake_core.runtime.nvrtc import CompileResult

KNN = Path(__file__).resolve().parents[2] / "cake_core" / "problems" / "knn" / "schedules"

#: scores folded from a `rows` register tile (split 1) and from a shared tile split over P threads per
#: row; the split lists merge by shuffles and through `scratch`, the others in their own thread
TOPK = """
kernel tk(s: global f32[R0, C0], bias: global f32[C0], out: global i32[R0, KK], out1: global i32[R0, KK])
  domain R0 >= 1, C0 >= 1, KK in {1, 5}
  const R = 96, C = 16, P = 2
  grid (t) over (cdiv(R0, R))
  cta warps 2
  smem sc: f32[R, C] pad 4
  smem red: i32[2 * R * KK]
  role all warps 0..2:
    reg tile: f32[R, C] layout rows
    reg tv: f32[R * P, KK] layout rows
    reg ti: i32[R * P, KK] layout rows
    reg uv: f32[R, KK] layout rows
    reg ui: i32[R, KK] layout rows
    reg fv: f32[R, KK] layout rows
    reg fi: i32[R, KK] layout rows
    fill tv, value=inf
    fill ti, value=-1
    fill uv, value=inf
    fill ui, value=-1
    for c in 0 .. cdiv(C0, C):
      load tile <- s[t * R : +R, c * C : +C], oob=zero
      topk.update uv, ui <- tile, bias[c * C : +C], base=c * C, k=KK, scale=-2.0, oob=skip
      store sc <- tile
      bar.sync
      topk.update tv, ti <- sc, bias[c * C : +C], base=c * C, k=KK, scale=-2.0, split=P, limit=C0, oob=skip
      bar.sync
    topk.reduce fv, fi <- tv, ti, red, k=KK
    store out[t * R : +R, :] <- fi, oob=skip
    topk.reduce fv, fi <- uv, ui, k=KK
    store out1[t * R : +R, :] <- fi, oob=skip
"""

#: partial lists of two role instances gathered in shared memory, merged by every thread of one
STAGED = """
kernel st(out: global i32[M, KK])
  domain M >= 1, KK in {4}
  const R = 64, P = 2
  grid (t) over (1)
  cta warps 4
  smem pv: f32[2][R * P, KK]
  smem pi: i32[2][R * P, KK]
  role all warps 0..4 per 2:
    reg fv: f32[R, KK] layout rows
    reg fi: i32[R, KK] layout rows
    bar.sync
    topk.reduce fv, fi <- pv, pi, k=KK
    store out[self * R : +R, :] <- fi, oob=skip
"""


def _compile(text: str, values: dict, file: str = "topk.cake") -> tuple[str, CompileResult]:
    cand = pipeline.Candidate(pipeline.load_text(text, file), plugins.registry().get("targets", "h200"))
    assert cand.check().ok, [d.message for d in cand.check().diagnostics]
    spec = cand.spec(values)
    return cand.build(spec).source, cand.compile(spec, cache=False)


def _no_spills(result: CompileResult) -> None:
    assert result.kernels and not [name for name, k in result.kernels.items() if k.spills]


def test_update_and_reduce_from_registers_and_shared_memory_compile() -> None:
    source, result = _compile(TOPK, {"KK": 5})
    _no_spills(result)
    # the two threads of a row are neighbouring lanes: one shuffle step
    assert "__shfl_xor_sync(0xffffffffu, cake_mv[e], 1)" in source
    assert "__shfl_xor_sync(0xffffffffu, cake_mv[e], 2)" not in source


def test_reduce_of_staged_shared_partials_compiles() -> None:
    _, result = _compile(STAGED, {"KK": 4})
    _no_spills(result)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [("topk.reduce fv, fi <- tv, ti, red, k=KK", "topk.reduce fv, fi <- tv, ti, k=KK", "needs a shared `scratch`"),
     ("<- sc, bias[c * C : +C], base=c * C, k=KK, scale=-2.0, split=P", "<- tile, bias[c * C : +C], base=c * C, "
      "k=KK, scale=-2.0, split=P", "store it to shared memory")],
)  # fmt: skip
def test_what_needs_another_thread_s_rows_is_refused_clearly(old: str, new: str, message: str) -> None:
    assert TOPK.count(old) == 1
    with pytest.raises(NotLoweredError, match=message):
        _compile(TOPK.replace(old, new), {"KK": 5})


@pytest.mark.parametrize("schedule", ["naive", "fused_topk"])
def test_the_knn_schedules_compile_for_h200_without_spills(schedule: str) -> None:
    reg = plugins.registry()
    cand = pipeline.Candidate.load(KNN / f"{schedule}.cake", reg.get("targets", "h200"))
    shape = {"B": 1, "M": 1, "N": 16, "D": 64, "K": 10}
    spec = cand.spec(program_values(cand.check(), reg.get("problems", "knn"), shape, "bf16"))
    _no_spills(cand.compile(spec, cache=False))
