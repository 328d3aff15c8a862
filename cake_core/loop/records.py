"""The typed records the loop passes down its stages, writes to the ledger and hands to observer hooks.

*Provisional* (like the agent and cost-model contracts): fields may be added before cake-core 1.0.
"""

from __future__ import annotations

from typing import Any

import attrs

from cake_core.diagnostics.diagnostic import Diagnostic

#: where a routed finding goes (DESIGN section 5, stage 4; docs/loop.md says what sends a finding where)
DESTINATIONS = ("candidate", "verifier", "cost-model", "vocabulary")


@attrs.frozen
class RunInfo:
    """What every observer hook is told about the run it observes."""

    problem: str
    target: str
    out: str
    seed: int
    budgets: Budgets
    cell: dict[str, Any]


@attrs.frozen
class Budgets:
    """What a run may spend; ``None`` is unlimited. Wall time and GPU seconds add up over resumed sessions."""

    candidates: int | None = None
    gpu_benchmarks: int | None = None  # stage-3 dispatches of candidates, failures included (baselines aside)
    gpu_seconds: float | None = None  # wall time of those dispatches
    wall_seconds: float | None = None
    agent_tokens: int | None = None
    #: how many of a round's compiled candidates go on to stage 3, best predicted first
    benchmark_top: int | None = None


@attrs.frozen
class Spent:
    """What a run has spent so far, against its :class:`Budgets`."""

    candidates: int = 0
    gpu_benchmarks: int = 0
    gpu_seconds: float = 0.0
    wall_seconds: float = 0.0
    agent_tokens: int = 0

    def exhausted(self, budgets: Budgets) -> str | None:
        """The first budget spent in full, as a phrase, or ``None``."""
        for name in ("candidates", "gpu_benchmarks", "gpu_seconds", "wall_seconds", "agent_tokens"):
            limit = getattr(budgets, name)
            if limit is not None and getattr(self, name) >= limit:
                return f"{name.replace('_', ' ')} budget ({limit}) spent"
        return None


@attrs.frozen
class CandidateInfo:
    """One candidate as generated: its ledger id, structural hash, where it came from."""

    id: int
    hash: str
    name: str
    round: int
    origin: str  # "seed" (a committed schedule), "from" (a user's file), "agent:NAME"
    how: str  # one line: the file it was read from, or the tactic chain that made it
    source: str
    parent: str | None = None  # the parent's hash
    path: str | None = None


@attrs.frozen
class KernelResources:
    """What ptxas reported for one kernel of a compiled candidate (bytes)."""

    registers: int | None
    spill_stores: int
    stack: int


@attrs.frozen
class CompileSummary:
    """The compile of the default cell's specialization: architecture, resources, compiler warnings."""

    arch: str
    kernels: dict[str, KernelResources]
    smem_bytes: dict[str, int]
    warnings: list[str] = attrs.field(factory=list)


@attrs.frozen
class EstimateSummary:
    """A cost model's estimate of a candidate at the run's cell: the total and its terms."""

    model: str  # name and version
    calibrated: bool
    ms: float
    bound: str
    terms: dict[str, float] = attrs.field(factory=dict)  # the longest launch's terms, ms


@attrs.frozen
class FilterOutcome:
    """Stage 2's verdict on one candidate. ``gate`` names the gate that rejected it (``verify``, ``interp``,
    ``compile``), ``None`` for a candidate that passed every gate."""

    status: str  # "rejected" or "compiled"
    gate: str | None = None
    reason: str | None = None  # one line: the first diagnostic, or the compiler's error
    verify: list[Diagnostic] = attrs.field(factory=list)
    interp: list[Diagnostic] = attrs.field(factory=list)
    interp_seconds: float | None = None
    compile: CompileSummary | None = None
    estimate: EstimateSummary | None = None
    seconds: float = 0.0


@attrs.frozen
class Finding:
    """A routed finding (stage 4): where it goes, what kind of thing it is, what it rests on, and a ``.cake``
    text that reproduces it (``None`` where the finding is not about one candidate)."""

    destination: str  # one of DESTINATIONS
    kind: str  # e.g. "rejected", "wrong-on-gpu", "misranked" (docs/loop.md lists them)
    message: str
    round: int
    candidate: int | None = None  # ledger id
    location: str | None = None  # file:line:col in the candidate's source
    evidence: dict[str, Any] = attrs.field(factory=dict)
    reproducer: str | None = None


@attrs.frozen
class RunSummary:
    """How a run ended: the best kernel (by measured time, else by predicted time), the baseline, the counts."""

    best: str | None  # candidate name
    best_hash: str | None
    best_ms: float | None  # measured
    best_predicted_ms: float | None
    baseline: str | None
    baseline_ms: float | None
    speedup: float | None
    measured: bool  # whether anything was benchmarked on a GPU
    stages: dict[str, str]
    stopped: str | None  # what ended the run: a budget spent, or an agent that proposed nothing new
    spent: Spent
