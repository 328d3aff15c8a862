"""Subjects of mutation testing: valid kernels, and how the interpreter tells a mutant from them.

A :class:`Subject` is one valid ``.cake`` file: its text, its target (the ``# target:`` line, else
``h200``), its module, and an *exerciser* that runs a checked mutant in the interpreter and says
whether it went wrong:

* :class:`ProblemExerciser` — the file is a schedule of a registered problem (kmeans-assign): the
  problem makes the inputs, the problem's oracle judges the output, and any interpreter finding
  (fault, uninitialized read, race, deadlock, step bound) counts too;
* :class:`DifferentialExerciser` — any other kernel: random inputs for the parameters no kernel
  writes, sizes from its shape domain, and the original kernel's own interpreter run as the oracle
  (every written parameter must come out bit for bit the same, and no finding may appear).

Each exerciser has *standard* runs (every mutant gets them) and *exercising* runs (more shapes,
seeds and multiprocessor counts, tried on survivors before anything is called equivalent).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import attrs
import numpy as np

from cake_core.diagnostics.diagnostic import DiagnosticError
from cake_core.errors import CakeError
from cake_core.hostdata import random_values
from cake_core.ir import nodes as n
from cake_core.ir.exprs import evaluate, try_int
from cake_core.ir.parser import parse
from cake_core.ir.primitive import Access, Kind, Primitive
from cake_core.ir.model import CheckedModule
from cake_core.ir.sema import check_module
from cake_core.ir.types import DTYPE_NAMES
from cake_core.verify.expectations import named_target

#: operations one interpreter run may execute: a mutant that spins is stopped (a finding), not waited on
MAX_STEPS = 200_000
DEFAULT_TARGET = "h200"


@attrs.frozen
class RunConfig:
    """One interpreter run: sizes (type variables included), scheduling and the multiprocessor count."""

    sizes: tuple[tuple[str, int | str], ...]
    policy: str = "sequential"
    seed: int = 0
    sms: int = 1
    data_seed: int = 0

    @property
    def size_map(self) -> dict[str, int | str]:
        return dict(self.sizes)

    def describe(self) -> str:
        s = ", ".join(f"{k}={v}" for k, v in self.sizes)
        how = "sequential" if self.policy == "sequential" else f"random seed {self.seed}"
        return f"{s}, SMS={self.sms}, {how}"


class Exerciser(Protocol):
    """Runs a checked module in the interpreter and says what, if anything, went wrong."""

    def configs(self, exercising: bool) -> Sequence[RunConfig]: ...

    def failure(self, checked: CheckedModule, config: RunConfig) -> str | None: ...


def _run(checked: CheckedModule, inputs: Mapping[str, np.ndarray], config: RunConfig) -> Any:
    from cake_core.semantics import run_program

    return run_program(
        checked, inputs, config.size_map, seed=config.seed, policy=config.policy, max_steps=MAX_STEPS, sms=config.sms
    )


def _first_finding(result: Any) -> str | None:
    if not result.findings:
        return None
    f = result.findings[0]
    return f"{f.code.code} {f.message}"


# ---------------------------------------------------------------------------------------------------
# Problem schedules
# ---------------------------------------------------------------------------------------------------

#: kmeans-assign shapes whose rings wrap: K spans many centroid tiles, SMS small so that one CTA walks
#: several row tiles (so the x ring wraps too), N and K ragged
KMEANS_STANDARD: tuple[tuple[dict[str, int], str, int], ...] = (
    ({"B": 1, "N": 773, "K": 1155, "D": 64}, "bf16", 1),
    ({"B": 2, "N": 300, "K": 300, "D": 128}, "f16", 2),
    ({"B": 1, "N": 260, "K": 390, "D": 256}, "bf16", 1),
)
#: more shapes for survivors: tiny; exact multiples of the tiles; more CTAs than tiles; one centroid
#: tile per row tile with many row tiles a CTA (nothing holds the producer back: it runs ahead)
KMEANS_EXERCISING: tuple[tuple[dict[str, int], str, int], ...] = (
    ({"B": 1, "N": 1, "K": 1, "D": 64}, "bf16", 1),
    ({"B": 3, "N": 512, "K": 512, "D": 64}, "f16", 2),
    ({"B": 1, "N": 1030, "K": 2049, "D": 128}, "bf16", 3),
    ({"B": 2, "N": 129, "K": 129, "D": 256}, "f16", 4),
    ({"B": 1, "N": 600, "K": 700, "D": 128}, "bf16", 1),
    ({"B": 1, "N": 1800, "K": 100, "D": 64}, "bf16", 1),
    ({"B": 2, "N": 1100, "K": 60, "D": 128}, "f16", 1),
)


@attrs.frozen
class ProblemExerciser:
    """Judges runs with a problem's oracle (``problem.check``) and the interpreter's findings."""

    problem: Any
    shapes: tuple[tuple[dict[str, int], str, int], ...] = KMEANS_STANDARD
    extra: tuple[tuple[dict[str, int], str, int], ...] = KMEANS_EXERCISING

    def configs(self, exercising: bool) -> Sequence[RunConfig]:
        shapes, seeds = (self.extra, (3, 4, 5, 6, 7, 8)) if exercising else (self.shapes, (0, 1, 2))
        out = []
        for shape, dtype, sms in shapes:
            sizes = tuple(shape.items()) + (("T", dtype),)
            out.append(RunConfig(sizes, "sequential", 0, sms))
            out += [RunConfig(sizes, "random", s, sms, data_seed=s) for s in seeds]
        return out

    def failure(self, checked: CheckedModule, config: RunConfig) -> str | None:
        sizes = config.size_map
        dtype = str(sizes["T"])
        shape = {k: int(v) for k, v in sizes.items() if k != "T"}
        inputs = self.problem.make_inputs(shape, dtype, config.data_seed)
        result = _run(checked, inputs, config)
        found = _first_finding(result)
        if found is not None:
            return found
        report = self.problem.check(inputs, {"out": result.outputs["out"]}, shape, dtype)
        return None if report.passed else f"wrong answer: {report.summary()}"


# ---------------------------------------------------------------------------------------------------
# Any kernel: the original is the oracle
# ---------------------------------------------------------------------------------------------------


def _size_values(
    domain: Sequence[n.Constraint], var: str, env: Mapping[str, int | str], wanted: Sequence[int]
) -> list[int]:
    """Admissible values of one run-time size nearest (at or above) each of ``wanted``."""
    lo, hi, mod = 0, None, 1
    for c in domain:
        if c.var != var or not c.values:
            continue
        v = try_int(c.values[0], env)
        if v is None:
            continue
        if c.op == ">=":
            lo = max(lo, v)
        elif c.op == "<=":
            hi = v if hi is None else min(hi, v)
        elif c.op == "%" and v > 0:
            mod = int(np.lcm(mod, v))
    out = []
    for w in wanted:
        v = -(-max(w, lo) // mod) * mod
        if hi is not None and v > hi:
            v = (hi // mod) * mod
        if v >= lo and v not in out:
            out.append(v)
    return out


@attrs.define(eq=False)
class DifferentialExerciser:
    """Compares every run with the original module's run on the same inputs."""

    original: CheckedModule
    standard_sizes: tuple[int, ...] = (150, 300)
    exercising_sizes: tuple[int, ...] = (1, 129, 257, 520)
    _references: dict[RunConfig, Any] = attrs.field(factory=dict, init=False)

    def configs(self, exercising: bool) -> Sequence[RunConfig]:
        prog = self.original.module.entry
        finite: list[tuple[str, list[int | str]]] = []
        for c in prog.domain:
            if c.op == "in":
                vals: list[int | str] = []
                for v in c.values:
                    if isinstance(v, n.Name) and v.id in DTYPE_NAMES:
                        vals.append(v.id)
                    else:
                        iv = try_int(v, {})
                        if iv is not None:
                            vals.append(iv)
                finite.append((c.var, vals))
        runtime = sorted({c.var for c in prog.domain if c.op != "in"} - {v for v, _ in finite})
        wanted = self.exercising_sizes if exercising else self.standard_sizes
        seeds = (3, 4) if exercising else (0, 1)
        out = []
        for combo in itertools.product(*[vals for _, vals in finite]):
            env = dict(zip([v for v, _ in finite], combo, strict=True))
            for w in wanted:
                sizes: list[tuple[str, int | str]] = list(env.items())
                for var in runtime:
                    vals_ = _size_values(prog.domain, var, env, [w])
                    sizes.append((var, vals_[0] if vals_ else w))
                key = tuple(sizes)
                out.append(RunConfig(key, "sequential", 0, 2))
                out += [RunConfig(key, "random", s, 2, data_seed=s) for s in seeds]
        return out

    def _inputs(self, config: RunConfig) -> dict[str, np.ndarray]:
        prog = self.original.module.entry
        env = config.size_map
        written = _written_params(self.original)
        rng = np.random.default_rng(config.data_seed)
        out = {}
        for p in prog.params:
            if p.tier != "global" or p.name in written:
                continue
            dtype = str(env.get(p.dtype, p.dtype))
            shape = tuple(int(evaluate(e, env)) for e in p.shape)  # type: ignore[call-overload]
            out[p.name] = random_values(rng, shape, dtype)
        return out

    def reference(self, config: RunConfig) -> Any:
        """The original's run for ``config`` (None when the original itself cannot run or finds something)."""
        if config not in self._references:
            try:
                inputs = self._inputs(config)
            except KeyError:  # an element type without host storage (fp8): nothing to run on
                inputs = None
            try:
                result = None if inputs is None else _run(self.original, inputs, config)
            except (CakeError, DiagnosticError, NotImplementedError, KeyError):
                result = None  # the interpreter cannot run the original here (KeyError: no host storage)
            self._references[config] = result if result is not None and result.ok else None
        return self._references[config]

    def failure(self, checked: CheckedModule, config: RunConfig) -> str | None:
        ref = self.reference(config)
        if ref is None:
            return None  # nothing to compare with
        result = _run(checked, self._inputs(config), config)
        found = _first_finding(result)
        if found is not None:
            return found
        for name, want in ref.outputs.items():
            got = result.outputs.get(name)
            if name not in _written_params(self.original):
                continue
            same = got is not None and got.shape == want.shape
            if not (same and np.array_equal(got, want, equal_nan=want.dtype.kind == "f")):
                return f"`{name}` differs from the original's"
        return None


def _written_params(checked: CheckedModule) -> set[str]:
    """Program parameters some launched kernel writes."""
    out: set[str] = set()
    for lm in checked.launches:
        for model in checked.kernel_models(lm.kernel.name):
            for typed in model.ops:
                for eff in typed.prim.effects(typed):
                    o = eff.operand
                    if o.kind is Kind.GLOBAL and eff.access in (Access.WRITE, Access.READWRITE):
                        for arg, p in zip(lm.launch.args, lm.kernel.params, strict=False):
                            if p.name == o.name:
                                out.add(arg)
    return out


# ---------------------------------------------------------------------------------------------------
# Subjects
# ---------------------------------------------------------------------------------------------------


@attrs.define(eq=False)
class Subject:
    """A valid kernel file mutants are made of."""

    path: str
    text: str
    target: str
    module: n.Module
    exerciser: Exerciser | None  # None: the interpreter cannot run the original
    why_not_run: str = ""

    @classmethod
    def load(cls, path: str, text: str, primitives: Mapping[str, Primitive], problem: Any = None) -> Subject:
        """Parse ``text``; with ``problem`` its oracle judges runs, else the original's own runs do."""
        target = named_target(text) or DEFAULT_TARGET
        module = parse(text, path)
        checked = check_module(module, primitives)  # no target: SMS comes from each run
        if problem is not None:
            return cls(path, text, target, module, ProblemExerciser(problem))
        diff = DifferentialExerciser(checked)
        runnable = [c for c in diff.configs(False) if diff.reference(c) is not None]
        if not runnable:
            reason = "the interpreter cannot run the original kernel (an operation without CPU semantics, or findings)"
            return cls(path, text, target, module, None, reason)
        return cls(path, text, target, module, diff)

    @property
    def has_sync(self) -> bool:
        """Whether the kernel has what the operators mutate: barriers, rings or fences."""
        for k in self.module.kernels:
            if k.barriers or any(s.stages is not None for s in k.smem):
                return True
            if any(op.name.split(".")[0] == "fence" for _, op in n.walk_ops(k)):
                return True  # (the operators also take primitives declaring `proxy_fence`)
        return False
