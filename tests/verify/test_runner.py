"""The rule contract and the runner: registration, plugin stamping, merging across specializations,
ordering, type errors first, and rules that crash."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cake_core.diagnostics.diagnostic import Diagnostic, Severity
from cake_core.errors import CakeInternalError, CakeUserError
from cake_core.ir.model import Spec
from cake_core.verify.rule import Rule, RuleContext
from cake_core.verify.runner import describe_specs, verify_source

KERNEL = """\
kernel k(x: global f32[N, D], out: global f32[N])
  domain N >= 1, D in {64, 128, 256}, T in {bf16, f16}
  const R = 128
  grid (t) over (cdiv(N, R))
  cta warps 4
  role all warps 0..4:
    reg s: f32[R] layout rows
    fill s, value=0.0
    sumsq s <- x[t * R : +R, :], oob=zero
    store out[t * R : +R] <- s, oob=skip
"""
# `T` is used by no parameter: the type checker rejects the domain; the tests use KERNEL_OK.
KERNEL_OK = KERNEL.replace(", T in {bf16, f16}", "")

DOC = """
## What it does
Something.

## Why is this bad?
Because.

## Example
    bad

## Use instead
    good
"""


class EveryFill(Rule):
    """Flags every `fill`, under every specialization, with the same message."""

    name = "TS901"
    slug = "every-fill"
    summary = "flags fills"
    explanation = DOC

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        for typed in ctx.ops():
            if typed.op.name == "fill":
                yield self.at(typed.op.loc, "a fill", label="here")


class WideOnly(Rule):
    """Flags the kernel only where D is 256."""

    name = "TS902"
    slug = "wide-only"
    severity = Severity.WARNING
    summary = "flags D=256"
    explanation = DOC

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        if ctx.model.env["D"] == 256:
            yield self.at(ctx.kernel.loc, "wide")


class PerSpecMessage(Rule):
    """A message that differs per specialization (it names a byte count)."""

    name = "TS903"
    slug = "per-spec"
    summary = "a message per specialization"
    explanation = DOC

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        yield self.at(ctx.kernel.loc, f"{ctx.model.env['D'] * 4} bytes per row")


class Crashes(Rule):
    name = "TS904"
    slug = "crashes"
    summary = "raises"
    explanation = DOC

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        raise ZeroDivisionError("boom")


def _run(registry_with, text: str, *rules: Rule, target: str = "h200") -> list[Diagnostic]:
    reg = registry_with(*rules)
    return list(verify_source(text, "t.cake", reg.get("targets", target), reg).diagnostics)


# -- the contract --------------------------------------------------------------------------------------


def test_a_well_formed_rule_has_no_problems() -> None:
    assert EveryFill().problems() == []
    assert EveryFill().id == "TS901"


def test_problems_name_what_is_malformed() -> None:
    class Bad(Rule):
        name = "cr1"
        slug = "Not Kebab"
        summary = "two\nlines"
        explanation = "## Example\n## What it does\n"

    problems = " | ".join(Bad().problems())
    assert "pack prefix" in problems
    assert "kebab-case" in problems
    assert "one non-empty line" in problems
    assert "'## Why is this bad?'" in problems

    class OutOfOrder(EveryFill):
        explanation = "## Why is this bad?\n## What it does\n## Example\n## Use instead\n"

    assert any("out of order" in p for p in OutOfOrder().problems())


def test_at_builds_a_diagnostic_of_the_rule() -> None:
    from cake_core.location import Loc

    d = WideOnly().at(Loc("f", 3, 1, 3, 5), "wide", notes=["n"], help="h")
    assert (d.code, d.slug, d.severity, d.message, d.notes, d.help) == (
        "TS902", "wide-only", Severity.WARNING, "wide", ("n",), "h",
    )  # fmt: skip


def test_the_registry_accepts_only_rules(registry_with) -> None:
    class NotARule:
        name = "TS999"

    with pytest.raises(CakeUserError, match="is not a cake_core.verify.rule.Rule"):
        registry_with(NotARule())  # type: ignore[arg-type]


def test_a_malformed_rule_is_a_broken_plugin(registry_with) -> None:
    class Undocumented(EveryFill):
        name = "TS906"
        explanation = "nothing"

    with pytest.raises(CakeUserError, match=r"rule `TS906` from \(in-process\) 0 is malformed: explanation lacks"):
        _run(registry_with, KERNEL_OK, Undocumented())


def test_duplicate_rule_ids_are_rejected(registry_with) -> None:
    with pytest.raises(CakeUserError, match="rule `TS901` is registered twice"):
        registry_with(EveryFill(), EveryFill())


# -- the runner ----------------------------------------------------------------------------------------


def test_the_registering_distribution_is_stamped(registry_with) -> None:
    diags = _run(registry_with, KERNEL_OK, EveryFill())
    assert [d.code for d in diags] == ["TS901"]
    assert diags[0].plugin == "(in-process)"
    assert diags[0].primary.line == 8


def test_a_finding_under_every_specialization_names_none(registry_with) -> None:
    diags = _run(registry_with, KERNEL_OK, EveryFill())
    assert len(diags) == 1 and diags[0].message == "a fill"


def test_a_finding_under_some_specializations_names_them(registry_with) -> None:
    diags = _run(registry_with, KERNEL_OK, WideOnly())
    assert [d.message for d in diags] == ["wide (with D=256)"]
    assert diags[0].severity is Severity.WARNING


def test_different_messages_stay_apart(registry_with) -> None:
    diags = _run(registry_with, KERNEL_OK, PerSpecMessage())
    assert sorted(d.message for d in diags) == [
        "1024 bytes per row (with D=256)", "256 bytes per row (with D=64)", "512 bytes per row (with D=128)",
    ]  # fmt: skip


def test_findings_are_sorted_by_location(registry_with) -> None:
    diags = _run(registry_with, KERNEL_OK, EveryFill(), WideOnly(), PerSpecMessage())
    keys = [(d.primary.line, d.primary.col, d.code) for d in diags]
    assert keys == sorted(keys)
    assert diags[0].primary.line == 1 and diags[-1].code == "TS901"


def test_type_errors_stop_the_rules(registry_with) -> None:
    diags = _run(registry_with, KERNEL, EveryFill())
    assert [d.code for d in diags] == ["CK008"]  # `T` is used by no parameter
    assert all(d.plugin == "cake-core" for d in diags)


def test_the_target_reaches_the_type_checker_and_the_rules(registry_with) -> None:
    seen: list[str] = []

    class Spy(EveryFill):
        name = "TS905"

        def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
            seen.append(ctx.target.name)
            return iter(())

    reg = registry_with(Spy())
    report = verify_source(KERNEL_OK, "t.cake", reg.get("targets", "a10"), reg)
    assert set(seen) == {"a10"} and len(seen) == 3  # one call per specialization
    assert report.ok and report.rules == ("TS905",) and report.specializations == 3 and report.kernels == 1


def test_a_crashing_rule_is_an_internal_error_naming_it(registry_with) -> None:
    with pytest.raises(CakeInternalError, match=r"rule TS904 from \(in-process\) failed on kernel `k`"):
        _run(registry_with, KERNEL_OK, Crashes())


def test_a_syntax_error_is_a_ck001_diagnostic(registry_with) -> None:
    reg = registry_with(EveryFill())
    report = verify_source("kernel k(\n", "bad.cake", reg.get("targets", "h200"), reg)
    assert [d.code for d in report.diagnostics] == ["CK001"]
    assert not report.ok and report.errors == 1


# -- naming specializations ----------------------------------------------------------------------------


def _specs(*combos: tuple[tuple[str, int | str], ...]) -> list[Spec]:
    return [Spec(c) for c in combos]


def test_describe_specs() -> None:
    every = _specs(
        *[(("T", t), ("D", d)) for t in ("bf16", "f16") for d in (64, 128, 256)]
    )
    assert describe_specs(every, every) is None
    assert describe_specs([s for s in every if s.env["D"] == 256], every) == "D=256"
    assert describe_specs([s for s in every if s.env["D"] != 64], every) == "D in {128, 256}"
    assert describe_specs([s for s in every if s.env["T"] == "f16" and s.env["D"] == 64], every) == "T=f16, D=64"
    odd = [every[0], every[4]]  # (bf16, 64) and (f16, 128): not a box
    assert describe_specs(odd, every) == "T=bf16,D=64; T=f16,D=128"


@pytest.mark.parametrize(
    ("old", "new", "what"),
    [
        ("const R = 128", "const R = 128, inf = 3", "constant"),
        ("    fill s, value=0.0", "    let inf = 2\n    fill s, value=0.0", "let"),
        ("out: global f32[N])", "out: global f32[N], inf: scalar i32)", "parameter"),
    ],
)
def test_the_builtin_word_inf_names_nothing(registry_with, old: str, new: str, what: str) -> None:
    """Every evaluator reads `inf` as infinity (the interpreter, the protocol replay, the CUDA lowering), so a
    declaration may not give it another value: one CK003 at the declaration."""
    assert old in KERNEL_OK
    diags = _run(registry_with, KERNEL_OK.replace(old, new))
    errors = [d for d in diags if d.is_error]
    assert [d.code for d in errors] == ["CK003"]
    assert errors[0].message == f"`inf` is a built-in constant (inf); it cannot name a {what}"
    assert errors[0].primary.line == next(i for i, line in enumerate(KERNEL_OK.replace(old, new).splitlines(), 1)
                                          if "inf" in line)


SCALAR_KERNEL = KERNEL_OK.replace("out: global f32[N])", "out: global f32[N], lim: scalar i32)").replace(
    "    sumsq s <- x[t * R : +R, :], oob=zero", "    if t < lim:\n      sumsq s <- x[t * R : +R, :], oob=zero"
)


def test_a_kernel_with_a_scalar_parameter_type_checks(registry_with) -> None:
    """A scalar parameter is bound by the implicit program's scalar (it used to be refused as a rank mismatch)."""
    assert "lim: scalar i32" in SCALAR_KERNEL and "if t < lim:" in SCALAR_KERNEL
    assert [d for d in _run(registry_with, SCALAR_KERNEL) if d.is_error] == []


@pytest.mark.parametrize(
    ("program_param", "message"),
    [
        ("lim: global i32[N]", "`lim` is a tensor, parameter `lim` of `k` takes a scalar"),
        ("lim: scalar i32", None),
    ],
)
def test_a_launch_passes_scalars_to_scalars_only(registry_with, program_param: str, message: str | None) -> None:
    text = SCALAR_KERNEL + (
        f"\nprogram p(x: global f32[N, D], out: global f32[N], {program_param})\n"
        "  domain N >= 1, D in {64, 128, 256}\n"
        "  launch k(x, out, lim)\n"
    )
    errors = [d for d in _run(registry_with, text) if d.is_error]
    assert [d.message for d in errors] == ([message] if message else [])
    assert all(d.code == "CK009" for d in errors)
