"""Running the verifier: every registered rule over a module type-checked for a target.

1. The verifier takes the checked module (``cake_core.ir.sema.check_module`` for the same target) and
   keeps its ``CK`` diagnostics. If any of those is an error, the rules do not run: they assume a
   well-typed kernel.
2. Every registered rule runs over every specialization of every kernel. The distribution that
   registered a rule is stamped into each of its diagnostics' ``plugin`` field.
3. The same finding (code, primary span, message) made under several specializations is reported
   once; it names the specializations only when it does not hold for all of them: ``(with D=256)``,
   ``(with D in {128, 256})``, or a list when the specializations do not form such a box.
4. Diagnostics are sorted by location.

A rule that raises is a bug in its pack: it surfaces as :class:`~cake_core.errors.CakeInternalError`
naming the rule and its distribution, never as a finding about the kernel.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import weakref

import attrs

from cake_core.diagnostics.diagnostic import Diagnostic, DiagnosticError
from cake_core.errors import CakeInternalError
from cake_core.verify.analyses import PluginSet, plugin_set
from cake_core.verify.rule import RuleContext, iter_rules

if TYPE_CHECKING:
    from cake_core.ir import nodes as n
    from cake_core.ir.primitive import Primitive
    from cake_core.ir.model import CheckedModule, Spec
    from cake_core.plugins import Registry
    from cake_core.target import Target


@attrs.frozen
class Report:
    """What one verification found and what it covered."""

    diagnostics: tuple[Diagnostic, ...]
    target: Target
    rules: tuple[str, ...]  # ids of the rules that ran (none when type checking failed)
    kernels: int
    specializations: int

    @property
    def ok(self) -> bool:
        return not any(d.is_error for d in self.diagnostics)

    @property
    def errors(self) -> int:
        return sum(d.is_error for d in self.diagnostics)


def verify(checked: CheckedModule, target: Target, registry: Registry | None = None) -> Report:
    """Run every registered rule over ``checked``, the module type-checked for ``target``.

    A module with type errors gets no rule run: its report holds the checker's diagnostics. The
    report's diagnostics are sorted by location.
    """
    from cake_core import plugins

    reg = registry if registry is not None else plugins.registry()
    module = checked.module
    nspecs = len(checked.models)
    if not checked.ok:
        return Report(tuple(sort_diagnostics(checked.diagnostics)), target, (), len(module.kernels), nspecs)
    rules = registered_rules(reg)
    out = list(checked.diagnostics)
    plugins_of = _of_registry(reg, "plugin set", plugin_set)
    for kernel in module.kernels:
        out += _run_kernel(checked, kernel.name, target, rules, plugins_of)
    return Report(
        tuple(sort_diagnostics(out)), target, tuple(r.name for r, _ in rules), len(module.kernels), nspecs
    )


def verify_source(text: str, file: str, target: Target, registry: Registry | None = None) -> Report:
    """Parse, type-check and verify ``text``: what ``cake verify`` and the expectation corpora run on a
    file. A syntax error is a ``CK001`` diagnostic in the report."""
    from cake_core import plugins
    from cake_core.ir.parser import parse

    reg = registry if registry is not None else plugins.registry()
    try:
        module = parse(text, file)
    except DiagnosticError as exc:
        return Report(tuple(sort_diagnostics(exc.diagnostics)), target, (), 0, 0)
    return verify(check_registered(module, target, reg), target, reg)


def check_registered(module: n.Module, target: Target, registry: Registry) -> CheckedModule:
    """``module`` type-checked for ``target`` with the registry's primitives and layouts: the module the
    rules run over (the pipeline's check step, and :func:`verify_source`'s)."""
    from cake_core.ir.sema import check_module

    return check_module(module, registered_primitives(registry), target, registry.by_name("layouts"))


#: what each registry holds, in the forms verification reads, made once per registry: what a registry
#: holds is fixed once its plugins have loaded. This is about plugins, not kernels: no verdict is kept.
_OF_REGISTRY: weakref.WeakKeyDictionary[object, dict[str, Any]] = weakref.WeakKeyDictionary()


def _of_registry(registry: Registry, what: str, make: Callable[[Registry], Any]) -> Any:
    """``make(registry)``, remembered for the registry's life under ``what``; made every time for a
    registry that cannot be weakly referenced, and never remembered when ``make`` raises."""
    try:
        known = _OF_REGISTRY.setdefault(registry, {})
    except TypeError:
        return make(registry)
    if what not in known:
        known[what] = make(registry)
    return known[what]


def registered_rules(registry: Registry) -> list[tuple[object, str]]:
    """Every registered rule with its distribution (:func:`~cake_core.verify.rule.iter_rules`).

    A registry's declarations are validated on its first verification only; a malformed rule raises
    every time.
    """
    return _of_registry(registry, "rules", lambda reg: list(iter_rules(reg)))  # type: ignore[no-any-return]


def registered_primitives(registry: Registry) -> dict[str, Primitive]:
    """The registry's primitives by name."""
    return _of_registry(registry, "primitives", lambda reg: {p.name: p for p in reg.values("primitives")})  # type: ignore[no-any-return]


def _run_kernel(
    checked: CheckedModule, kernel: str, target: Target, rules: Sequence[tuple[object, str]], plugins: PluginSet
) -> list[Diagnostic]:
    specs = [spec for (name, spec) in checked.models if name == kernel]
    # one entry per finding: the first diagnostic made of it, the distribution of the rule that made
    # it, and the specializations it was made under (stamped and worded once, at the end)
    found: dict[tuple, tuple[Diagnostic, str, list[Spec]]] = {}
    for spec in specs:
        ctx = RuleContext(checked, checked.models[(kernel, spec)], target, plugins)
        for rule, distribution in rules:
            try:
                diags = list(rule.check(ctx))  # type: ignore[attr-defined]
            except Exception as exc:
                raise CakeInternalError(
                    f"rule {rule.name} from {distribution} failed on kernel `{kernel}` "  # type: ignore[attr-defined]
                    f"({spec.label}): {type(exc).__name__}: {exc}"
                ) from exc
            for d in diags:
                found.setdefault((d.code, d.primary, d.message), (d, distribution, []))[2].append(spec)
    out = []
    for d, distribution, where in found.values():
        # a kernel with one specialization names none
        words = None if len(specs) == 1 else describe_specs(where, specs)
        message = d.message if words is None else f"{d.message} (with {words})"
        out.append(_stamped(d, distribution, message))
    return out


def _stamped(d: Diagnostic, plugin: str, message: str) -> Diagnostic:
    """``attrs.evolve(d, plugin=plugin, message=message)``, built directly for a plain :class:`Diagnostic`."""
    if type(d) is not Diagnostic:
        return attrs.evolve(d, plugin=plugin, message=message)
    return Diagnostic(
        d.code, d.slug, d.severity, message, d.primary, d.label, d.secondary, d.notes, d.help, plugin
    )  # fmt: skip


def describe_specs(subset: Sequence[Spec], every: Sequence[Spec]) -> str | None:
    """The specializations ``subset`` in words, or None when it is all of ``every``.

    A subset that fixes some variables and leaves the rest free is named by the fixed ones
    (``D=256``, ``D in {128, 256}``); any other subset is listed (``T=bf16,D=64; T=f16,D=128``).
    """
    chosen = {s.values for s in subset}
    if len(chosen) == len({s.values for s in every}):
        return None
    names = [k for k, _ in every[0].values] if every else []
    all_values = {k: _ordered(s.env[k] for s in every) for k in names}
    sub_values = {k: _ordered(s.env[k] for s in subset) for k in names}
    box = 1
    for k in names:
        box *= len(sub_values[k])
    consistent = all(any(s.values == t.values for t in subset) for s in every if _inside(s, sub_values))
    if box == len(chosen) and consistent:
        parts = []
        for k in names:
            if sub_values[k] == all_values[k]:
                continue
            vals = sub_values[k]
            parts.append(f"{k}={vals[0]}" if len(vals) == 1 else f"{k} in {{{', '.join(map(str, vals))}}}")
        if parts:
            return ", ".join(parts)
    return "; ".join(s.label for s in subset)


def _ordered(values: Iterable[int | str]) -> list[int | str]:
    out: list[int | str] = []
    for v in values:
        if v not in out:
            out.append(v)
    return out


def _inside(spec: Spec, values: dict[str, list[int | str]]) -> bool:
    return all(v in values[k] for k, v in spec.values)


def sort_diagnostics(diags: Iterable[Diagnostic]) -> list[Diagnostic]:
    """By file, line, column, then code and message."""
    return sorted(
        diags, key=lambda d: (d.primary.file, d.primary.line, d.primary.col, d.code, d.message)
    )
