"""`topk.update` / `topk.reduce`: exact, deterministic CPU semantics (ties by index), loop-carried state over
many tiles, split lists, a merge across role instances through shared memory, and the type rules."""

from __future__ import annotations

import numpy as np
import pytest

from cake_core.primitives.topk import select_best
from cake_core.semantics import run_program

# scores of a [R0, C0] matrix folded 16 columns at a time into lists of KK per row, then merged
TOPK = """
kernel tk(s: global f32[R0, C0], bias: global f32[C0], out_i: global i32[R0, KK], out_v: global f32[R0, KK])
  domain R0 >= 1, C0 >= 1, KK in {KVAL}
  const R = 32, C = 16, P = PVAL
  grid (t) over (cdiv(R0, R))
  cta warps 1
  role all warps 0..1:
    reg tile: f32[R, C] layout rows
    reg tv: f32[R * P, KK] layout rows
    reg ti: i32[R * P, KK] layout rows
    reg fv: f32[R, KK] layout rows
    reg fi: i32[R, KK] layout rows
    fill tv, value=inf
    fill ti, value=-1
    for c in 0 .. cdiv(C0, C):
      load tile <- s[t * R : +R, c * C : +C], oob=zero
      topk.update tv, ti <- tile, bias[c * C : +C], base=c * C, k=KK, scale=-2.0, split=P, oob=skip EXTRA
    topk.reduce fv, fi <- tv, ti, k=KK
    store out_i[t * R : +R, :] <- fi, oob=skip
    store out_v[t * R : +R, :] <- fv, oob=skip
"""


def _kernel(k: int, split: int, extra: str = "") -> str:
    return TOPK.replace("KVAL", str(k)).replace("PVAL", str(split)).replace(" EXTRA", extra)


def _expected(s: np.ndarray, bias: np.ndarray, k: int, limit: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Brute force: every column's fp32 score, sorted by (score, index); NaN scores and columns past
    ``limit`` are no candidates; missing ranks are (inf, -1)."""
    score = (bias[None, :].astype(np.float64) - 2.0 * s.astype(np.float64)).astype(np.float32)
    rows, cols = s.shape
    vals = np.full((rows, k), np.inf, np.float32)
    idx = np.full((rows, k), -1, np.int64)
    for r in range(rows):
        ok = [j for j in range(cols) if not np.isnan(score[r, j]) and (limit is None or j < limit)]
        ok.sort(key=lambda j: (score[r, j], j))
        for rank, j in enumerate(ok[:k]):
            vals[r, rank], idx[r, rank] = score[r, j], j
    return vals, idx


@pytest.mark.parametrize("k,split", [(1, 1), (3, 1), (5, 2), (8, 4)])
def test_lists_over_many_tiles_are_the_exact_k_smallest(compile_cake, k, split):
    checked = compile_cake(_kernel(k, split))
    rng = np.random.default_rng(k * 10 + split)
    s = rng.standard_normal((45, 53)).astype(np.float32)  # ragged rows and columns: 2 CTAs, 4 tiles
    bias = rng.standard_normal(53).astype(np.float32)
    result = run_program(checked, {"s": s, "bias": bias}, {"KK": k})
    assert result.ok, [str(f) for f in result.findings]
    vals, idx = _expected(s, bias, k)
    assert np.array_equal(result.outputs["out_i"], idx) and np.array_equal(result.outputs["out_v"], vals)


@pytest.mark.parametrize("split", [1, 2])
def test_ties_go_to_the_smaller_index(compile_cake, split):
    checked = compile_cake(_kernel(5, split))
    rng = np.random.default_rng(3)
    s = np.zeros((32, 40), np.float32)
    bias = rng.integers(0, 3, size=40).astype(np.float32)  # three distinct scores, many ties
    out = run_program(checked, {"s": s, "bias": bias}, {"KK": 5}).outputs
    want = np.lexsort((np.arange(40), bias))[:5]
    assert (out["out_i"] == want[None, :]).all()
    assert out["out_i"][0].tolist() == sorted(out["out_i"][0].tolist(), key=lambda j: (bias[j], j))


def test_nan_scores_limits_and_short_rows(compile_cake):
    checked = compile_cake(_kernel(8, 2, ", limit=C0 - 3"))
    rng = np.random.default_rng(4)
    s = rng.standard_normal((32, 9)).astype(np.float32)
    s[0, :4] = np.nan  # row 0: four columns are no candidates
    bias = rng.standard_normal(9).astype(np.float32)
    out = run_program(checked, {"s": s, "bias": bias}, {"KK": 8}).outputs
    vals, idx = _expected(s, bias, 8, limit=6)  # columns 6..8 reach the limit
    assert np.array_equal(out["out_i"], idx) and np.array_equal(out["out_v"], vals)
    assert out["out_i"][0].tolist()[2:] == [-1] * 6  # 2 candidates left: the rest stays empty
    assert out["out_i"][1].tolist()[6:] == [-1] * 2 and np.isinf(out["out_v"][1, 6:]).all()


def test_select_best_orders_by_value_then_unsigned_index():
    vals = np.array([[1.0, np.inf, 1.0, 0.5, np.inf]], np.float32)
    idx = np.array([[7, -1, 3, 9, 4]], np.int64)
    v, i = select_best(vals, idx, 5)
    assert i.tolist() == [[9, 3, 7, 4, -1]]  # (inf, 4) before the empty slot (inf, -1)
    assert v[0, :3].tolist() == [0.5, 1.0, 1.0]


# two role instances fold disjoint halves of the columns, then merge through a staged shared buffer
MERGE = """
kernel mg(s: global f32[R0, C0], bias: global f32[C0], out_i: global i32[R0, KK])
  domain R0 >= 1, C0 >= 1, KK in {4}
  const R = 32, C = 16
  grid (t) over (1)
  cta warps 2
  smem sv: f32[2][R, KK]
  smem si: i32[2][R, KK]
  role all warps 0..2 per 1:
    reg tile: f32[R, C] layout rows
    reg tv: f32[R, KK] layout rows
    reg ti: i32[R, KK] layout rows
    reg fv: f32[R, KK] layout rows
    reg fi: i32[R, KK] layout rows
    fill tv, value=inf
    fill ti, value=-1
    for c in self .. cdiv(C0, C) step 2:
      load tile <- s[0 : +R, c * C : +C], oob=zero
      topk.update tv, ti <- tile, bias[c * C : +C], base=c * C, k=KK, scale=-2.0, oob=skip
    store sv[self] <- tv
    store si[self] <- ti
    bar.sync
    if self == 0:
      topk.reduce fv, fi <- sv, si, k=KK
      store out_i[0 : +R, :] <- fi, oob=skip
"""


@pytest.mark.parametrize("policy", ["random", "sequential"])
def test_lists_of_role_instances_merge_through_shared_memory(compile_cake, policy):
    checked = compile_cake(MERGE)
    rng = np.random.default_rng(6)
    s = rng.standard_normal((20, 70)).astype(np.float32)
    bias = rng.standard_normal(70).astype(np.float32)
    result = run_program(checked, {"s": s, "bias": bias}, {"KK": 4}, policy=policy)
    assert result.ok, [str(f) for f in result.findings]
    assert np.array_equal(result.outputs["out_i"], _expected(s, bias, 4)[1])


def test_merging_before_the_other_instance_stored_is_a_race(compile_cake, plant):
    checked = compile_cake(plant(MERGE, "    bar.sync\n", ""))
    rng = np.random.default_rng(6)
    inputs = {"s": rng.standard_normal((20, 70)).astype(np.float32), "bias": rng.standard_normal(70).astype(np.float32)}
    assert "CS003" in run_program(checked, inputs, {"KK": 4}).codes


# -- type rules --------------------------------------------------------------------------------------

TYPES = """
kernel k(sc: global f32[R0, C0], bias: global f32[C0])
  domain R0 >= 1, C0 >= 1
  grid (t) over (1)
  cta warps 4
  smem ss: f32[64, 32]
  role all warps 0..4:
    reg acc: f32[64, 32] layout mma_acc(2, 2)
    reg tile: f32[64, 32] layout rows
    reg tv: f32[128, 4] layout rows
    reg ti: i32[128, 4] layout rows
    reg tv3: f32[128, 3] layout rows
    reg fv: f32[64, 4] layout rows
    reg fi: i32[64, 4] layout rows
    reg fv8: f32[64, 8] layout rows
    reg fi8: i32[64, 8] layout rows
    reg fv16: f32[64, 16] layout rows
    reg fi16: i32[64, 16] layout rows
    reg wacc: f32[64, 32] layout wgmma_acc
    reg wv: f32[64, 4] layout wgmma_rows
    reg wi: i32[64, 4] layout wgmma_rows
    LINE
"""


@pytest.mark.parametrize(
    "line,message",
    [
        ("topk.update tv, ti <- acc, bias[0 : +32], base=0, k=4, split=2", "store an `mma_acc` accumulator"),
        ("topk.update fv, fi <- wacc, bias[0 : +32], base=0, k=4", "folds into state in layout `wgmma_rows`"),
        ("topk.update wv, wi <- tile, bias[0 : +32], base=0, k=4", "folds into state in layout `rows`"),
        ("topk.update wv, wi <- wacc, bias[0 : +32], base=0, k=4, split=2", "split over its quads already"),
        ("topk.reduce fv, fi <- wv, wi, k=4", "needs a shared scratch of 512 32-bit words"),
        ("topk.reduce wv, wi <- wv, wi, ss, k=4", "lists in the `rows` layout"),
        ("topk.update tv, ti <- tile, bias[0 : +32], base=0, k=3, split=2", "rows * split by k is [128, 3]"),
        ("topk.update tv, ti <- tile, bias[0 : +32], base=0, k=4", "rows * split by k is [64, 4]"),
        ("topk.update tv3, ti <- ss, bias[0 : +32], base=0, k=4, split=2", "`tv3` is [128, 3]"),
        ("topk.update ti, tv <- ss, bias[0 : +32], base=0, k=4, split=2", "f32 values"),
        ("topk.update tv, ti <- tile, bias[0 : +16], base=0, k=4, split=2", "the bias has 16 columns, the tile 32"),
        ("topk.update tv, ti <- tile, bias[0 : +32], k=4, split=2", "needs the attribute `base=...`"),
        ("topk.update tv, ti <- tile, bias[0 : +32], base=0, k=4, split=0", "`split` must be at least 1"),
        ("topk.reduce fv, fi <- tv, ti, k=8", "is [64, 4], not [rows, 8]"),
        ("topk.reduce fv16, fi16 <- tv3, ti, k=16", "one shape"),
        ("topk.reduce fv16, fi16 <- tv, ti, k=16", "each row has 8 partial candidates, fewer than k = 16"),
    ],
)
def test_type_rules(check, line, message):
    checked = check(TYPES.replace("LINE", line))
    assert not checked.ok
    assert any(message in d.message for d in checked.diagnostics), [d.message for d in checked.diagnostics]


@pytest.mark.parametrize(
    "line",
    ["topk.update tv, ti <- tile, bias[0 : +32], base=0, k=4, split=2, oob=skip",
     "topk.update tv, ti <- ss, bias[0 : +32], base=0, k=4, scale=-2.0, split=2, limit=C0",
     "topk.reduce fv8, fi8 <- tv, ti, k=8"],
)  # fmt: skip
def test_well_typed_lines_check_clean(check, line):
    checked = check(TYPES.replace("LINE", line))
    assert checked.ok, [d.message for d in checked.diagnostics]
    (typed,) = next(iter(checked.models.values())).ops
    assert typed.prim.cost(typed, None).flops > 0
