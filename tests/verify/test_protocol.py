"""The protocol simulator rules read (`cake_core.verify.protocol`, `samples`, `traces`, `replay`) and the
per-kernel facts they share (`cake_core.verify.facts`): size samples, traces, and the replay's hazards
and deadlocks."""

from __future__ import annotations

import pytest

from cake_core.ir.exprs import Compiled
from cake_core.ir.parser import parse
from cake_core.ir.primitive import BarrierAction
from cake_core.primitives.hopper import FenceProxyAsync, TmaLoad
from cake_core.verify import protocol as P
from cake_core.verify import samples, traces
from cake_core.verify.analyses import attach
from cake_core.verify.replay import Replay
from cake_core.verify.facts import facts, is_proxy_fence, is_warpgroup_wide

from .conftest import models

PIPE = """
kernel pipe(x: global bf16[N, 64], c: global bf16[K, 64], out: global f32[N, 64])
  domain N >= 1, N % 64 == 0, K >= 1
  const S = 2, BN = 64
  grid (t) over (N / 64)
  cta warps 8 occupancy 1
  smem xs: bf16[64, 64] swizzle 128B
  smem cs: bf16[S][BN, 64] swizzle 128B
  barrier xfull: mbarrier count 1
  barrier full: mbarrier[S] count 1
  barrier empty: mbarrier[S] count 128
  role producer warps 0..4 regs 40:
    mbarrier.arrive.expect_tx xfull, bytes=64 * 64 * 2
    tma.load xs <- x[t * 64 : +64, :], xfull
    for kt in 0 .. cdiv(K, BN):
      let s = kt % S
      mbarrier.wait empty[s], parity=(kt / S + 1) % 2
      mbarrier.arrive.expect_tx full[s], bytes=BN * 64 * 2
      tma.load cs[s] <- c[kt * BN : +BN, :], full[s]
  role consumer warps 4..8 regs 232:
    reg acc: f32[64, BN] layout wgmma_acc
    mbarrier.wait xfull, parity=0
    for kt in 0 .. cdiv(K, BN):
      let s = kt % S
      mbarrier.wait full[s], parity=(kt / S) % 2
      wgmma acc <- xs, cs[s]^T, accumulate=0
      wgmma.commit
      wgmma.wait pending=0
      mbarrier.arrive empty[s]
    store out[t * 64 : +64, :] <- acc
"""


def _model(text: str = PIPE):
    (m,) = models(text)
    return m


# -- facts --------------------------------------------------------------------------------------------


def test_facts_index_a_model(only_targets) -> None:
    m = _model()
    kf = facts(m)
    assert [of.typed.op.name for of in kf.ops][:3] == ["mbarrier.arrive.expect_tx", "tma.load", "mbarrier.wait"]
    assert sorted(kf.barrier_actions) == ["empty", "full", "xfull"]
    assert [e.barrier for _, e in kf.actions("full")] == [
        BarrierAction.ARRIVE_EXPECT_TX, BarrierAction.COMPLETE_TX, BarrierAction.WAIT,
    ]  # fmt: skip
    assert kf.async_proxy_readers() == {"xs", "cs"}  # wgmma operands
    wide = [of.typed.op.name for of in kf.ops if is_warpgroup_wide(of.prim, of.features)]
    assert wide == ["wgmma", "wgmma.commit", "wgmma.wait"]


def test_a_proxy_fence_is_a_trait_not_a_name() -> None:
    assert is_proxy_fence(FenceProxyAsync()) and not is_proxy_fence(TmaLoad())

    class NamedLikeAFence(TmaLoad):
        name = "fence.proxy_async.fake"
        proxy_fence = True  # has operands: not a fence

    assert not is_proxy_fence(NamedLikeAFence())


# -- samples and traces -------------------------------------------------------------------------------


def test_sizes_grow_by_the_constants_the_kernel_divides_them_by(only_targets) -> None:
    m = _model()
    sizes = samples.sizes(m)
    assert sizes is not None and sizes.small == (("K", 1), ("N", 64))
    assert sizes.at(4).sizes == (("K", 256), ("N", 256))  # cdiv(K, BN): 4 x 64; N / 64: 4 x 64


def test_persistent_kernels_are_simulated_with_two_multiprocessors(only_targets) -> None:
    text = PIPE.replace("grid (t) over (N / 64)", "grid (w) over (min(SMS, N / 64))")
    text = text.replace("t * 64", "w * 64")
    m = _model(text)
    assert m.env["SMS"] == 132
    p = P.protocol(m)
    assert {r.sample.sms for r in p.runs} == {samples.SIM_SMS}
    assert "persistent loops" in (p.runs[0].sample.note or "")


def test_traces_follow_each_instance_through_its_loops(only_targets) -> None:
    p = P.protocol(_model())
    small, wide = p.runs
    assert small.skipped is None and wide.skipped is None
    assert [i.who for i in wide.instances] == ["role `producer`", "role `consumer`"]
    assert wide.sample.sizes == (("K", 256), ("N", 256))
    producer = wide.traces[0]
    waits = [(s.waits[0][1], s.waits[0][2], s.where) for s in producer if s.waits]
    assert waits == [(0, 1, "kt=0"), (1, 1, "kt=1"), (0, 0, "kt=2"), (1, 0, "kt=3")]  # stage, parity
    copies = [s.completes[0][:3] for s in producer if s.completes]
    assert copies[0] == ("xfull", 0, 64 * 64 * 2) and copies[1:] == [("full", k % 2, 64 * 64 * 2) for k in range(4)]
    assert traces.covered(wide) and not traces.covered(small)


def test_a_sample_over_the_budget_is_skipped(only_targets, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(P, "MAX_STEPS", 5)
    m = _model()
    run = traces.simulate(m, samples.Sample((("K", 1000), ("N", 64))), _programs(m), P.MAX_STEPS)
    assert run.skipped == "more than 5 operations" and run.traces == []


def _programs(m):
    comp = Compiled()
    plans = {id(of.typed.op): traces.plan(of, m, comp) for of in facts(m).ops}
    return {info.role.name: traces.program(info.role.body, plans, comp) for info in m.roles}


# -- the replay ---------------------------------------------------------------------------------------


def _replay(text: str):
    m = _model(text)
    p = P.protocol(m)
    return [(r, r.replay(m)) for r in p.runs if r.skipped is None]


def test_a_correct_pipeline_replays_clean(only_targets) -> None:
    for run, result in _replay(PIPE):
        assert result.conflicts == [] and result.deadlock is None, run.sample


def test_a_read_without_its_wait_is_a_raw_conflict_with_the_copy_in_flight(only_targets) -> None:
    text = PIPE.replace("      mbarrier.wait full[s], parity=(kt / S) % 2\n", "")
    (run, result), *_ = _replay(text)
    (c,) = result.conflicts
    assert (c.kind, c.buffer, c.in_flight) == ("raw", "cs", True)
    assert c.step.op.name == "wgmma" and c.other.op.name == "tma.load"
    assert c.signals == (("full", 0, 0),) and "full" not in c.waits


def test_a_refill_without_the_empty_wait_overwrites_in_flight(only_targets) -> None:
    text = PIPE.replace("      mbarrier.wait empty[s], parity=(kt / S + 1) % 2\n", "")
    results = _replay(text)
    kinds = {(c.kind, c.buffer) for _, r in results for c in r.conflicts}
    assert ("waw", "cs") in kinds


def test_a_producer_waiting_for_phase_0_of_an_empty_slot_deadlocks(only_targets) -> None:
    text = PIPE.replace("parity=(kt / S + 1) % 2", "parity=(kt / S) % 2")
    (run, result), *_ = _replay(text)
    assert result.conflicts == [] and result.deadlock is not None
    blocked = {(run.instances[b.inst].role, b.barrier, b.stage, b.parity) for b in result.deadlock}
    assert blocked == {("producer", "empty", 0, 0), ("consumer", "full", 0, 0)}


def test_asynchronous_copies_of_one_lane_share_a_clock_component(only_targets) -> None:
    m = _model()
    run = P.protocol(m).runs[1]
    replay = Replay(m, run.traces)
    replay.run()
    # the producer's copies on xfull, full[0], full[1] and the consumer's wgmma group: four lanes
    assert len(replay.lanes) == 4 and replay.next_comp == 2 + 4


def test_protocols_are_shared_by_specializations_of_equal_element_sizes(only_targets) -> None:
    from cake_core import plugins
    from cake_core.ir.sema import check_module

    text = PIPE.replace("kernel pipe(x: global bf16[N, 64], c: global bf16[K, 64]",
                        "kernel pipe(x: global T[N, 64], c: global T[K, 64]")  # fmt: skip
    text = text.replace("bf16[", "T[").replace("domain N >= 1", "domain T in {bf16, f16}, N >= 1")
    reg = plugins.registry()
    checked = check_module(parse(text, "t.cake"), {p.name: p for p in reg.values("primitives")},
                           reg.get("targets", "h200"))  # fmt: skip
    assert checked.ok, [d.message for d in checked.diagnostics]
    bf16, f16 = checked.models.values()
    assert P.protocol(bf16) is not P.protocol(bf16)  # without an attached analysis table nothing is shared
    table = attach(checked, ())
    assert P.protocol(bf16) is P.protocol(f16)
    assert table.get("protocol", P.protocol_key(f16), list) is P.protocol(bf16)  # one simulation, kept


def test_simulations_live_as_long_as_their_checked_module(only_targets) -> None:
    import gc
    import weakref

    from cake_core import plugins
    from cake_core.ir.sema import check_module

    reg = plugins.registry()
    checked = check_module(parse(PIPE, "t.cake"), {p.name: p for p in reg.values("primitives")},
                           reg.get("targets", "h200"))  # fmt: skip
    (m,) = checked.models.values()
    attach(checked, ())
    kept = weakref.ref(P.protocol(m))
    assert P.protocol(m) is kept()
    del checked, m
    gc.collect()
    assert kept() is None
