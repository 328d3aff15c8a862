"""The kmeans-update problem (declarations, inputs, fp64 reference and oracle) and its atomic schedule:
type-checked, verified for h200, run in the interpreter to the oracle's approval; planted bugs caught."""

from __future__ import annotations

import numpy as np
import pytest

from cake_core import plugins
from cake_core.errors import CakeUserError
from cake_core.hostdata import decode
from cake_core.problems.kmeans_update import CHECK_CELLS, DEFAULT_CELL, KMEANS_UPDATE as P
from cake_core.problems.kmeans_update.baseline import FLASH_KMEANS_UPDATE
from cake_core.problems.problem import METHOD_NUMPY, Problem, baseline_of, validate_cell
from cake_core.semantics import run_program
from cake_core.verify.runner import verify_source

SMALL = {"B": 2, "N": 300, "K": 13, "D": 64}


def _brute(inputs: dict[str, np.ndarray], dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """Float64 means and counts, one point at a time."""
    x, a, c = decode(inputs["x"], dtype, np.float64), inputs["assign"], decode(inputs["c"], dtype, np.float64)
    sums, counts = np.zeros(c.shape), np.zeros(c.shape[:2], np.int64)
    for b in range(x.shape[0]):
        for i in range(x.shape[1]):
            sums[b, a[b, i]] += x[b, i]
            counts[b, a[b, i]] += 1
    means = np.where(counts[..., None] > 0, sums / np.maximum(counts, 1)[..., None], c)
    return means, counts


# -- the problem -------------------------------------------------------------------------------------


def test_registered_as_a_builtin_problem_with_flash_kmeans_as_baseline():
    reg = plugins.registry()
    assert reg.get("problems", "kmeans-update") is P and isinstance(P, Problem)
    assert reg.registration("problems", "kmeans-update").plugin.builtin
    b = baseline_of(P)
    assert b is FLASH_KMEANS_UPDATE and b.name == "flash-kmeans" and "its sort included" in b.summary
    assert b.entry == "cake_core.problems.kmeans_update.baseline:flash_kmeans_update"
    assert b.requires == ("torch", "triton", "flash_kmeans")


def test_declarations_and_cells():
    assert [t.describe() for t in P.tensors] == [
        "x: [B, N, D] in {bf16, f16} (input)",
        "assign: [B, N] in i32 (input)",
        "c: [B, K, D] in {bf16, f16} (input)",
        "centroids: [B, K, D] in f32 (output)",
        "counts: [B, K] in i32 (output)",
    ]
    assert P.default_cell == DEFAULT_CELL == CHECK_CELLS[0]
    for cell in CHECK_CELLS:
        validate_cell(P, cell.shape, cell.dtype)
    assert P.flops(SMALL) == 2 * (300 + 13) * 64
    assert P.min_bytes(SMALL, "bf16") == 2 * 300 * 64 * 2 + 2 * 300 * 4 + 2 * 13 * 64 * 2 + 2 * 13 * 64 * 4 + 2 * 13 * 4


def test_make_inputs_is_seeded_and_leaves_clusters_empty():
    a = P.make_inputs(SMALL, "bf16", seed=1)
    assert a["x"].dtype == np.uint16 and a["assign"].dtype == np.int32 and a["c"].shape == (2, 13, 64)
    assert all(np.array_equal(a[k], P.make_inputs(SMALL, "bf16", seed=1)[k]) for k in a)
    assert not np.array_equal(a["assign"], P.make_inputs(SMALL, "bf16", seed=2)["assign"])
    for b in range(2):
        counts = np.bincount(a["assign"][b], minlength=13)
        assert (counts == 0).sum() == 1 and counts.min() == 0  # 13 // 8 = 1 empty cluster
        assert a["assign"][b].min() >= 0 and a["assign"][b].max() < 13


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_reference_is_the_float64_mean_and_empty_clusters_keep_their_centroid(dtype):
    inputs = P.make_inputs(SMALL, dtype, seed=3)
    ref = P.reference(inputs, SMALL, dtype)
    means, counts = _brute(inputs, dtype)
    assert np.array_equal(ref["counts"], counts)
    assert np.array_equal(ref["centroids"], means.astype(np.float32))
    empty = counts == 0
    assert empty.any() and np.array_equal(ref["centroids"][empty], decode(inputs["c"], dtype)[empty])
    report = P.check(inputs, ref, SMALL, dtype)
    # the only error left is the final rounding of each float64 mean to f32
    assert report.passed and 0.0 < report.worst_excess <= 0.25 and report.method == METHOD_NUMPY
    assert report.checked == 2 * 13 * 64 + 2 * 13


def test_oracle_accepts_fp32_sums_in_any_order():
    inputs = P.make_inputs(SMALL, "bf16", seed=4)
    x = decode(inputs["x"], "bf16")
    rng = np.random.default_rng(0)
    sums = np.zeros((2, 13, 64), np.float32)
    for b in range(2):
        order = rng.permutation(300)
        np.add.at(sums[b], inputs["assign"][b][order], x[b][order])  # fp32, shuffled
    ref = P.reference(inputs, SMALL, "bf16")
    n = ref["counts"][..., None]
    cents = np.where(n > 0, sums / np.maximum(n, 1), ref["centroids"]).astype(np.float32)
    report = P.check(inputs, {"centroids": cents, "counts": ref["counts"]}, SMALL, "bf16")
    assert report.passed and 0 < report.worst_excess < 1


def test_oracle_catches_wrong_counts_means_and_empty_clusters():
    inputs = P.make_inputs(SMALL, "bf16", seed=5)
    ref = P.reference(inputs, SMALL, "bf16")
    counts = np.bincount(inputs["assign"][0], minlength=13)
    full, empty = int(np.argmax(counts)), int(np.argmin(counts))

    bad = {k: v.copy() for k, v in ref.items()}
    bad["counts"][0, full] += 1
    r = P.check(inputs, bad, SMALL, "bf16")
    assert not r.passed and r.violations == 1 and r.first[0].tensor == "counts" and r.first[0].position == (0, full)

    bad = {k: v.copy() for k, v in ref.items()}
    x0 = decode(inputs["x"][0], "bf16", np.float64)
    first = int(np.flatnonzero(inputs["assign"][0] == full)[0])
    # the mean without one of its points
    without = (ref["centroids"][0, full] * counts[full] - x0[first]) / counts[full]
    bad["centroids"][0, full] = without.astype(np.float32)
    r = P.check(inputs, bad, SMALL, "bf16")
    assert not r.passed and r.first[0].position[:2] == (0, full) and "off by" in r.first[0].detail

    bad = {k: v.copy() for k, v in ref.items()}
    bad["centroids"][0, empty] = 0.0  # an empty cluster zeroed instead of keeping its centroid
    r = P.check(inputs, bad, SMALL, "bf16")
    assert not r.passed and r.violations == 64 and "is empty" in r.first[0].detail

    bad = {k: v.copy() for k, v in ref.items()}
    bad["centroids"][1, 2, 3] = np.nan
    assert P.check(inputs, bad, SMALL, "bf16").violations == 1
    assert not P.check(inputs, {"centroids": ref["centroids"]}, SMALL, "bf16").passed  # counts missing


def test_judge_works_the_inputs_out_once_and_gives_checks_verdicts():
    inputs = P.make_inputs(SMALL, "f16", seed=7)
    ref = P.reference(inputs, SMALL, "f16")
    wrong = {k: v.copy() for k, v in ref.items()}
    wrong["counts"][1, 0] += 2
    judge = P.judge(inputs, SMALL, "f16")
    for outputs in (ref, wrong, {"counts": ref["counts"]}):
        got, want = judge(outputs), P.check(inputs, outputs, SMALL, "f16")
        assert (got.passed, got.violations, got.first) == (want.passed, want.violations, want.first)
    assert not judge(wrong).passed and judge(ref).passed
    bad = dict(inputs, assign=inputs["assign"] + 13)
    with pytest.raises(CakeUserError, match="assignments must lie in"):
        P.judge(bad, SMALL, "f16")


def test_bad_inputs_and_cells_too_big_for_numpy_are_user_errors():
    inputs = P.make_inputs(SMALL, "bf16", seed=6)
    bad = dict(inputs, assign=inputs["assign"].copy())
    bad["assign"][0, 0] = 13
    with pytest.raises(CakeUserError, match=r"assignments must lie in \[0, K\)"):
        P.reference(bad, SMALL, "bf16")
    with pytest.raises(CakeUserError, match="no GPU reference"):
        type(P)(numpy_limit=1000).check(inputs, P.reference(inputs, SMALL, "bf16"), SMALL, "bf16")


# -- the atomic schedule -----------------------------------------------------------------------------

SHAPES = [
    ({"B": 2, "N": 300, "K": 13, "D": 64}, "bf16"),  # N not a multiple of the 256 points of a CTA
    ({"B": 1, "N": 257, "K": 200, "D": 128}, "f16"),  # K spans two 128-cluster tiles of finalize
    ({"B": 1, "N": 512, "K": 3, "D": 256}, "bf16"),  # many points on few clusters; N divides
]


def _run(checked, shape, dtype, seed=3, **kw):
    inputs = P.make_inputs(shape, dtype, seed)
    result = run_program(checked, inputs, {**shape, "T": dtype}, **kw)
    outputs = {"centroids": result.outputs["centroids"], "counts": result.outputs["counts"]}
    return inputs, result, outputs


def test_schedule_verifies_clean_on_h200(schedule_text):
    target = plugins.registry().get("targets", "h200")
    diags = list(verify_source(schedule_text("atomic"), "atomic.cake", target).diagnostics)
    assert diags == [], [f"{d.code}: {d.message}" for d in diags]


@pytest.mark.parametrize("shape,dtype", SHAPES, ids=lambda v: "-".join(f"{k}{x}" for k, x in v.items())
                         if isinstance(v, dict) else v)  # fmt: skip
def test_schedule_gives_the_oracles_answer(compile_cake, schedule_text, shape, dtype):
    checked = compile_cake(schedule_text("atomic"), "atomic.cake")
    inputs, result, outputs = _run(checked, shape, dtype)
    assert result.ok and not result.stopped and result.launches == 3, [str(f) for f in result.findings]
    report = P.check(inputs, outputs, shape, dtype)
    assert report.passed, report.summary()
    assert np.array_equal(outputs["counts"], P.reference(inputs, shape, dtype)["counts"])


def test_schedule_is_race_free_and_counts_are_exact_under_every_interleaving(compile_cake, schedule_text):
    checked = compile_cake(schedule_text("atomic"), "atomic.cake")
    shape, dtype = SHAPES[0]
    inputs = P.make_inputs(shape, dtype, 9)
    runs = [run_program(checked, inputs, {**shape, "T": dtype}, policy=p, seed=s)
            for p, s in (("sequential", 0), ("random", 1), ("random", 2), ("random", 2))]  # fmt: skip
    assert all(r.ok for r in runs)
    # the two instances' atomics interleave differently: integer counts agree exactly, fp32 sums up to
    # the order of additions (as on a GPU), and one policy and seed always gives the same bits
    assert all(np.array_equal(r.outputs["counts"], runs[0].outputs["counts"]) for r in runs)
    assert np.array_equal(runs[2].outputs["centroids"], runs[3].outputs["centroids"])
    for r in runs:
        outputs = {"centroids": r.outputs["centroids"], "counts": r.outputs["counts"]}
        assert P.check(inputs, outputs, shape, dtype).passed


@pytest.mark.parametrize(
    "old,new,what",
    [
        # the scatter reads the assignments one row off: each point lands in its neighbour's cluster
        ("load ai <- assign[b, row : +R]", "load ai <- assign[b, row + 1 : +R]", "wrong index"),
        # tail points read index 0 instead of -1: cluster 0 gains phantom zero points
        ("load ai <- assign[b, row : +R], oob=fill, value=-1", "load ai <- assign[b, row : +R], oob=zero", "mask"),
        # counts scattered by the first instance's indices only
        ("atomic.add counts[b, :] <- one, ai, oob=skip",
         "if self == 0:\n      atomic.add counts[b, :] <- one, ai, oob=skip", "lost atomics"),
    ],
)  # fmt: skip
def test_planted_bugs_fail_the_oracle(compile_cake, schedule_text, plant, old, new, what):
    checked = compile_cake(plant(schedule_text("atomic"), old, new), "bug.cake")
    shape, dtype = SHAPES[0]
    inputs, result, outputs = _run(checked, shape, dtype)
    assert not result.stopped
    report = P.check(inputs, outputs, shape, dtype)
    assert not report.passed, what


def test_an_unmasked_scatter_of_the_tail_faults(compile_cake, schedule_text, plant):
    text = plant(schedule_text("atomic"), "atomic.add counts[b, :] <- one, ai, oob=skip",
                 "atomic.add counts[b, :] <- one, ai")  # fmt: skip
    checked = compile_cake(text, "bug.cake")
    _, result, _ = _run(checked, *SHAPES[0])
    assert result.stopped and result.codes == ["CS001"] and "holds the index -1" in result.findings[0].message
