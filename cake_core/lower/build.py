"""Parse, check, lower and compile a ``.cake`` file for a target: the path every command shares."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import attrs

from cake_core import plugins
from cake_core.diagnostics.diagnostic import Diagnostic, DiagnosticError
from cake_core.ir import nodes as n
from cake_core.ir.parser import parse, parse_file
from cake_core.ir.model import CheckedModule, Spec
from cake_core.ir.sema import check_module
from cake_core.lower.program import LoweredProgram, lower_program, program_specs, select_spec
from cake_core.target import Target


def primitives() -> dict:
    reg = plugins.registry()
    return {name: reg.get("primitives", name) for name in reg.names("primitives")}


def target(name: str) -> Target:
    return plugins.registry().get("targets", name)


@attrs.frozen
class Source:
    module: n.Module
    text: str

    @property
    def sources(self) -> dict[str, str]:
        return {self.module.path: self.text}


def load(path: str | Path) -> Source:
    """Parse a file (syntax errors raise DiagnosticError; a missing file is a user error)."""
    module, text = parse_file(path)
    return Source(module, text)


def load_text(text: str, path: str = "<string>") -> Source:
    return Source(parse(text, path), text)


def check(src: Source, tgt: Target) -> CheckedModule:
    """Type-check against the target; raises DiagnosticError with the errors."""
    checked = check_module(src.module, primitives(), tgt, plugins.registry().by_name("layouts"))
    errors = [d for d in checked.diagnostics if d.is_error]
    if errors:
        raise DiagnosticError(errors)
    return checked


def sass_claims(checked: CheckedModule) -> tuple[str, ...]:
    """Every SASS mnemonic the module's operations claim, sorted."""
    out: set[str] = set()
    for model in checked.models.values():
        for t in model.ops:
            out.update(getattr(t.prim, "sass_claims", ()))
    return tuple(sorted(out))


@attrs.frozen
class Built:
    lowered: LoweredProgram
    compiled: object  # cake_core.runtime.nvrtc.CompileResult

    @property
    def cubin(self) -> bytes:
        return self.compiled.cubin  # type: ignore[attr-defined]


def build(checked: CheckedModule, tgt: Target, spec: Spec, *, cache: bool = True) -> Built:
    """Lower one program specialization and compile it with NVRTC for the target."""
    from cake_core.runtime.nvrtc import compile_cuda

    lowered = lower_program(checked, tgt, spec)
    stem = Path(checked.module.path).stem or "cake"
    compiled = compile_cuda(lowered.source, tgt.nvrtc_arch, name=f"{stem}.cu", cache=cache)
    return Built(lowered, compiled)


def spec_for(checked: CheckedModule, shape: Mapping[str, int | str]) -> Spec:
    return select_spec(checked, shape)


def all_specs(checked: CheckedModule) -> list[Spec]:
    return program_specs(checked)


__all__ = ["Built", "Diagnostic", "Source", "build", "check", "load", "load_text", "sass_claims"]
