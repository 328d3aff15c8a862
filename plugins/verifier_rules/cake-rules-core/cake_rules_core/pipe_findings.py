"""What a kernel's pipes tell: the findings of CR121-CR124, from the pipe declarations, the stage names
each operation holds (:func:`cake_core.ir.pipes.holders`) and the simulated traces.

The compiler derives a pipe's barriers, stage indices, parities, counts and bytes, so what is left to
get wrong is how the roles use it:

* **CR121** trip counts — at each simulated size, every instance of every consumer role must take
  (``pipe.wait``) as many stages as the producer fills (``pipe.acquire``);
* **CR122** releases — a consumer instance releases every stage it takes, once, before it takes that
  stage again or finishes; and it releases a stage name it took from that pipe;
* **CR123** copies — an asynchronous copy into a pipe's buffer indexes the stage with a name the
  producer's ``pipe.acquire`` bound;
* **CR124** stages held — every other access to a pipe's buffer indexes the stage with a name its
  role took from that pipe (``pipe.wait`` for a consumer), and at run time only while the instance
  holds that stage (after its take, before its release).

The operations are recognised by their effects on the pipe's derived barriers (a wait on ``full`` is
a consumer's take, a wait on ``empty`` a producer's acquire, an arrival on ``empty`` a release), never
by their names. When any of these finds something, the barrier rules CR111-CR116 are not run on the
kernel: the deadlocks and races they would report follow from it.
"""

from __future__ import annotations

from collections import defaultdict

from cake_core.diagnostics.diagnostic import Label
from cake_core.ir.model import KernelModel, PipeInfo
from cake_core.ir.pipes import CONSUMER, PRODUCER, holders, side_of, sides, stage_name, take_side
from cake_core.ir.primitive import Access, BarrierAction, Kind
from cake_core.ir.printer import expr as text
from cake_core.verify.protocol import Protocol
from cake_core.verify.traces import SampleRun, Step

from cake_rules_core.findings import Finding


def pipe_findings(p: Protocol) -> list[Finding]:
    """Every pipe finding of one kernel model: the static ones, else those of the first simulated
    sample that shows any."""
    model = p.model
    if not model.pipes:
        return []
    found = _static(model)
    if found:  # a stage name used wrongly: what the traces would show follows from it
        return found
    for run in p.runs:
        if run.skipped is not None:
            continue
        traced = _trips(model, run) + _holds(model, run)
        if traced:
            found += traced
            break
    seen: set = set()
    out = []
    for f in found:
        if (f.rule, f.loc) not in seen:
            seen.add((f.rule, f.loc))
            out.append(f)
    return out


def _owner(model: KernelModel) -> dict[str, PipeInfo]:
    return {b: info for info in model.pipes.values() for b in info.buffers}


def _taking(model: KernelModel) -> frozenset[str]:
    """The operations whose output binds a stage name."""
    return frozenset(t.op.name for t in model.ops if t.outs and t.outs[0].slot.binds)


def _producing(model: KernelModel) -> frozenset[str]:
    """The operations among :func:`_taking` that take a stage on the producer's side."""
    return frozenset(t.op.name for t in model.ops if t.outs and t.outs[0].slot.binds and take_side(t.prim) == PRODUCER)


def _side(info: PipeInfo, role: str, copy: bool) -> str | None:
    """The side of the pipe an access by ``role`` is on: a role on both sides fills stages with its
    asynchronous copies (``copy``) and reads them as a consumer."""
    both = sides(info.decl, role)
    return (PRODUCER if copy else CONSUMER) if len(both) == 2 else side_of(info.decl, role)


# ---------------------------------------------------------------------------------------------------
# Static: which stage names an access uses
# ---------------------------------------------------------------------------------------------------


def _static(model: KernelModel) -> list[Finding]:
    out: list[Finding] = []
    owner = _owner(model)
    held = holders(model.kernel, _taking(model), _producing(model))
    empties = {info.empty: info for info in model.pipes.values()}
    for t in model.ops:
        role = t.role.role.name
        mine = held.get(id(t.op), {})
        for e in t.prim.effects(t):
            o = e.operand
            if e.tier is Kind.BARRIER and e.barrier is BarrierAction.ARRIVE and o.name in empties:
                info = empties[o.name]
                name = stage_name(o.stage)
                h = mine.get(name) if name else None
                if CONSUMER in sides(info.decl, role) and (h is None or h.pipe != info.decl.name):
                    what = f"`{name}`" if name else f"`{text(o.stage)}`" if o.stage is not None else "a stage"
                    out.append(Finding(
                        "CR122", t.op.loc,
                        f"`{t.op.name}` gives back {what}, which is not a stage role `{role}` took from pipe "
                        f"`{info.decl.name}`",
                        label="not a stage this role holds",
                        help=f"release the name `pipe.wait s <- {info.decl.name}` bound: `{t.op.name} "
                        f"{info.decl.name}[s]`",
                    ))  # fmt: skip
                continue
            if e.tier is not Kind.SHARED or o.name not in owner or e.access is Access.NONE:
                continue
            info = owner[o.name]
            pipe = info.decl.name
            writes = e.access in (Access.WRITE, Access.READWRITE)
            side = _side(info, role, writes and e.asynchronous)
            name = stage_name(o.stage)
            h = mine.get(name) if name else None
            ok = h is not None and h.pipe == pipe and h.side == side
            where = text(o.expr)
            if writes and e.asynchronous and side != CONSUMER:
                if not ok:
                    out.append(Finding(
                        "CR123", o.expr.loc,
                        f"`{t.op.name}` copies into `{where}`, a stage of pipe `{pipe}` that role `{role}` "
                        "has not acquired",
                        label="stage not acquired",
                        help=f"acquire the stage first, `pipe.acquire s <- {pipe}`, and copy into `{o.name}[s]` "
                        "in the same block: the stage's barrier then expects this copy's bytes",
                    ))  # fmt: skip
                continue
            if ok:
                continue
            verb = "writes" if writes else "reads"
            if side is None:
                msg = (f"role `{role}` {verb} `{where}`, a buffer of pipe `{pipe}`, which it neither produces nor "
                       "consumes")  # fmt: skip
                help = f"name the role in the pipe's declaration, or keep `{o.name}` out of the pipe"
            else:
                took = "acquired with `pipe.acquire`" if side == PRODUCER else "took with `pipe.wait`"
                index = f"`{name}`" if name else "this stage index" if o.stage is not None else "the whole ring"
                msg = (f"`{t.op.name}` {verb} `{where}` of pipe `{pipe}` at {index}, which is not a stage role "
                       f"`{role}` {took}")  # fmt: skip
                help = (f"take the stage with `pipe.wait s <- {pipe}` and index `{o.name}` with `s` until "
                        f"`pipe.release {pipe}[s]`" if side == CONSUMER else
                        f"write a pipe's stage with copies after `pipe.acquire s <- {pipe}`")  # fmt: skip
            out.append(Finding("CR124", o.expr.loc, msg, label="outside a stage it holds", help=help))
    return out


# ---------------------------------------------------------------------------------------------------
# Traces
# ---------------------------------------------------------------------------------------------------


def _trips(model: KernelModel, run: SampleRun) -> list[Finding]:
    """CR121: every consumer instance takes as many stages as the producer fills."""
    out: list[Finding] = []
    for info in model.pipes.values():
        fills: list[Step] = []
        takes: dict[int, list[Step]] = defaultdict(list)
        for trace in run.traces:
            for st in trace:
                for bar, _, _, _ in st.waits:
                    if bar == info.empty:
                        fills.append(st)
                    elif bar == info.full:
                        takes[st.inst].append(st)
        for inst in run.instances:
            if inst.role not in info.consumers:
                continue
            mine = takes.get(inst.index, [])
            if len(mine) == len(fills):
                continue
            secondary = []
            if fills:
                secondary.append(Label(fills[0].op.loc, f"role `{info.producers[0]}` fills {len(fills)} stage(s)"))
            if mine:
                secondary.append(Label(mine[0].op.loc, f"{inst.who} takes {len(mine)}"))
            out.append(Finding(
                "CR121", info.decl.loc,
                f"pipe `{info.decl.name}`: role `{info.producers[0]}` fills {len(fills)} stage(s) a CTA, but "
                f"{inst.who} takes {len(mine)}{run.sample.when}",
                label="producer and consumer trip counts differ", secondary=tuple(secondary),
                notes=_notes(run),
                help="every consumer instance takes every stage the producer fills: give their loops the same "
                "trip counts for every size of the domain",
            ))  # fmt: skip
            break
    return out


def _holds(model: KernelModel, run: SampleRun) -> list[Finding]:
    """CR122 and CR124 at run time: a consumer instance releases each stage it took once, before taking
    it again or finishing, and touches a pipe's buffers only at stages it holds."""
    out: list[Finding] = []
    owner = _owner(model)
    fulls = {info.full: info for info in model.pipes.values()}
    empties = {info.empty: info for info in model.pipes.values()}
    for inst, trace in zip(run.instances, run.traces, strict=True):
        held: dict[tuple[str, int], Step] = {}  # (pipe, stage) -> the take that holds it
        released: dict[tuple[str, int], Step] = {}  # the last release of each stage
        for st in trace:
            for bar, stage, _, _ in st.waits:
                info = fulls.get(bar)
                if info is None or inst.role not in info.consumers:
                    continue
                key = (info.decl.name, stage)
                if key in held:
                    out.append(_unreleased(info, stage, held[key], st, inst.who, run))
                held[key] = st
            for acc in st.accesses:
                info = owner.get(acc.buffer)
                if info is None or acc.stage is None or inst.role not in info.consumers:
                    continue
                if _side(info, inst.role, _copy(acc.effect)) == PRODUCER:
                    continue  # a role on both sides fills the stage it acquired (CR123 checks the name)
                key = (info.decl.name, acc.stage)
                if key not in held:
                    before = released.get(key)
                    out.append(Finding(
                        "CR124", acc.effect.operand.expr.loc,
                        f"{inst.who} touches `{acc.buffer}` at stage {acc.stage} of pipe `{info.decl.name}` "
                        f"{_at(st)}after it released that stage{run.sample.when}",
                        label="the stage is no longer held",
                        secondary=(Label(before.op.loc, "released here"),) if before is not None else (),
                        notes=_notes(run),
                        help="release a stage after its last use (after the `wgmma.wait` that retires a read)",
                    ))  # fmt: skip
            for act, bar, stage, _, _, _ in st.signals:
                info = empties.get(bar)
                if act is not BarrierAction.ARRIVE or info is None or inst.role not in info.consumers:
                    continue
                key = (info.decl.name, stage)
                if key not in held:
                    before = released.get(key)
                    out.append(Finding(
                        "CR122", st.op.loc,
                        f"{inst.who} releases stage {stage} of pipe `{info.decl.name}` {_at(st)}which it does not "
                        f"hold: it released it already{run.sample.when}",
                        label="released twice",
                        secondary=(Label(before.op.loc, "released before here"),) if before is not None else (),
                        notes=_notes(run),
                        help="release each stage once, after its last use; every `pipe.wait` has one `pipe.release`",
                    ))  # fmt: skip
                    continue
                del held[key]
                released[key] = st
        for (pipe, stage), take in held.items():
            out.append(Finding(
                "CR122", take.op.loc,
                f"{inst.who} takes stage {stage} of pipe `{pipe}` {_at(take)}and never releases it{run.sample.when}",
                label="taken, never released", notes=_notes(run),
                help=f"release the stage after its last use: `pipe.release {pipe}[s]` for the name this take binds",
            ))  # fmt: skip
    return out


def _copy(e: object) -> bool:
    """Whether an access effect is an asynchronous write (a copy into a stage)."""
    return e.asynchronous and e.access in (Access.WRITE, Access.READWRITE)  # type: ignore[attr-defined]


def _unreleased(info: PipeInfo, stage: int, take: Step, again: Step, who: str, run: SampleRun) -> Finding:
    return Finding(
        "CR122", take.op.loc,
        f"{who} takes stage {stage} of pipe `{info.decl.name}` {_at(take)}and takes it again {_at(again)}"
        f"without releasing it in between{run.sample.when}",
        label="taken here, not released", secondary=(Label(again.op.loc, "taken again here"),),
        notes=_notes(run),
        help=f"release the stage after its last use, before the next pass over the ring: `pipe.release "
        f"{info.decl.name}[s]`",
    )  # fmt: skip


def _at(st: Step) -> str:
    return f"(at {st.where}) " if st.where else ""


def _notes(run: SampleRun) -> tuple[str, ...]:
    note = run.sample.note
    return (note,) if note else ()


__all__ = ["pipe_findings"]
