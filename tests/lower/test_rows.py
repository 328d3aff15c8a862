"""The `rows` vocabulary lowered to CUDA and compiled by NVRTC without a GPU: `load` into and `store` from
`rows` register tiles (global and shared), `store` of an `mma_acc` tile into shared memory, `atomic.add`,
`segment.add` and `rowdiv`; and the kmeans-update schedule for h200 (no spills). What the code does is checked on the
GPU (test_rows_gpu.py); here only what the generated code must contain by contract is asserted."""

from __future__ import annotations

from pathlib import Path

import pytest

from cake_core import pipeline, plugins
from cake_core.problems.kmeans_update import KMEANS_UPDATE
from cake_core.runtime.nvrtc import CompileResult

PROBLEMS = Path(__file__).resolve().parents[2] / "cake_core" / "problems"

#: global -> rows (with a fill past the ragged edge) -> shared -> rows -> global; R = 96 rows over 64 threads
COPY = """
kernel copy(a: global T[N, C], o: global f32[N, C])
  domain T in {bf16, f16, f32}, N >= 1, C in {8}
  const R = 96
  grid (t) over (cdiv(N, R))
  cta warps 2
  smem s: f32[R, C]
  role all warps 0..2:
    reg v: f32[R, C] layout rows
    reg w: f32[R, C] layout rows
    load v <- a[t * R : +R, :], oob=fill, value=-1.5
    store s <- v
    bar.sync
    load w <- s
    store o[t * R : +R, :] <- w, oob=skip
"""

#: an mma.sync accumulator through shared memory into a `rows` tile
MMA_TO_SHARED = """
kernel mma(a: global T[64, 16], b: global T[32, 16], o: global f32[64, 32])
  domain T in {bf16, f16}
  grid (t) over (1)
  cta warps 4
  smem sa: T[64, 16] pad 8
  smem sb: T[32, 16] pad 8
  smem sc: f32[64, 32] pad 4
  role all warps 0..4:
    reg acc: f32[64, 32] layout mma_acc(2, 2)
    reg fa: T[64, 16] layout mma_a(2, 2)
    reg fb: T[32, 16] layout mma_b(2, 2)
    reg r: f32[64, 32] layout rows
    cp.async sa <- a[:, :]
    cp.async sb <- b[:, :]
    cp.async.commit
    cp.async.wait pending=0
    bar.sync
    ldmatrix fa <- sa
    ldmatrix fb <- sb
    fill acc, value=0.0
    mma.sync acc <- fa, fb^T
    store sc <- acc
    bar.sync
    load r <- sc
    store o[:, :] <- r
"""

#: rows scattered with atomics into global memory, counted in shared memory, then divided
SCATTER = """
kernel scatter(v: global V[N, C], ix: global i32[N], d: global V[K, C], m: global f32[K, C])
  domain V in {f32, i32}, N >= 1, K >= 1, C in {4}
  const R = 64
  grid (t) over (cdiv(N, R))
  cta warps 2
  smem cnt: i32[R]
  role all warps 0..2:
    reg vr: V[R, C] layout rows
    reg ir: i32[R] layout rows
    reg one: i32[R] layout rows
    reg q: f32[R, C] layout rows
    fill one, value=0
    store cnt <- one
    bar.sync
    load vr <- v[t * R : +R, :], oob=zero
    load ir <- ix[t * R : +R], oob=fill, value=-1
    fill one, value=1
    atomic.add d[:, :] <- vr, ir, oob=skip
    atomic.add cnt[:] <- one, ir, oob=skip
    bar.sync
    rowdiv q <- m[t * R : +R, :], cnt, oob=zero
    store m[t * R : +R, :] <- q, oob=skip
"""


#: one CTA scatters ragged tiles of rows into a shared accumulator (OP: atomic.add or segment.add), then
#: writes it out; indices outside its 64 rows are skipped
SEGMENTS = """
kernel seg(v: global V[N, C], ix: global i32[N], d: global V[64, C])
  domain V in {f32, i32}, N >= 1, C in {4}
  const R = 96
  grid (t) over (1)
  cta warps 2
  smem acc: V[64, C]
  role all warps 0..2:
    reg z: V[64, C] layout rows
    reg vr: V[R, C] layout rows
    reg ir: i32[R] layout rows
    fill z, value=0
    store acc <- z
    bar.sync
    for i in 0 .. cdiv(N, R):
      load vr <- v[i * R : +R, :], oob=zero
      load ir <- ix[i * R : +R], oob=fill, value=-1
      OP acc <- vr, ir, oob=skip
    bar.sync
    load z <- acc
    store d[:, :] <- z
"""


def compile_text(text: str, values: dict) -> tuple[str, CompileResult]:
    """The CUDA source of one specialization of a one-kernel module for h200, and NVRTC's result."""
    cand = pipeline.Candidate(pipeline.load_text(text, "rows.cake"), plugins.registry().get("targets", "h200"))
    assert cand.check().ok, [d.message for d in cand.check().diagnostics]
    spec = cand.spec(values)
    return cand.build(spec).source, cand.compile(spec, cache=False)


def _no_spills(result: CompileResult) -> None:
    assert result.kernels and not [name for name, k in result.kernels.items() if k.spills]


@pytest.mark.parametrize("t", ["bf16", "f16", "f32"])
def test_load_and_store_through_shared_memory_compile(t: str) -> None:
    source, result = compile_text(COPY, {"T": t, "C": 8})
    _no_spills(result)
    # the rows past R = 96 of 64 threads exist for half of the threads only
    assert "< 96" in source


def test_store_of_an_mma_accumulator_into_shared_memory_compiles() -> None:
    source, result = compile_text(MMA_TO_SHARED, {"T": "bf16"})
    _no_spills(result)


@pytest.mark.parametrize(("dst", "ptx"), [("f32", "red.global.add.v4.f32"), ("i32", "red.global.add.s32")])
def test_atomic_add_is_a_reduction_per_element_or_aligned_group(dst: str, ptx: str) -> None:
    source, result = compile_text(SCATTER, {"V": dst, "C": 4})
    _no_spills(result)
    assert ptx in source and "red.shared.add.s32" in source  # the counts go through shared memory


def test_rowdiv_divides_correctly_rounded() -> None:
    source, _ = compile_text(SCATTER, {"V": "f32", "C": 4})
    assert "__fdiv_rn(" in source  # the interpreter's fp32 division is IEEE's


@pytest.mark.parametrize("v", ["f32", "i32"])
def test_segment_add_sums_runs_by_shuffles_then_adds_once(v: str) -> None:
    source, result = compile_text(SEGMENTS.replace("OP", "segment.add"), {"V": v, "C": 4})
    _no_spills(result)
    assert "__ballot_sync" in source and "red.shared.add" in source


def test_the_atomic_kmeans_update_schedule_compiles_for_h200_without_spills() -> None:
    target = plugins.registry().get("targets", "h200")
    cand = pipeline.Candidate.load(PROBLEMS / "kmeans_update" / "schedules" / "atomic.cake", target)
    from cake_core.loop.benchmark import program_values

    spec = cand.spec(program_values(cand.check(), KMEANS_UPDATE, {"B": 1, "N": 1, "K": 1, "D": 64}, "bf16"))
    result = cand.compile(spec, cache=False)
    _no_spills(result)
