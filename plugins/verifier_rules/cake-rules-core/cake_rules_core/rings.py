"""Which barrier hands a shared ring's stages back to their writer, and whether a refill waited for it.

A ring buffer (``smem cs: T[S][...]``) is filled stage by stage by a writer (a producer's copies) and
read by other role instances, which hand each stage back by arriving on an *empty* barrier after
their last read; the writer waits on that barrier before it refills the stage. Read from the
kernel's declared effects (:func:`release_of`), the empty barrier of a ring is the one ring of
barriers

* with as many stages as the buffer,
* that no copy completes (that is the *full* barrier), and
* on which a role reading the buffer arrives;

where several qualify (an ``x`` ring and a centroid ring of the same depth, both released by the
consumers), the one the readers arrive on at the stage index they read the buffer at
(``xs[xb]`` and ``xempty[xb]``). A writer's trace then tells whether one refill waited on it
(:func:`unawaited_refill`), and :func:`empty_wait` spells the wait the refill needs.
"""

from __future__ import annotations

import attrs

from cake_core.ir import nodes as n
from cake_core.ir.model import KernelModel
from cake_core.ir.primitive import Access, BarrierAction, Effect
from cake_core.ir.printer import expr as text
from cake_core.verify.facts import KernelFacts, OpFacts
from cake_core.verify.traces import Step

__all__ = ["Release", "arrives_on", "empty_wait", "release_of", "unawaited_refill"]

_READS = (Access.READ, Access.READWRITE)


@attrs.frozen
class Release:
    """How the readers of one ring hand its stages back: the empty barrier, the operations of the
    releasing roles that read the ring, and their arrivals on the barrier (each in source order)."""

    barrier: str
    reads: tuple[tuple[OpFacts, Effect], ...]
    arrivals: tuple[tuple[OpFacts, Effect], ...]


def _stage_text(e: Effect) -> str | None:
    return text(e.operand.stage) if e.operand.stage is not None else None


def release_of(kf: KernelFacts, buffer: str) -> Release | None:
    """The empty barrier of ring ``buffer`` and who arrives on it; None for a buffer that is not a ring
    or where no barrier (or more than one) qualifies."""
    model = kf.model
    info = model.smem.get(buffer)
    if info is None or info.stages is None:
        return None
    reads = [(of, e) for of, e in kf.shared_accesses.get(buffer, ()) if e.access in _READS]
    readers = {of.role.role.name for of, _ in reads}
    candidates: dict[str, list[tuple[OpFacts, Effect]]] = {}
    for name, bar in model.barriers.items():
        if bar.stages != info.stages or kf.actions(name, BarrierAction.COMPLETE_TX):
            continue
        arrivals = [(of, e) for of, e in kf.actions(name, BarrierAction.ARRIVE) if of.role.role.name in readers]
        if arrivals:
            candidates[name] = arrivals
    if len(candidates) > 1:
        read_at = {_stage_text(e) for _, e in reads} - {None}
        candidates = {k: v for k, v in candidates.items() if any(_stage_text(e) in read_at for _, e in v)}
    if len(candidates) != 1:
        return None
    ((name, arrivals),) = candidates.items()
    releasing = {of.role.role.name for of, _ in arrivals}
    return Release(name, tuple((of, e) for of, e in reads if of.role.role.name in releasing), tuple(arrivals))


def arrives_on(step: Step, barrier: str, stage: int | None) -> bool:
    """Whether ``step`` arrives (a plain arrival, as a reader's release is) on ``barrier[stage]``."""
    return any(act is BarrierAction.ARRIVE and name == barrier and stg == stage for act, name, stg, *_ in step.signals)


def unawaited_refill(trace: list[Step], w: Step, buffer: str, stage: int, barrier: str) -> tuple[Step, ...] | None:
    """Whether step ``w`` of ``trace`` refills stage ``stage`` of ``buffer`` without a wait on
    ``barrier[stage]`` since the instance last filled that stage: None where it waited (at ``w`` or
    since) or where ``w`` is the stage's first fill; else the steps that waited on *other* stages of
    ``barrier`` in between (latest first), which may be the wait the author meant."""
    others: list[Step] = []
    for s in reversed(trace[: w.pos + 1]):
        if s is not w and any(x.write and x.buffer == buffer and x.stage == stage for x in s.accesses):
            return tuple(others)  # the previous fill: nothing in between waited for the stage
        for name, stg, _, _ in s.waits:
            if name == barrier:
                if stg == stage:
                    return None
                others.append(s)
    return None


def empty_wait(model: KernelModel, role: n.Role, barrier: str, stage: n.Expr | None) -> str:
    """The wait a refill at stage index ``stage`` (an expression of ``role``) needs, spelled out:
    ``mbarrier.wait cempty[s], parity=(g / S + 1) % 2`` where ``s`` is ``g % S`` (found through the
    role's ``let``), else with ``use`` standing for the count of the stage's fills."""
    decl = model.barriers[barrier].decl
    depth = text(decl.stages) if decl.stages is not None else str(model.barriers[barrier].stages)
    index = stage
    if isinstance(index, n.Name):
        lets = [s for s in n.walk_stmts(role.body) if isinstance(s, n.Let) and s.name == index.id]
        index = lets[0].value if len(lets) == 1 else None
    use = "use"
    if isinstance(index, n.Bin) and index.op == "%":
        left = index.left
        use = text(left) if isinstance(left, (n.Name, n.Num, n.Call)) else f"({text(left)})"
    where = text(stage) if stage is not None else ""
    return f"mbarrier.wait {barrier}[{where}], parity=({use} / {depth} + 1) % 2"
