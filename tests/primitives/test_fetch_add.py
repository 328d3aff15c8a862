"""`atomic.fetch_add`: atomic integer additions that hand back each row's value before its addition. Its
type rules, its CPU semantics (rows in order, skipped rows get -1, an unmasked index outside faults), a
lowering that compiles for h200 into global and shared memory, and on the GPU (marked ``gpu``) slots that
are a permutation of the interpreter's within each counter."""

from __future__ import annotations

import numpy as np
import pytest

from cake_core import pipeline, plugins
from cake_core.lower.program import build_plan
from cake_core.semantics import run_program

#: every row takes the next slot of its counter; R = 96 rows over 64 threads (a ragged tile), N ragged too
SLOTS = """
kernel slots(ix: global i32[N], ctr: global i32[K], o: global i32[N])
  domain N >= 1, K >= 1
  const R = 96
  grid (t) over (cdiv(N, R))
  cta warps 2
  role all warps 0..2:
    reg ir: i32[R] layout rows
    reg one: i32[R] layout rows
    reg s: i32[R] layout rows
    load ir <- ix[t * R : +R], oob=fill, value=-1
    fill one, value=1
    LINE
    store o[t * R : +R] <- s, oob=skip
"""
GOOD = "atomic.fetch_add s, ctr[:] <- one, ir, oob=skip"

#: the same through a shared counter (zeroed, then read back), one CTA
SHARED = """
kernel slots(ix: global i32[N], ctr: global i32[K], o: global i32[N])
  domain N >= 1, N <= 96, K >= 1, K <= 64
  const R = 96
  grid (t) over (1)
  cta warps 2
  smem sc: i32[64]
  role all warps 0..2:
    reg ir: i32[R] layout rows
    reg one: i32[R] layout rows
    reg s: i32[R] layout rows
    reg z: i32[64] layout rows
    fill z, value=0
    store sc <- z
    bar.sync
    load ir <- ix[0 : +R], oob=fill, value=-1
    fill one, value=1
    atomic.fetch_add s, sc[:] <- one, ir, oob=skip
    store o[0 : +R] <- s, oob=skip
"""


def _inputs(n: int, k: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"ix": rng.integers(0, k, n).astype(np.int32), "ctr": (rng.integers(0, 5, k) * 100).astype(np.int32),
            "o": np.full(n, -9, np.int32)}  # fmt: skip


def _ranks(ix: np.ndarray) -> np.ndarray:
    """Each row's rank among the earlier rows of its counter."""
    out = np.empty(ix.shape, np.int64)
    for k in np.unique(ix):
        where = np.flatnonzero(ix == k)
        out[where] = np.arange(where.size)
    return out


def test_rows_in_order_take_consecutive_slots(compile_cake) -> None:
    inputs = _inputs(200, 7, seed=1)
    result = run_program(compile_cake(SLOTS.replace("LINE", GOOD)), inputs, {}, policy="sequential")
    assert result.ok, [str(f) for f in result.findings]
    start = inputs["ctr"][inputs["ix"]]
    assert np.array_equal(result.outputs["o"], start + _ranks(inputs["ix"]))  # CTAs in order, rows in order
    assert np.array_equal(result.outputs["ctr"], inputs["ctr"] + np.bincount(inputs["ix"], minlength=7))


def test_a_skipped_row_gets_minus_one_and_an_unmasked_one_faults(compile_cake) -> None:
    inputs = _inputs(50, 4, seed=2)
    inputs["ix"][[3, 17]] = [-1, 4]
    result = run_program(compile_cake(SLOTS.replace("LINE", GOOD)), inputs, {}, policy="sequential")
    assert result.ok and result.outputs["o"][3] == -1 and result.outputs["o"][17] == -1
    assert (result.outputs["o"][np.r_[0:3, 4:17, 18:50]] >= 0).all()
    unmasked = compile_cake(SLOTS.replace("LINE", GOOD.replace(", oob=skip", "")))
    result = run_program(unmasked, inputs, {}, policy="sequential")
    assert result.stopped and result.codes == ["CS001"] and "holds the index -1" in result.findings[0].message


@pytest.mark.parametrize(("line", "message"), [
    ("reg f: f32[R] layout rows\n    atomic.fetch_add f, ctr[:] <- one, ir", "integers"),
    ("reg s2: i32[R, 2] layout rows\n    atomic.fetch_add s2, ctr[:] <- one, ir", "[R] register vectors"),
    ("reg s4: i32[64] layout rows\n    atomic.fetch_add s4, ctr[:] <- one, ir", "of one length"),
])  # fmt: skip
def test_type_rules(check, line: str, message: str) -> None:
    checked = check(SLOTS.replace("LINE", line + "\n    fill s, value=0"))
    assert not checked.ok and any(message in d.message for d in checked.diagnostics), [
        d.message for d in checked.diagnostics
    ]


@pytest.mark.parametrize(("text", "ptx"), [(SLOTS.replace("LINE", GOOD), "atom.global.add.s32"),
                                           (SHARED, "atom.shared.add.s32")])  # fmt: skip
def test_the_lowering_compiles_for_h200_without_spills(text: str, ptx: str) -> None:
    cand = pipeline.Candidate(pipeline.load_text(text, "slots.cake"), plugins.registry().get("targets", "h200"))
    spec = cand.spec({})
    assert ptx in cand.build(spec).source
    result = cand.compile(spec, cache=False)
    assert result.kernels and not [name for name, k in result.kernels.items() if k.spills]


@pytest.mark.gpu
@pytest.mark.parametrize(("text", "n", "k"), [(SLOTS.replace("LINE", GOOD), 1001, 37), (SHARED, 90, 50)],
                         ids=["global", "shared"])  # fmt: skip
def test_the_gpu_hands_out_each_counters_slots_once(gpu_runner, compile_cake, text: str, n: int, k: int) -> None:
    cand = pipeline.Candidate(pipeline.load_text(text, "slots.cake"), plugins.registry().get("targets", "h200"))
    sizes = {"N": n, "K": k}
    spec = cand.spec(sizes)
    plan = build_plan(cand.build(spec), cand.compile(spec, cache=False).cubin, sizes)
    inputs = _inputs(n, k, seed=3)
    # what the kernel writes (`o`, and `ctr` where the counters are global) is the plan's output, which the
    # runner poisons (all ones: -1) before the run instead of taking it from the caller; the interpreter
    # starts from the same values. The shared variant counts in shared memory and never touches `ctr`,
    # which is then an input like `ix`.
    poisoned = {"o": np.full(n, -1, np.int32)}
    feed = {"ix": inputs["ix"]}
    if text is SHARED:
        feed["ctr"] = inputs["ctr"]
    else:
        poisoned["ctr"] = np.full(k, -1, np.int32)
    got = gpu_runner.run(plan, feed)
    assert got.ok, (got.status, got.error)
    inputs.update(poisoned)
    want = run_program(compile_cake(text), inputs, sizes, policy="sequential")
    # the order in which rows of one counter land differs; the slots each counter hands out do not
    for key in range(k):
        rows = inputs["ix"] == key
        assert sorted(got.outputs["o"][rows]) == sorted(want.outputs["o"][rows]), key
    if text is not SHARED:
        assert np.array_equal(got.outputs["ctr"], want.outputs["ctr"])
