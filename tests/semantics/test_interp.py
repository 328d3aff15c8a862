"""The CPU interpreter: K-Means schedules give the oracle's answer; planted bugs are found, not hung on."""

from __future__ import annotations

import numpy as np
import pytest

from cake_core.diagnostics.render import render
from cake_core.problems.kmeans_assign import KMEANS_ASSIGN
from cake_core.problems.kmeans_assign.oracle import nearest_numpy
from cake_core.semantics import SEMANTICS_CODES, run_program

# ---------------------------------------------------------------------------------------------------
# K-Means assignment: both schedules, edge shapes, both element types
# ---------------------------------------------------------------------------------------------------

# N not a multiple of the 128-row CTA tile, K not a multiple of the centroid tile (and for ampere,
# K = 200 spans two 128-centroid tiles, so the cp.async ring wraps), D in {64, 128}, B = 2
SHAPES = [
    {"B": 2, "N": 130, "K": 37, "D": 64},
    {"B": 2, "N": 65, "K": 100, "D": 128},
]
AMPERE_EXTRA = [{"B": 2, "N": 130, "K": 200, "D": 128}]


def _run_kmeans(checked, shape, dtype, data_seed=3, **kw):
    inputs = KMEANS_ASSIGN.make_inputs(shape, dtype, data_seed)
    result = run_program(checked, inputs, {**shape, "T": dtype}, **kw)
    return inputs, result


def _assert_nearest(inputs, result, shape, dtype):
    assert result.ok, [str(f) for f in result.findings]
    assert not result.stopped
    out = result.outputs["out"]
    report = KMEANS_ASSIGN.check(inputs, {"out": out}, shape, dtype)
    assert report.passed, report.first
    # the oracle allows ties within its tolerance; on these inputs the indices are the fp64 argmin
    exact = out == nearest_numpy(inputs["x"], inputs["c"], dtype)
    assert exact.mean() > 0.99


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "N{N}-K{K}-D{D}".format(**s))
@pytest.mark.parametrize("schedule", ["naive", "ampere"])
def test_kmeans_schedules_give_the_nearest_centroid(compile_cake, schedule_text, schedule, shape, dtype):
    checked = compile_cake(schedule_text(schedule), f"{schedule}.cake")
    inputs, result = _run_kmeans(checked, shape, dtype)
    _assert_nearest(inputs, result, shape, dtype)
    assert result.launches == 2


@pytest.mark.parametrize("shape", AMPERE_EXTRA, ids=lambda s: "N{N}-K{K}-D{D}".format(**s))
def test_ampere_ring_wraps_over_several_centroid_tiles(compile_cake, schedule_text, shape):
    checked = compile_cake(schedule_text("ampere"), "ampere.cake")
    inputs, result = _run_kmeans(checked, shape, "bf16")
    _assert_nearest(inputs, result, shape, "bf16")


@pytest.mark.parametrize("schedule", ["naive", "ampere"])
def test_policies_agree_on_race_free_schedules(compile_cake, schedule_text, schedule):
    checked = compile_cake(schedule_text(schedule), f"{schedule}.cake")
    shape = {"B": 2, "N": 65, "K": 37, "D": 64}
    _, seq = _run_kmeans(checked, shape, "f16", policy="sequential")
    assert seq.ok
    for seed in (0, 1):
        _, rnd = _run_kmeans(checked, shape, "f16", policy="random", seed=seed)
        assert rnd.ok
        np.testing.assert_array_equal(rnd.outputs["out"], seq.outputs["out"])


def test_sizes_and_type_are_inferred_from_the_inputs(compile_cake, schedule_text):
    checked = compile_cake(schedule_text("naive"), "naive.cake")
    shape = {"B": 1, "N": 5, "K": 3, "D": 64}
    inputs = KMEANS_ASSIGN.make_inputs(shape, "bf16", 0)
    result = run_program(checked, inputs, {})
    _assert_nearest(inputs, result, shape, "bf16")


# ---------------------------------------------------------------------------------------------------
# Planted bugs in the ampere schedule
# ---------------------------------------------------------------------------------------------------


def _mutant(compile_cake, schedule_text, old, new, name="ampere"):
    text = schedule_text(name)
    assert old in text
    return compile_cake(text.replace(old, new), f"{name}_mutant.cake")


def test_off_by_one_tile_offset_gives_a_wrong_answer(compile_cake, schedule_text):
    checked = _mutant(compile_cake, schedule_text, "x[b, t * BM : +BM, :], oob=zero",
                      "x[b, t * BM + 1 : +BM, :], oob=zero")  # fmt: skip
    shape = {"B": 2, "N": 130, "K": 37, "D": 64}
    inputs, result = _run_kmeans(checked, shape, "bf16")
    report = KMEANS_ASSIGN.check(inputs, {"out": result.outputs["out"]}, shape, "bf16")
    assert not result.ok or not report.passed


def test_wrong_stage_index_is_found(compile_cake, schedule_text):
    checked = _mutant(compile_cake, schedule_text, "ldmatrix bt <- cs[i % S]", "ldmatrix bt <- cs[(i + 1) % S]")
    shape = {"B": 1, "N": 65, "K": 200, "D": 64}
    inputs, result = _run_kmeans(checked, shape, "bf16")
    assert "CS003" in result.codes
    report = KMEANS_ASSIGN.check(inputs, {"out": result.outputs["out"]}, shape, "bf16")
    assert not report.passed


def test_missing_mask_on_an_edge_tile_faults(compile_cake, schedule_text):
    checked = _mutant(compile_cake, schedule_text, "cp.async xs <- x[b, t * BM : +BM, :], oob=zero",
                      "cp.async xs <- x[b, t * BM : +BM, :]")  # fmt: skip
    _, result = _run_kmeans(checked, {"B": 1, "N": 130, "K": 37, "D": 64}, "bf16")
    assert result.stopped
    (fault,) = result.by_code("CS001")
    assert fault.fatal and fault.kernel == "assign" and dict(fault.cta) == {"t": 1, "b": 0}
    assert "`x[0, 128:256, 0:64]`" in fault.message and "extent 130" in fault.message
    line = next(i for i, text in enumerate(schedule_text("ampere").splitlines(), 1) if "cp.async xs <-" in text)
    assert fault.loc.line == line and "oob=zero" in (fault.help or "")


def test_mask_is_not_needed_when_tiles_divide(compile_cake, schedule_text):
    checked = _mutant(compile_cake, schedule_text, "cp.async xs <- x[b, t * BM : +BM, :], oob=zero",
                      "cp.async xs <- x[b, t * BM : +BM, :]")  # fmt: skip
    shape = {"B": 1, "N": 128, "K": 37, "D": 64}
    inputs, result = _run_kmeans(checked, shape, "bf16")
    _assert_nearest(inputs, result, shape, "bf16")


@pytest.mark.parametrize("policy", ["random", "sequential"])
def test_wait_leaving_too_many_groups_pending_is_a_race(compile_cake, schedule_text, policy):
    checked = _mutant(compile_cake, schedule_text, "cp.async.wait pending=S - 2", "cp.async.wait pending=S - 1")
    _, result = _run_kmeans(checked, {"B": 1, "N": 65, "K": 37, "D": 64}, "bf16", policy=policy)
    races = result.by_code("CS003")
    assert races
    race = races[0]
    assert "before its copy completed" in race.message and "`cs` stage" in "".join(f.message for f in races)
    assert race.secondary and race.secondary[0].loc.line != race.loc.line  # both locations


def test_missing_cta_barrier_after_the_copy_wait_is_a_race(compile_cake, schedule_text):
    checked = _mutant(compile_cake, schedule_text, "      bar.sync\n", "")
    # K = 200: four k-steps through a three-stage ring, so a stage is refilled after it was read
    _, result = _run_kmeans(checked, {"B": 1, "N": 65, "K": 200, "D": 64}, "bf16")
    messages = [f.message for f in result.by_code("CS003")]
    assert any("not ordered after its write by `cp.async`" in m for m in messages)
    assert any("overwrite before empty" in m for m in messages)


def test_program_buffer_read_before_written(compile_cake, schedule_text):
    checked = _mutant(compile_cake, schedule_text, "  launch centroid_norms(c, c_sq)\n", "", name="naive")
    _, result = _run_kmeans(checked, {"B": 1, "N": 5, "K": 3, "D": 64}, "bf16")
    (f,) = result.by_code("CS002")
    assert "`c_sq" in f.message and "never written" in f.message


def test_step_limit_stops_the_run(compile_cake, schedule_text):
    checked = compile_cake(schedule_text("naive"), "naive.cake")
    _, result = _run_kmeans(checked, {"B": 1, "N": 5, "K": 50, "D": 64}, "bf16", max_steps=40)
    assert result.stopped and result.codes == ["CS005"]


# ---------------------------------------------------------------------------------------------------
# Roles, mbarriers and CTA barriers (test primitives: test.wait, test.arrive, test.arrive_tx, test.tma)
# ---------------------------------------------------------------------------------------------------

PIPE = """
kernel pipe(x: global f32[N, 32], y: global f32[N, 32])
  domain N >= 1
  const S = 2, R = 8
  grid (g) over (1)
  cta warps 3
  smem buf: f32[S][R, 32]
  barrier full: mbarrier[S] count 1
  barrier empty: mbarrier[S] count 2
  role producer warps 0..1:
    for i in 0 .. cdiv(N, R):
      test.wait empty[i % S], parity=(i / S + 1) % 2
      test.arrive_tx full[i % S], tx=R * 32 * 4
      test.tma buf[i % S] <- x[i * R : +R, :], full[i % S], oob=zero
  role consumers warps 1..3 per 1:
    reg v: f32[R, 32] layout rows
    for i in 0 .. cdiv(N, R):
      test.wait full[i % S]
      test.load v <- buf[i % S]
      test.arrive empty[i % S]
      if i % 2 == self:
        store y[i * R : +R, :] <- v, oob=skip
"""

PIPE_X = np.random.default_rng(0).standard_normal((50, 32)).astype(np.float32)


def test_mbarrier_pipeline_is_race_free_under_every_schedule(compile_cake):
    checked = compile_cake(PIPE, "pipe.cake")
    results = [run_program(checked, {"x": PIPE_X}, {"N": 50}, policy="sequential")]
    results += [run_program(checked, {"x": PIPE_X}, {"N": 50}, policy="random", seed=s) for s in range(8)]
    for r in results:
        assert r.ok, [str(f) for f in r.findings]
        np.testing.assert_array_equal(r.outputs["y"], PIPE_X)


def test_expected_bytes_default_to_the_copy_of_the_same_operation(compile_cake):
    # one operation expects its own copy's bytes (N = 50: the last tile is partial, the bytes still whole)
    text = PIPE.replace(
        "      test.arrive_tx full[i % S], tx=R * 32 * 4\n      test.tma buf[i % S] <- x[i * R : +R, :], full[i % S], oob=zero",
        "      test.tma_arrive buf[i % S] <- x[i * R : +R, :], full[i % S], full[i % S], oob=zero",
    )
    assert "tma_arrive" in text
    checked = compile_cake(text, "pipe.cake")
    for policy, seed in (("sequential", 0), ("random", 4)):
        result = run_program(checked, {"x": PIPE_X}, {"N": 50}, policy=policy, seed=seed)
        assert result.ok, [str(f) for f in result.findings]
        np.testing.assert_array_equal(result.outputs["y"], PIPE_X)


@pytest.mark.parametrize("policy", ["random", "sequential"])
def test_consumer_reading_before_the_full_wait_is_a_race(compile_cake, policy):
    checked = compile_cake(PIPE.replace("      test.wait full[i % S]\n", ""), "pipe.cake")
    result = run_program(checked, {"x": PIPE_X}, {"N": 50}, policy=policy, seed=1)
    assert "CS003" in result.codes


@pytest.mark.parametrize("policy", ["random", "sequential"])
def test_producer_refilling_before_the_empty_wait_is_found(compile_cake, policy):
    checked = compile_cake(PIPE.replace("      test.wait empty[i % S], parity=(i / S + 1) % 2\n", ""), "pipe.cake")
    result = run_program(checked, {"x": PIPE_X}, {"N": 50}, policy=policy, seed=1)
    assert "CS003" in result.codes
    assert not np.array_equal(result.outputs["y"], PIPE_X) or not result.ok


@pytest.mark.parametrize("policy", ["random", "sequential"])
def test_barrier_count_that_never_completes_is_a_deadlock(compile_cake, policy):
    checked = compile_cake(PIPE.replace("barrier full: mbarrier[S] count 1", "barrier full: mbarrier[S] count 2"))
    result = run_program(checked, {"x": PIPE_X}, {"N": 50}, policy=policy, seed=2)
    assert result.stopped
    (dead,) = result.by_code("CS004")
    assert dead.fatal
    for part in ("role `consumers` instance 0", "role `consumers` instance 1", "`full[0]`", "1 of 2 arrivals",
                 "role `producer`", "`empty[0]`"):  # fmt: skip
        assert part in dead.message, dead.message
    assert {label.loc.line for label in dead.secondary} | {dead.loc.line} == {12, 18}


HANDOFF = """
kernel handoff(x: global f32[8, 32], y: global f32[8, 32])
  grid (g) over (1)
  cta warps 2
  smem buf: f32[8, 32]
  role writer warps 0..1:
    reg v: f32[8, 32] layout rows
    test.load v <- x[0 : +8, :]
    store buf <- v
    bar.sync
  role reader warps 1..2:
    reg w: f32[8, 32] layout rows
    bar.sync
    test.load w <- buf
    store y[0 : +8, :] <- w
"""
HANDOFF_X = np.arange(256, dtype=np.float32).reshape(8, 32)


@pytest.mark.parametrize("policy", ["random", "sequential"])
def test_cta_barrier_orders_a_handoff_between_roles(compile_cake, policy):
    checked = compile_cake(HANDOFF, "handoff.cake")
    for seed in range(4):
        result = run_program(checked, {"x": HANDOFF_X}, {}, policy=policy, seed=seed)
        assert result.ok, [str(f) for f in result.findings]
        np.testing.assert_array_equal(result.outputs["y"], HANDOFF_X)


@pytest.mark.parametrize("policy", ["random", "sequential"])
def test_handoff_without_a_barrier_is_a_race(compile_cake, policy):
    checked = compile_cake(HANDOFF.replace("    bar.sync\n", ""), "handoff.cake")
    for seed in range(4):
        result = run_program(checked, {"x": HANDOFF_X}, {}, policy=policy, seed=seed)
        assert "CS003" in result.codes


def test_cta_barrier_a_role_skips_is_a_deadlock(compile_cake):
    text = HANDOFF.replace("    bar.sync\n    test.load w", "    test.load w")
    checked = compile_cake(text, "handoff.cake")
    result = run_program(checked, {"x": HANDOFF_X}, {}, policy="random", seed=0)
    (dead,) = result.by_code("CS004")
    assert "role `writer` waits at `bar.sync`" in dead.message and "role `reader` has finished" in dead.message
    assert any("finished never arrives" in note for note in dead.notes)


OVERRUN = """
kernel overrun(y: global f32[4])
  grid (g) over (1)
  cta warps 2
  barrier b: mbarrier count 1
  role p warps 0..1:
    test.arrive b
    test.arrive b
    test.arrive b
  role c warps 1..2:
    test.wait b
"""


def test_barrier_two_phases_ahead_of_a_waiter_is_an_overrun(compile_cake):
    checked = compile_cake(OVERRUN, "overrun.cake")
    result = run_program(checked, {"y": np.zeros(4, np.float32)}, {}, policy="sequential")
    assert result.codes == ["CS006"]


UNINIT = """
kernel u(y: global f32[8])
  grid (g) over (1)
  cta warps 1
  role r warps 0..1:
    reg v: f32[8] layout rows
    store y[0 : +8] <- v
"""


def test_unwritten_register_read_and_the_finding_as_a_diagnostic(compile_cake):
    checked = compile_cake(UNINIT, "uninit.cake")
    result = run_program(checked, {}, {})
    (f,) = result.findings
    assert f.id == "CS002" and "`v`" in f.message and "8 of its 8" in f.message
    assert np.isnan(result.outputs["y"]).all()  # poison went through
    d = f.to_diagnostic()
    assert d.code == "CS002" and d.slug == "uninitialized-read" and d.is_error
    assert d.primary.line == 7 and any("kernel `u`" in note for note in d.notes)
    text = render(d, {"uninit.cake": UNINIT})
    assert "CS002" in text and "store y[0 : +8] <- v" in text


NO_EXECUTE = """
kernel opaque(y: global f32[8])
  grid (g) over (1)
  cta warps 1
  role r warps 0..1:
    test.opaque
"""


def test_primitive_without_cpu_semantics_stops_the_run(compile_cake):
    result = run_program(compile_cake(NO_EXECUTE, "opaque.cake"), {"y": np.zeros(8, np.float32)}, {})
    assert result.stopped and result.codes == ["CS007"]


GROUPED_TX = """
kernel grouped(x: global f32[8, 32], y: global f32[8, 32])
  grid (g) over (1)
  cta warps 2
  smem buf: f32[8, 32]
  barrier full: mbarrier count 1
  role producer warps 0..1:
    test.arrive_tx full, tx=8 * 32 * 4
    test.gcopy buf <- x[0 : +8, :], full
    test.gcommit
  role consumer warps 1..2:
    reg w: f32[8, 32] layout rows
    test.wait full
    test.load w <- buf
    store y[0 : +8, :] <- w
"""


@pytest.mark.parametrize("policy", ["random", "sequential"])
def test_grouped_copy_signalling_a_barrier_lands_without_its_group_wait(compile_cake, policy):
    # the producer never waits for its group: the copy still lands and completes the consumer's phase
    checked = compile_cake(GROUPED_TX, "grouped.cake")
    result = run_program(checked, {"x": HANDOFF_X}, {}, policy=policy)
    assert result.ok, [str(f) for f in result.findings]
    np.testing.assert_array_equal(result.outputs["y"], HANDOFF_X)


def test_codes_are_documented():
    assert sorted(SEMANTICS_CODES) == [f"CS00{i}" for i in range(1, 10)] + ["CS010"]
    for code in SEMANTICS_CODES.values():
        assert code.explanation.startswith("## What it checks") and "## Example" in code.explanation


# ---------------------------------------------------------------------------------------------------
# The warp-specialized Hopper schedule: TMA, mbarriers, wgmma, persistent CTAs
# ---------------------------------------------------------------------------------------------------

HOPPER_SHAPES = [
    ({"B": 2, "N": 130, "K": 37, "D": 64}, 2),
    ({"B": 1, "N": 300, "K": 200, "D": 128}, 1),  # one persistent CTA walks three row tiles
]


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize(("shape", "sms"), HOPPER_SHAPES, ids=lambda v: "N{N}-K{K}-D{D}".format(**v)
                         if isinstance(v, dict) else f"SMS{v}")  # fmt: skip
def test_hopper_schedule_gives_the_nearest_centroid(compile_cake, schedule_text, shape, sms, dtype):
    checked = compile_cake(schedule_text("hopper"), "hopper.cake")
    for policy in ("sequential", "random"):
        inputs, result = _run_kmeans(checked, shape, dtype, policy=policy, sms=sms)
        _assert_nearest(inputs, result, shape, dtype)


HOPPER_BUGS = {
    # the producer refills a ring slot the consumers may still be reading
    "no-empty-wait": ("        mbarrier.wait cempty[s], parity=(g / S + 1) % 2\n", "", {"CS003"}),
    # the consumers read a slot before its copy landed
    "no-full-wait": ("        mbarrier.wait cfull[s], parity=(g / S) % 2\n", "", {"CS003"}),
    # the argmin reads the accumulator while the wgmma that writes it is still in flight
    "wgmma-pending": ("wgmma.wait pending=0", "wgmma.wait pending=1", {"CS003"}),
    # one arrival more than the consumers give: the producer waits forever
    "empty-count": ("barrier cempty: mbarrier[S] count 128 * WG", "barrier cempty: mbarrier[S] count 128 * WG + 1",
                    {"CS004"}),
    # expect-tx forgets the c_sq tile: the phase completes before that copy lands (a race), or, when the
    # c_sq copy lands first, the count goes negative and the phase never completes (a deadlock)
    "tx-bytes": ("bytes=BN * D * 2 + BN * 4", "bytes=BN * D * 2", {"CS003", "CS004"}),
}


@pytest.mark.parametrize("bug", sorted(HOPPER_BUGS))
def test_hopper_protocol_bugs_are_found(compile_cake, schedule_text, bug):
    old, new, codes = HOPPER_BUGS[bug]
    checked = _mutant(compile_cake, schedule_text, old, new, name="explicit/hopper")
    shape = {"B": 1, "N": 300, "K": 300, "D": 128}
    for policy in ("sequential", "random"):
        _, result = _run_kmeans(checked, shape, "bf16", policy=policy, sms=1)
        assert codes & set(result.codes), (policy, [str(f) for f in result.findings])


def test_wgmma_chain_accumulates_without_waiting_in_between(compile_cake, schedule_text):
    # two wgmmas of one group on one accumulator: the second sees the first's result, and no race
    one = "        wgmma acc <- xs[xb][self * ROWS : +ROWS, :], cs[s]^T, accumulate=0\n"
    two = ("        wgmma acc <- xs[xb][self * ROWS : +ROWS, 0 : +64], cs[s][:, 0 : +64]^T, accumulate=0\n"
           "        wgmma acc <- xs[xb][self * ROWS : +ROWS, 64 : +64], cs[s][:, 64 : +64]^T\n")  # fmt: skip
    checked = _mutant(compile_cake, schedule_text, one, two, name="hopper")
    shape = {"B": 1, "N": 130, "K": 100, "D": 128}
    inputs, result = _run_kmeans(checked, shape, "bf16", sms=2)
    _assert_nearest(inputs, result, shape, "bf16")


PIPE_BUGS = {
    # a stage taken and never given back: the producer waits forever for its release
    "no-release": ("        pipe.release cring[s]\n", "", {"CS004"}),
    # given back twice: the second release counts toward the stage's next phase, which completes before
    # the consumers are done with it (the producer overwrites a stage still read), or never completes
    "release-twice": ("        pipe.release cring[s]\n", "        pipe.release cring[s]\n        pipe.release cring[s]\n",
                      {"CS003", "CS004"}),
    # released before the last read of the stage
    "release-early": ("        argmin.update bv, bi <- acc, csq[s], base=kt * BN, scale=-2.0, limit=K\n"
                      "        pipe.release cring[s]\n",
                      "        pipe.release cring[s]\n"
                      "        argmin.update bv, bi <- acc, csq[s], base=kt * BN, scale=-2.0, limit=K\n", {"CS003"}),
}


@pytest.mark.parametrize("bug", sorted(PIPE_BUGS))
def test_pipe_protocol_bugs_are_found(compile_cake, schedule_text, bug):
    """The interpreter follows the pipe itself: stages, parities and counts it derives, at the user's lines."""
    old, new, codes = PIPE_BUGS[bug]
    checked = _mutant(compile_cake, schedule_text, old, new, name="hopper")
    shape = {"B": 1, "N": 300, "K": 300, "D": 128}
    for policy in ("sequential", "random"):
        _, result = _run_kmeans(checked, shape, "bf16", policy=policy, sms=1)
        assert codes & set(result.codes), (policy, [str(f) for f in result.findings])
        assert all(f.loc.file.endswith("hopper_mutant.cake") for f in result.findings)
