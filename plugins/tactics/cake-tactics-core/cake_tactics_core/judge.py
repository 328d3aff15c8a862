"""Whether a rewritten module keeps its kernel's meaning as the loop judges it before any GPU: printed and read
back (what an agent hands the loop), verified for a target, and run by the interpreter gate against a problem's
oracle. Tactic tests use it, this distribution's and a third party's alike."""

from __future__ import annotations

from cake_core import plugins
from cake_core.ir import nodes as n
from cake_core.ir.parser import parse
from cake_core.ir.printer import print_module
from cake_core.verify.interp_gate import run_gate
from cake_core.verify.runner import verify_source


def judge(problem: str, module: n.Module, target: str = "h200") -> tuple[str, list[str]]:
    """``module``'s text and the errors of the verifier for ``target`` and of the interpreter gate with
    ``problem``'s oracle (none where both pass; the gate runs only where the verifier passes)."""
    reg = plugins.registry()
    text = print_module(module)
    report = verify_source(text, "rewritten.cake", reg.get("targets", target), reg)
    errors = [d.message for d in report.diagnostics if d.is_error]
    if not errors:
        gate = run_gate(reg.get("problems", problem), parse(text, "rewritten.cake"), reg)
        errors = [d.message for d in gate.diagnostics if d.is_error] if not gate.ok else []
        if not gate.ok and not errors:
            errors = [d.message for d in gate.diagnostics] or ["the interpreter gate refuses it"]
    return text, errors
