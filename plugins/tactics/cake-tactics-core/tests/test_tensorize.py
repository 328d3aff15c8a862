"""The tensorize tactic on the naive schedules of kmeans-assign and knn: what it offers, that the rowdot loop
becomes a mma.sync tile loop that keeps the kernel's meaning (the input and every output pass the verifier
for the target, the interpreter gate and extra ragged runs against the problem's oracle), that the kmeans
output compiles with NVRTC for h200 and a100, and that the precondition refuses what it must."""

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
from cake_core.target import Feature
from cake_core.verify.interp_gate import interp_checked, run_gate, type_variables
from cake_core.verify.runner import check_registered, verify_source

PROBLEMS = Path(plugins.__file__).parent / "problems"

#: sizes the interpreter runs besides the gate's: rows and items ragged against every tile offered
#: (R = 128 rows, BN = 64 or 128 items), more than one list entry for knn
EXTRA = {
    "kmeans-assign": ({"B": 2, "N": 130, "K": 200, "D": 64}, "f16"),
    "knn": ({"B": 1, "M": 131, "N": 150, "D": 128, "K": 4}, "bf16"),
}


def _text(problem: str) -> str:
    return (PROBLEMS / problem.replace("-", "_") / "schedules" / "naive.cake").read_text(encoding="utf-8")


def _naive(problem: str) -> n.Module:
    return parse(_text(problem), f"{problem}/naive.cake")


def _tactic() -> Tactic:
    return plugins.registry().get("tactics", "tensorize")


def _target(name: str = "h200"):
    return plugins.registry().get("targets", name)


def _passes(problem: str, module: n.Module) -> None:
    """The verifier for h200, the interpreter gate and one more ragged run judged by ``problem``'s oracle
    all pass ``module``, printed to text and read back (what an agent hands the loop)."""
    reg = plugins.registry()
    text = print_module(module)
    report = verify_source(text, "rewritten.cake", _target(), reg)
    assert report.ok, [d.message for d in report.diagnostics if d.is_error]
    prob, module = reg.get("problems", problem), parse(text, "rewritten.cake")
    gate = run_gate(prob, module, reg)
    assert gate.ok, [d.message for d in gate.diagnostics]
    shape, dtype = EXTRA[problem]
    inputs = prob.make_inputs(shape, dtype, 7)
    sizes = {**shape, **type_variables(prob, module.entry, dtype)}
    result = run_program(interp_checked(module, reg), inputs, sizes, seed=7, policy="random", sms=2)
    assert not result.findings, [f.to_diagnostic().message for f in result.findings]
    outputs = {t.name: result.outputs[t.name] for t in outputs_of(prob)}
    verdict = prob.check(inputs, outputs, shape, dtype)
    assert verdict.passed, verdict.summary()


def _role(module: n.Module, kernel: str) -> n.Role:
    (role,) = module.kernel(kernel).roles
    return role


def _ops(module: n.Module, kernel: str) -> list[str]:
    return [st.name for st in n.walk_stmts(_role(module, kernel).body) if isinstance(st, n.Op)]


def test_it_registers_through_the_entry_point() -> None:
    reg = plugins.registry()
    assert reg.registration("tactics", "tensorize").plugin.distribution == "cake-tactics-core"
    assert "\n" not in _tactic().precondition


@pytest.mark.parametrize(
    ("problem", "kernel", "fold", "consumer"),
    [("kmeans-assign", "assign", "registers", "argmin.update"), ("knn", "topk", "shared", "topk.update")],
)
def test_the_naive_loop_becomes_a_tensor_core_tile_loop(problem: str, kernel: str, fold: str, consumer: str) -> None:
    """Both item tiles are offered, each with the one fold the consumer accepts (argmin.update folds the
    mma accumulator in place; topk.update reads a shared tile), and every output keeps the meaning."""
    module, target, t = _naive(problem), _target(), _tactic()
    _passes(problem, module)
    apps = t.applications(module, target)
    var = "k" if problem == "kmeans-assign" else "j"
    assert [a.key for a in apps] == [f"tensorize@{kernel}:all:{var}(BN={bn},fold={fold})" for bn in (64, 128)]
    assert apps == list(t.applications(module, target))
    before = print_module(module)
    for app in apps:
        out = t.apply(module, target, app)
        _passes(problem, out)
        ops = _ops(out, kernel)
        assert "rowdot" not in ops and ops.count("mma.sync") == 1 and ops.count("ldmatrix") == 2
        assert ops.count("cp.async") == 2 and ops.count(consumer) == 1
        k = out.kernel(kernel)
        assert next(c.value for c in k.consts if c.name == "BN") == n.Num(app.params["BN"])
        assert k.cta.warps == n.Bin("*", n.Name("WM"), n.Name("WN"))
        (update,) = [st for st in n.walk_stmts(_role(out, kernel).body) if isinstance(st, n.Op) and st.name == consumer]
        assert update.attr("base") == n.Bin("*", n.Name(f"{var}t"), n.Name("BN"))
        assert update.attr("oob") == n.Name("skip")
    assert print_module(module) == before  # the input is left as it was


def test_kmeans_folds_in_registers_and_reduces_the_warps_partial_states() -> None:
    module, target = _naive("kmeans-assign"), _target()
    out = _tactic().apply(module, target, Application("tensorize", "assign:all:k", {"BN": 64, "fold": "registers"}))
    text = print_module(out)
    assert "reg bv: f32[R] layout mma_rows(WM, WN)" in text and "reg bi_rows: i32[R] layout rows" in text
    assert "argmin.update bv, bi <- acc, c_sq[b, kt * BN : +BN], base=kt * BN, scale=-2.0, oob=skip" in text
    assert "argmin.reduce bv_rows, bi_rows <- bv, bi, red" in text and "<- bi_rows, oob=skip" in text
    assert "smem xs: T[R, D] pad 8" in text and "cp.async cs <- c[b, kt * BN : +BN, :], oob=zero" in text
    # the shared fold does not type-check for argmin.update (it folds register tiles only): not offered
    shared = _tactic().apply(module, target, Application("tensorize", "assign:all:k", {"BN": 64, "fold": "shared"}))
    assert not verify_source(print_module(shared), "shared.cake", target, plugins.registry()).ok


def test_knn_routes_the_accumulator_through_shared_memory() -> None:
    module, target = _naive("knn"), _target()
    out = _tactic().apply(module, target, Application("tensorize", "topk:all:j", {"BN": 128, "fold": "shared"}))
    body = [st for st in _role(out, "topk").body if isinstance(st, n.For)][0].body
    tail = [st.name for st in body if isinstance(st, n.Op)][-4:]
    assert tail == ["store", "bar.sync", "topk.update", "bar.sync"]
    assert out.kernel("topk").buffer("sc").shape == (n.Name("R"), n.Name("BN"))
    assert "reg tv: f32[R, K] layout rows" in print_module(out)  # the state is left as it was


@pytest.mark.parametrize("target", ["h200", "a100"])
def test_the_kmeans_output_compiles_with_nvrtc(target: str) -> None:
    reg, tgt = plugins.registry(), _target(target)
    (app, *_) = _tactic().applications(_naive("kmeans-assign"), tgt)
    checked = check_registered(_tactic().apply(_naive("kmeans-assign"), tgt, app), tgt, reg)
    (spec,) = [s for s in program_specs(checked) if dict(s.values) == {"T": "bf16", "D": 128}]
    compiled = pipeline.compile_program(pipeline.build(checked, tgt, spec), tgt, cache=False)
    assert compiled.arch == tgt.nvrtc_arch and len(compiled.cubin) > 0
    assert all(r.registers and r.spill_stores == 0 for r in compiled.kernels.values())


def test_new_names_collide_with_none_of_the_kernels() -> None:
    """State named like the tactic's stems (``acc``, ``a``) pushes the new tiles to ``acc2``, ``a2``."""
    text = _text("kmeans-assign").replace("bv", "acc").replace("bi", "a")
    module, target = parse(text, "renamed.cake"), _target()
    app = Application("tensorize", "assign:all:k", {"BN": 64, "fold": "registers"})
    assert app in _tactic().applications(module, target)
    out = _tactic().apply(module, target, app)
    assert "mma.sync acc2 <- a2, bt^T" in print_module(out)
    _passes("kmeans-assign", out)


def test_the_precondition_refuses_what_it_must() -> None:
    t, target, reg = _tactic(), _target(), plugins.registry()
    # no rowdot loop: the tensor-core schedules of both problems
    for problem, schedule in (("kmeans-assign", "ampere"), ("knn", "fused_topk")):
        path = PROBLEMS / problem.replace("-", "_") / "schedules" / f"{schedule}.cake"
        assert t.applications(parse(path.read_text(encoding="utf-8"), str(path)), target) == []
    # the rowdot's result is used elsewhere (here also cleared before the loop): still a valid kernel
    text = _text("kmeans-assign").replace("    fill bi, value=-1\n", "    fill bi, value=-1\n    fill dot, value=0.0\n")
    assert text != _text("kmeans-assign") and verify_source(text, "used.cake", target, reg).ok
    assert t.applications(parse(text, "used.cake"), target) == []
    # the consumer uses the loop variable beyond `k : +1` and `base=k`
    text = _text("knn").replace("base=j, k=K", "base=j, limit=j + 1, k=K")
    assert text != _text("knn") and t.applications(parse(text, "limit.cake"), target) == []
    # a target without mma.sync
    old = attrs.evolve(target, features=target.features - {Feature.MMA_SYNC})
    assert t.applications(_naive("kmeans-assign"), old) == []
