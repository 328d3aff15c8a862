"""`gather` and `segment.gather_add`: rows of a global tile picked by an index tile, loaded or summed by
runs of keys. Their CPU semantics (rows in bounds copied, an index outside the tile's rows skipped and
read as `value`, a ragged tile of rows over the threads, vectors of integers; runs summed into their keys'
rows, a key outside skipped or faulting), their type rules, the rules on the tile a gather reads (a column
span past the tensor flagged unless masked, nothing flagged for data-dependent indices, a race with a
writer of the tile reported by the interpreter), their lowerings (vector loads where a row's run is
aligned, scalar ones where not; a warp's lanes across a row and vector reductions for the sums; compiled
for h200 without spills), and on the GPU (marked ``gpu``) the interpreter's answers."""

from __future__ import annotations

import numpy as np
import pytest

from cake_core import pipeline, plugins
from cake_core.hostdata import decode, encode
from cake_core.lower.program import build_plan
from cake_core.semantics import run_program
from cake_core.verify.runner import verify_source

#: rows of v picked by ix into o; R = 96 rows over 64 threads (a ragged tile), N ragged against it too
ROWS = """
kernel pick(v: global T[M, C], ix: global i32[N], o: global f32[N, W])
  domain T in {bf16, f32}, M >= 1, N >= 1, C in {CC}
  const R = 96
  grid (t) over (cdiv(N, R))
  cta warps 2
  role all warps 0..2:
    reg ir: i32[R] layout rows
    reg vr: f32[R, W] layout rows
    load ir <- ix[t * R : +R], oob=fill, value=-1
    gather vr <- v[:, COLS], ir ATTRS
    store o[t * R : +R, :] <- vr, oob=skip
"""

#: a vector of integers picked by ix, skipped rows reading -1
VECTOR = """
kernel pick(a: global i32[M], ix: global i32[N], o: global i32[N])
  domain M >= 1, N >= 1
  const R = 96
  grid (t) over (cdiv(N, R))
  cta warps 2
  role all warps 0..2:
    reg ir: i32[R] layout rows
    reg ar: i32[R] layout rows
    load ir <- ix[t * R : +R], oob=fill, value=-1
    gather ar <- a[:], ir, value=-1
    store o[t * R : +R] <- ar, oob=skip
"""


def _kernel(c: int, w: int | None = None, cols: str = ":", attrs: str = "") -> str:
    return ROWS.replace("CC", str(c)).replace("COLS", cols).replace("W", str(w or c)).replace("ATTRS", attrs)


def _inputs(m: int, n: int, c: int, t: str, seed: int) -> dict[str, np.ndarray]:
    """Random rows and indices, a fifth of them outside [0, M) on both sides."""
    rng = np.random.default_rng(seed)
    ix = rng.integers(0, m, n)
    bad = rng.random(n) < 0.2
    ix[bad] = rng.choice([-1, -7, m, m + 3, 1 << 30], bad.sum())
    return {"v": encode(rng.standard_normal((m, c)).astype(np.float32), t), "ix": ix.astype(np.int32)}


def _want(v: np.ndarray, ix: np.ndarray, fill: float) -> np.ndarray:
    ok = (ix >= 0) & (ix < v.shape[0])
    out = np.full((ix.size, v.shape[1]), fill, np.float32)
    out[ok] = v[ix[ok]]
    return out


@pytest.mark.parametrize("t", ["f32", "bf16"])
@pytest.mark.parametrize(("attrs", "fill"), [("", 0.0), (", value=2.5", 2.5)])
def test_rows_in_bounds_are_copied_and_the_others_read_value(compile_cake, t: str, attrs: str, fill: float) -> None:
    m, n, c = 50, 200, 8
    inputs = _inputs(m, n, c, t, seed=1)
    result = run_program(compile_cake(_kernel(c, attrs=attrs)), inputs, {"T": t}, policy="random", seed=2)
    assert result.ok, [str(f) for f in result.findings]
    assert np.array_equal(result.outputs["o"], _want(decode(inputs["v"], t), inputs["ix"], fill))


def test_a_vector_of_integers_is_gathered(compile_cake) -> None:
    rng = np.random.default_rng(3)
    inputs = {"a": rng.integers(0, 1000, 37).astype(np.int32), "ix": rng.integers(-5, 45, 131).astype(np.int32)}
    result = run_program(compile_cake(VECTOR), inputs, {}, policy="sequential")
    assert result.ok, [str(f) for f in result.findings]
    ix = inputs["ix"]
    want = np.where((ix >= 0) & (ix < 37), inputs["a"][np.clip(ix, 0, 36)], -1)
    assert np.array_equal(result.outputs["o"], want)


def test_columns_past_the_tensor_read_zero_with_oob_zero_and_skipped_rows_value(compile_cake) -> None:
    m, n, c = 20, 100, 8
    inputs = _inputs(m, n, c, "f32", seed=4)
    text = _kernel(c, 8, "4 : +8", ", oob=zero, value=-3")
    result = run_program(compile_cake(text), inputs, {"T": "f32"}, policy="sequential")
    assert result.ok, [str(f) for f in result.findings]
    padded = np.concatenate([inputs["v"][:, 4:], np.zeros((m, 4), np.float32)], axis=1)
    assert np.array_equal(result.outputs["o"], _want(padded, inputs["ix"], -3.0))


def test_the_bounds_rule_sees_the_tile_not_the_indices() -> None:
    target = plugins.registry().get("targets", "h200")
    clean = list(verify_source(_kernel(8), "g.cake", target).diagnostics)
    assert clean == [], [f"{d.code}: {d.message}" for d in clean]
    past = list(verify_source(_kernel(8, 8, "4 : +8"), "g.cake", target).diagnostics)
    assert [d.code for d in past] == ["CR108"] and "`v[:, 4 : +8]`" in past[0].message, [d.message for d in past]
    masked = list(verify_source(_kernel(8, 8, "4 : +8", ", oob=zero"), "g.cake", target).diagnostics)
    assert masked == [], [f"{d.code}: {d.message}" for d in masked]


#: one role writes rows of w while another gathers from all of w, with no barrier between them
RACE = """
kernel race(v: global f32[M, C], ix: global i32[N], w: global f32[M, C], o: global f32[N, C])
  domain M >= 1, N >= 1, C in {8}
  const R = 64
  grid (t) over (cdiv(N, R))
  cta warps 4
  role writer warps 0..2:
    reg z: f32[R, C] layout rows
    load z <- v[t * R : +R, :], oob=zero
    store w[t * R : +R, :] <- z, oob=skip
  role reader warps 2..4:
    reg ir: i32[R] layout rows
    reg vr: f32[R, C] layout rows
    load ir <- ix[t * R : +R], oob=fill, value=-1
    gather vr <- w[:, :], ir
    store o[t * R : +R, :] <- vr, oob=skip
"""


def test_a_gather_unordered_after_a_write_of_its_tile_is_a_race(compile_cake) -> None:
    inputs = _inputs(100, 130, 8, "f32", seed=9)
    result = run_program(compile_cake(RACE), {**inputs, "ix": np.abs(inputs["ix"]) % 100}, {}, policy="random", seed=1)
    assert "CS003" in result.codes and "by `gather` (role `reader`)" in result.findings[0].message, result.codes


@pytest.mark.parametrize(("text", "message"), [
    (_kernel(8, 4), "rows of 8 elements into rows of 4"),
    (VECTOR.replace("gather ar <- a[:]", "gather ar <- a[0 : +1]").replace("reg ar: i32[R]", "reg ar: i32[R, 1]"),
     "both vectors or both matrices"),
    (VECTOR.replace("reg ar: i32[R] layout rows", "reg ar: f32[R] layout rows"), "converts between float types"),
    (VECTOR.replace("reg ir: i32[R] layout rows", "reg ir: i32[R] layout rows\n    reg fr: f32[R] layout rows")
     .replace("a[:], ir,", "a[:], fr,"), "integer row indices"),
    (VECTOR.replace("reg ir: i32[R] layout rows", "reg ir: i32[R] layout rows\n    reg i2: i32[64] layout rows")
     .replace("a[:], ir,", "a[:], i2,"), "holds 64 indices for the 96 rows"),
])  # fmt: skip
def test_type_rules(check, text: str, message: str) -> None:
    checked = check(text)
    assert not checked.ok and any(message in d.message for d in checked.diagnostics), [
        d.message for d in checked.diagnostics
    ]


def _source(text: str, values: dict) -> str:
    cand = pipeline.Candidate(pipeline.load_text(text, "g.cake"), plugins.registry().get("targets", "h200"))
    assert cand.check().ok, [d.message for d in cand.check().diagnostics]
    return cand.build(cand.spec(values)).source


@pytest.mark.parametrize(
    ("c", "w", "cols", "t", "load"),
    [
        (32, 32, ":", "bf16", "uint4"),  # eight 16-bit values a load
        (8, 8, ":", "f32", "uint4"),
        (6, 6, ":", "f32", "uint2"),  # rows of 24 bytes: 8-byte loads
        (6, 6, ":", "bf16", "unsigned"),
        (16, 8, "1 : +8", "bf16", None),  # a column start off the grid: one element at a time
        (5, 5, ":", "f32", None),  # rows of 20 bytes
    ],
)  # fmt: skip
def test_vector_loads_where_a_rows_run_is_aligned_and_scalar_ones_where_not(c, w, cols, t, load) -> None:
    src = _source(_kernel(c, w, cols), {"T": t, "C": c})
    for vtype in ("uint4", "uint2", "unsigned"):
        assert (f"const {vtype} cake_v" in src) == (load == vtype), vtype
    assert "(unsigned)cake_gkey" in src and "< (unsigned)(M)" in src  # every row's index checked


def test_the_lowering_compiles_for_h200_without_spills() -> None:
    cand = pipeline.Candidate(pipeline.load_text(_kernel(32), "g.cake"), plugins.registry().get("targets", "h200"))
    result = cand.compile(cand.spec({"T": "bf16", "C": 32}), cache=False)
    assert result.kernels and not [name for name, k in result.kernels.items() if k.spills]


@pytest.mark.gpu
@pytest.mark.parametrize(("c", "w", "cols", "t", "attrs"), [
    (32, 32, ":", "bf16", ""), (8, 8, "4 : +8", "f32", ", oob=zero, value=2.5"), (6, 6, ":", "f32", ", value=-1"),
])  # fmt: skip
def test_the_gpu_gathers_what_the_interpreter_does(gpu_runner, compile_cake, c, w, cols, t, attrs) -> None:
    text = _kernel(c, w, cols, attrs)
    cand = pipeline.Candidate(pipeline.load_text(text, "g.cake"), plugins.registry().get("targets", "h200"))
    m, n = 77, 1001
    sizes = {"T": t, "M": m, "N": n, "C": c}
    spec = cand.spec(sizes)
    plan = build_plan(cand.build(spec), cand.compile(spec, cache=False).cubin, sizes)
    inputs = _inputs(m, n, c, t, seed=5)
    got = gpu_runner.run(plan, inputs)  # `o` is the plan's output: the runner poisons it before the run
    assert got.ok, (got.status, got.error)
    want = run_program(compile_cake(text), inputs, {"T": t}, policy="sequential")
    assert want.ok, [str(f) for f in want.findings]
    assert np.array_equal(got.outputs["o"], want.outputs["o"])


#: sums of the rows of v picked by ix into the rows of d picked by kx; instances of PER warps, PER * 80 rows
#: over their threads (ragged), N ragged against a CTA's 160 rows
SUMS = """
program gsum(v: global T[M, C], ix: global i32[N], kx: global i32[N], d: global f32[K, C])
  domain T in {bf16, f32}, M >= 1, N >= 1, K >= 1, C in {CC}
  launch zero(d)
  launch sums(v, ix, kx, d)

kernel zero(d: global f32[K, C])
  domain K >= 1, C in {CC}
  const R = 64
  grid (t) over (cdiv(K, R))
  cta warps 2
  role all warps 0..2:
    reg z: f32[R, C] layout rows
    fill z, value=0.0
    store d[t * R : +R, :] <- z, oob=skip

kernel sums(v: global T[M, C], ix: global i32[N], kx: global i32[N], d: global f32[K, C])
  domain T in {bf16, f32}, M >= 1, N >= 1, K >= 1, C in {CC}
  const R = 80
  grid (t) over (cdiv(N, 2 * R))
  cta warps 2
  role w warps 0..2 per PER:
    reg ir: i32[PER * R] layout rows
    reg kr: i32[PER * R] layout rows
    let row = t * 2 * R + self * R * PER
    load ir <- ix[row : +PER * R], oob=fill, value=-1
    load kr <- kx[row : +PER * R], oob=fill, value=-1
    segment.gather_add d[:, :] <- v[:, :], ir, kr OOB
"""


def _sums(c: int, oob: str = ", oob=skip", per: int = 1) -> str:
    """Instances of ``per`` warps (160 rows over 64 threads when 2: rows ``64 j + 32 w + i``)."""
    return SUMS.replace("CC", str(c)).replace("OOB", oob).replace("PER", str(per))


def _sum_inputs(m: int, n: int, k: int, c: int, t: str, seed: int) -> dict[str, np.ndarray]:
    """Indices as `_inputs` gives them, keys sorted (runs of ~n/k rows) with a few outside [0, K)."""
    inputs = _inputs(m, n, c, t, seed)
    rng = np.random.default_rng(seed + 100)
    keys = np.sort(rng.integers(0, k, n))
    keys[rng.random(n) < 0.05] = rng.choice([-1, k, k + 9])
    inputs["kx"] = keys.astype(np.int32)
    return inputs


def _sum_want(inputs: dict, t: str, k: int) -> np.ndarray:
    v, ix, kx = decode(inputs["v"], t, np.float64), inputs["ix"], inputs["kx"]
    ok = (ix >= 0) & (ix < v.shape[0]) & (kx >= 0) & (kx < k)
    out = np.zeros((k, v.shape[1]))
    np.add.at(out, kx[ok], v[ix[ok]])
    return out


@pytest.mark.parametrize(("t", "c", "per"), [("f32", 32, 1), ("bf16", 64, 2)])
def test_gathered_rows_are_summed_into_their_keys_rows(compile_cake, t: str, c: int, per: int) -> None:
    m, n, k = 70, 333, 9
    inputs = _sum_inputs(m, n, k, c, t, seed=6)
    result = run_program(compile_cake(_sums(c, per=per)), inputs, {"T": t, "K": k}, policy="random", seed=1)
    assert result.ok, [str(f) for f in result.findings]
    assert np.allclose(result.outputs["d"], _sum_want(inputs, t, k), rtol=1e-5, atol=1e-4)


def test_a_key_outside_faults_without_oob_skip(compile_cake) -> None:
    inputs = _sum_inputs(20, 100, 5, 32, "f32", seed=7)
    result = run_program(compile_cake(_sums(32, "")), inputs, {"T": "f32", "K": 5}, policy="sequential")
    assert result.stopped and result.codes == ["CS001"] and "`kr` holds the index" in result.findings[0].message


@pytest.mark.parametrize(("c", "t", "load", "red"), [
    (128, "bf16", "uint2", "v4"), (256, "bf16", "uint4", "v4"), (64, "f32", "uint2", "v2"), (32, "bf16", None, None),
])  # fmt: skip
def test_a_warps_lanes_read_a_whole_row_and_add_each_run_once(c: int, t: str, load: str | None, red: str | None):
    src = _source(_sums(c), {"T": t, "C": c})
    body = src[src.index("cake_sums"):]
    for vtype in ("uint4", "uint2", "unsigned"):
        assert (f"const {vtype} cake_v" in body) == (load == vtype), vtype
    assert (f"red.global.add.{red}.f32" in body) if red else ("red.global.add.f32 " in body)
    assert "__shfl_up_sync" not in body  # no scan across lanes: each lane sums its own columns


def test_rows_of_other_lengths_are_not_lowered() -> None:
    cand = pipeline.Candidate(pipeline.load_text(_sums(48), "s.cake"), plugins.registry().get("targets", "h200"))
    with pytest.raises(Exception, match="rows of 32, 64, 128 or 256 elements"):
        cand.build(cand.spec({"T": "f32", "C": 48}))


def test_segment_gather_add_compiles_for_h200_without_spills() -> None:
    cand = pipeline.Candidate(pipeline.load_text(_sums(128), "s.cake"), plugins.registry().get("targets", "h200"))
    result = cand.compile(cand.spec({"T": "bf16", "C": 128}), cache=False)
    assert result.kernels and not [name for name, k in result.kernels.items() if k.spills]


@pytest.mark.gpu
@pytest.mark.parametrize(("t", "c", "per"), [("bf16", 128, 1), ("f32", 64, 2), ("bf16", 256, 1), ("f32", 32, 2)])
def test_the_gpu_sums_what_the_interpreter_does(gpu_runner, compile_cake, t: str, c: int, per: int) -> None:
    text = _sums(c, per=per)
    cand = pipeline.Candidate(pipeline.load_text(text, "s.cake"), plugins.registry().get("targets", "h200"))
    m, n, k = 301, 2049, 37
    sizes = {"T": t, "M": m, "N": n, "K": k, "C": c}
    spec = cand.spec(sizes)
    plan = build_plan(cand.build(spec), cand.compile(spec, cache=False).cubin, sizes)
    inputs = _sum_inputs(m, n, k, c, t, seed=8)
    got = gpu_runner.run(plan, inputs)  # `d` is the plan's output: poisoned by the runner, zeroed by `zero`
    assert got.ok, (got.status, got.error)
    want = run_program(compile_cake(text), inputs, {"T": t, "K": k}, policy="sequential")
    assert want.ok, [str(f) for f in want.findings]
    # the runs' sums land in another order on the GPU: equal up to fp32 rounding
    assert np.allclose(got.outputs["d"], want.outputs["d"], rtol=1e-5, atol=1e-4)
    assert np.allclose(got.outputs["d"], _sum_want(inputs, t, k), rtol=1e-4, atol=1e-3)
