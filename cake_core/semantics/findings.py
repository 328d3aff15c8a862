"""Typed records of what the interpreter found, convertible to :class:`~cake_core.diagnostics.diagnostic.Diagnostic`.

A :class:`Finding` carries a stable code from :mod:`cake_core.semantics.codes`, a message that stands
alone, the location of the operation (or statement) that did it, labelled secondary locations (the
other side of a race, each blocked role of a deadlock), and where in the run it happened: the
launch's kernel, the CTA's grid coordinates and the role instance. The same finding made again
(another CTA, another loop iteration) is folded into the first one: ``count`` says how often.
:class:`Findings` collects them for one run; a fatal one ends the run as :class:`Stop`.
"""

from __future__ import annotations

from typing import Any

import attrs

from cake_core.diagnostics.codes import Code
from cake_core.diagnostics.diagnostic import Diagnostic, Label
from cake_core.location import Loc


@attrs.define(eq=False)
class Finding:
    """One finding of a run."""

    code: Code
    message: str
    loc: Loc
    label: str = ""
    secondary: tuple[Label, ...] = attrs.field(default=(), converter=tuple)
    notes: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    help: str | None = None
    kernel: str | None = None  # the launched kernel
    cta: tuple[tuple[str, int], ...] = ()  # grid variable -> coordinate of the CTA
    instance: str | None = None  # the role instance: "role `main`" or "role `consumers` instance 1"
    fatal: bool = False  # the finding stopped the run (a fault, a deadlock, the step bound)
    count: int = 1  # how many times the same finding was made

    @property
    def id(self) -> str:
        """The stable code, ``CS003``."""
        return self.code.code

    @property
    def slug(self) -> str:
        return self.code.slug

    @property
    def where(self) -> str:
        """The launch, CTA and role instance in words."""
        parts = []
        if self.kernel:
            parts.append(f"kernel `{self.kernel}`")
        if self.cta:
            parts.append("CTA (" + ", ".join(f"{k}={v}" for k, v in self.cta) + ")")
        if self.instance:
            parts.append(self.instance)
        return ", ".join(parts)

    def key(self) -> tuple:
        """What makes two findings the same one: code, location, and the other side's locations."""
        return (self.code.code, self.loc, tuple(s.loc for s in self.secondary), self.label)

    def to_diagnostic(self) -> Diagnostic:
        notes = list(self.notes)
        if self.where:
            notes.insert(0, f"first seen in {self.where}")
        if self.count > 1:
            notes.append(f"seen {self.count} times in this run")
        return self.code.at(
            self.loc, self.message, label=self.label, secondary=self.secondary, notes=tuple(notes), help=self.help
        )

    def __str__(self) -> str:
        return f"{self.code.code} {self.loc}: {self.message}"


class Stop(Exception):
    """A fatal finding: the run ends."""

    def __init__(self, finding: Finding) -> None:
        super().__init__(finding.message)
        self.finding = finding


class Findings:
    """What one run found, each finding once, and where the run is: the launched kernel and the CTA."""

    def __init__(self) -> None:
        self.found: dict[tuple, Finding] = {}
        self.kernel: str | None = None
        self.coords: tuple[tuple[str, int], ...] = ()

    def make(self, code: Code, loc: Loc, message: str, who: str | None = None, **kw: Any) -> Finding:
        """A finding here, by the role instance ``who`` (None: by no instance)."""
        return Finding(code, message, loc, kernel=self.kernel, cta=self.coords, instance=who, **kw)

    def stop(self, code: Code, loc: Loc, message: str, who: str | None = None, **kw: Any) -> Stop:
        """A fatal finding here, to raise."""
        return Stop(self.make(code, loc, message, who, fatal=True, **kw))

    def report(self, f: Finding) -> None:
        """Keeps ``f``, or counts it again when the same finding was made before."""
        key = f.key()
        if key in self.found:
            self.found[key].count += 1
        else:
            self.found[key] = f
