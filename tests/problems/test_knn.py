"""The knn and knn-ip problems (declarations, inputs, fp64 reference and oracle) and knn's fused top-k schedule:
type-checked, verified for h200, run in the interpreter to the oracle's approval; planted bugs caught."""

from __future__ import annotations

import numpy as np
import pytest

from cake_core import plugins
from cake_core.errors import CakeUserError
from cake_core.hostdata import decode, encode
from cake_core.problems.knn import BENCH_CELLS, CHECK_CELLS, DEFAULT_CELL, KNN_IP
from cake_core.problems.knn import KNN as P
from cake_core.problems.knn.baseline import TORCH_FP32_IP, TORCH_FP32_L2
from cake_core.problems.problem import Problem, baseline_of, validate_cell
from cake_core.semantics import run_program
from cake_core.verify.runner import verify_source

SMALL = {"B": 2, "M": 30, "N": 50, "D": 64, "K": 4}


def _dist(inputs: dict[str, np.ndarray], dtype: str) -> np.ndarray:
    """Float64 squared distances [B, M, N], summed directly."""
    q, x = decode(inputs["q"], dtype, np.float64), decode(inputs["x"], dtype, np.float64)
    return ((q[:, :, None, :] - x[:, None, :, :]) ** 2).sum(-1)


def _dot(inputs: dict[str, np.ndarray], dtype: str) -> np.ndarray:
    """Float64 inner products [B, M, N]."""
    q, x = decode(inputs["q"], dtype, np.float64), decode(inputs["x"], dtype, np.float64)
    return np.einsum("bmd,bnd->bmn", q, x)


# -- the problems ------------------------------------------------------------------------------------


def test_registered_as_builtin_problems():
    reg = plugins.registry()
    assert reg.get("problems", "knn") is P and reg.get("problems", "knn-ip") is KNN_IP
    for name in ("knn", "knn-ip"):
        assert isinstance(reg.get("problems", name), Problem) and reg.registration("problems", name).plugin.builtin
    assert "Euclidean" in P.summary and "inner product" in KNN_IP.summary


def test_each_metric_names_torch_with_fp32_scores_as_its_baseline():
    reg = plugins.registry()
    l2, ip = baseline_of(reg.get("problems", "knn")), baseline_of(reg.get("problems", "knn-ip"))
    assert (l2, ip) == (TORCH_FP32_L2, TORCH_FP32_IP) and l2.name == ip.name == "torch-fp32"
    assert l2.entry == "cake_core.problems.knn.baseline:torch_fp32_l2" and "baddbmm" in l2.summary
    assert ip.entry == "cake_core.problems.knn.baseline:torch_fp32_ip" and "bmm q @ x.T" in ip.summary
    assert l2.requires == ip.requires == ("torch",) and all("fp32" in b.summary for b in (l2, ip))


def test_declarations_and_cells():
    assert [t.describe() for t in P.tensors] == [
        "q: [B, M, D] in {bf16, f16} (input)",
        "x: [B, N, D] in {bf16, f16} (input)",
        "out: [B, M, K] in i32 (output)",
    ]
    assert [s.describe() for s in P.sizes][-1] == "K in {1, 2, 4, 8, 10, 16, 32, 64, 100, 128}"
    assert P.default_cell == DEFAULT_CELL == CHECK_CELLS[0] and KNN_IP.cells == P.cells
    for cell in CHECK_CELLS + BENCH_CELLS:
        validate_cell(P, cell.shape, cell.dtype)
    assert {c.shape["K"] for c in BENCH_CELLS} == {1, 10, 100} and {c.shape["D"] for c in BENCH_CELLS} == {64, 128, 256}
    assert P.flops(SMALL) == 2 * 2 * 30 * 50 * 64
    with pytest.raises(CakeUserError, match="`knn-ip` needs K <= N"):
        KNN_IP.make_inputs({**SMALL, "N": 3}, "bf16", 0)
    with pytest.raises(ValueError):
        type(P)(metric="cosine")


@pytest.mark.parametrize("problem", [P, KNN_IP], ids=["l2", "ip"])
@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_reference_is_the_float64_k_best_best_first(problem, dtype):
    inputs = problem.make_inputs(SMALL, dtype, seed=1)
    assert all(np.array_equal(inputs[k], problem.make_inputs(SMALL, dtype, seed=1)[k]) for k in inputs)
    assert all(np.count_nonzero(v) > 0.9 * v.size for v in inputs.values())
    out = problem.reference(inputs, SMALL, dtype)["out"]
    assert out.dtype == np.int32 and out.shape == (2, 30, 4)
    score = -_dot(inputs, dtype) if problem is KNN_IP else _dist(inputs, dtype)
    assert np.array_equal(out, np.argsort(score, axis=-1, kind="stable")[..., :4])
    report = problem.check(inputs, {"out": out}, SMALL, dtype)
    assert report.passed and report.worst_excess < 1e-9 and report.checked == 2 * 30 * 4


def test_the_metrics_choose_differently():
    inputs = P.make_inputs(SMALL, "f16", seed=6)
    l2, ip = P.reference(inputs, SMALL, "f16")["out"], KNN_IP.reference(inputs, SMALL, "f16")["out"]
    assert (l2 != ip).mean() > 0.2
    assert not KNN_IP.check(inputs, {"out": l2}, SMALL, "f16").passed
    assert not P.check(inputs, {"out": ip}, SMALL, "f16").passed


def test_reference_breaks_ties_to_the_smaller_index():
    inputs = P.make_inputs(SMALL, "bf16", seed=2)
    inputs["x"][0, 10:20] = inputs["x"][0, 7]  # points 7 and 10..19 coincide
    inputs["q"][0, 0] = inputs["x"][0, 7]
    out = P.reference(inputs, SMALL, "bf16")["out"]
    assert out[0, 0].tolist() == [7, 10, 11, 12]
    swapped = out.copy()
    swapped[0, 0] = [12, 19, 7, 15]  # equal distances: any of the tied points, in any order, passes
    assert P.check(inputs, {"out": swapped}, SMALL, "bf16").passed


@pytest.mark.parametrize("problem", [P, KNN_IP], ids=["l2", "ip"])
def test_oracle_catches_range_repeats_order_and_far_points(problem):
    inputs = problem.make_inputs(SMALL, "f16", seed=3)
    ref = problem.reference(inputs, SMALL, "f16")["out"]
    score = -_dot(inputs, "f16") if problem is KNN_IP else _dist(inputs, "f16")
    cases = {
        "outside": ((1, 5, 2), 50, "outside [0, 50)"),
        "negative": ((1, 6, 0), -1, "outside [0, 50)"),
        "repeat": ((0, 3, 3), int(ref[0, 3, 1]), "already returned at rank 1"),
        "far": ((1, 29, 0), int(score[1, 29].argmax()), "points score below it by more than the tolerance"),
        "fifth": ((0, 7, 3), int(np.argsort(score[0, 7], kind="stable")[4]), "4 points score below it by more than"),
    }
    for pos, value, words in cases.values():
        bad = ref.copy()
        bad[pos] = value
        r = problem.check(inputs, {"out": bad}, SMALL, "f16")
        assert not r.passed and r.violations == 1 and r.first[0].position == pos and words in r.first[0].detail
        assert r.worst_excess > 1
    slightly = ref.copy()
    slightly[0, 7, 3] = int(np.argsort(score[0, 7], kind="stable")[4])
    r = type(problem)(metric=problem.metric, rtol=1.0).check(inputs, {"out": slightly}, SMALL, "f16")
    assert r.passed  # within a (huge) tolerance, the fifth best may stand for the fourth
    backwards = ref[..., ::-1].copy()  # the right set, worst first
    r = problem.check(inputs, {"out": backwards}, SMALL, "f16")
    assert not r.passed and r.violations >= 2 * 30
    assert not problem.check(inputs, {"out": ref[..., :3]}, SMALL, "f16").passed  # malformed


def test_cells_too_big_for_the_host_need_a_runner():
    inputs = P.make_inputs(SMALL, "bf16", seed=4)
    small = type(P)(host_limit=1000)
    with pytest.raises(CakeUserError, match="give it a GPU runner"):
        small.check(inputs, P.reference(inputs, SMALL, "bf16"), SMALL, "bf16")
    with pytest.raises(CakeUserError, match="B\\*M\\*N\\*D"):
        P.check(inputs, {}, DEFAULT_CELL.shape, "bf16")  # checks the cell before reading anything
    with pytest.raises(CakeUserError, match="unknown oracle method"):
        P.check(inputs, {}, SMALL, "bf16", method="guess")


# -- the fused top-k schedule ------------------------------------------------------------------------

SHAPES = [
    ({"B": 2, "M": 70, "N": 150, "D": 64, "K": 8}, "bf16"),  # ragged M and N: 3 tiles of 64 points
    ({"B": 1, "M": 130, "N": 200, "D": 128, "K": 10}, "f16"),  # two CTAs of queries, 4 point tiles
    ({"B": 1, "M": 20, "N": 33, "D": 64, "K": 32}, "bf16"),  # the longest lists, N barely over K
    ({"B": 1, "M": 9, "N": 70, "D": 256, "K": 1}, "bf16"),  # nearest neighbour only; D = 256: 8 k-chunks
]


def _run(checked, shape, dtype, inputs=None, **kw):
    inputs = inputs if inputs is not None else P.make_inputs(shape, dtype, 3)
    result = run_program(checked, inputs, {**shape, "T": dtype}, **kw)
    return inputs, result


def test_schedule_verifies_clean_on_h200(schedule_text):
    target = plugins.registry().get("targets", "h200")
    diags = list(verify_source(schedule_text("fused_topk"), "fused_topk.cake", target).diagnostics)
    assert diags == [], [f"{d.code}: {d.message}" for d in diags]


@pytest.mark.parametrize("shape,dtype", SHAPES, ids=lambda v: "-".join(f"{k}{x}" for k, x in v.items())
                         if isinstance(v, dict) else v)  # fmt: skip
def test_schedule_gives_the_k_nearest(compile_cake, schedule_text, shape, dtype):
    checked = compile_cake(schedule_text("fused_topk"), "fused_topk.cake")
    inputs, result = _run(checked, shape, dtype)
    assert result.ok and not result.stopped and result.launches == 2, [str(f) for f in result.findings]
    report = P.check(inputs, {"out": result.outputs["out"]}, shape, dtype)
    assert report.passed, report.summary()
    # fp32 scores may swap near-ties; on these inputs they pick the float64 answer almost everywhere
    assert (result.outputs["out"] == P.reference(inputs, shape, dtype)["out"]).mean() > 0.99


def test_schedule_is_race_free_under_the_random_policy(compile_cake, schedule_text):
    checked = compile_cake(schedule_text("fused_topk"), "fused_topk.cake")
    shape, dtype = SHAPES[0]
    _, a = _run(checked, shape, dtype, policy="random", seed=5)
    _, b = _run(checked, shape, dtype, policy="sequential")
    assert a.ok and b.ok and np.array_equal(a.outputs["out"], b.outputs["out"])


def _even_nearest(shape: dict[str, int], dtype: str) -> dict[str, np.ndarray]:
    """Inputs whose K nearest points are all at even indices (odd points pushed far away): every list
    of the split state that holds the even columns then needs all K slots."""
    inputs = P.make_inputs(shape, dtype, 7)
    x = decode(inputs["x"], dtype)
    x[:, 1::2] += 8.0
    inputs["x"] = encode(x, dtype)
    return inputs


def test_planted_k_off_by_one_in_the_lists_fails_the_oracle(compile_cake, schedule_text, plant):
    text = schedule_text("fused_topk")
    for old, new in [("reg tv: f32[BM * P, K]", "reg tv: f32[BM * P, K - 1]"),
                     ("reg ti: i32[BM * P, K]", "reg ti: i32[BM * P, K - 1]"),
                     ("k=K, scale=-2.0", "k=K - 1, scale=-2.0")]:  # fmt: skip
        text = plant(text, old, new)
    text = text.replace("K in {1, 2, 4, 8, 10, 16, 32}", "K in {8}")  # lists of K - 1 >= 1
    checked = compile_cake(text, "bug.cake")  # it type-checks: 2 lists of K - 1 still hold K candidates
    shape, dtype = SHAPES[0]
    inputs = _even_nearest(shape, dtype)
    good = compile_cake(schedule_text("fused_topk"), "fused_topk.cake")
    assert P.check(inputs, {"out": _run(good, shape, dtype, inputs)[1].outputs["out"]}, shape, dtype).passed
    _, result = _run(checked, shape, dtype, inputs)
    assert result.ok
    report = P.check(inputs, {"out": result.outputs["out"]}, shape, dtype)
    assert not report.passed and report.violations >= 2 * 70  # rank K - 1 of every query
    assert {v.position[2] for v in report.first} == {7}


def test_planted_k_mismatch_between_state_and_update_is_a_type_error(check, schedule_text, plant):
    checked = check(plant(schedule_text("fused_topk"), "k=K, scale=-2.0", "k=K + 1, scale=-2.0"), "bug.cake")
    assert not checked.ok and any("rows * split by k" in d.message for d in checked.diagnostics)


def test_planted_wrong_base_index_fails_the_oracle(compile_cake, schedule_text, plant):
    checked = compile_cake(plant(schedule_text("fused_topk"), "base=i / KC * BN,", "base=i / KC * BN + 1,"))
    shape, dtype = SHAPES[0]
    inputs, result = _run(checked, shape, dtype)
    assert not P.check(inputs, {"out": result.outputs["out"]}, shape, dtype).passed


def test_planted_missing_barrier_before_the_epilogue_is_a_race(compile_cake, schedule_text, plant):
    text = plant(schedule_text("fused_topk"), "store sc <- acc\n        bar.sync\n", "store sc <- acc\n")
    checked = compile_cake(text, "bug.cake")
    _, result = _run(checked, *SHAPES[0])
    assert "CS003" in result.codes


def test_the_gate_samples_only_ks_the_schedule_takes(compile_cake, schedule_text):
    """knn's K reaches 128; fused_topk takes K <= 32: the interpreter gate's runs stay inside the schedule."""
    from cake_core.verify.interp_gate import sample

    runs = sample(P, compile_cake(schedule_text("fused_topk"), "fused_topk.cake"))
    assert runs and all(dict(r.shape)["K"] in (1, 2, 4, 8, 10, 16, 32) for r in runs)


def test_cake_run_seeds_each_metric_from_its_own_schedules():
    from cake_core.loop.run import seed_schedules

    assert [p.name for p in seed_schedules(P)] == ["fused_topk.cake", "hopper.cake", "hopper_split.cake",
                                                   "hopper_split_big.cake", "naive.cake"]  # fmt: skip
    assert [p.relative_to(p.parents[2]).as_posix() for p in seed_schedules(KNN_IP)] == [
        "ip/schedules/hopper.cake", "ip/schedules/hopper_split.cake", "ip/schedules/hopper_split_big.cake"]
