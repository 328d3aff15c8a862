"""The records of the bounds analysis: obligations, the verdicts on them, and the witnesses that break them.

:class:`~cake_core.verify.domain.KernelDomain` turns an operand access (or a divisibility question)
into :class:`Obligation`\\ s, decides them, and answers with a :class:`Verdict`: proved, sampled, or
violated with a :class:`Witness` (the sizes and variable values under which one fails).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import attrs

from cake_core.ir import nodes as n
from cake_core.ir.primitive import Effect, Operand

if TYPE_CHECKING:
    from cake_core.ir.model import TypedOpImpl
    from cake_core.verify.linear import Lin

__all__ = ["MASKED", "PROVED", "AccessVerdict", "Obligation", "Status", "Verdict", "Witness"]


class Status(enum.StrEnum):
    PROVED = "proved"  # holds for every admissible size and variable value
    SAMPLED = "sampled"  # not proved; held on every sample of the witness search
    VIOLATED = "violated"  # a witness breaks it
    MASKED = "masked"  # the access is bounds-masked: out-of-bounds elements are handled


@attrs.frozen
class Witness:
    """Concrete sizes and variable values under which an obligation fails, and what happens."""

    sizes: tuple[tuple[str, int], ...]
    vars: tuple[tuple[str, int], ...]
    what: str

    def describe(self) -> str:
        """``N=1, B=1 (t=0, b=0)``."""
        s = ", ".join(f"{k}={v}" for k, v in self.sizes)
        v = ", ".join(f"{k}={x}" for k, x in self.vars)
        if s and v:
            return f"{s} (at {v})"
        return s or (f"at {v}" if v else "")

    @property
    def when(self) -> str:
        """`` when N=1 (at t=0)``, or nothing when the failure depends on no size or variable."""
        d = self.describe()
        return f" when {d}" if d else ""


@attrs.frozen
class Verdict:
    status: Status
    witness: Witness | None = None
    samples: int = 0  # size assignments the witness search tried

    @property
    def ok(self) -> bool:
        return self.status is not Status.VIOLATED


#: the verdicts that carry nothing but their status, shared (they are frozen)
PROVED, MASKED = Verdict(Status.PROVED), Verdict(Status.MASKED)


@attrs.frozen
class Obligation:
    """``m >= 0`` must hold where the operation runs; ``check`` tells, concretely, how it fails.

    ``m`` is None where the quantity is not linear (then only the witness search decides); ``exprs``
    are the expressions it depends on (the witness search samples the sizes they name); ``check(env)``
    gives the words of the failure at one point of the walk, or None where it holds there.
    """

    m: Lin | None
    exprs: tuple[n.Expr, ...]
    check: Callable[[Mapping[str, object]], str | None]


@attrs.frozen
class AccessVerdict:
    """Whether one operand access of one operation stays in bounds."""

    typed: TypedOpImpl
    effect: Effect
    verdict: Verdict

    @property
    def operand(self) -> Operand:
        return self.effect.operand
