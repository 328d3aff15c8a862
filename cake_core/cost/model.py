"""The cost-model contract (*provisional*: members may be added before cake-core 1.0).

A model estimates one checked candidate's time at one shape, term by term, and may learn from measured
times (``update``; an analytic model that does not learn says so with ``calibrated = False`` and ignores
it). The first implementation taught the interface: a model needs the type-checked module (shapes,
layouts and typed operations per specialization), not only its syntax, and a ranking wants to know
which bound a candidate hits, not only a number (:class:`Estimate`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import attrs

if TYPE_CHECKING:
    from cake_core.ir.model import CheckedModule
    from cake_core.target import Target


@attrs.frozen
class LaunchEstimate:
    """One launch of the program: its time, the term that bounds it, and every term in milliseconds."""

    kernel: str
    ms: float
    bound: str
    terms: dict[str, float]
    ctas: int
    waves: int


@attrs.frozen
class Estimate:
    """A program's estimated time at one shape: the launches' times added up."""

    model: str
    version: str
    calibrated: bool
    ms: float
    bound: str  # the bounding term of the launch that takes longest
    launches: tuple[LaunchEstimate, ...]
    notes: tuple[str, ...] = ()


@runtime_checkable
class CostModel(Protocol):
    """A cost model (docs/plugins.md). Optional beyond these: ``basis(target) -> str``, one sentence on where
    its figures for ``target`` come from, which ``cake run`` adds where it ranks by predicted time alone."""

    name: str
    version: str
    calibrated: bool

    def estimate(self, checked: CheckedModule, target: Target, values: Mapping[str, int | str]) -> Estimate:
        """The estimated time of the checked program at the program sizes and type variables ``values``."""
        ...

    def update(self, estimates: Sequence[Estimate], measured_ms: Sequence[float]) -> None:
        """Learn from measured times of the candidates these estimates were made for."""
        ...
