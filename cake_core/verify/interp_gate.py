"""The interpreter gate: a schedule of a problem run in the CPU interpreter on a sample of the problem's
shape domain, judged by the problem's oracle, its findings as diagnostics.

:func:`sample` picks the runs; :func:`run_gate` runs them and answers with a :class:`GateReport`. Both
``cake verify --problem`` and ``cake run``'s stage 2 call :func:`run_gate` (after the static rules pass).

**The sample.** Each run-time size of the problem (a size without a fixed set of choices) is grown from
the largest constant the schedule's kernels divide it by, its *tile* ``u`` (``cdiv(N, 128)``: 128; the
divisors the protocol replay grows sizes by, :func:`cake_core.verify.samples.sizes`), matched to the
program's sizes by name and snapped to what every kernel's domain admits (``K % 4 == 0``):

* **ragged**: ``u + 1`` (two tiles, the second partial: floor and ceiling division differ in every
  tiled dimension), a size no kernel divides (the batch) 2, ``SMS`` = 2, sizes with choices at their
  least, the problem's first element type, scheduled in order;
* **wrap**: ``S * u + 1`` (``S + 1`` tiles) where ``S`` is the deepest ring (shared-buffer or barrier
  stages) of the kernel specializations at the choices whose rings are the shallowest, a size no
  kernel divides 1, ``SMS`` = 1: one CTA walks every tile, so every persistent loop takes more than
  one trip and every ring fed once per tile (or more often) wraps; also ragged; the problem's last
  element type, scheduled at random (seeded: the same every time), so producers run ahead of consumers.

The module is checked without a target for the interpreter, so each run chooses ``SMS``; the static
rules have already checked it for the target.

**Findings.** Every finding of a run (:mod:`cake_core.semantics.codes`: out of bounds, uninitialized
read, race, deadlock, ...) becomes a diagnostic noting the run it was seen in; the same finding in two
runs is reported once. A run without findings whose outputs the oracle rejects is a wrong answer
(``CS009``) at the program.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from itertools import product
from typing import TYPE_CHECKING

import attrs
from threadpoolctl import threadpool_limits

from cake_core.diagnostics.diagnostic import Diagnostic
from cake_core.errors import CakeUserError
from cake_core.ir.exprs import try_int
from cake_core.semantics import codes
from cake_core.verify.samples import sizes as sample_sizes
from cake_core.verify.samples import snap

if TYPE_CHECKING:
    from cake_core.ir import nodes as n
    from cake_core.ir.model import CheckedModule
    from cake_core.plugins import Registry
    from cake_core.problems.problem import Problem

#: operations one run may execute before it is stopped (CS005): the sample's shapes need far fewer
MAX_STEPS = 200_000


@attrs.frozen
class GateRun:
    """One interpreter run of the sample: sizes, element type, multiprocessors and scheduling."""

    name: str  # "ragged", "wrap"
    shape: tuple[tuple[str, int], ...]
    dtype: str
    sms: int
    policy: str
    seed: int

    def describe(self) -> str:
        how = "sequential" if self.policy == "sequential" else f"random schedule, seed {self.seed}"
        return f"{', '.join(f'{k}={v}' for k, v in self.shape)}, T={self.dtype}, SMS={self.sms}, {how}"


@attrs.frozen
class GateReport:
    """What the gate found: diagnostics (errors), the runs made, the seconds each took (interpreter and
    oracle) and the seconds of the whole gate (the type check and the sample included)."""

    diagnostics: tuple[Diagnostic, ...]
    runs: tuple[GateRun, ...]
    run_seconds: tuple[float, ...]
    seconds: float

    @property
    def ok(self) -> bool:
        return not self.diagnostics


@attrs.frozen
class Tiling:
    """What the sample needs of a schedule's kernels at some fixed sizes: per run-time size, the largest
    constant a kernel divides it by (its tile) and the admissible values (least, greatest, multiple of);
    and the deepest ring (1 without rings)."""

    tiles: dict[str, int]
    ranges: dict[str, tuple[int, int | None, int]]
    depth: int

    def value(self, name: str, minimum: int, factor: int, untiled: int) -> int:
        """``factor`` tiles and one more element (``untiled`` for a size no kernel divides), at least
        ``minimum``, snapped to what every kernel admits."""
        lo, hi, mod = self.ranges.get(name, (1, None, 1))
        tile = self.tiles.get(name, 1)
        want = factor * tile + 1 if tile > 1 else untiled
        return snap(max(want, minimum), max(lo, minimum), hi, mod) or want


def tiling(checked: CheckedModule, fixed: Mapping[str, int]) -> Tiling:
    """The :class:`Tiling` of the kernel specializations at the sizes ``fixed`` (those a kernel has)."""
    tiles: dict[str, int] = {}
    ranges: dict[str, tuple[int, int | None, int]] = {}
    depth = 1
    for model in checked.models.values():
        if any(name in model.env and model.env[name] != v for name, v in fixed.items()):
            continue
        s = sample_sizes(model)
        if s is not None:
            for name, lo, hi, mod, unit in s.ranges:
                tiles[name] = max(tiles.get(name, 1), unit)
                lo0, hi0, mod0 = ranges.get(name, (lo, hi, mod))
                top = hi if hi0 is None else hi0 if hi is None else min(hi, hi0)
                ranges[name] = (max(lo, lo0), top, math.lcm(mod, mod0))
        k = model.kernel
        for e in [b.stages for b in k.smem] + [b.stages for b in k.barriers]:
            v = try_int(e, model.env) if e is not None else None
            if v is not None:
                depth = max(depth, v)
    return Tiling(tiles, ranges, depth)


def sample(problem: Problem, checked: CheckedModule) -> tuple[GateRun, ...]:
    """The runs of the gate for ``checked``, a schedule of ``problem`` (see the module docstring)."""
    choices = [(s.name, sorted(s.choices)) for s in problem.sizes if s.choices]
    combos = [dict(zip([c for c, _ in choices], vals, strict=True)) for vals in product(*[v for _, v in choices])]
    # a combination some kernel has no specialization for (a problem's K the schedule does not take) is no sample
    kernels: dict[str, list[Mapping]] = {}
    for model in checked.models.values():
        kernels.setdefault(model.kernel.name, []).append(model.env)
    inside = [c for c in combos
              if all(any(all(env.get(k, v) == v for k, v in c.items()) for env in envs) for envs in kernels.values())]
    tilings = [(combo, tiling(checked, combo)) for combo in inside or combos]
    least = tilings[0]
    shallow = min(tilings, key=lambda t: t[1].depth)  # the first of the shallowest rings: fewest tiles to wrap

    def shape(fixed: Mapping[str, int], t: Tiling, factor: int, untiled: int) -> tuple[tuple[str, int], ...]:
        return tuple(
            (s.name, fixed[s.name] if s.choices else t.value(s.name, s.minimum, factor, untiled))
            for s in problem.sizes
        )

    combo, t = shallow
    return (
        GateRun("ragged", shape(least[0], least[1], 1, 2), problem.dtypes[0], 2, "sequential", 0),
        GateRun("wrap", shape(combo, t, t.depth, 1), problem.dtypes[-1], 1, "random", 1),
    )


def interp_checked(module: n.Module, registry: Registry) -> CheckedModule:
    """``module`` type-checked without a target, so that each run chooses ``SMS``."""
    from cake_core.ir.sema import check_module
    from cake_core.verify.runner import registered_primitives

    return check_module(module, registered_primitives(registry), None, registry.by_name("layouts"))


def check_signature(problem: Problem, module: n.Module) -> None:
    """A user error unless the module's program takes every tensor of ``problem`` by name, with the
    problem's size names as its shape (``x: global T[B, N, D]``)."""
    from cake_core.ir import nodes

    prog = module.entry
    params = {p.name: p for p in prog.params}
    for t in problem.tensors:
        p = params.get(t.name)
        if p is None:
            raise CakeUserError(
                f"program `{prog.name}` does not compute problem `{problem.name}`: it has no parameter "
                f"`{t.name}` (the problem's tensors: {', '.join(d.describe() for d in problem.tensors)})"
            )
        dims = tuple(e.id if isinstance(e, nodes.Name) else None for e in p.shape)
        if dims != t.shape:
            raise CakeUserError(
                f"program `{prog.name}` does not compute problem `{problem.name}`: its parameter `{t.name}` "
                f"is not shaped [{', '.join(t.shape)}] (the problem's {t.describe()})"
            )


def type_variables(problem: Problem, prog: n.Program | n.Kernel, dtype: str) -> dict[str, str]:
    """The program's element-type variables (``T``) bound as the problem's tensors are at ``dtype``."""
    from cake_core.ir.types import DTYPE_NAMES

    decls = {t.name: t for t in problem.tensors}
    return {
        p.dtype: decls[p.name].dtype_for(dtype)
        for p in prog.params
        if p.name in decls and p.dtype not in DTYPE_NAMES
    }


def wrong_answer(prog: n.Program | n.Kernel, run: GateRun, summary: str, outputs: list[str]) -> Diagnostic:
    """The oracle rejected the outputs of a run that found nothing else (``CS009``)."""
    return codes.WRONG_ANSWER.at(
        prog.loc,
        f"the problem's oracle rejects {', '.join(f'`{o}`' for o in outputs)} computed by `{prog.name}`: {summary}",
        label="computes a wrong answer",
        notes=(f"seen in the interpreter at {run.describe()}",),
        help="the sizes above reproduce it in the interpreter (`run_program`); compare the output with the "
        "problem's reference there",
    )


def run_gate(problem: Problem, module: n.Module, registry: Registry) -> GateReport:
    """Run ``module`` (a schedule of ``problem`` the static rules passed) in the interpreter on the
    gate's sample and judge each run with the oracle."""
    import time

    from cake_core.problems.problem import outputs_of

    start = time.perf_counter()
    check_signature(problem, module)
    checked = interp_checked(module, registry)
    if not checked.ok:  # what only a check without a target refuses: the checker's errors are the gate's
        errors = tuple(d for d in checked.diagnostics if d.is_error)
        return GateReport(errors, (), (), time.perf_counter() - start)
    runs = sample(problem, checked)
    outputs = [t.name for t in outputs_of(problem)]
    found: dict[tuple, Diagnostic] = {}
    timings = []
    # the interpreter's matrix products are tiny: more BLAS threads than one only cost (measured: the
    # median candidate 0.86 s with the library's default threads on 2 loaded cores, 0.16 s with one)
    with threadpool_limits(limits=1, user_api="blas"):
        for run in runs:
            timings.append(_judge(problem, module, checked, run, outputs, found))
    return GateReport(tuple(found.values()), runs, tuple(timings), time.perf_counter() - start)


def _judge(problem: Problem, module: n.Module, checked: CheckedModule, run: GateRun, outputs: list[str],
           found: dict[tuple, Diagnostic]) -> float:  # fmt: skip
    """One run of the gate's sample, its findings (or the oracle's verdict) added to ``found``; its time."""
    import time

    from cake_core.semantics import run_program

    began = time.perf_counter()
    shape = dict(run.shape)
    inputs = problem.make_inputs(shape, run.dtype, run.seed)
    sizes = {**shape, **type_variables(problem, module.entry, run.dtype)}
    result = run_program(checked, inputs, sizes, seed=run.seed, policy=run.policy, max_steps=MAX_STEPS, sms=run.sms)
    diags = [f.to_diagnostic() for f in result.findings]
    if not diags:
        report = problem.check(inputs, {o: result.outputs[o] for o in outputs}, shape, run.dtype)
        if not report.passed:
            diags = [wrong_answer(module.entry, run, report.summary(), outputs)]
    for d in diags:
        key = (d.code, d.primary, d.label)
        if key not in found:
            if d.code != codes.WRONG_ANSWER.code:
                d = attrs.evolve(d, notes=(*d.notes, f"interpreter run at {run.describe()}"))
            found[key] = d
    return time.perf_counter() - began
