"""The cp-async-pipeline tactic on the tensorize tactic's outputs for two problems: kmeans-assign (the W1 form:
one centroid tile copied and waited for in every iteration) and knn (the same with a shared score tile the loop
still orders with a CTA barrier). Each input and output passes the verifier for h200, the interpreter gate and
one more ragged run (several tiles, so the ring wraps; threads interleaved at random) against the problem's
oracle; the kmeans output compiles with NVRTC for a100 and h200 without spills; ring-depth deepens the new
ring, and the tma and warp-specialize tactics take it; the precondition refuses a loop without a copy, a
buffer already a ring, a role of several instances and a wait that leaves groups pending."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from cake_core import pipeline, plugins
from cake_core.ir import nodes as n
from cake_core.ir.parser import parse
from cake_core.ir.printer import print_module
from cake_core.loop.tactic import Application, Tactic
from cake_core.lower.program import program_specs
from cake_core.problems.problem import outputs_of
from cake_core.semantics import run_program
from cake_core.verify.interp_gate import interp_checked, type_variables
from cake_core.verify.runner import check_registered, verify_source

from cake_tactics_core.cp_async_pipeline import Refused, plan
from cake_tactics_core.judge import judge

PROBLEMS = Path(plugins.__file__).parent / "problems"

#: the tensorize application giving each problem's input, the kernel and its loop variable
W1 = {
    "kmeans-assign": (Application("tensorize", "assign:all:k", {"BN": 64, "fold": "registers"}), "assign", "kt"),
    "knn": (Application("tensorize", "topk:all:j", {"BN": 64, "fold": "shared"}), "topk", "jt"),
}
#: sizes of the extra run: items ragged against BN = 64 and over several tiles (the ring wraps)
EXTRA = {
    "kmeans-assign": ({"B": 2, "N": 130, "K": 200, "D": 64}, "f16"),
    "knn": ({"B": 1, "M": 131, "N": 150, "D": 64, "K": 4}, "bf16"),
}


def _tactic() -> Tactic:
    return plugins.registry().get("tactics", "cp-async-pipeline")


def _target(name: str = "h200"):
    return plugins.registry().get("targets", name)


def _w1(problem: str) -> n.Module:
    """``problem``'s naive schedule with its rowdot loop tensorized: the tile copied and waited for at once."""
    path = PROBLEMS / problem.replace("-", "_") / "schedules" / "naive.cake"
    naive = parse(path.read_text(encoding="utf-8"), str(path))
    return plugins.registry().get("tactics", "tensorize").apply(naive, _target(), W1[problem][0])


def _run(problem: str, text: str) -> tuple[list[str], bool]:
    """The interpreter's findings and the oracle's verdict on a ragged run of ``text`` over several tiles with
    threads interleaved at random."""
    reg = plugins.registry()
    prob, module = reg.get("problems", problem), parse(text, "rewritten.cake")
    shape, dtype = EXTRA[problem]
    inputs = prob.make_inputs(shape, dtype, 11)
    sizes = {**shape, **type_variables(prob, module.entry, dtype)}
    result = run_program(interp_checked(module, reg), inputs, sizes, seed=11, policy="random", sms=2)
    verdict = prob.check(inputs, {t.name: result.outputs[t.name] for t in outputs_of(prob)}, shape, dtype)
    return [f.to_diagnostic().message for f in result.findings], verdict.passed


def _passes(problem: str, module: n.Module) -> None:
    """The verifier for h200 and the interpreter gate pass ``module`` (printed and read back), and so does a
    ragged run over several tiles with threads interleaved at random, judged by ``problem``'s oracle."""
    text, errors = judge(problem, module)
    assert not errors, errors
    assert _run(problem, text) == ([], True)


def _pipelined(problem: str) -> tuple[n.Module, n.Module]:
    """The input and the output of the one application offered on ``problem``'s W1 form, both checked."""
    module, (_, kernel, var) = _w1(problem), W1[problem]
    _passes(problem, module)
    before = print_module(module)
    offered = _tactic().applications(module, _target())
    assert [a.key for a in offered] == [f"cp-async-pipeline@{kernel}:all:{var}()"]
    out = _tactic().apply(module, _target(), offered[0])
    assert print_module(module) == before  # the input is left as it was
    _passes(problem, out)
    return module, out


def _loop(module: n.Module, kernel: str) -> list[str]:
    """The lines of ``kernel``'s role from the prologue's ``let`` on, stripped."""
    text = print_module(module)
    lines = [ln.strip() for ln in text[text.index(f"kernel {kernel}(") :].splitlines()]
    return lines[next(i for i, ln in enumerate(lines) if ln.startswith("let n_")) :]


def test_it_registers_through_the_entry_point() -> None:
    reg = plugins.registry()
    assert reg.registration("tactics", "cp-async-pipeline").plugin.distribution == "cake-tactics-core"
    assert isinstance(_tactic(), Tactic) and "\n" not in _tactic().precondition


def test_the_kmeans_tile_becomes_a_ring_copied_ahead() -> None:
    """The centroid buffer becomes ``cs[S_cs]`` filled one iteration ahead; the top-level copy of the rows
    stays where it was and joins the prologue's first group; the trailing bar.sync goes."""
    _, out = _pipelined("kmeans-assign")
    text = print_module(out)
    assert "const S_cs = 2" in text and "smem cs: T[S_cs][BN, D] pad 8" in text and "smem xs: T[R, D] pad 8" in text
    assert "cp.async xs <- x[b, t * R : +R, :], oob=zero\n    let n_cs = cdiv(K, BN)\n" in text
    assert _loop(out, "assign")[:19] == [
        "let n_cs = cdiv(K, BN)",
        "for p in 0 .. S_cs - 1:",
        "if p < n_cs:",
        "cp.async cs[p] <- c[b, p * BN : +BN, :], oob=zero",
        "cp.async.commit",
        "for kt in 0 .. cdiv(K, BN):",
        "cp.async.wait pending=S_cs - 2",
        "bar.sync",
        "fill acc, value=0.0",
        "for kk in 0 .. D / 16:",
        "ldmatrix a <- xs[:, kk * 16 : +16]",
        "ldmatrix bt <- cs[kt % S_cs, :, kk * 16 : +16]",
        "mma.sync acc <- a, bt^T",
        "argmin.update bv, bi <- acc, c_sq[b, kt * BN : +BN], base=kt * BN, scale=-2.0, oob=skip",
        "let j = kt + S_cs - 1",
        "if j < n_cs:",
        "cp.async cs[j % S_cs] <- c[b, j * BN : +BN, :], oob=zero",
        "cp.async.commit",
        "argmin.reduce bv_rows, bi_rows <- bv, bi, red",
    ]


def test_a_loop_that_does_not_start_at_zero_counts_its_stages_from_its_start() -> None:
    """``for kt in 1 .. NT + 1``: stage ``(kt - 1) % S_cs``, the prologue's tiles from the loop's start."""
    text = print_module(_w1("kmeans-assign")).replace("for kt in 0 .. cdiv(K, BN):", "for kt in 1 .. cdiv(K, BN) + 1:")
    module = parse(text.replace("kt * BN", "(kt - 1) * BN"), "shifted.cake")
    _passes("kmeans-assign", module)
    (app,) = _tactic().applications(module, _target())
    out = _tactic().apply(module, _target(), app)
    _passes("kmeans-assign", out)
    loop = _loop(out, "assign")
    assert "cp.async cs[p] <- c[b, (1 + p - 1) * BN : +BN, :], oob=zero" in loop
    assert "ldmatrix bt <- cs[(kt - 1) % S_cs, :, kk * 16 : +16]" in loop and "let j = kt - 1 + S_cs - 1" in loop


def test_ring_depth_deepens_the_new_ring() -> None:
    _, out = _pipelined("kmeans-assign")
    ring = plugins.registry().get("tactics", "ring-depth")
    offered = {a.key: a for a in ring.applications(out, _target())}
    assert "ring-depth@assign.cs(stages=3)" in offered
    deeper = ring.apply(out, _target(), offered["ring-depth@assign.cs(stages=3)"])
    assert "const S_cs = 3" in print_module(deeper)
    _passes("kmeans-assign", deeper)


def test_the_ring_is_the_form_tma_and_warp_specialize_follow() -> None:
    """The output's prologue and prefetch are the ring filled ahead that the TMA tactics read back."""
    _, out = _pipelined("kmeans-assign")
    for name in ("tma", "warp-specialize"):
        offered = plugins.registry().get("tactics", name).applications(out, _target())
        assert [a.key for a in offered] == [f"{name}@assign()"]


@pytest.mark.parametrize("target", ["h200", "a100"])
def test_the_kmeans_output_compiles_with_nvrtc_without_spills(target: str) -> None:
    reg, tgt = plugins.registry(), _target(target)
    module = _w1("kmeans-assign")
    (app,) = _tactic().applications(module, tgt)
    checked = check_registered(_tactic().apply(module, tgt, app), tgt, reg)
    (spec,) = [s for s in program_specs(checked) if dict(s.values) == {"T": "bf16", "D": 128}]
    compiled = pipeline.compile_program(pipeline.build(checked, tgt, spec), tgt, cache=False)
    assert compiled.arch == tgt.nvrtc_arch and len(compiled.cubin) > 0
    assert all(r.registers and r.spill_stores == 0 for r in compiled.kernels.values())


def test_knn_keeps_the_barrier_of_its_score_tile() -> None:
    """The bar.sync between the score tile's store and topk.update orders the tile, not the copy: it stays;
    the trailing one goes (the next iteration's top bar.sync orders the next store after this read)."""
    _, out = _pipelined("knn")
    loop = _loop(out, "topk")
    assert loop[loop.index("for jt in 0 .. cdiv(N, BN):") + 1 :][:2] == ["cp.async.wait pending=S_xs - 2", "bar.sync"]
    tail = loop[loop.index("store sc <- acc") :]
    assert tail[:3] == ["store sc <- acc", "bar.sync", tail[2]] and tail[2].startswith("topk.update")
    assert tail[3:7] == ["let j = jt + S_xs - 1", "if j < n_xs:",
                         "cp.async xs[j % S_xs] <- x[b, j * BN : +BN, :], oob=zero", "cp.async.commit"]  # fmt: skip
    assert tail[7].startswith("store out[")  # nothing after the loop touches shared memory: no fence


def test_a_barrier_follows_the_loop_where_later_code_touches_its_shared_memory() -> None:
    """Code after the loop that writes the score tile the last iteration read needs the last trailing
    bar.sync: it moves after the loop. Without it the interpreter finds the overwrite (the verifier's race rule
    does not follow the loop's last reads out of the loop)."""
    module = _w1("knn")
    knn = print_module(module).replace("    store out[", "    store sc <- acc\n    store out[")
    module = parse(knn, "fenced.cake")
    assert verify_source(knn, "fenced.cake", _target(), plugins.registry()).ok
    (app,) = _tactic().applications(module, _target())
    text = print_module(_tactic().apply(module, _target(), app))
    assert "    bar.sync\n    store sc <- acc\n    store out[" in text
    unfenced = text.replace("    bar.sync\n    store sc <- acc\n", "    store sc <- acc\n")
    assert verify_source(unfenced, "unfenced.cake", _target(), plugins.registry()).ok
    findings, _ = _run("knn", unfenced)
    assert any("may overwrite it before `topk.update`" in f for f in findings), findings
    _passes("knn", parse(text, "fenced.cake"))


def test_the_precondition_refuses_what_it_cannot_pipeline() -> None:
    t, target = _tactic(), _target()
    w1 = _w1("kmeans-assign")
    kernel = w1.kernel("assign")
    # no loop copy: the naive schedule (no cp.async at all)
    naive = parse((PROBLEMS / "kmeans_assign" / "schedules" / "naive.cake").read_text(encoding="utf-8"), "naive.cake")
    assert t.applications(naive, target) == []
    with pytest.raises(Refused, match="no top-level loop copies"):
        plan(naive.kernels[-1])
    # already pipelined: this tactic's output and staging's ring
    (app,) = t.applications(w1, target)
    assert t.applications(t.apply(w1, target, app), target) == []
    site = Application("staging", "assign:all:k:c[b, k, :]", {"stages": 2})
    assert t.applications(plugins.registry().get("tactics", "staging").apply(naive, target, site), target) == []
    # a buffer that is already a ring, copied tile i into stage i % 2 and waited for at once
    ring = print_module(w1).replace("smem cs: T[BN, D]", "smem cs: T[2][BN, D]")
    ring = ring.replace("cp.async cs <-", "cp.async cs[kt % 2] <-").replace("<- cs[:,", "<- cs[kt % 2, :,")
    assert verify_source(ring, "ring.cake", target, plugins.registry()).ok
    with pytest.raises(Refused, match="already a ring"):
        plan(parse(ring, "ring.cake").kernel("assign"))
    # several role instances, and several roles (the warp-specialized split)
    several = attrs.evolve(kernel, roles=(attrs.evolve(kernel.roles[0], per=n.Num(4)),))
    with pytest.raises(Refused, match="more than one role instance"):
        plan(several)
    ws = plugins.registry().get("tactics", "warp-specialize")
    split = ws.apply(w1, target, Application("warp-specialize", "assign", {}))
    assert len(split.kernel("assign").roles) == 2 and t.applications(split, target) == []
    # a wait that leaves a group pending does not wait for the copy at once
    pending = print_module(w1).replace("cp.async.wait pending=0", "cp.async.wait pending=1")
    with pytest.raises(Refused, match="does not wait for its copies at once"):
        plan(parse(pending, "pending.cake").kernel("assign"))
