"""Inline expectations: ``.cake`` test files that say, on the offending line, what the verifier finds.

The way MLIR's ``expected-error`` and mypy's ``# E:`` comments test diagnostics. A test file's first
line names the target it is verified for; each expectation is a comment on the line where the
diagnostic's primary span starts::

    # target: a10
    kernel assign(x: global bf16[N, D], out: global i32[N])     # expect-error[CR102]
      ...
        store out[t * 128 : +128] <- v      # expect-error[CR108] expect-warning[XY201]

``expect-error[CODE]`` / ``expect-warning[CODE]`` (several codes may share one pair of brackets,
``expect-error[CR101, CR107]``) expect at least one diagnostic with that code and severity whose
primary span starts on that line. Every diagnostic the verifier emits must be expected on its line:
a file without expectations must verify clean. A syntax error is a ``CK001`` diagnostic like any other.

Rule packs reuse this harness for their corpora::

    @pytest.mark.parametrize("path", corpus(HERE / "corpus"), ids=lambda p: p.name)
    def test_corpus(path):
        assert_file(path)
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from cake_core.diagnostics.diagnostic import Diagnostic, Severity

if TYPE_CHECKING:
    from cake_core.plugins import Registry

TARGET_LINE = re.compile(r"#\s*target:\s*(?P<target>\S+)\s*$")
EXPECT = re.compile(r"expect-(?P<severity>error|warning)\[(?P<codes>[^\]]*)\]")
CODE = re.compile(r"[A-Z]{2,4}[0-9]{3}")


class ExpectationError(ValueError):
    """A test file whose header or expectation comments are malformed."""


@attrs.frozen(order=True)
class Expectation:
    """One expected diagnostic: its code and severity, and the line its primary span starts on."""

    line: int
    severity: Severity
    code: str

    def __str__(self) -> str:
        return f"line {self.line}: expect-{self.severity.value}[{self.code}]"


@attrs.frozen
class Outcome:
    """What verifying one test file found, against what it expected."""

    path: str
    target: str
    source: str
    diagnostics: tuple[Diagnostic, ...]
    expected: tuple[Expectation, ...]
    missing: tuple[Expectation, ...]
    unexpected: tuple[Diagnostic, ...]

    @property
    def ok(self) -> bool:
        return not self.missing and not self.unexpected

    def explain(self) -> str:
        """A report of every mismatch, with the diagnostics rendered as the command line would."""
        from cake_core.diagnostics.render import render

        out = [f"{self.path} (target {self.target}):"]
        for e in self.missing:
            out.append(f"  missing: {e}")
        for d in self.unexpected:
            out.append(f"  unexpected {d.severity.value}[{d.code}] at line {d.primary.line}: {d.message}")
        if self.diagnostics:
            out.append("everything the verifier said:")
            out.extend(render(d, {self.path: self.source}) for d in self.diagnostics)
        return "\n".join(out)


def named_target(text: str) -> str | None:
    """The target a kernel file names on its first line (``# target: NAME``), or None."""
    lines = text.splitlines()
    m = TARGET_LINE.fullmatch(lines[0].strip()) if lines else None
    return m["target"] if m else None


def parse_expectations(text: str, path: str = "<string>") -> tuple[str, tuple[Expectation, ...]]:
    """The target named on the first line and every expectation, in line order."""
    lines = text.splitlines()
    target = named_target(text)
    if target is None:
        raise ExpectationError(f"{path}: the first line must name the target: `# target: NAME`")
    found: list[Expectation] = []
    for number, line in enumerate(lines, start=1):
        hash_at = line.find("#")
        if hash_at < 0:
            continue
        comment = line[hash_at:]
        for word in re.finditer(r"expect-", comment):
            em = EXPECT.match(comment, word.start())
            if em is None:
                raise ExpectationError(
                    f"{path}:{number}: an expectation is written `expect-error[CODE]` or `expect-warning[CODE]`"
                )
            for code in (c.strip() for c in em["codes"].split(",")):
                if not CODE.fullmatch(code):
                    raise ExpectationError(f"{path}:{number}: `{code}` is not a diagnostic code (`CR102`)")
                found.append(Expectation(number, Severity(em["severity"]), code))
    return target, tuple(sorted(set(found)))


def compare(expected: Iterable[Expectation], diagnostics: Iterable[Diagnostic]) -> tuple[
    tuple[Expectation, ...], tuple[Diagnostic, ...]
]:
    """Expectations no diagnostic meets, and diagnostics no expectation allows."""
    expected = set(expected)
    diagnostics = list(diagnostics)
    got = {Expectation(d.primary.line, d.severity, d.code) for d in diagnostics}
    missing = tuple(sorted(expected - got))
    unexpected = tuple(d for d in diagnostics if Expectation(d.primary.line, d.severity, d.code) not in expected)
    return missing, unexpected


def check_text(text: str, path: str, registry: Registry | None = None) -> Outcome:
    """Verify ``text`` for the target its first line names and compare with its expectations."""
    from cake_core import plugins
    from cake_core.verify.runner import verify_source

    target_name, expected = parse_expectations(text, path)
    reg = registry if registry is not None else plugins.registry()
    target = reg.get("targets", target_name)
    report = verify_source(text, path, target, reg)
    missing, unexpected = compare(expected, report.diagnostics)
    return Outcome(path, target_name, text, report.diagnostics, expected, missing, unexpected)


def check_file(path: str | Path, registry: Registry | None = None) -> Outcome:
    p = Path(path)
    return check_text(p.read_text(encoding="utf-8"), str(p), registry)


def assert_file(path: str | Path, registry: Registry | None = None) -> Outcome:
    """:func:`check_file`, raising :class:`AssertionError` with a full report on any mismatch."""
    outcome = check_file(path, registry)
    if not outcome.ok:
        raise AssertionError(outcome.explain())
    return outcome


def corpus(directory: str | Path) -> list[Path]:
    """Every ``.cake`` file under ``directory``, sorted (for ``pytest.mark.parametrize``)."""
    return sorted(Path(directory).rglob("*.cake"))
