"""Every hook a Cake plugin can implement.

Each hook receives a ``register`` callback and calls it once per thing it contributes; the host, not
the plugin, checks names and records which distribution registered what. All results are collected
(no hook is ``firstresult``), none is ``historic``. An implementation may accept fewer arguments than
its spec, so hooks only ever grow.

What each hook registers is a typed interface. Those marked *provisional* may still gain members
before version 1.0 of cake-core; the rest are stable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from cake_core.cost.model import CostModel
    from cake_core.ir.layouts import TileLayout
    from cake_core.ir.primitive import Primitive, Tier
    from cake_core.loop.agent import Agent
    from cake_core.loop.benchmark import Measurement
    from cake_core.loop.records import CandidateInfo, FilterOutcome, Finding, RunInfo, RunSummary
    from cake_core.loop.tactic import Tactic
    from cake_core.mutate.mutant import Operator
    from cake_core.problems.problem import Problem
    from cake_core.problems.schedule import Schedule
    from cake_core.target import Target, TargetFeature
    from cake_core.verify.rule import Rule

hookspec = pluggy.HookspecMarker("cake")
hookimpl = pluggy.HookimplMarker("cake")

# ---------------------------------------------------------------------------------------------------
# Hardware
# ---------------------------------------------------------------------------------------------------


@hookspec
def cake_register_targets(register: Callable[[Target], None]) -> None:
    """Register hardware targets.

    :param register: call with one :class:`cake_core.target.Target` per GPU part; its ``name`` is
        the id users pass as ``--target``. Each of its features must be declared by a loaded plugin.
    """


@hookspec
def cake_register_features(register: Callable[[TargetFeature], None]) -> None:
    """Register hardware features: names that targets list and primitives require.

    :param register: call with one :class:`cake_core.target.TargetFeature` per feature name (``"tma"``),
        saying what a target that lists it offers.
    """


# ---------------------------------------------------------------------------------------------------
# The IR vocabulary
# ---------------------------------------------------------------------------------------------------


@hookspec
def cake_register_tiers(register: Callable[[Tier], None]) -> None:
    """Register memory tiers: kinds of operand (where an operand lives) that primitives' slots accept.

    :param register: call with one :class:`cake_core.ir.primitive.Tier` per kind; each kind a
        primitive's signature names must be declared by a loaded plugin.
    """


@hookspec
def cake_register_layouts(register: Callable[[TileLayout], None]) -> None:
    """Register register-tile layouts, the names written in ``reg t: f32[M, N] layout NAME(ARGS)``.

    :param register: call with one :class:`cake_core.ir.layouts.TileLayout` per layout: how it places
        a tile over a role instance's threads, and how many registers a thread needs for it.
    """


@hookspec
def cake_register_primitives(register: Callable[[Primitive], None]) -> None:
    """Register IR primitives (operations written in the generic form ``name outs <- ins, key=value``).

    :param register: call with one :class:`cake_core.ir.primitive.Primitive` per operation name: its
        signature and type rule, declared effects, CPU semantics, lowering per architecture and cost terms.
    """


# ---------------------------------------------------------------------------------------------------
# Static filtering
# ---------------------------------------------------------------------------------------------------


@hookspec
def cake_register_rules(register: Callable[[Rule], None]) -> None:
    """Register verifier rules.

    :param register: call with one :class:`cake_core.verify.rule.Rule` per rule; its id (pack prefix
        plus number) never changes meaning across versions of the pack.
    """


@hookspec
def cake_register_mutations(register: Callable[[Operator], None]) -> None:
    """Register mutation classes: plausible schedule bugs made on purpose, to test rules (*provisional* interface).

    :param register: call with one :class:`cake_core.mutate.mutant.Operator` per class; its ``name``
        is the class id, and every mutant of a valid kernel it makes should be refused by some rule.
    """


@hookspec
def cake_register_cost_models(register: Callable[[CostModel], None]) -> None:
    """Register cost models (*provisional* interface).

    :param register: call with one :class:`cake_core.cost.model.CostModel` per model.
    """


# ---------------------------------------------------------------------------------------------------
# Search
# ---------------------------------------------------------------------------------------------------


@hookspec
def cake_register_tactics(register: Callable[[Tactic], None]) -> None:
    """Register schedule transformations, the search space agents draw from (*provisional* interface).

    :param register: call with one :class:`cake_core.loop.tactic.Tactic` per transformation.
    """


@hookspec
def cake_register_agents(register: Callable[[Agent], None]) -> None:
    """Register agent backends that propose candidate kernels (*provisional* interface).

    :param register: call with one :class:`cake_core.loop.agent.Agent` per backend.
    """


# ---------------------------------------------------------------------------------------------------
# Problems
# ---------------------------------------------------------------------------------------------------


@hookspec
def cake_register_problems(register: Callable[[Problem], None]) -> None:
    """Register problems: inputs, reference, oracle, shape domain and default cell.

    :param register: call with one :class:`cake_core.problems.problem.Problem` per problem; its
        ``name`` is what users pass to ``cake run`` and ``--problem``.
    """


@hookspec
def cake_register_schedules(register: Callable[[Schedule], None]) -> None:
    """Register schedules for problems: ``.cake`` files ``cake run`` seeds beside a problem's own
    (*provisional* interface).

    :param register: call with one :class:`cake_core.problems.schedule.Schedule` per file: the problem
        it solves and the targets it is written for (none: every target).
    """


# ---------------------------------------------------------------------------------------------------
# Observing a run (pytest-style lifecycle hooks; *provisional*). Unlike the hooks above, these are called
# while ``cake run`` works, once per event, with the typed records of cake_core.loop.records. A record taken
# from the ledger of a resumed run is announced again with ``resumed=True``, so an observer sees the whole run.
# An observer must not raise: the run reports a raising observer as a user error naming its plugin.
# ---------------------------------------------------------------------------------------------------


@hookspec
def cake_run_started(run: RunInfo, resumed: bool) -> None:
    """A run starts (or a resumed run starts again)."""


@hookspec
def cake_candidate_generated(run: RunInfo, candidate: CandidateInfo, resumed: bool) -> None:
    """Stage 1 recorded a new, structurally distinct candidate."""


@hookspec
def cake_candidate_filtered(run: RunInfo, candidate: CandidateInfo, outcome: FilterOutcome, resumed: bool) -> None:
    """Stage 2 decided on a candidate: rejected (with the gate and reason) or compiled (with its estimate)."""


@hookspec
def cake_measured(run: RunInfo, candidate: CandidateInfo | None, measurement: Measurement, resumed: bool) -> None:
    """Stage 3 recorded a dispatch: a candidate's (``candidate`` given) or the problem's baseline's."""


@hookspec
def cake_finding_routed(run: RunInfo, finding: Finding, resumed: bool) -> None:
    """Stage 4 routed a finding to the candidate, the verifier, the cost model or the IR vocabulary."""


@hookspec
def cake_run_finished(run: RunInfo, summary: RunSummary) -> None:
    """The run ended: its best kernel, the baseline and the counts (also after a budget stopped it)."""
