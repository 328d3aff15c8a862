"""A schedule a plugin contributes to a problem: a ``.cake`` file that ``cake run`` seeds beside the
problem's own committed schedules (``cake_register_schedules``).

A problem keeps its schedules in ``schedules/*.cake`` beside its module; a plugin that adds an
architecture (``cake-blackwell``) ships schedules for it without editing the problem's package. Each
names the problem it solves and, optionally, the targets it is written for: a run for another target
does not seed it (its primitives would only be refused there).
"""

from __future__ import annotations

from pathlib import Path

import attrs


@attrs.frozen
class Schedule:
    """One contributed schedule: ``name`` (unique among registered schedules, ``problem/stem`` by
    convention), the problem it solves, its file, and the targets it is for (empty: every target)."""

    name: str
    problem: str
    path: Path = attrs.field(converter=Path)
    targets: frozenset[str] = attrs.field(default=frozenset(), converter=frozenset)
    summary: str = ""

    def seeds_for(self, problem: str, target: str) -> bool:
        """Whether a run of ``problem`` on ``target`` takes this schedule as a seed."""
        return self.problem == problem and (not self.targets or target in self.targets)
