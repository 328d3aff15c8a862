"""Vector accesses chosen at compile time: `atomic.add` of f32 into global memory as
``red.global.add.v4/.v2.f32`` (sm_90 on) and `load` of a row's aligned run as one vector load, where the
elements are contiguous and aligned, and the scalar forms where they are not (a ragged or odd row length,
a misaligned column start, an Ampere target). Also the wgmma-accumulator layouts both take (a consumer
warpgroup's argmin indices in `wgmma_rows`, rows re-read into `wgmma_acc`). The generated code is checked
here without a GPU; test_rows_gpu.py runs these kernels on the GPU against the interpreter."""

from __future__ import annotations

import pytest

from cake_core import pipeline, plugins

#: rows of v scattered into d by ix; COLS is the tile's column slice of both (W columns of C)
ROWS = """
kernel scatter(v: global T[N, C], ix: global i32[N], d: global f32[K, C])
  domain T in {bf16, f32}, N >= 1, K >= 1, C in {CC}
  const R = 64
  grid (t) over (cdiv(N, R))
  cta warps 2
  role all warps 0..2:
    reg vr: f32[R, W] layout rows
    reg ir: i32[R] layout rows
    load vr <- v[t * R : +R, COLS], oob=zero
    load ir <- ix[t * R : +R], oob=fill, value=-1
    atomic.add d[:, COLS] <- vr, ir, oob=skip
"""

#: one warpgroup: indices in `wgmma_rows`, values re-read into `wgmma_acc`, both scattered
WGMMA = """
kernel scatter(v: global T[N, C], ix: global i32[N], d: global f32[K, C], cnt: global i32[K])
  domain T in {bf16, f32}, N >= 1, K >= 1, C in {CC}
  const R = 128
  grid (t) over (cdiv(N, R))
  cta warps 4
  role wg warps 0..4:
    reg vr: f32[R, C] layout wgmma_acc
    reg ir: i32[R] layout wgmma_rows
    reg one: i32[R] layout wgmma_rows
    load vr <- v[t * R : +R, :], oob=zero
    load ir <- ix[t * R : +R], oob=fill, value=-1
    fill one, value=1
    atomic.add d[:, :] <- vr, ir, oob=skip
    atomic.add cnt[:] <- one, ir, oob=skip
"""


def _kernel(text: str, c: int, w: int | None = None, cols: str = ":") -> str:
    return text.replace("CC", str(c)).replace("COLS", cols).replace("W", str(w if w is not None else c))


def _source(text: str, values: dict, target: str = "h200") -> str:
    cand = pipeline.Candidate(pipeline.load_text(text, "vec.cake"), plugins.registry().get("targets", target))
    assert cand.check().ok, [d.message for d in cand.check().diagnostics]
    return cand.build(cand.spec(values)).source


@pytest.mark.parametrize(
    ("c", "w", "cols", "t", "red", "load"),
    [
        (8, 8, ":", "f32", "v4", "uint4"),  # 16-byte aligned runs
        (6, 6, ":", "f32", "v2", "uint2"),  # rows of 24 bytes: 8-byte groups only
        (5, 5, ":", "f32", None, None),  # rows of 20 bytes: scalar
        (8, 4, "1 : +4", "f32", None, None),  # a column start off the 16-byte grid: scalar
        (8, 4, "4 : +4", "f32", "v4", "uint4"),
        (8, 8, ":", "bf16", "v4", "uint4"),  # eight 16-bit values a load
        (6, 6, ":", "bf16", "v2", "unsigned"),  # two 16-bit values a load
    ],
)  # fmt: skip
def test_vector_forms_where_aligned_and_scalar_forms_where_not(c, w, cols, t, red, load):
    src = _source(_kernel(ROWS, c, w, cols), {"T": t, "C": c})
    for width in ("v4", "v2"):
        assert (f"red.global.add.{width}.f32" in src) == (red == width), width
    assert ("red.global.add.f32" in src) == (red is None)
    for vtype in ("uint4", "uint2", "unsigned"):
        assert (f"const {vtype} cake_v" in src) == (load == vtype), vtype


def test_no_vector_reduction_before_sm_90():
    src = _source(_kernel(ROWS, 8), {"T": "f32", "C": 8}, target="a100")
    assert "red.global.add.f32" in src and "red.global.add.v" not in src


def test_wgmma_layouts_scatter_column_pairs_and_count_each_row_once():
    src = _source(_kernel(WGMMA, 16), {"T": "bf16", "C": 16})
    assert "red.global.add.v2.f32" in src and "red.global.add.f32" not in src
    # the quad's four lanes hold a `wgmma_rows` value alike: one of them adds it
    assert "(cake_lane & 3) == 0" in src and "red.global.add.s32" in src


def test_the_vector_forms_compile_for_h200_without_spills():
    for text, values in ((_kernel(ROWS, 8), {"T": "bf16", "C": 8}), (_kernel(WGMMA, 16), {"T": "bf16", "C": 16})):
        cand = pipeline.Candidate(pipeline.load_text(text, "vec.cake"), plugins.registry().get("targets", "h200"))
        result = cand.compile(cand.spec(values), cache=False)
        assert result.kernels and not [k for k, r in result.kernels.items() if r.spills], result.kernels
