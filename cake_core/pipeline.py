"""The pipeline a candidate goes down, as values: load → check → verify (→ interpreter gate) → build →
compile → bench.

Each step takes the product of the step before it:

* :func:`load` parses a file (:func:`load_text` a text) into a :class:`Source`;
* :func:`check` type-checks the source's module for a target: a
  :class:`~cake_core.ir.model.CheckedModule`, whose diagnostics say whether it is well typed;
* :func:`verify` runs every registered rule over the checked module: a
  :class:`~cake_core.verify.runner.Report`;
* :func:`interp_gate` runs a module the rules passed in the CPU interpreter with a problem's oracle: a
  :class:`~cake_core.verify.interp_gate.GateReport`;
* :func:`build` lowers one specialization of the checked module to CUDA C++: a
  :class:`~cake_core.lower.program.LoweredProgram`;
* :func:`compile_program` compiles a lowered program with NVRTC for the target: a
  :class:`~cake_core.runtime.nvrtc.CompileResult`;
* :func:`cake_core.loop.benchmark.bench_candidate` measures a compiled specialization on a GPU.

A :class:`Candidate` is one source on its way down for one target: it keeps every product it has, so
each step runs once per candidate (once per specialization for build and compile) whoever asks.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from cake_core.ir import model, parser
from cake_core.lower import program

if TYPE_CHECKING:
    from cake_core.ir import nodes as n
    from cake_core.loop.benchmark import Measurement
    from cake_core.plugins import Registry
    from cake_core.runtime.nvrtc import CompileResult
    from cake_core.target import Target
    from cake_core.problems.problem import Problem
    from cake_core.verify.interp_gate import GateReport
    from cake_core.verify.runner import Report


@attrs.frozen
class Source:
    """A parsed ``.cake`` text: the module and the text it came from (for rendering diagnostics)."""

    module: n.Module
    text: str

    @property
    def path(self) -> str:
        return self.module.path

    @property
    def sources(self) -> dict[str, str]:
        """The text by file name, as :func:`~cake_core.diagnostics.render.render_all` takes it."""
        return {self.module.path: self.text}


def load(path: str | Path) -> Source:
    """Parse a file (a syntax error raises DiagnosticError; a missing file is a user error)."""
    module, text = parser.parse_file(path)
    return Source(module, text)


def load_text(text: str, path: str = "<string>") -> Source:
    """Parse a text as if it were the file ``path``."""
    return Source(parser.parse(text, path), text)


def _registry(registry: Registry | None) -> Registry:
    from cake_core import plugins

    return registry if registry is not None else plugins.registry()


def check(source: Source, target: Target, registry: Registry | None = None) -> model.CheckedModule:
    """Type-check the source's module for ``target`` with the registry's primitives; never raises for
    the kernel's errors (they are the checked module's diagnostics)."""
    from cake_core.verify.runner import check_registered

    return check_registered(source.module, target, _registry(registry))


def verify(checked: model.CheckedModule, target: Target, registry: Registry | None = None) -> Report:
    """Every registered rule over the checked module (:func:`cake_core.verify.runner.verify`)."""
    from cake_core.verify import runner

    return runner.verify(checked, target, _registry(registry))


def interp_gate(source: Source, problem: Problem, registry: Registry | None = None) -> GateReport:
    """The source's program run in the interpreter on the gate's sample of ``problem``'s shape domain,
    judged by its oracle (:func:`cake_core.verify.interp_gate.run_gate`)."""
    from cake_core.verify.interp_gate import run_gate

    return run_gate(problem, source.module, _registry(registry))


def build(checked: model.CheckedModule, target: Target, spec: model.Spec) -> program.LoweredProgram:
    """Lower one program specialization of a well-typed module to standalone CUDA C++."""
    return program.lower_program(checked, target, spec)


def compile_program(
    lowered: program.LoweredProgram, target: Target, *, cache: bool = True, cache_directory: Path | None = None
) -> CompileResult:
    """Compile a lowered program with NVRTC for the target (raises CompileError when NVRTC rejects it)."""
    from cake_core.runtime import nvrtc

    stem = Path(lowered.checked.module.path).stem or "cake"
    return nvrtc.compile_cuda(
        lowered.source, target.nvrtc_arch, name=f"{stem}.cu", cache=cache, cache_directory=cache_directory
    )


@attrs.define(eq=False)
class Candidate:
    """One source on its way down the pipeline for one target, with every product it has so far.

    Each method runs its step the first time it is asked and keeps the product: ``checked`` (the
    checked module), ``report`` (the verifier's), ``gate`` (the interpreter gate's, for one problem),
    ``lowered`` and ``compiled`` per specialization; ``measurements`` collects what
    :func:`~cake_core.loop.benchmark.bench_candidate` measured.
    """

    source: Source
    target: Target
    registry: Registry | None = None
    checked: model.CheckedModule | None = None
    report: Report | None = None
    gate: GateReport | None = None
    lowered: dict[model.Spec, program.LoweredProgram] = attrs.field(factory=dict)
    compiled: dict[model.Spec, CompileResult] = attrs.field(factory=dict)
    measurements: list[Measurement] = attrs.field(factory=list)

    @classmethod
    def load(cls, path: str | Path, target: Target, registry: Registry | None = None) -> Candidate:
        return cls(load(path), target, registry)

    @property
    def path(self) -> str:
        return self.source.path

    def check(self) -> model.CheckedModule:
        if self.checked is None:
            self.checked = check(self.source, self.target, self.registry)
        return self.checked

    def verify(self) -> Report:
        if self.report is None:
            self.report = verify(self.check(), self.target, self.registry)
        return self.report

    def interp_gate(self, problem: Problem) -> GateReport:
        """The interpreter gate for ``problem`` (run once: a candidate is a schedule of one problem)."""
        if self.gate is None:
            self.gate = interp_gate(self.source, problem, self.registry)
        return self.gate

    def build(self, spec: model.Spec) -> program.LoweredProgram:
        if spec not in self.lowered:
            self.lowered[spec] = build(self.check(), self.target, spec)
        return self.lowered[spec]

    def compile(self, spec: model.Spec, *, cache: bool = True) -> CompileResult:
        if spec not in self.compiled:
            self.compiled[spec] = compile_program(self.build(spec), self.target, cache=cache)
        return self.compiled[spec]

    def spec(self, values: dict[str, int | str]) -> model.Spec:
        """The program specialization of concrete sizes and dtypes (``D=128, T=bf16``)."""
        return program.select_spec(self.check(), values)

    def specs(self) -> list[model.Spec]:
        """Every program specialization."""
        return program.program_specs(self.check())

    def sass_claims(self) -> tuple[str, ...]:
        """Every SASS mnemonic the module's operations claim, sorted."""
        out: set[str] = set()
        for model in self.check().models.values():
            for t in model.ops:
                out.update(getattr(t.prim, "sass_claims", ()))
        return tuple(sorted(out))
