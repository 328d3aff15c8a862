"""The roofline model: found through its entry point, term by term, and its answers move the way the work
does. It is uncalibrated: these tests check its arithmetic and its plumbing, not that it ranks kernels
well (that is measured on a GPU, bench/results/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cake_core import cli, pipeline, plugins
from cake_core.problems import kmeans_assign
from cake_core.problems.kmeans_assign.cells import AMPERE_SWEEP, ampere_variant

SCHEDULES = Path(kmeans_assign.__file__).parent / "schedules"
PROBLEMS = SCHEDULES.parents[1]
CELL = {"B": 32, "N": 65536, "K": 1024, "D": 128, "T": "bf16"}


def _estimate(name: str, values: dict = CELL, target: str = "h200"):
    reg = plugins.registry()
    cand = pipeline.Candidate(pipeline.load(SCHEDULES / f"{name}.cake"), reg.get("targets", target))
    return reg.get("cost_models", "roofline").estimate(cand.check(), cand.target, values)


def test_the_model_registers_through_its_entry_point() -> None:
    reg = plugins.registry()
    assert "roofline" in reg.names("cost_models")
    assert reg.registration("cost_models", "roofline").plugin.distribution == "cake-cost-roofline"


def test_an_estimate_is_term_by_term_and_says_it_is_uncalibrated() -> None:
    est = _estimate("hopper")
    assert est.calibrated is False and any("uncalibrated" in x for x in est.notes)
    assert [x.kernel for x in est.launches] == ["centroid_norms", "assign"]
    assign = est.launches[1]
    assert set(assign.terms) == {"dram", "l2", "shared", "tensor", "fp32", "issue", "atomics", "sync", "stall",
                                 "latency", "launch", "waves"}  # fmt: skip
    assert assign.terms["atomics"] == 0  # the assignment adds nothing atomically
    # the time is the throughput bound plus every overhead term, wave quantization included
    throughput = max(assign.terms[k] for k in ("dram", "l2", "shared", "tensor", "fp32", "issue"))
    overheads = sum(assign.terms[k] for k in ("atomics", "sync", "latency", "launch", "waves"))
    assert assign.ms == pytest.approx(throughput + overheads)
    assert assign.bound == "tensor"  # 2*B*N*K*D flops at the dense bf16 rate outweigh reading x once
    flops = 2 * 32 * 65536 * 1024 * 128
    assert assign.terms["tensor"] == pytest.approx(flops / 761e12 * 1e3, rel=0.05)  # the measured H200 rate
    assert est.ms == pytest.approx(sum(x.ms for x in est.launches))
    assert assign.ctas == 132 and assign.waves == 1  # persistent: one CTA per SM


def test_more_points_take_proportionally_longer() -> None:
    small = _estimate("hopper", {**CELL, "N": 32768}).launches[1].terms["tensor"]
    large = _estimate("hopper", CELL).launches[1].terms["tensor"]
    assert large == pytest.approx(2 * small, rel=0.05)


def test_a_cta_rereading_its_own_tile_is_not_dram_traffic() -> None:
    """The naive schedule reads its 128 rows of x once per centroid: its caches serve the re-reads, so
    DRAM sees x once (512 MiB at 4.27 TB/s is about 0.13 ms), not 1024 times."""
    dram = _estimate("naive").launches[1].terms["dram"]
    assert dram < 0.3


def test_cake_cost_prints_and_writes_json(capsys: pytest.CaptureFixture) -> None:
    path = str(SCHEDULES / "hopper.cake")
    assert cli.main(["cost", path, "--target", "h200", "--problem", "kmeans-assign"]) == 0
    out = capsys.readouterr().out
    assert "tensor-bound" in out and "uncalibrated" in out
    assert cli.main(["cost", path, "--target", "h200", "--shape", "B=2,N=1000,K=100,D=64,T=f16", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["model"] == "roofline" and doc["calibrated"] is False and doc["ms"] > 0


def test_cake_cost_without_every_size_is_one_line(capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["cost", str(SCHEDULES / "hopper.cake"), "--target", "h200", "--shape", "B=2"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "give D, K, N, T with --shape" in line


def _variant(values: dict):
    """ampere.cake with its constants set to ``values``, estimated at the reference cell."""
    reg = plugins.registry()
    cand = pipeline.Candidate(pipeline.Source(*ampere_variant(values)), reg.get("targets", "h200"))
    return reg.get("cost_models", "roofline").estimate(cand.check(), cand.target, CELL)


def test_the_hopper_schedules_rank_ahead_of_every_ampere_variant_at_the_reference_cell() -> None:
    """Measured on the H200 (bench/results/2026-12-01-h200-cost-rank-2.json): hopper 1.09 ms, hopper_overlap
    1.11 ms, the fastest Ampere variant measured 2.39 ms. Roofline 0.1.0 put ampere ahead (0.80 against 0.81)."""
    slowest_hopper = max(_estimate(name).ms for name in ("hopper", "hopper_overlap"))
    assert slowest_hopper < min(_variant(values).ms for values in AMPERE_SWEEP)


def test_every_warp_of_a_warp_grid_loads_its_own_fragment_copy() -> None:
    """ldmatrix fills `mma_a(WM, WN)` (held by the WN warps of a grid row) and `mma_b` (by the WM warps of a
    column): per k16 step a CTA reads 32 * (WN * BM + WM * BN) bytes, 8 KiB with a 2x2 grid of 64x64 and
    12 KiB with 4x2. The tile, the ring and everything else are the same, so the shared term grows."""
    four = _variant({"BM": 64, "BN": 64, "BK": 32, "S": 2, "WM": 2, "WN": 2}).launches[1]
    eight = _variant({"BM": 64, "BN": 64, "BK": 32, "S": 2, "WM": 4, "WN": 2}).launches[1]
    assert eight.ctas == four.ctas
    assert 1.3 < eight.terms["shared"] / four.terms["shared"] < 1.5


def test_a_cta_barrier_is_a_wait_on_the_critical_path() -> None:
    """ampere.cake has one bar.sync per k chunk: half as many chunks, half the barrier time per wave."""
    bk32 = _variant({"BM": 128, "BN": 128, "BK": 32, "S": 2, "WM": 2, "WN": 2}).launches[1]
    bk64 = _variant({"BM": 128, "BN": 128, "BK": 64, "S": 2, "WM": 2, "WN": 2}).launches[1]
    assert bk64.terms["sync"] > 0
    assert bk32.terms["sync"] / bk32.waves == pytest.approx(2 * bk64.terms["sync"] / bk64.waves, rel=0.1)


def test_a_persistent_grid_of_one_cta_per_sm_loses_nothing_to_quantization() -> None:
    """With 64 rows a CTA and one x stage two CTAs fit an SM, but the persistent grid launches one per SM:
    every SM is busy, so no time is lost to a partial wave (0.2.1 counted slots and doubled the time)."""
    from cake_core.ir.printer import print_module
    from cake_core.ir.transform import set_consts

    reg = plugins.registry()
    module = set_consts(pipeline.load(SCHEDULES / "hopper.cake").module, {"BM": 64, "XS": 1}, kernel="assign")
    cand = pipeline.Candidate(pipeline.load_text(print_module(module)), reg.get("targets", "h200"))
    assign = reg.get("cost_models", "roofline").estimate(cand.check(), cand.target, CELL).launches[1]
    assert assign.ctas == 132
    assert assign.terms["waves"] == pytest.approx(0.0, abs=1e-9)
    # a grid one CTA past a whole number per SM leaves all but one SM idle for the last CTA's share
    ragged = _estimate("naive", {**CELL, "B": 1, "N": 128 * 133}).launches[1]
    assert ragged.ctas == 133 and ragged.terms["waves"] > 0.9 * max(
        ragged.terms[k] for k in ("dram", "l2", "shared", "tensor", "fp32", "issue"))  # fmt: skip


def test_a_global_read_the_epilogue_waits_for_is_a_stall_on_the_consumers_path() -> None:
    """hopper.cake's consumers read the centroid norms from a pipe stage; reading them from global memory
    instead (measured 18% slower on the H200) waits one round trip per centroid tile of the busiest CTA,
    once for both consumer warpgroups: 63 row tiles x 8 centroid tiles."""
    text = (SCHEDULES / "hopper.cake").read_text()
    edits = [("  smem csq: f32[S][BN]\n", ""), ("consumers of cs, csq", "consumers of cs"),
             ("        tma.load csq[s] <- c_sq[b, kt * BN : +BN]\n", ""),
             ("csq[s], base=kt * BN, scale=-2.0, limit=K", "c_sq[b, kt * BN : +BN], base=kt * BN, scale=-2.0, oob=skip")]  # fmt: skip
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    reg = plugins.registry()
    cand = pipeline.Candidate(pipeline.load_text(text), reg.get("targets", "h200"))
    direct = reg.get("cost_models", "roofline").estimate(cand.check(), cand.target, CELL).launches[1]
    piped = _estimate("hopper").launches[1]
    assert piped.terms["stall"] == 0
    clocks = reg.get("targets", "h200").boost_clock_mhz * 1e3  # per ms
    assert direct.terms["stall"] == pytest.approx(63 * 8 * 780 / clocks)
    assert direct.ms > piped.ms + 0.9 * direct.terms["stall"]


def test_the_estimate_says_where_each_targets_rates_come_from() -> None:
    # b200 has no measured ceiling: its figures are the datasheet's and the model says so; the h200
    # record carries measured ceilings, which it names
    b200 = _estimate("ampere", target="b200")
    said = "Its b200 rates are datasheet figures, uncalibrated: the target record has no measured ceiling."
    assert said in b200.notes
    h200 = _estimate("ampere")
    (note,) = [x for x in h200.notes if x.startswith("Its h200 rates")]
    assert "measured" in note and "datasheet" in note


# --------------------------------------------------------------------------------------------------- atomics


def _schedule(problem: str, name: str, values: dict = CELL):
    """The estimate of another problem's committed schedule (``kmeans_update``, ``kmeans_iter``)."""
    reg = plugins.registry()
    cand = pipeline.Candidate(pipeline.load(PROBLEMS / problem / "schedules" / f"{name}.cake"), reg.get("targets", "h200"))
    return reg.get("cost_models", "roofline").estimate(cand.check(), cand.target, values)


def test_the_kmeans_update_schedules_rank_as_measured_at_the_reference_cell() -> None:
    """Measured on the H200 (bench/results/2026-12-02-h200-kmeans-update-3.json, -4.json): gather 0.48 ms,
    vector 0.81, atomic 1.06, privatized 1.31. Roofline 0.3.0 charged no atomics: vector and atomic tied at
    0.167 ms and gather came out slowest of the three (0.199)."""
    ms = {name: _schedule("kmeans_update", name).ms for name in ("gather", "vector", "atomic", "privatized")}
    assert ms["gather"] < ms["vector"] < ms["atomic"] < ms["privatized"]


def test_a_scatter_is_charged_per_l2_request() -> None:
    """2^28 f32 added at the reference cell: atomic.cake's lanes each add 4 columns of a row of their own (one
    request per `red.global.add.v4.f32`, 2^26), vector.cake's quads 8 consecutive columns (a 32-byte sector,
    2^25); the counts add 2^21 more, one per point. The atomic units take 34 requests per clock."""
    clocks_per_ms = plugins.registry().get("targets", "h200").boost_clock_mhz * 1e3
    for name, requests in (("atomic", 2**26 + 2**21), ("vector", 2**25 + 2**21)):
        accumulate = _schedule("kmeans_update", name).launches[1]
        assert accumulate.kernel == "accumulate" and accumulate.bound == "atomics"
        assert accumulate.terms["atomics"] == pytest.approx(requests / 34 / clocks_per_ms, rel=1e-6)


def test_atomics_into_shared_memory_are_charged_per_element_and_sm() -> None:
    """privatized.cake adds 2^28 f32 and 2^23 counts into shared memory (1.1 per clock per SM), then each of
    its 1024 CTAs flushes 1024 x 32 f32 (four columns a request) into global memory, and the busiest (`s == 0`,
    as every CTA is charged) its 1024 counts too."""
    target = plugins.registry().get("targets", "h200")
    clocks_per_ms = target.boost_clock_mhz * 1e3
    accumulate = _schedule("kmeans_update", "privatized").launches[1]
    shared = (2**28 + 2**23) / (target.sm_count * 1.1)
    flush = 1024 * (1024 * 32 / 4 + 1024) / 34
    assert accumulate.terms["atomics"] == pytest.approx((shared + flush) / clocks_per_ms, rel=1e-6)


def test_the_kmeans_iter_hopper_schedule_ranks_ahead_of_the_fused_one() -> None:
    """Measured (bench/results/2026-12-02-h200-kmeans-iter-2.json) at the reference cell in f16: hopper 1.79 ms,
    fused 2.90. Roofline 0.3.0 put fused ahead (1.026 against 1.036 ms): its scatter, v4 reductions a lane
    each, takes twice the L2 requests of hopper's quads."""
    cell = {**CELL, "T": "f16"}
    assert _schedule("kmeans_iter", "hopper", cell).ms < _schedule("kmeans_iter", "fused", cell).ms
