"""The verifier-rule contract: what a rule pack registers through ``cake_register_rules``.

A rule is a small object with a stable id and its documentation, and one method, :meth:`Rule.check`,
that looks at one kernel under one specialization (a :class:`RuleContext`) and yields diagnostics.
The runner (:mod:`cake_core.verify.runner`) calls every registered rule over every specialization of
every kernel, stamps the distribution that registered the rule into each diagnostic's ``plugin``
field, merges the same finding made under several specializations, and sorts the result.

Rule ids are forever: a pack prefix and a number (``CR102``). A later version of a pack may sharpen
what a rule finds, never change what it means; a retired rule's id is not reused.

Write a rule by subclassing :class:`Rule` and setting its class variables::

    class SmemOverLimit(Rule):
        name = "CR102"
        slug = "smem-over-limit"
        summary = "a kernel needs more shared memory than the target grants one block"
        explanation = '''## What it does ... ## Why is this bad? ... ## Example ... ## Use instead ...'''

        def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
            if ctx.model.smem_bytes > ctx.target.smem_per_block_optin:
                yield self.at(ctx.kernel.loc, "...")
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, ClassVar

import attrs

from cake_core.diagnostics.diagnostic import Diagnostic, Label, Severity
from cake_core.verify.analyses import PluginSet, attach

if TYPE_CHECKING:
    from cake_core.ir import nodes as n
    from cake_core.location import Loc
    from cake_core.ir.primitive import Effect
    from cake_core.ir.model import CheckedModule, KernelModel, TypedOpImpl
    from cake_core.target import Target
    from cake_core.verify.domain import KernelDomain

#: A rule id: an upper-case pack prefix of two to four letters and three digits.
RULE_ID = re.compile(r"[A-Z]{2,4}[0-9]{3}")
#: A slug: lower-case words joined by hyphens.
SLUG = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
#: The sections every explanation has, in this order (ruff's rule documentation).
SECTIONS = ("## What it does", "## Why is this bad?", "## Example", "## Use instead")


@attrs.define(eq=False)
class RuleContext:
    """One kernel under one specialization, as every rule sees it.

    ``checked`` is the whole type-checked module (for rules that look across kernels), ``model`` the
    kernel under this specialization (environment, warps, roles, shared-memory layout with byte sizes
    and offsets, register tiles with their layouts, typed operations with resolved operands), and
    ``target`` the hardware record every limit comes from. ``plugins`` is the plugin set of the
    registry the rules come from (:func:`~cake_core.verify.analyses.plugin_set`): making the context
    attaches the checked module's analyses under it (:func:`~cake_core.verify.analyses.attach`), so
    that what rules compute about the module (facts, bounds verdicts) is kept for that plugin set.
    """

    checked: CheckedModule
    model: KernelModel
    target: Target
    plugins: PluginSet = ()

    def __attrs_post_init__(self) -> None:
        attach(self.checked, self.plugins)

    @property
    def kernel(self) -> n.Kernel:
        return self.model.kernel

    @property
    def spec_label(self) -> str:
        """The specialization in words (``T=bf16,D=256``; ``(single)`` without finite sets)."""
        return self.model.spec.label

    def ops(self) -> list[TypedOpImpl]:
        """Every typed operation of the kernel, in source order."""
        return list(self.model.ops)

    def effects(self, typed: TypedOpImpl) -> tuple[Effect, ...]:
        """The operation's declared effects (through its primitive, so plugin primitives are covered)."""
        return typed.prim.effects(typed)

    def const(self, e: n.Expr) -> int | None:
        """``e``'s value when the kernel is compiled under this specialization, if it has one."""
        from cake_core.ir.exprs import try_int

        return try_int(e, self.model.env)

    def attr_const(self, typed: TypedOpImpl, key: str) -> tuple[int | None, Loc]:
        """An integer attribute's compile-time value (or its declared default) and where it is written.

        The location is the attribute's when it is written, else the operation's.
        """
        value = typed.attr(key)
        if value is not None:
            return self.const(value), value.loc
        spec = typed.prim.signature.attr(key)
        default = spec.default if spec is not None else None
        return (default if isinstance(default, int) else None), typed.op.loc

    @functools.cached_property
    def domain(self) -> KernelDomain:
        """Reasoning about run-time sizes for this kernel (built once, shared by every rule)."""
        from cake_core.verify.domain import KernelDomain

        return KernelDomain(self.model)


@attrs.define(frozen=True, eq=False)
class Rule:
    """Base class of verifier rules. Subclasses set the class variables and implement :meth:`check`.

    ``name`` is the stable id (``CR101``) the registry files the rule under; ``slug`` its kebab-case
    name; ``severity`` whether a finding is a hard gate (``error``) or advisory (``warning``);
    ``summary`` one line; ``explanation`` markdown with the sections of :data:`SECTIONS`.
    """

    name: ClassVar[str]
    slug: ClassVar[str]
    severity: ClassVar[Severity] = Severity.ERROR
    summary: ClassVar[str]
    explanation: ClassVar[str]

    @property
    def id(self) -> str:
        """The stable rule id; the same as ``name``."""
        return self.name

    def check(self, ctx: RuleContext) -> Iterable[Diagnostic]:
        """Findings for one kernel under one specialization."""
        raise NotImplementedError(f"rule {self.name} does not implement `check`")

    def at(
        self,
        loc: Loc,
        message: str,
        *,
        label: str = "",
        secondary: Iterable[Label] = (),
        notes: Iterable[str] = (),
        help: str | None = None,
    ) -> Diagnostic:
        """A diagnostic of this rule; the runner fills in ``plugin`` with the registering distribution."""
        return Diagnostic(
            self.name, self.slug, self.severity, message, loc, label, tuple(secondary), tuple(notes), help,
            plugin="",
        )  # fmt: skip

    def problems(self) -> list[str]:
        """What is wrong with this rule's declaration (empty when it is well formed)."""
        out = []
        name = getattr(self, "name", None)
        if not isinstance(name, str) or not RULE_ID.fullmatch(name):
            out.append(f"id {name!r} is not a pack prefix and three digits (`CR101`)")
        if not isinstance(getattr(self, "slug", None), str) or not SLUG.fullmatch(self.slug):
            out.append(f"slug {getattr(self, 'slug', None)!r} is not kebab-case")
        if not isinstance(self.severity, Severity):
            out.append(f"severity {self.severity!r} is not a Severity")
        summary = getattr(self, "summary", "")
        if not isinstance(summary, str) or not summary or "\n" in summary:
            out.append("summary must be one non-empty line")
        text = getattr(self, "explanation", "")
        positions = [text.find(s) if isinstance(text, str) else -1 for s in SECTIONS]
        missing = [s for s, p in zip(SECTIONS, positions, strict=True) if p < 0]
        if missing:
            out.append(f"explanation lacks {', '.join(repr(m) for m in missing)}")
        elif positions != sorted(positions):
            out.append(f"explanation sections are out of order (expected {', '.join(SECTIONS)})")
        return out


def iter_rules(registry: object) -> Iterator[tuple[Rule, str]]:
    """Every registered rule with the distribution that registered it, in id order.

    A rule whose declaration is malformed (see :meth:`Rule.problems`) is a broken plugin: a
    :class:`~cake_core.errors.CakeUserError` naming it and its distribution, as for a plugin that
    fails to load.
    """
    from cake_core.errors import CakeUserError

    for name in registry.names("rules"):  # type: ignore[attr-defined]
        reg = registry.registration("rules", name)  # type: ignore[attr-defined]
        problems = reg.obj.problems()
        if problems:
            p = reg.plugin
            raise CakeUserError(
                f"rule `{name}` from {p.distribution} {p.version} is malformed: {'; '.join(problems)}"
            )
        yield reg.obj, reg.plugin.distribution
