"""One test per hook (``test_hook_<hook name>...``; ``test_docs.py`` checks every hook has one).

Targets, primitives and problems go through real discovery of the installed ``cake-example-plugin``;
rules through ``cake-rules-core`` where it is installed and an in-process rule; cost models, tactics
and agents (no installed package registers one yet) through small in-process plugins implementing
their Protocols. Each test checks that what a plugin registers lands under its category and its plugin,
and that the object works through the registry."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Mapping, Sequence

import attrs
import cake_example_plugin
import numpy as np
import pytest
from cake_core import plugins
from cake_core.cost.model import CostModel, Estimate, LaunchEstimate
from cake_core.diagnostics.diagnostic import Diagnostic, Severity
from cake_core.errors import CakeUserError
from cake_core.hookspecs import hookimpl
from cake_core.ir import nodes as n
from cake_core.ir.hashing import structural_hash
from cake_core.ir.model import CheckedModule
from cake_core.ir.parser import parse
from cake_core.ir.primitive import Access, Kind, Primitive
from cake_core.ir.printer import print_module
from cake_core.loop.agent import Agent, Feedback, Parent, Proposal
from cake_core.loop.records import Budgets, RunInfo
from cake_core.loop.tactic import Application, Tactic
from cake_core.problems.problem import Problem
from cake_core.target import Feature, Target
from cake_core.verify.rule import Rule, RuleContext
from cake_core.verify.runner import verify_source

KERNEL = """\
kernel k(x: global f32[N, 64], out: global f32[N, 64])
  domain N >= 1
  grid (t) over (cdiv(N, 64))
  cta warps 4
  role all warps 0..4:
    scale.rows out[t * 64 : +64, :] <- x[t * 64 : +64, :], oob=skip
"""


# ---------------------------------------------------------------------------------------------------
# Small implementations of the provisional Protocols (what a plugin author would write)
# ---------------------------------------------------------------------------------------------------


@attrs.define
class OpCountModel:
    """A cost model: ``ms_per_op`` milliseconds per operation, refitted from measurements by ``update``."""

    name: str = "op-count"
    version: str = "1"
    calibrated: bool = False
    ms_per_op: float = 0.01

    def estimate(self, checked: CheckedModule, target: Target, values: Mapping[str, int | str]) -> Estimate:
        ops = _ops(checked.module)
        launch = LaunchEstimate("all", self.ms_per_op * ops, "issue", {"issue": self.ms_per_op * ops}, 1, 1)
        return Estimate(self.name, self.version, self.calibrated, launch.ms, "issue", (launch,))

    def update(self, estimates: Sequence[Estimate], measured_ms: Sequence[float]) -> None:
        ops = sum(e.ms / self.ms_per_op for e in estimates)
        if ops:
            self.ms_per_op, self.calibrated = sum(measured_ms) / ops, True


def _ops(m: n.Module) -> int:
    return sum(isinstance(s, n.Op) for k in m.kernels for r in k.roles for s in n.walk_stmts(r.body))


@attrs.frozen
class RenameKernels:
    """A tactic that renames every kernel: the structural hash must not notice."""

    name: str = "rename-kernels"
    precondition: str = "the module has no program (launches name kernels; this small tactic does not follow them)"

    def applications(self, module: n.Module, target: Target) -> list[Application]:
        if module.program is not None:
            return []
        return [Application(self.name, k.name, {"suffix": s}) for k in module.kernels for s in ("a", "b")]

    def apply(self, module: n.Module, target: Target, application: Application) -> n.Module:
        suffix = application.params["suffix"]
        kernels = tuple(attrs.evolve(k, name=f"{k.name}_{suffix}") if k.name == application.site else k
                        for k in module.kernels)  # fmt: skip
        return attrs.evolve(module, kernels=kernels)


@attrs.frozen
class EchoAgent:
    """An agent that proposes its parents again, reprinted and reparsed."""

    name: str = "echo"

    def propose(self, run: RunInfo, parents: Sequence[Parent], feedback: Sequence[Feedback], target: Target,
                count: int, rng: random.Random, known: frozenset[str]) -> tuple[list[Proposal], int]:  # fmt: skip
        out = [Proposal(parse(print_module(p.module), p.module.path), "echoed", p.hash) for p in parents]
        return out[:count], 0


class EveryScaleRows(Rule):
    """An advisory rule that points at every `scale.rows`, known only by name."""

    name = "EX901"
    slug = "every-scale-rows"
    severity = Severity.WARNING
    summary = "points at every `scale.rows`"
    explanation = "\n".join(
        ["## What it does", "Points.", "## Why is this bad?", "It is not.", "## Example", "```", "```",
         "## Use instead", "```", "```"]  # fmt: skip
    )

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        for typed in ctx.ops():
            if typed.prim.name == "scale.rows":
                yield self.at(typed.op.loc, "a `scale.rows`")


def _plugin(name: str, hook: str, *objects: object) -> object:
    """An in-process plugin whose ``hook`` registers ``objects``."""

    def impl(register: Callable[[object], None]) -> None:
        for obj in objects:
            register(obj)

    return type("Plugin", (), {"__name__": name, hook: staticmethod(hookimpl(impl))})()


# ---------------------------------------------------------------------------------------------------
# One test per hook
# ---------------------------------------------------------------------------------------------------


def test_hook_cake_register_targets() -> None:
    reg = plugins.load()
    r = reg.registration("targets", "example-gpu")
    assert r.plugin.distribution == "cake-example-plugin" and r.plugin.version == "0.3.1"
    t: Target = r.obj
    # its own data, not the NVIDIA package's
    assert (t.nvrtc_arch, t.compute_capability, t.architecture, t.vendor) == ("sm_89", (8, 9), "ada", "example")
    assert t.features == {Feature.CP_ASYNC, Feature.LDMATRIX, Feature.MMA_SYNC, Feature.FP8}
    assert t.data_version == "0.3.1" and t.sm_count == 60 and t.smem_per_block_optin == 101376
    assert t == cake_example_plugin.load_target()
    # every other target comes from a plugin too: the core holds no hardware facts
    assert not any(reg.registration("targets", x).plugin.builtin for x in reg.names("targets"))
    assert reg.registration("targets", "h200").plugin.distribution == "cake-targets-nvidia"


def test_hook_cake_register_primitives() -> None:
    reg = plugins.load()
    r = reg.registration("primitives", "scale.rows")
    assert r.plugin.name == "example"
    prim: Primitive = r.obj
    (dst,) = prim.signature.outs
    assert (dst.name, dst.kinds, dst.access, dst.mask_attr) == ("dst", {Kind.GLOBAL}, Access.WRITE, "oob")
    assert prim.requires == frozenset()  # lowers for every architecture
    # the core's primitives come through the same hook, from the built-in plugin
    assert reg.registration("primitives", "store").plugin.distribution == "cake-core"


def test_hook_cake_register_rules() -> None:
    reg = plugins.load(extra=[_plugin("every-scale-rows", "cake_register_rules", EveryScaleRows())])
    r = reg.registration("rules", "EX901")
    assert r.plugin.distribution == "(in-process)"
    diags = verify_source(KERNEL, "k.cake", reg.get("targets", "example-gpu"), reg).diagnostics
    mine = [d for d in diags if d.code == "EX901"]
    assert [(d.primary.line, d.severity, d.plugin) for d in mine] == [(6, Severity.WARNING, "(in-process)")]
    if "CR108" in reg.names("rules"):  # the installed hard-gate pack registers through the same hook
        assert reg.registration("rules", "CR108").plugin.distribution == "cake-rules-core"


def test_hook_cake_register_mutations() -> None:
    from cake_core.mutate import Mutant, Operator
    from cake_core.mutate.rewrite import replace

    class UnmaskedScaleRows(Operator):
        """A mutation class that drops the mask of every `scale.rows`, known only by name."""

        name = "unmasked-scale-rows"
        summary = "the `oob` mask of a `scale.rows` removed"

        def kernel_mutants(self, module, kernel, primitives) -> Iterator[Mutant]:  # type: ignore[no-untyped-def]
            for _, op in n.walk_ops(kernel):
                if op.name == "scale.rows":
                    mutated = replace(module, op, attrs.evolve(op, attrs=()))
                    yield self.mutant(kernel, op.loc, "mask dropped", mutated, op.name, "drop")

    reg = plugins.load(extra=[_plugin("unmasked", "cake_register_mutations", UnmaskedScaleRows())])
    r = reg.registration("mutations", "unmasked-scale-rows")
    assert r.plugin.distribution == "(in-process)"
    (m,) = r.obj.mutants(parse(KERNEL, "k.cake"), {p.name: p for p in reg.values("primitives")})
    report = verify_source(print_module(m.module), "k.cake", reg.get("targets", "example-gpu"), reg)
    if "CR108" in reg.names("rules"):  # the mutant is what the hard gate refuses
        assert "CR108" in {d.code for d in report.diagnostics}
    with pytest.raises(CakeUserError, match=r"registered a mutation class that is not a cake_core\.mutate\.mutant\.Operator"):
        plugins.load(extra=[_plugin("not-one", "cake_register_mutations", RenameKernels())])


def test_hook_cake_register_cost_models() -> None:
    model = OpCountModel()
    reg = plugins.load(extra=[_plugin("op-count", "cake_register_cost_models", model)])
    got: CostModel = reg.get("cost_models", "op-count")
    assert got is model and reg.registration("cost_models", "op-count").plugin.distribution == "(in-process)"
    # what a model sees: the checked module, the target and the program's sizes; it may learn
    from cake_core.ir.sema import check_module

    checked = check_module(parse(KERNEL, "k.cake"), {p.name: p for p in reg.values("primitives")})
    est = got.estimate(checked, reg.get("targets", "example-gpu"), {"N": 64})
    assert est.ms == pytest.approx(0.01 * _ops(checked.module)) and not est.calibrated
    got.update([est], [2 * est.ms])
    assert got.estimate(checked, reg.get("targets", "example-gpu"), {"N": 64}).ms == pytest.approx(2 * est.ms)
    # the contract is checked when a model registers: one that cannot learn from measurements is refused
    cannot_learn = type("NoUpdate", (), {"name": "no-update", "version": "1", "calibrated": False,
                                         "estimate": OpCountModel.estimate})()
    with pytest.raises(CakeUserError, match=r"registered a cost model that is not a cake_core\.cost\.model\.CostModel"):
        plugins.load(extra=[_plugin("no-update", "cake_register_cost_models", cannot_learn)])


def test_hook_cake_register_tactics() -> None:
    reg = plugins.load(extra=[_plugin("rename", "cake_register_tactics", RenameKernels())])
    tactic: Tactic = reg.get("tactics", "rename-kernels")
    assert isinstance(tactic, Tactic)
    module = parse(KERNEL, "k.cake")
    target = reg.get("targets", "example-gpu")
    apps = tactic.applications(module, target)
    assert [a.key for a in apps] == ["rename-kernels@k(suffix=a)", "rename-kernels@k(suffix=b)"]
    renamed = tactic.apply(module, target, apps[1])
    assert renamed.kernels[0].name == "k_b" and module.kernels[0].name == "k"
    assert structural_hash(renamed) == structural_hash(module)


def test_hook_cake_register_agents() -> None:
    reg = plugins.load(extra=[_plugin("echo", "cake_register_agents", EchoAgent())])
    agent: Agent = reg.get("agents", "echo")
    assert isinstance(agent, Agent)
    module = parse(KERNEL, "k.cake")
    parent = Parent(module, structural_hash(module), "k", None, False)
    run = RunInfo("k", "h200", "out", 0, Budgets(), {"shape": {"N": 64}, "dtype": "f32"})
    (child,), tokens = agent.propose(run, [parent, parent], [], reg.get("targets", "h200"), 1, random.Random(0),
                                     frozenset())  # fmt: skip
    assert structural_hash(child.module) == parent.hash and child.parent == parent.hash and tokens == 0


def test_hook_cake_register_problems() -> None:
    reg = plugins.load()
    r = reg.registration("problems", "scale-rows")
    assert (r.plugin.distribution, r.plugin.version) == ("cake-example-plugin", "0.3.1")
    problem: Problem = r.obj
    assert isinstance(problem, Problem)
    shape, dtype = {"N": 5, "D": 64}, "bf16"
    inputs = problem.make_inputs(shape, dtype, seed=7)
    good = problem.reference(inputs, shape, dtype)
    assert problem.check(inputs, good, shape, dtype).passed
    bad = {"out": good["out"].copy()}
    bad["out"][3, 10] ^= np.uint16(1)  # one bf16 ulp off
    report = problem.check(inputs, bad, shape, dtype)
    assert not report.passed and report.violations == 1 and report.first[0].position == (3, 10)
    assert reg.registration("problems", "kmeans-assign").plugin.distribution == "cake-core"


def test_hook_cake_register_schedules(tmp_path) -> None:
    from cake_core.loop.run import seed_schedules
    from cake_core.problems.schedule import Schedule

    path = tmp_path / "mine.cake"
    path.write_text(KERNEL)
    mine = Schedule("kmeans-assign/mine", "kmeans-assign", path, {"h200"})
    reg = plugins.load(extra=[_plugin("sched", "cake_register_schedules", mine)])
    assert reg.registration("schedules", "kmeans-assign/mine").plugin.distribution == "(in-process)"
    problem = reg.get("problems", "kmeans-assign")
    own = seed_schedules(problem)
    assert seed_schedules(problem, reg, "h200") == [path, *own]  # written for the target: first
    assert path not in seed_schedules(problem, reg, "a100")  # written for h200 only
    stray = Schedule("nope/mine", "no-such-problem", path)
    with pytest.raises(CakeUserError, match="uses the problem `no-such-problem`"):
        plugins.load(extra=[_plugin("stray", "cake_register_schedules", stray)])
