"""Judging mutants: type checker, verifier, interpreter, and a verdict for every survivor.

For one mutant of a :class:`~cake_core.mutate.subjects.Subject`:

1. print it and parse the text back (the mutant is a real ``.cake`` text, not only a tree);
2. type-check it for the subject's target — a mutant that does not type-check does not count;
3. verify it with every registered rule; an error diagnostic catches it (warnings are noted only);
4. a mutant whose structural hash is the original's is *equivalent* (it is the same candidate);
5. run it in the interpreter on the subject's standard runs; a finding or a wrong answer catches it;
6. a survivor is run again on the exercising runs (more shapes, seeds, multiprocessor counts);
7. what still survives gets a verdict from :mod:`cake_core.mutate.verdicts`: *equivalent*, with the
   argument that makes it so, or *missed*, with why neither the verifier nor the interpreter saw it.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from cake_core.diagnostics.diagnostic import DiagnosticError
from cake_core.errors import CakeError
from cake_core.ir.hashing import structural_hash
from cake_core.ir.parser import parse
from cake_core.ir.primitive import Primitive
from cake_core.ir.printer import print_module
from cake_core.ir.sema import check_module
from cake_core.mutate.operators import Mutant
from cake_core.mutate.subjects import Subject
from cake_core.mutate.verdicts import survivor_verdict
from cake_core.verify.runner import verify


class Fate(enum.StrEnum):
    """What became of one mutant."""

    NOT_TYPED = "does-not-type-check"
    VERIFIER = "caught-by-verifier"
    INTERPRETER = "caught-by-interpreter"
    EQUIVALENT = "equivalent"
    MISSED = "missed"


@attrs.frozen
class Outcome:
    """One mutant's fate and the evidence: the codes and first message, the run, or the argument."""

    mutant: Mutant
    file: str
    fate: Fate
    detail: str
    warnings: tuple[str, ...] = ()  # codes of warnings the verifier gave (advisory: they catch nothing)

    @property
    def typechecks(self) -> bool:
        return self.fate is not Fate.NOT_TYPED


class Judge:
    """Judges mutants of subjects with one registry (primitives, rules, targets)."""

    def __init__(self, registry: Any) -> None:
        self.registry = registry
        self.primitives: dict[str, Primitive] = {p.name: p for p in registry.values("primitives")}
        self._hashes: dict[int, str] = {}

    def original_hash(self, subject: Subject) -> str:
        key = id(subject)
        if key not in self._hashes:
            self._hashes[key] = structural_hash(subject.module)
        return self._hashes[key]

    def judge(self, subject: Subject, mutant: Mutant) -> Outcome:
        """The fate of one mutant (see the module documentation for the steps)."""
        text = print_module(mutant.module)
        try:
            module = parse(text, subject.path)
        except DiagnosticError as exc:  # the printer and parser disagree: a bug, reported plainly
            return Outcome(mutant, subject.path, Fate.NOT_TYPED, f"the printed mutant does not parse: {exc}")
        target = self.registry.get("targets", subject.target)
        typed = check_module(module, self.primitives, target)
        if not typed.ok:
            first = next(d for d in typed.diagnostics if d.is_error)
            return Outcome(mutant, subject.path, Fate.NOT_TYPED, f"{first.code} {first.message}")
        diags = verify(typed, target, self.registry).diagnostics
        errors = [d for d in diags if d.is_error]
        warnings = tuple(dict.fromkeys(d.code for d in diags if not d.is_error))
        if errors:
            codes = ", ".join(dict.fromkeys(d.code for d in errors))
            return Outcome(mutant, subject.path, Fate.VERIFIER, f"{codes}: {errors[0].message}", warnings)
        if structural_hash(module) == self.original_hash(subject):
            return Outcome(mutant, subject.path, Fate.EQUIVALENT, "structurally identical to the original", warnings)
        exerciser = subject.exerciser
        if exerciser is None:
            fate, why = survivor_verdict(self, subject, mutant, module, runs=0, interpreted=False)
            return Outcome(mutant, subject.path, fate, f"{why}; {subject.why_not_run}", warnings)
        checked = check_module(module, self.primitives)  # no target: each run gives SMS
        runs = 0
        for exercising in (False, True):
            for config in exerciser.configs(exercising):
                runs += 1
                try:
                    failure = exerciser.failure(checked, config)
                except (CakeError, DiagnosticError, NotImplementedError) as exc:
                    failure = f"the interpreter refused the run: {type(exc).__name__}: {exc}"
                except Exception as exc:  # noqa: BLE001 - an interpreter failure is evidence, not a verdict
                    return Outcome(
                        mutant, subject.path, Fate.MISSED,
                        f"the interpreter failed ({type(exc).__name__}: {exc}) on {config.describe()}", warnings,
                    )  # fmt: skip
                if failure is not None:
                    where = "exercising run" if exercising else "run"
                    return Outcome(
                        mutant, subject.path, Fate.INTERPRETER, f"{failure} ({where}: {config.describe()})", warnings
                    )
        fate, why = survivor_verdict(self, subject, mutant, module, runs=runs, interpreted=True)
        return Outcome(mutant, subject.path, fate, why, warnings)


# ---------------------------------------------------------------------------------------------------
# Summaries
# ---------------------------------------------------------------------------------------------------


@attrs.frozen
class ClassSummary:
    """One operator class in the report's table."""

    operator: str
    mutants: int
    typechecked: int
    verifier: int
    interpreter: int
    equivalent: int
    missed: int

    @property
    def caught_share(self) -> float | None:
        """Caught over type-checked mutants that are not equivalent (None when there are none)."""
        live = self.typechecked - self.equivalent
        return (self.verifier + self.interpreter) / live if live else None


def summarize(outcomes: Iterable[Outcome], classes: Iterable[str]) -> list[ClassSummary]:
    """Per operator class, in the order of ``classes``."""
    by: dict[str, list[Outcome]] = {c: [] for c in classes}
    for o in outcomes:
        by.setdefault(o.mutant.operator, []).append(o)
    out = []
    for name, items in by.items():
        fates = [o.fate for o in items]
        out.append(ClassSummary(
            name, len(items), sum(o.typechecks for o in items), fates.count(Fate.VERIFIER),
            fates.count(Fate.INTERPRETER), fates.count(Fate.EQUIVALENT), fates.count(Fate.MISSED),
        ))  # fmt: skip
    return out


def judge_all(judge: Judge, subjects: Mapping[str, Subject], mutants: Iterable[tuple[str, Mutant]]) -> list[Outcome]:
    """Judge ``(subject path, mutant)`` pairs in order."""
    return [judge.judge(subjects[path], m) for path, m in mutants]
