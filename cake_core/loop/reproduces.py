"""Predicates for :func:`cake_core.loop.reduce.reduce`: whether a text still reproduces a finding.

:func:`verifier_reports` asks "does verifying the text for a target (as ``cake verify`` does) still
report this code?", :func:`gate_reports` "does the interpreter gate for a problem still report it?";
:func:`predicate_for` picks the one that holds of a text, as ``cake reduce`` does.
Given the text being reduced as ``baseline``, each also asks that the finding be *the same one*: a
diagnostic of the code whose label and message begin alike, numbers aside (``expects # bytes on
`cfull[#]```, not another mistake the same rule names), and no error code the baseline lacks. Each
predicate remembers its last verdicts by text, so asking it again (the reducer's first question is
the one the caller asked) costs nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import TYPE_CHECKING

import attrs

from cake_core.diagnostics.diagnostic import Diagnostic, DiagnosticError
from cake_core.errors import CakeUserError
from cake_core.ir import nodes as n
from cake_core.ir.parser import parse
from cake_core.loop.reduce import Predicate

if TYPE_CHECKING:
    from cake_core.plugins import Registry
    from cake_core.problems.problem import Problem
    from cake_core.target import Target


def predicate_for(
    text: str, code: str, target: Target, registry: Registry, problem: Problem | None = None
) -> Predicate | None:
    """The predicate that keeps ``code`` as ``cake verify [--problem]`` finds it in ``text``: verifying
    for ``target`` reports it, else (with ``problem``) the interpreter gate after clean static rules
    does; None when neither does. ``text`` is the baseline of either (the same finding)."""
    still = verifier_reports(code, target, registry, baseline=text)
    if still(text):
        return still
    if problem is not None:
        still = gate_reports(code, problem, registry, target=target, baseline=text)
        if still(text):
            return still
    return None


def verifier_reports(code: str, target: Target, registry: Registry, *, baseline: str | None = None) -> Predicate:
    """A predicate: verifying the text for ``target`` (as ``cake verify`` does) reports ``code``.

    With ``baseline`` (the text being reduced), the same finding (see the module docstring).
    """
    from cake_core.verify.runner import verify_source

    @lru_cache(maxsize=256)
    def found(text: str) -> _Found:
        return _Found.of(verify_source(text, "reduced.cake", target, registry).diagnostics)

    return _reports(code, found, baseline)


def gate_reports(
    code: str, problem: Problem, registry: Registry, *, target: Target | None = None, baseline: str | None = None
) -> Predicate:
    """A predicate: the interpreter gate for ``problem`` (:func:`~cake_core.verify.interp_gate.run_gate`)
    reports ``code``. With ``target``, the static rules for it must first find no error, as in
    ``cake verify --problem`` and stage 2, where the gate runs only then. ``baseline`` as for
    :func:`verifier_reports`. A text whose program does not take the problem's tensors, or has no
    operation that writes one of its outputs, reports nothing: a schedule that lost its stores
    computes a wrong answer about anything."""
    from cake_core.verify.interp_gate import run_gate
    from cake_core.verify.runner import verify_source

    @lru_cache(maxsize=256)
    def found(text: str) -> _Found:
        if target is not None and not verify_source(text, "reduced.cake", target, registry).ok:
            return _NOTHING
        try:
            module = parse(text, "reduced.cake")
        except DiagnosticError as exc:
            return _Found.of(exc.diagnostics)
        if not _stores_outputs(module, problem):
            return _NOTHING
        try:
            return _Found.of(run_gate(problem, module, registry).diagnostics)
        except CakeUserError:  # not a program of the problem
            return _NOTHING

    return _reports(code, found, baseline)


def _stores_outputs(module: n.Module, problem: Problem) -> bool:
    """Whether every output tensor of ``problem`` is written by an operation of a kernel launched with it."""
    from cake_core.problems.problem import outputs_of

    written: set[str] = set()
    for launch in module.entry.launches:
        k = module.kernel(launch.kernel)
        if k is None:
            continue
        outs = {o.name if isinstance(o, n.Ref) else o.id for _, op in n.walk_ops(k) for o in op.outs
                if isinstance(o, (n.Ref, n.Name))}  # fmt: skip
        written |= {arg for arg, p in zip(launch.args, k.params) if p.name in outs}
    return {t.name for t in outputs_of(problem)} <= written


@attrs.frozen
class _Found:
    """What a text was reported with: each finding's code and shape (:func:`shape`), and the codes of
    the errors."""

    findings: frozenset[tuple[str, str]]
    errors: frozenset[str]

    @classmethod
    def of(cls, diagnostics: Iterable[Diagnostic]) -> _Found:
        diagnostics = list(diagnostics)
        return cls(frozenset((d.code, shape(d)) for d in diagnostics),
                   frozenset(d.code for d in diagnostics if d.is_error))  # fmt: skip


_NOTHING = _Found(frozenset(), frozenset())
_NUMBER = re.compile(r"-?\d+")
#: where a message's head ends: what follows says where and under which sizes it was seen
_HEAD_END = re.compile(r" \(|;|, seen ")


def shape(d: Diagnostic) -> str:
    """What stays of a finding while its module shrinks: its label and the head of its message, numbers
    masked (``expects # bytes | `mbarrier.arrive.expect_tx` expects # bytes on `cfull[#]```)."""
    head = _HEAD_END.split(d.message, maxsplit=1)[0]
    return _NUMBER.sub("#", f"{d.label or ''} | {head}")


def _reports(code: str, found: Callable[[str], _Found], baseline: str | None) -> Predicate:
    wanted = code.strip().upper()

    def holds(text: str) -> bool:
        now = found(text)
        shapes = {s for c, s in now.findings if c == wanted}
        if baseline is None:
            return bool(shapes)
        before = found(baseline)
        return bool(shapes & {s for c, s in before.findings if c == wanted}) and now.errors <= before.errors

    return holds
