"""The kmeans-iter problem: declarations, inputs, the float64 reference, and an oracle that judges the
assignments as kmeans-assign does and the centroids against the candidate's own clusters (a legal tie
choice passes; a wrong centroid, a wrong assignment or a lost empty-cluster rule fails)."""

from __future__ import annotations

import numpy as np
import pytest

from cake_core import plugins
from cake_core.hostdata import decode, encode
from cake_core.problems.kmeans_iter import CHECK_CELLS, DEFAULT_CELL, KMEANS_ITER as P
from cake_core.problems.problem import METHOD_NUMPY, Problem, baseline_of, validate_cell

SMALL = {"B": 2, "N": 300, "K": 13, "D": 64}


def _brute(inputs: dict[str, np.ndarray], dtype: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Nearest centroids (direct squared distances, ties to the smallest index), float64 means and counts."""
    x, c = decode(inputs["x"], dtype, np.float64), decode(inputs["c"], dtype, np.float64)
    assign = np.argmin(((x[:, :, None, :] - c[:, None, :, :]) ** 2).sum(-1), axis=-1).astype(np.int32)
    sums, counts = np.zeros(c.shape), np.zeros(c.shape[:2], np.int64)
    for b in range(x.shape[0]):
        np.add.at(sums[b], assign[b], x[b])
        counts[b] = np.bincount(assign[b], minlength=c.shape[1])
    means = np.where(counts[..., None] > 0, sums / np.maximum(counts, 1)[..., None], c)
    return assign, means, counts


def _fp32_update(inputs: dict[str, np.ndarray], assign: np.ndarray, dtype: str, seed: int = 0) -> np.ndarray:
    """What a GPU kernel computes: fp32 sums in a shuffled order, one fp32 division, rounded to ``dtype``."""
    x, c = decode(inputs["x"], dtype), inputs["c"]
    rng = np.random.default_rng(seed)
    out = c.copy()
    for b in range(x.shape[0]):
        order = rng.permutation(x.shape[1])
        sums = np.zeros((c.shape[1], c.shape[2]), np.float32)
        np.add.at(sums, assign[b][order], x[b][order])
        n = np.bincount(assign[b], minlength=c.shape[1]).astype(np.float32)[:, None]
        full = np.broadcast_to(n > 0, sums.shape)
        out[b][full] = encode((sums / np.maximum(n, 1))[full], dtype)
    return out


def test_registered_as_a_builtin_problem_with_flash_kmeans_as_baseline():
    reg = plugins.registry()
    assert reg.get("problems", "kmeans-iter") is P and isinstance(P, Problem)
    assert reg.registration("problems", "kmeans-iter").plugin.builtin
    assert baseline_of(P).entry == "cake_core.problems.kmeans_iter.baseline:flash_kmeans_iter"


def test_declarations_and_cells():
    assert [t.describe() for t in P.tensors] == [
        "x: [B, N, D] in {bf16, f16} (input)",
        "c: [B, K, D] in {bf16, f16} (input)",
        "assign: [B, N] in i32 (output)",
        "centroids: [B, K, D] in {bf16, f16} (output)",
    ]
    assert not P.tensors[3].reproducible and P.tensors[2].reproducible
    assert P.default_cell == DEFAULT_CELL == CHECK_CELLS[0]
    assert DEFAULT_CELL.shape == {"B": 32, "N": 65536, "K": 1024, "D": 128} and DEFAULT_CELL.dtype == "bf16"
    assert {c.dtype for c in CHECK_CELLS} == {"bf16", "f16"}
    for cell in CHECK_CELLS:
        validate_cell(P, cell.shape, cell.dtype)
    assert P.flops(SMALL) == 2 * 2 * 300 * 13 * 64 + 2 * 300 * 64 + 2 * 13 * 64
    assert P.min_bytes(SMALL, "f16") == 2 * 300 * 64 * 2 + 2 * 2 * 13 * 64 * 2 + 2 * 300 * 4


def test_make_inputs_is_seeded_random_and_leaves_clusters_empty():
    a = P.make_inputs(SMALL, "bf16", seed=1)
    assert a["x"].dtype == np.uint16 and a["c"].shape == (2, 13, 64)
    assert all(np.array_equal(a[k], P.make_inputs(SMALL, "bf16", seed=1)[k]) for k in a)
    assert not np.array_equal(a["x"], P.make_inputs(SMALL, "bf16", seed=2)["x"])
    for k in a:
        v = decode(a[k], "bf16")
        assert np.count_nonzero(v) > 0.99 * v.size and v.std() > 0.5
    _, _, counts = _brute(a, "bf16")
    assert ((counts == 0).sum(axis=1) >= 1).all()  # 13 // 8 = 1 centroid out of reach in each batch


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_reference_is_the_float64_iteration_and_passes_its_oracle(dtype):
    inputs = P.make_inputs(SMALL, dtype, seed=3)
    ref = P.reference(inputs, SMALL, dtype)
    assign, means, counts = _brute(inputs, dtype)
    assert np.array_equal(ref["assign"], assign)
    assert np.array_equal(ref["centroids"], encode(means, dtype))
    empty = counts == 0
    assert empty.any() and np.array_equal(ref["centroids"][empty], inputs["c"][empty])
    report = P.check(inputs, ref, SMALL, dtype)
    assert report.passed and report.method == METHOD_NUMPY, report.summary()
    assert report.checked == 2 * 300 + 2 * 13 * 64 and 0.0 < report.worst_excess < 1.0


def test_fp32_sums_in_any_order_rounded_to_the_input_type_pass():
    inputs = P.make_inputs(SMALL, "f16", seed=4)
    ref = P.reference(inputs, SMALL, "f16")
    for seed in range(3):
        got = {"assign": ref["assign"], "centroids": _fp32_update(inputs, ref["assign"], "f16", seed)}
        assert P.check(inputs, got, SMALL, "f16").passed


def test_a_legal_tie_choice_is_judged_by_its_own_clusters():
    inputs = P.make_inputs(SMALL, "bf16", seed=5)
    ref = P.reference(inputs, SMALL, "bf16")
    used = np.bincount(ref["assign"][0], minlength=13)
    i = int(np.argmax(used))
    j = (i + 1) % 13
    c = inputs["c"].copy()
    c[0, j] = c[0, i]  # an exact tie: the reference keeps the smaller index, a kernel may take the other
    tied = dict(inputs, c=c)
    ref = P.reference(tied, SMALL, "bf16")
    assert (ref["assign"][0] == min(i, j)).any()
    other = ref["assign"].copy()
    other[0][ref["assign"][0] == min(i, j)] = max(i, j)
    fair = {"assign": other, "centroids": _fp32_update(tied, other, "bf16")}
    assert P.check(tied, fair, SMALL, "bf16").passed
    # the reference's centroids beside the other choice of assignments describe other clusters: wrong
    mixed = P.check(tied, {"assign": other, "centroids": ref["centroids"]}, SMALL, "bf16")
    assert not mixed.passed and mixed.first[0].tensor == "centroids"


def test_the_oracle_catches_a_wrong_assignment_a_wrong_centroid_and_a_lost_empty_cluster_rule():
    inputs = P.make_inputs(SMALL, "bf16", seed=6)
    ref = P.reference(inputs, SMALL, "bf16")

    # one point sent to the wrong cluster, centroids consistent with that choice: the assignment fails
    assign = ref["assign"].copy()
    assign[1, 7] = (assign[1, 7] + 1) % 13
    r = P.check(inputs, {"assign": assign, "centroids": _fp32_update(inputs, assign, "bf16")}, SMALL, "bf16")
    assert not r.passed and r.violations == 1 and r.first[0].tensor == "assign" and r.first[0].position == (1, 7)
    assign[1, 7] = 13  # outside [0, K): an assignment violation, the centroids judged without it
    r = P.check(inputs, {"assign": assign, "centroids": ref["centroids"]}, SMALL, "bf16")
    assert not r.passed and r.first[0].tensor == "assign" and "outside" in r.first[0].detail

    # one cluster's mean without one of its points
    counts = np.bincount(ref["assign"][0], minlength=13)
    full = int(np.argmax(counts))
    x0 = decode(inputs["x"][0], "bf16", np.float64)
    members = ref["assign"][0] == full
    bad = ref["centroids"].copy()
    bad[0, full] = encode(x0[members][1:].mean(axis=0), "bf16")
    r = P.check(inputs, {"assign": ref["assign"], "centroids": bad}, SMALL, "bf16")
    assert not r.passed and r.first[0].tensor == "centroids" and r.first[0].position[:2] == (0, full)
    assert "off by" in r.first[0].detail

    # an empty cluster divided by its zero count (NaN) or zeroed instead of keeping its centroid
    empty = int(np.argmin(counts))
    assert counts[empty] == 0
    for value in (np.nan, 0.0):
        bad = ref["centroids"].copy()
        bad[0, empty] = encode(np.full(64, value), "bf16")
        r = P.check(inputs, {"assign": ref["assign"], "centroids": bad}, SMALL, "bf16")
        assert not r.passed and r.violations == 64 and "has no point" in r.first[0].detail

    # centroids left in fp32, or missing: malformed
    assert not P.check(inputs, {"assign": ref["assign"], "centroids": decode(ref["centroids"], "bf16")},
                       SMALL, "bf16").passed  # fmt: skip
    assert not P.check(inputs, {"assign": ref["assign"]}, SMALL, "bf16").passed


def test_the_centroid_facts_are_worked_out_once_for_the_same_points_and_assignments(monkeypatch):
    """A benchmark judges several implementations on one run's inputs: the float64 facts of a batch come
    from the cache when the points and assignments are the ones already judged, and anew when either differs."""
    from cake_core.problems.kmeans_iter import oracle

    calls = []
    real = oracle.batch_truth
    monkeypatch.setattr(oracle, "batch_truth", lambda *a: calls.append(1) or real(*a))
    monkeypatch.setattr(oracle, "_TRUTHS", type(oracle._TRUTHS)())
    inputs = P.make_inputs(SMALL, "bf16", seed=6)
    ref = P.reference(inputs, SMALL, "bf16")
    calls.clear()  # (the reference works out its own)
    assert P.check(inputs, ref, SMALL, "bf16").passed and len(calls) == SMALL["B"]
    assert P.check(inputs, ref, SMALL, "bf16").passed and len(calls) == SMALL["B"]  # both batches cached
    moved = ref["assign"].copy()
    moved[1, 0] = (moved[1, 0] + 1) % SMALL["K"]  # another cluster for one point of batch 1
    report = P.check(inputs, {"assign": moved, "centroids": ref["centroids"]}, SMALL, "bf16")
    assert len(calls) == SMALL["B"] + 1 and not report.passed
