"""The installed cost model's estimate of a proposed module at the run's cell, before anything is compiled: the
order in which the search agent proposes its candidates."""

from __future__ import annotations

from typing import Any

import attrs
from cake_core import pipeline
from cake_core.cost.floor import floor_ms
from cake_core.errors import CakeUserError
from cake_core.ir import nodes as n
from cake_core.ir.printer import print_module
from cake_core.loop.benchmark import program_values
from cake_core.loop.records import RunInfo
from cake_core.target import Target


@attrs.frozen
class Ranker:
    """Estimates modules of one run (problem, cell, target) with the first installed cost model."""

    problem: Any
    target: Target
    registry: Any
    shape: dict[str, int]
    dtype: str
    model: Any  # a cake_core.cost.model.CostModel, or None where none is installed
    floor: float  # ms: the least time the cell can take (cake_core.cost.floor); stage 2 refuses a prediction below it

    @classmethod
    def for_run(cls, run: RunInfo, target: Target, registry: Any) -> Ranker:
        problem = registry.get("problems", run.problem)
        shape, dtype = dict(run.cell["shape"]), run.cell["dtype"]
        models = registry.names("cost_models")
        model = registry.get("cost_models", models[0]) if models else None
        return cls(problem, target, registry, shape, dtype, model, floor_ms(problem, shape, dtype, target))

    def estimate(self, module: n.Module) -> float | None:
        """Predicted milliseconds at the run's cell; ``None`` where there is no model or the module is ill-typed."""
        if self.model is None:
            return None
        checked = pipeline.check(pipeline.Source(module, print_module(module)), self.target, self.registry)
        if not checked.ok:
            return None
        try:
            values = program_values(checked, self.problem, self.shape, self.dtype)
            est = self.model.estimate(checked, self.target, values)
        except CakeUserError:  # e.g. no specialization for the cell
            return None
        return float(est.ms)

    def order(self, ms: float | None) -> tuple[bool, float]:
        """A sort key: plausible estimates first, fastest first; then those the loop will refuse (ill-typed, or
        predicted below the floor, which stage 2 refuses)."""
        implausible = ms is None or ms < self.floor
        return implausible, ms if ms is not None else 0.0
