"""The ``split-reduction`` tactic on kernels of two problems (kmeans-assign: ``kmeans_assign_w3``; knn:
``knn_ws``): the rewrite keeps the kernel's meaning (input and outputs pass the verifier for h200 and the
interpreter gate against the oracle; a split with no tiles of its own, and partial minima that tie across
splits, merge to the lowest index), it is offered on h200 only where its merge lowers there (``load`` into
``rows`` tiles, ``topk.reduce`` through a shared scratch; both lower now), and where its precondition
refuses."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cake_core import pipeline, plugins
from cake_core.ir import nodes as n
from cake_core.ir.parser import parse
from cake_core.ir.printer import print_module
from cake_core.loop.tactic import Application
from cake_core.problems.problem import outputs_of
from cake_core.runtime.device import requires_gpu
from cake_core.semantics import run_program
from cake_core.verify.interp_gate import interp_checked, type_variables

from cake_tactics_core.fit import fits
from cake_tactics_core.judge import judge
from cake_tactics_core.split import _lowers, _site

HERE = Path(__file__).parent / "schedules"
KMEANS = Path(plugins.__file__).parent / "problems" / "kmeans_assign" / "schedules"


def _read(path: Path) -> n.Module:
    return parse(path.read_text(encoding="utf-8"), path.name)


def _split(module: n.Module, kernel: str, factor: int) -> tuple[n.Module, str]:
    """``module`` split by ``factor`` at ``kernel`` (the input left as it was), and its text."""
    reg = plugins.registry()
    before = print_module(module)
    out = reg.get("tactics", "split-reduction").apply(
        module, reg.get("targets", "h200"), Application("split-reduction", kernel, {"split": factor}))  # fmt: skip
    assert print_module(module) == before
    return out, print_module(out)


def _clean(problem: str, module: n.Module) -> None:
    errors = judge(problem, module)[1]
    assert not errors, errors


def test_the_tactic_registers_through_the_entry_point() -> None:
    reg = plugins.registry()
    assert reg.registration("tactics", "split-reduction").plugin.distribution == "cake-tactics-core"
    assert "\n" not in reg.get("tactics", "split-reduction").precondition


def test_kmeans_partial_minima_merge_in_a_new_launch() -> None:
    module = _read(HERE / "kmeans_assign_w3.cake")
    _clean("kmeans-assign", module)
    for factor in (2, 4):
        out, text = _split(module, "assign", factor)
        _clean("kmeans-assign", out)
        assert f"buffer out_v: global f32[B, N, {factor}]\n  buffer out_i: global i32[B, N, {factor}]" in text
        assert "launch assign(x, c, c_sq, out_v, out_i)\n  launch merge(out_v, out_i, out)" in text
        assert f"const SP = {factor}\n  grid (t, b, sp) over (cdiv(N, BM), B, SP)" in text
        assert text.count("for kt in sp * cdiv(NC, SP) .. min(NC, (sp + 1) * cdiv(NC, SP)):") == 2
        assert "store out_v[b, t * BM + self * ROWS : +ROWS, sp] <- bv, oob=skip" in text
        assert "topk.reduce fv, fi <- v, i, red, k=1\n    store out[b, t * R : +R] <- fi, oob=skip" in text


def test_kmeans_ties_across_splits_take_the_lowest_index() -> None:
    """Centroids 128..255 (split 1's tile) repeat 0..127 (split 0's): every point's nearest distance
    ties across the splits, and the merge keeps the lower index. With one tile (K=5) split 1 has none:
    its ``(inf, -1)`` loses."""
    reg = plugins.registry()
    prob = reg.get("problems", "kmeans-assign")
    out, _ = _split(_read(HERE / "kmeans_assign_w3.cake"), "assign", 2)
    checked = interp_checked(out, reg)
    for shape in ({"B": 1, "N": 70, "K": 256, "D": 64}, {"B": 2, "N": 130, "K": 5, "D": 64}):
        inputs = prob.make_inputs(shape, "bf16", 3)
        if shape["K"] == 256:
            inputs["c"][:, 128:] = inputs["c"][:, :128]
        sizes = {**shape, **type_variables(prob, out.entry, "bf16")}
        result = run_program(checked, inputs, sizes, seed=1, policy="random", sms=1)
        assert not result.findings, [f.message for f in result.findings]
        got = {o.name: result.outputs[o.name] for o in outputs_of(prob)}
        assert prob.check(inputs, got, shape, "bf16").passed
        assert np.all((got["out"] >= 0) & (got["out"] < min(128, shape["K"])))


def test_knn_partial_lists_merge_in_a_new_launch() -> None:
    module = _read(HERE / "knn_ws.cake")
    _clean("knn", module)
    out, text = _split(module, "topk", 2)
    _clean("knn", out)
    assert "buffer out_v: global f32[B, M, 2, K]" in text and "launch merge(out_v, out_i, out)" in text
    assert "store out_i[b, t * BM : +BM, sp, :] <- fi, oob=skip" in text
    assert "topk.reduce fv, fi <- v, i, red, k=K\n    store out[b, t * R : +R, :] <- fi, oob=skip" in text


def test_offered_where_the_merge_lowers() -> None:
    """The split fits h200 (verifier, shared memory, divisions) and its merge (``load`` into rows tiles,
    ``topk.reduce`` through a shared scratch) lowers there: both factors are offered."""
    reg = plugins.registry()
    h200, tactic = reg.get("targets", "h200"), reg.get("tactics", "split-reduction")
    module = _read(HERE / "kmeans_assign_w3.cake")
    out, _ = _split(module, "assign", 2)
    assert fits(out, h200) and _lowers(out, h200)
    keys = [a.key for a in tactic.applications(module, h200)]
    assert keys == ["split-reduction@assign(split=2)", "split-reduction@assign(split=4)"]


@requires_gpu
@pytest.mark.parametrize("factor", [2, 4])
def test_a_split_kmeans_kernel_passes_the_oracle_on_the_gpu(factor: int) -> None:
    """Fresh random inputs, outputs poisoned, checked by the oracle before and after (``bench_candidate``), at
    ragged cells where a split holds one centroid tile or several."""
    from cake_core.loop.benchmark import bench_candidate
    from cake_core.runtime.worker import GpuRunner

    reg = plugins.registry()
    out, _ = _split(_read(HERE / "kmeans_assign_w3.cake"), "assign", factor)
    cand = pipeline.Candidate(pipeline.load_text(print_module(out), "split.cake"), reg.get("targets", "h200"))
    problem = reg.get("problems", "kmeans-assign")
    with GpuRunner() as runner:
        for seed, (shape, dtype) in enumerate([({"B": 2, "N": 300, "K": 530, "D": 128}, "bf16"),
                                               ({"B": 1, "N": 1000, "K": 1100, "D": 64}, "f16")]):  # fmt: skip
            m = bench_candidate(cand, problem, shape, dtype, runner, impl="split", timing=None, seed=seed)
            assert m.status == "ok" and m.correct, (shape, m.status, m.error, m.oracle)


def test_refused_without_a_plain_reduction_tail() -> None:
    """hopper.cake is persistent (each CTA walks tiles already); the knn wgmma kernel stores its lists with
    no reduction before (``store out <- ti`` after ``pipe.release``)."""
    reg = plugins.registry()
    h200, tactic = reg.get("targets", "h200"), reg.get("tactics", "split-reduction")
    for path, kernel in ((KMEANS / "hopper.cake", "assign"), (HERE / "t2_knn_wgmma.cake", "topk")):
        module = _read(path)
        assert _site(module, module.kernel(kernel)) is None
        assert tactic.applications(module, h200) == []
