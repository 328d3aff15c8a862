"""Diagnostic records: what every parser error, type error and verifier finding is."""

from __future__ import annotations

import enum

import attrs

from cake_core.location import Loc


class Severity(enum.StrEnum):
    ERROR = "error"  # a hard gate: the candidate goes no further
    WARNING = "warning"  # advisory


@attrs.frozen
class Label:
    loc: Loc
    message: str


@attrs.frozen
class Diagnostic:
    """One finding, standing alone: a stable code, where, what, and how to fix it."""

    code: str  # pack prefix + number: CK001, CR101, ...
    slug: str  # kebab-case name of the code: smem-over-limit
    severity: Severity
    message: str  # lowercase, identifiers in backticks, complete without the source
    primary: Loc
    label: str = ""  # what the primary span shows
    secondary: tuple[Label, ...] = attrs.field(default=(), converter=tuple)
    notes: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    help: str | None = None
    plugin: str = "cake-core"  # the distribution whose rule emitted it

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR


class DiagnosticError(Exception):
    """Raised by the parser and checkers when they cannot go on; carries the diagnostics so far."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = diagnostics
        super().__init__("; ".join(d.message for d in diagnostics))
