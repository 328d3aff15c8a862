"""The inline-expectation harness rule packs share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cake_core.diagnostics.diagnostic import Diagnostic, Severity
from cake_core.errors import UnknownNameError
from cake_core.verify.expectations import (
    Expectation, ExpectationError, assert_file, check_text, corpus, parse_expectations,
)  # fmt: skip
from cake_core.verify.rule import Rule, RuleContext

from .test_runner import DOC

BODY = """\
kernel k(x: global f32[N, 64], out: global f32[N])
  domain N >= 1
  grid (t) over (cdiv(N, 128))
  cta warps 4
  role all warps 0..4:
    reg s: f32[128] layout rows
    fill s, value=0.0{fill}
    store out[t * 128 : +128] <- s, oob=skip
"""


class FlagFills(Rule):
    name = "TS911"
    slug = "flag-fills"
    summary = "flags fills"
    explanation = DOC

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        for typed in ctx.ops():
            if typed.op.name == "fill":
                yield self.at(typed.op.loc, "a fill")


class WarnStores(FlagFills):
    name = "TS912"
    slug = "warn-stores"
    severity = Severity.WARNING

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        for typed in ctx.ops():
            if typed.op.name == "store":
                yield self.at(typed.op.loc, "a store")


def test_parse_header_and_comments() -> None:
    text = "# target: a10\nkernel k()  # expect-error[CR102]\n  x  # expect-warning[CR101, CR107] expect-error[CK001]\n"
    target, expected = parse_expectations(text)
    assert target == "a10"
    assert expected == (
        Expectation(2, Severity.ERROR, "CR102"),
        Expectation(3, Severity.ERROR, "CK001"),
        Expectation(3, Severity.WARNING, "CR101"),
        Expectation(3, Severity.WARNING, "CR107"),
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kernel k()\n", "first line must name the target"),
        ("# target: a10\nx  # expect-error[cr102]\n", "is not a diagnostic code"),
        ("# target: a10\nx  # expect-eror[CR102]\n", "is written `expect-error\\[CODE\\]`"),
        ("# target: a10\nx  # expect-error[CR102] expect-warnin[CR103]\n", "is written"),
    ],
)
def test_malformed_files_are_rejected(text: str, message: str) -> None:
    with pytest.raises(ExpectationError, match=message):
        parse_expectations(text, "f.cake")


def test_met_expectations(registry_with) -> None:
    reg = registry_with(FlagFills(), WarnStores())
    text = "# target: h200\n" + BODY.format(fill="  # expect-error[TS911]").replace(
        "oob=skip\n", "oob=skip  # expect-warning[TS912]\n"
    )
    outcome = check_text(text, "t.cake", reg)
    assert outcome.ok, outcome.explain()
    assert [d.code for d in outcome.diagnostics] == ["TS911", "TS912"]


def test_missing_and_unexpected_are_both_reported(registry_with) -> None:
    reg = registry_with(FlagFills())
    # the fill is flagged but not expected; the store is expected to be flagged but is not
    text = "# target: h200\n" + BODY.format(fill="").replace("oob=skip\n", "oob=skip  # expect-error[TS911]\n")
    outcome = check_text(text, "t.cake", reg)
    assert not outcome.ok
    assert outcome.missing == (Expectation(9, Severity.ERROR, "TS911"),)
    assert [(d.code, d.primary.line) for d in outcome.unexpected] == [("TS911", 8)]
    report = outcome.explain()
    assert "missing: line 9: expect-error[TS911]" in report
    assert "unexpected error[TS911] at line 8: a fill" in report


def test_the_severity_must_match(registry_with) -> None:
    reg = registry_with(WarnStores())
    text = "# target: h200\n" + BODY.format(fill="").replace("oob=skip\n", "oob=skip  # expect-error[TS912]\n")
    outcome = check_text(text, "t.cake", reg)
    assert outcome.missing and outcome.unexpected


def test_a_file_without_expectations_must_be_clean(registry_with) -> None:
    reg = registry_with(FlagFills())
    outcome = check_text("# target: h200\n" + BODY.format(fill=""), "t.cake", reg)
    assert not outcome.ok and len(outcome.unexpected) == 1


def test_a_syntax_error_can_be_expected(registry_with) -> None:
    reg = registry_with()
    text = "# target: h200\n" + BODY.format(fill="").replace("0..4:", "0..4  # expect-error[CK001]")
    outcome = check_text(text, "t.cake", reg)
    assert outcome.ok, outcome.explain()


def test_an_unknown_target_is_a_user_error(registry_with) -> None:
    with pytest.raises(UnknownNameError, match="unknown target `z80`"):
        check_text("# target: z80\n" + BODY.format(fill=""), "t.cake", registry_with())


def test_files_and_corpora(tmp_path: Path, registry_with) -> None:
    reg = registry_with(FlagFills())
    (tmp_path / "sub").mkdir()
    good = tmp_path / "sub" / "b.cake"
    good.write_text("# target: h200\n" + BODY.format(fill="  # expect-error[TS911]"))
    bad = tmp_path / "a.cake"
    bad.write_text("# target: h200\n" + BODY.format(fill=""))
    assert corpus(tmp_path) == [bad, good]
    assert assert_file(good, reg).ok
    with pytest.raises(AssertionError, match="unexpected error\\[TS911\\]"):
        assert_file(bad, reg)
