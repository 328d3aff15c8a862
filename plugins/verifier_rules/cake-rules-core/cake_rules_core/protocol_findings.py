"""What the simulated barrier protocol of a kernel tells, classified once into the findings of CR111-CR117.

:mod:`cake_core.verify.protocol` simulates each role instance of one CTA through its loops at concrete
sizes (its traces) and replays the traces against each other with the mbarrier semantics. This module
reads those facts once per kernel model and sorts them into findings, so each rule only picks its own:

* **CR111** arrival counts — per barrier stage, the arrivals each phase receives. One arriving role
  instance: its arrivals fill phases in program order, each phase exactly ``count``. Several: each
  arrives once per phase (the convention of every producer-consumer ring), so phase ``p`` receives
  the ``p``-th arrival of each of them, and that sum must be ``count``;
* **CR112** expect-tx bytes — per role instance and barrier stage, the bytes an expect-tx announces
  against the full box bytes of the copies that complete on the same stage in the same iteration
  (the copies nested in the same iterations of the loops around the expect-tx);
* **CR113** parity discipline — successive waits of one instance on one stage wait for successive
  phases, so their parities alternate (``(use / stages + offset) % 2``); a parity is 0 or 1; and a
  replayed read whose wait on the right stage passed one phase early (a parity that is off by one);
* **CR114** waits that never complete — a barrier nobody arrives on; a wait for a phase the stage
  never reaches at these sizes; a replay that deadlocks;
* **CR115**, **CR116** — replayed reads of shared memory not ordered after the write they need (read
  before full), and writes not ordered after an earlier read or write (overwrite before empty);
* **CR117** — a generic-proxy write to a buffer that the async proxy reads, published (an arrival, a
  CTA barrier, or the instance's own async-proxy access) with no proxy fence in between.

Priorities, so that one mistake is reported once: a kernel with any CR111-CR114 finding from the
traces is not replayed (its hazards and deadlocks would be consequences); a replay that finds a hazard
does not also report the deadlock that follows from it. CR117 stands alone.
"""

from __future__ import annotations

import weakref
from collections import defaultdict
from collections.abc import Iterable, Iterator

import attrs

from cake_core.diagnostics.diagnostic import Diagnostic, Label
from cake_core.location import Loc
from cake_core.ir.primitive import Access, BarrierAction
from cake_core.ir.model import KernelModel
from cake_core.ir.printer import expr as text
from cake_core.verify.facts import is_proxy_fence
from cake_core.verify.protocol import Protocol, protocol
from cake_core.verify.replay import Conflict
from cake_core.verify.rule import Rule, RuleContext
from cake_core.verify.traces import SampleRun, Step

from cake_rules_core.findings import Finding
from cake_rules_core.pipe_findings import pipe_findings
from cake_rules_core.rings import Release, arrives_on, empty_wait, release_of, unawaited_refill

PROTOCOL_RULES = ("CR111", "CR112", "CR113", "CR114", "CR115", "CR116", "CR117", "CR121", "CR122", "CR123", "CR124")




def _ordinal(k: int) -> str:
    return f"{k}{'th' if 10 <= k % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(k % 10, 'th')}"


def _stage(model_barriers: dict, name: str, stage: int) -> str:
    info = model_barriers.get(name)
    return f"`{name}[{stage}]`" if info is not None and info.stages is not None else f"`{name}`"


def _at(step: Step) -> str:
    return f" (at {step.where})" if step.where else ""


class _Collector:
    """Findings of one kernel model, one per (rule, location): the first sample's wins."""

    def __init__(self) -> None:
        self.found: dict[tuple[str, Loc], Finding] = {}

    def add(self, f: Finding) -> None:
        self.found.setdefault((f.rule, f.loc), f)

    def rules(self) -> set[str]:
        return {r for r, _ in self.found}

    def of(self, rule: str) -> list[Finding]:
        return [f for (r, _), f in self.found.items() if r == rule]

    def by_rule(self) -> dict[str, list[Finding]]:
        """Every rule's findings (:meth:`of` for each), in one pass."""
        out: dict[str, list[Finding]] = {}
        for (r, _), f in self.found.items():
            out.setdefault(r, []).append(f)
        return out


# ---------------------------------------------------------------------------------------------------
# Trace analyses
# ---------------------------------------------------------------------------------------------------


@attrs.define(eq=False)
class _Index:
    """One sample's barrier actions, gathered in one pass over its traces."""

    #: (barrier, stage) -> instance -> its arrivals in program order: (arrivals, step)
    arrivals: dict[tuple[str, int], dict[int, list[tuple[int, Step]]]]
    #: per instance: (barrier, stage, loop context) -> its expect-tx steps: (bytes, step)
    expects: list[dict[tuple, list[tuple[int, Step]]]]
    #: per instance: every complete-tx of a copy it issued: (barrier, stage, bytes, step)
    completes: list[list[tuple[str, int, int, Step]]]
    #: (instance, barrier, stage) -> its waits in program order: (parity, step)
    waits: dict[tuple[int, str, int], list[tuple[int | None, Step]]]

    @classmethod
    def of(cls, run: SampleRun) -> _Index:
        arrivals: dict = defaultdict(lambda: defaultdict(list))
        waits: dict = defaultdict(list)
        expects: list[dict] = []
        completes: list[list] = []
        arrive_kinds = (BarrierAction.ARRIVE, BarrierAction.ARRIVE_EXPECT_TX)
        expect_kinds = (BarrierAction.EXPECT_TX, BarrierAction.ARRIVE_EXPECT_TX)
        for trace in run.traces:
            mine_e: dict = defaultdict(list)
            mine_c: list = []
            for st in trace:
                if st.waits:
                    for name, stage, parity, _ in st.waits:
                        waits[(st.inst, name, stage)].append((parity, st))
                if st.completes:
                    for name, stage, nbytes, _ in st.completes:
                        mine_c.append((name, stage, nbytes, st))
                if st.signals:
                    for act, name, stage, n_arr, nbytes, _ in st.signals:
                        if act in arrive_kinds:
                            arrivals[(name, stage)][st.inst].append((n_arr, st))
                        if act in expect_kinds:
                            own = sum([b for _, _, b, _ in st.completes])
                            key = (name, stage, tuple([(lid, v) for lid, _, v in st.loops]))
                            mine_e[key].append((nbytes if nbytes is not None else own, st))
            expects.append(mine_e)
            completes.append(mine_c)
        return cls(arrivals, expects, completes, waits)


def _notes(run: SampleRun) -> tuple[str, ...]:
    note = run.sample.note
    return (note,) if note else ()


def _never_arrived(p: Protocol, out: _Collector) -> set[str]:
    """CR114: barriers some operation waits on and none arrives on."""
    kf = p.facts
    dead: set[str] = set()
    for name, info in p.model.barriers.items():
        waits = kf.actions(name, BarrierAction.WAIT)
        arrivals = kf.actions(name, BarrierAction.ARRIVE, BarrierAction.ARRIVE_EXPECT_TX, BarrierAction.INIT)
        if waits and not arrivals:
            dead.add(name)
            for of, e in waits:
                out.add(Finding(
                    "CR114", of.typed.op.loc,
                    f"`{of.typed.op.name}` waits on `{name}`, on which no operation arrives: its phases never complete",
                    label="waits forever", secondary=(Label(info.decl.loc, f"`{name}` declared here"),),
                    help=f"arrive on `{name}` where its phase is meant to complete (`mbarrier.arrive`, or "
                    "`mbarrier.arrive.expect_tx` before the copies that signal it)",
                ))  # fmt: skip
    return dead


def _arrivals(p: Protocol, run: SampleRun, ix: _Index, skip: set[str], out: _Collector) -> dict[tuple[str, int], int]:
    """CR111 on one sample; returns the phases each barrier stage completes (by arrivals)."""
    per = {key: v for key, v in ix.arrivals.items() if key[0] not in skip}
    phases: dict[tuple[str, int], int] = {}
    reported: set[str] = set()
    for (name, stage), by_inst in sorted(per.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        info = p.model.barriers[name]
        count = info.count
        where = _stage(p.model.barriers, name, stage)
        decl_loc = info.decl.count.loc if info.decl.count.loc.line else info.decl.loc
        problem: str | None = None
        steps: list[Step] = []
        if len(by_inst) == 1:
            (inst, seq), = by_inst.items()
            who = run.instances[inst].who
            acc, done = 0, 0
            for n_arr, s in seq:
                if acc + n_arr > count:
                    problem = (f"one `{s.op.name}` of {who} gives {n_arr} arrival(s){_at(s)} to {where}, which "
                               f"{'has ' + str(acc) + ' already and ' if acc else ''}completes a phase at {count}")
                    steps = [s]
                    break
                acc += n_arr
                if acc == count:
                    acc, done = 0, done + 1
            if problem is None and acc:
                last = seq[-1][1]
                problem = (f"the last phase of {where} receives {acc} of its {count} arrivals from {who} (which "
                           f"arrives {len(seq)} time(s) in all)")
                steps = [last]
            phases[(name, stage)] = done
        else:
            ordered = sorted(by_inst.items())
            rounds = max(len(v) for v in by_inst.values())
            done = 0
            for ph in range(rounds):
                parts = [(inst, seq[ph]) for inst, seq in ordered if len(seq) > ph]
                total = sum([n_arr for _, (n_arr, _) in parts])
                if total != count:
                    words = ", ".join(f"{run.instances[i].who}: {n_arr}" for i, (n_arr, _) in parts)
                    missing = [run.instances[i].who for i, seq in ordered if len(seq) <= ph]
                    extra = f"; {', '.join(missing)} arrive(s) only {ph} time(s)" if missing else ""
                    problem = f"phase {ph} of {where} receives {total} ({words}{extra})"
                    steps = [s for _, (_, s) in parts]
                    break
                done += 1
            phases[(name, stage)] = done
        if problem is None or name in reported:
            continue
        reported.add(name)
        out.add(Finding(
            "CR111", decl_loc, f"`{name}` counts {count} arrivals a phase, but {problem}{run.sample.when}",
            label=f"count {count}",
            secondary=tuple(dict.fromkeys(Label(s.op.loc, "arrives here") for s in steps)),
            notes=(
                "a per-thread `mbarrier.arrive` counts the threads of its role instance; `per=instance` and "
                "`mbarrier.arrive.expect_tx` count one; several role instances each arrive once a phase",
                *_notes(run),
            ),
            help="make the count the arrivals one phase receives, or arrive once per phase from each instance",
        ))  # fmt: skip
    return phases


def _tx(p: Protocol, run: SampleRun, ix: _Index, skip: set[str], out: _Collector) -> set[tuple[str, int]]:
    """CR112 on one sample; returns the barrier stages with a finding."""
    bad: set[tuple[str, int]] = set()
    for inst_expects, inst_completes in zip(ix.expects, ix.completes, strict=True):
        expects = {key: v for key, v in inst_expects.items() if key[0] not in skip}
        copies: dict[tuple, list[tuple[int, Step]]] = defaultdict(list)
        for name, stage, nbytes, s in inst_completes:
            if name in skip:
                continue
            ctx = tuple([(lid, v) for lid, _, v in s.loops])
            for k in range(len(ctx), -1, -1):
                key = (name, stage, ctx[:k])
                if key in expects:
                    copies[key].append((nbytes, s))
                    break
            else:
                bad.add((name, stage))
                who = run.instances[s.inst].who
                out.add(Finding(
                    "CR112", s.op.loc,
                    f"`{s.op.name}` completes {nbytes} bytes on {_stage(p.model.barriers, name, stage)}{_at(s)}, "
                    f"but no expect-tx of {who} announces them in the same iteration{run.sample.when}",
                    label="bytes nobody expects",
                    notes=("a phase completes when its arrivals are in and its expected bytes have landed: "
                           "bytes nobody expects let it complete before the copy lands",
                           *_notes(run)),  # fmt: skip
                    help="announce the copy's bytes with `mbarrier.arrive.expect_tx` on the same stage first",
                ))  # fmt: skip
        for key, exp in expects.items():
            name, stage, _ = key
            want = sum([b for b, _ in exp])
            got = copies.get(key, [])
            have = sum([b for b, _ in got])
            if want == have:
                continue
            bad.add((name, stage))
            s = exp[0][1]
            where = _stage(p.model.barriers, name, stage)
            parts = " + ".join(f"`{c.op.name}` at line {c.op.loc.line}: {b}" for b, c in got)
            delivered = f"deliver {have} ({parts})" if got else "deliver nothing: no copy signals it there"
            out.add(Finding(
                "CR112", s.op.loc,
                f"`{s.op.name}` expects {want} bytes on {where}{_at(s)}, but the copies that complete on it in the "
                f"same iteration {delivered}{run.sample.when}",
                label=f"expects {want} bytes",
                secondary=tuple(dict.fromkeys(Label(c.op.loc, f"{b} bytes") for b, c in got)),
                notes=("a copy counts its full box bytes, also where part of the box is out of bounds (TMA fills "
                       "it with zeros)", *_notes(run)),  # fmt: skip
                help=f"expect {have} bytes (the copies' full boxes)" if got else
                "issue the copies that complete on this stage in the same iteration, or drop the expect-tx",
            ))  # fmt: skip
    return bad


def _parity(p: Protocol, run: SampleRun, ix: _Index, skip: set[str], out: _Collector) -> set[tuple[str, int]]:
    """CR113 on one sample (values and alternation); returns the barrier stages with a finding."""
    bad: set[tuple[str, int]] = set()
    for (inst, name, stage), seq in ix.waits.items():
        if name in skip:
            continue
        who = run.instances[inst].who
        where = _stage(p.model.barriers, name, stage)
        prev: tuple[int, Step] | None = None
        for j, (parity, s) in enumerate(seq):
            if parity is None:
                break
            if parity not in (0, 1):
                bad.add((name, stage))
                out.add(Finding(
                    "CR113", _parity_loc(s), f"the parity of this wait on {where} is {parity}{_at(s)}, not 0 or 1"
                    f"{run.sample.when}", label=f"parity {parity}",
                    help="write the parity as `(use / stages) % 2` (or `+ 1` for a producer's empty wait)",
                ))  # fmt: skip
                break
            if prev is not None and prev[0] == parity:
                bad.add((name, stage))
                before = prev[1]
                out.add(Finding(
                    "CR113", _parity_loc(s),
                    f"the {_ordinal(j + 1)} wait of {who} on {where}{_at(s)} waits for parity {parity} again: "
                    f"successive waits on one stage wait for successive phases, whose parities alternate"
                    f"{run.sample.when}",
                    label=f"parity {parity} again",
                    secondary=(Label(before.op.loc, f"the wait before{_at(before)}: parity {parity}"),),
                    notes=("the stage index and the parity must come from the same use index `u` of the ring: "
                           "stage `u % stages`, parity `(u / stages) % 2`", *_notes(run)),  # fmt: skip
                    help="compute the parity from the use index the stage is computed from, divided by the stages",
                ))  # fmt: skip
                break
            prev = (parity, s)
    return bad


def _parity_loc(s: Step) -> Loc:
    e = s.op.attr("parity")
    return e.loc if e is not None and e.loc.line else s.op.loc


def _reached(p: Protocol, run: SampleRun, ix: _Index, phases: dict[tuple[str, int], int], skip: set[str],
             bad: set[tuple[str, int]], out: _Collector) -> None:  # fmt: skip
    """CR114: waits for a phase the stage never completes at these sizes."""
    for (inst, name, stage), seq in ix.waits.items():
        if name in skip or (name, stage) in bad or not seq or seq[0][0] is None:
            continue
        p0 = seq[0][0] & 1
        done = phases.get((name, stage), 0)
        for j, (_, s) in enumerate(seq):
            target = j - p0
            if target >= done:
                where = _stage(p.model.barriers, name, stage)
                out.add(Finding(
                    "CR114", s.op.loc,
                    f"{run.instances[inst].who} waits for phase {target} of {where}{_at(s)}, but only {done} phase(s) "
                    f"of it ever complete: the wait never completes{run.sample.when}",
                    label="waits for a phase that never comes",
                    notes=("phases complete when their arrivals are in; this counts every arrival the kernel makes on "
                           "the stage at these sizes", *_notes(run)),  # fmt: skip
                    help="make every instance wait once per phase that is produced, and arrive once per phase it "
                    "waits for",
                ))  # fmt: skip
                break


# ---------------------------------------------------------------------------------------------------
# Replay findings
# ---------------------------------------------------------------------------------------------------


def _region(c: Conflict) -> str:
    return text(c.access.effect.operand.expr)


def _replayed(p: Protocol, run: SampleRun, out: _Collector) -> None:
    result = run.replay(p.model)
    for c in result.conflicts:
        out.add(_conflict(p, run, c))
    if result.deadlock and not result.conflicts:
        blocked = result.deadlock
        first = blocked[0]
        parts = []
        for b in blocked:
            who = run.instances[b.inst].who
            if b.barrier is None:
                parts.append(f"{who} waits at `{b.step.op.name}` for every role of the CTA")
            else:
                parts.append(f"{who} waits on {_stage(p.model.barriers, b.barrier, b.stage)} for parity {b.parity} "
                             f"({b.state})")  # fmt: skip
        for i in result.finished:
            parts.append(f"{run.instances[i].who} has finished")
        out.add(Finding(
            "CR114", first.step.op.loc,
            "the roles deadlock: " + "; ".join(parts) + run.sample.when,
            label="never completes",
            secondary=tuple(Label(b.step.op.loc, f"{run.instances[b.inst].who} waits here") for b in blocked[1:]),
            notes=("replayed on one CTA, copies completing as late as possible", *_notes(run)),
            help="a producer's first wait on an empty slot passes at once: its parity is `(use / stages + 1) % 2`; "
            "a consumer's wait on a full slot is `(use / stages) % 2`",
        ))  # fmt: skip


def _conflict(p: Protocol, run: SampleRun, c: Conflict) -> Finding:
    ring = release_of(p.facts, c.buffer)
    if ring is not None:
        refill = _unawaited_refill(p, run, c, ring)
        if refill is not None:
            return refill
    who = run.instances[c.step.inst].who
    other_who = run.instances[c.other.inst].who
    region = _region(c)
    loc = c.access.effect.operand.expr.loc
    notes = _notes(run)
    if c.kind == "raw":
        if c.signals:
            name, stage, phase = c.signals[0]
            where = _stage(p.model.barriers, name, stage)
            last = c.waits.get(name)
            rel = _early_release(p, run, c, ring, last[2] if last is not None and last[0] == stage else None)
            if rel is not None:
                # the reader waited for the stage, then released it, then read it: the refill that lands
                # under the read is an overwrite before empty, and the early release is its cause
                return Finding(
                    "CR116", c.other.op.loc,
                    f"{other_who} refills `{c.buffer}`{_at(c.other)} while {who} still reads it: {who} released the "
                    f"stage at line {rel.op.loc.line}{_at(rel)} before its `{c.step.op.name}` at line "
                    f"{c.step.op.loc.line} read `{region}`{run.sample.when}",
                    label="overwrite before empty",
                    secondary=(Label(rel.op.loc, "released here"), Label(loc, "read after the release")),
                    notes=notes,
                    help="arrive on the empty barrier after the last read of the stage (and after the wait for "
                    "any asynchronous operation reading it)",
                )  # fmt: skip
            if last is not None and last[0] == stage and last[1] < phase and _same_iteration(last[2], c.step):
                w = last[2]
                return Finding(
                    "CR113", _parity_loc(w),
                    f"this wait of {who} on {where}{_at(w)} passes on phase {last[1]}, but `{c.other.op.name}` "
                    f"fills `{c.buffer}` for phase {phase}, which `{c.step.op.name}` then reads{run.sample.when}",
                    label="waits for the wrong phase",
                    secondary=(Label(loc, "reads the stage before it is full"),
                               Label(c.other.op.loc, f"completes phase {phase}")),
                    notes=("a wait for parity P passes once the last completed phase has parity P: a parity one "
                           "phase behind passes on the previous round", *notes),  # fmt: skip
                    help="a consumer waits on a full slot with `(use / stages) % 2`; only a producer's empty wait "
                    "adds one",
                )  # fmt: skip
            hint = ""
            if last is not None and last[0] != stage:
                hint = f"; its last wait on `{name}` was on stage {last[0]}"
            elif last is None:
                hint = f"; it never waited on `{name}` before"
            elif not _same_iteration(last[2], c.step):
                hint = f"; its last wait on `{name}` was{_at(last[2])}"
            state = "still in flight" if c.in_flight else f"completing phase {phase} of {where}"
            return Finding(
                "CR115", loc,
                f"{who} reads `{region}`{_at(c.step)} before it is full: the `{c.other.op.name}` that writes it "
                f"({other_who}{_at(c.other)}) is {state}, and no wait on {where} orders the read after it{hint}"
                f"{run.sample.when}",
                label="read before full",
                secondary=(Label(c.other.op.loc, "the copy into this stage"),),
                notes=notes,
                help=f"wait on {where} for the phase the copy completes before reading the stage",
            )  # fmt: skip
        return Finding(
            "CR115", loc,
            f"{who} reads `{region}`{_at(c.step)}, which `{c.other.op.name}` ({other_who}{_at(c.other)}) writes, "
            f"and nothing orders the read after that write{run.sample.when}",
            label="read before full",
            secondary=(Label(c.other.op.loc, "the write"),),
            notes=notes,
            help="make the reader wait on a barrier phase the writer completes after writing",
        )  # fmt: skip
    if c.in_flight:
        what = f"while the `{c.other.op.name}` issued by {other_who}{_at(c.other)} still " + (
            "writes it" if c.kind == "waw" else "reads it"
        )
    elif c.kind == "war":
        what = f"before `{c.other.op.name}` ({other_who}{_at(c.other)}) is known to have finished reading it"
    else:
        what = f"while the data `{c.other.op.name}` ({other_who}{_at(c.other)}) wrote there may not have been read"
    return Finding(
        "CR116", loc,
        f"{who} overwrites `{region}`{_at(c.step)} {what}: the stage is not known to be empty{run.sample.when}",
        label="overwrite before empty",
        secondary=(Label(c.other.op.loc, "the earlier access"),),
        notes=notes,
        help="wait on the slot's empty barrier (the phase the readers complete after their last read) before "
        "writing it; readers of an asynchronous operation release the slot after its wait",
    )  # fmt: skip


def _unawaited_refill(p: Protocol, run: SampleRun, c: Conflict, ring: Release) -> Finding | None:
    """CR116 blamed on the write: a refill of a ring stage that did not wait on the ring's empty barrier
    since its writer last filled the stage, whoever the replay found it racing with (a reader of the
    previous contents, or the writer's own earlier copy still in flight)."""
    write, reader = (c.other, c.step) if c.kind == "raw" else (c.step, c.other)
    if c.kind == "raw" and not _read_what_it_waited_for(c):
        return None  # the read is not ordered after any fill of its stage: read before full (CR115)
    x = next((a for a in write.accesses if a.write and a.buffer == c.buffer and a.stage is not None), None)
    if x is None or x.stage is None or not 0 <= x.stage < (p.model.barriers[ring.barrier].stages or 1):
        return None  # (a stage outside the ring is CR108's)
    others = unawaited_refill(run.traces[write.inst], write, c.buffer, x.stage, ring.barrier)
    if others is None:
        return None
    empty = _stage(p.model.barriers, ring.barrier, x.stage)
    wait = empty_wait(p.model, write.facts.role.role, ring.barrier, x.effect.operand.stage)
    secondary: list[Label] = []
    read = c.access if c.kind == "raw" else next(
        (a for a in reader.accesses if a.read and a.buffer == c.buffer and reader.inst != write.inst), None
    )
    if read is not None:  # the replay met a reader of the stage
        who = run.instances[reader.inst].who
        secondary.append(Label(read.effect.operand.expr.loc, f"{who} reads the stage here{_at(reader)}"))
        later = run.traces[reader.inst][reader.pos :]
        release = next((s for s in later if arrives_on(s, ring.barrier, x.stage)), None)
        release_loc = release.op.loc if release is not None else ring.arrivals[0][0].typed.op.loc
    else:  # it met another write (the writer's own copy in flight): the readers are the declared ones
        roles = list(dict.fromkeys(of.role.role.name for of, _ in ring.reads))
        who = " and ".join(f"role `{r}`" for r in roles)
        for of, e in ring.reads:
            secondary.append(Label(e.operand.expr.loc, f"role `{of.role.role.name}` reads the stage here"))
        release_loc = ring.arrivals[0][0].typed.op.loc
    secondary.append(Label(release_loc, f"and releases it here, arriving on `{ring.barrier}`"))
    for s in others:
        secondary.append(Label(s.op.loc, f"this wait{_at(s)} is on another stage of `{ring.barrier}`"))
    return Finding(
        "CR116", x.effect.operand.expr.loc,
        f"{run.instances[write.inst].who} refills `{text(x.effect.operand.expr)}`{_at(write)} without waiting on "
        f"{empty} since it last filled the stage: {who} may still be reading the stage's previous contents, "
        f"which it releases by arriving on {empty}{run.sample.when}",
        label="overwrite before empty",
        secondary=tuple(dict.fromkeys(secondary)),
        notes=_notes(run),
        help=f"wait for the stage to be empty before `{write.op.name}`: `{wait}` (the readers complete that phase "
        "when they release the stage; the first wait on each stage passes at once)",
    )  # fmt: skip


def _read_what_it_waited_for(c: Conflict) -> bool:
    """Whether the reader of the raw conflict ``c`` waited, in the read's iteration, on the stage the
    write completes (for an earlier phase): it reads the stage's previous contents, which the write
    overwrites."""
    if not c.signals:
        return False
    name, stage, _ = c.signals[0]
    last = c.waits.get(name)
    return last is not None and last[0] == stage and _same_iteration(last[2], c.step)


def _early_release(p: Protocol, run: SampleRun, c: Conflict, ring: Release | None, wait: Step | None) -> Step | None:
    """The reader's arrival that released the stage between its wait for it (``wait``) and the read of
    the raw conflict ``c``: on the ring's empty barrier at the stage read where the ring has one, else
    the reader's last arrival, where it arrives on a barrier the writer's role waits on."""
    if wait is None:
        return None
    if ring is not None:
        between = run.traces[c.step.inst][wait.pos + 1 : c.step.pos]
        return next((s for s in reversed(between) if arrives_on(s, ring.barrier, c.access.stage)), None)
    rel = c.released
    if rel is None or rel.pos <= wait.pos:
        return None
    names = {name for act, name, *_ in rel.signals if act in (BarrierAction.ARRIVE, BarrierAction.ARRIVE_EXPECT_TX)}
    role = run.instances[c.other.inst].role
    waited = any(of.role.role.name == role for name in names for of, _ in p.facts.actions(name, BarrierAction.WAIT))
    return rel if waited else None


def _same_iteration(wait: Step, access: Step) -> bool:
    """Whether a wait is in the iteration of the access: its loops are a prefix of the access's loops."""
    return access.loops[: len(wait.loops)] == wait.loops


# ---------------------------------------------------------------------------------------------------
# Proxy fences
# ---------------------------------------------------------------------------------------------------


def _fences(p: Protocol, run: SampleRun, out: _Collector) -> None:
    """CR117 on one sample."""
    readers = p.facts.async_proxy_readers()
    written = {
        name for name, acc in p.facts.shared_accesses.items()
        if any(not e.async_proxy and e.access in (Access.WRITE, Access.READWRITE) for _, e in acc)
    }  # fmt: skip
    readers &= written
    if not readers:
        return  # no buffer is both written through the generic proxy and read through the async one
    first_reader = {}
    for of in p.facts.ops:
        for e in of.shared_effects:
            if e.async_proxy and e.access in (Access.READ, Access.READWRITE) and e.operand.name not in first_reader:
                first_reader[e.operand.name] = of
    for trace in run.traces:
        pending: dict[str, tuple[Step, object]] = {}
        for s in trace:
            if is_proxy_fence(s.facts.prim):
                pending.clear()
                continue
            for x in s.accesses:
                if x.async_proxy and x.read and x.buffer in pending:
                    w, e = pending.pop(x.buffer)
                    _fence_finding(p, run, w, e, s, "reads it through the async proxy", first_reader, out)
            for x in s.accesses:
                if x.write and not x.async_proxy and x.buffer in readers:
                    pending.setdefault(x.buffer, (s, x.effect))
            release = s.facts.prim.cta_barrier or any(
                a in (BarrierAction.ARRIVE, BarrierAction.ARRIVE_EXPECT_TX) for a, *_ in s.signals
            )
            if release and pending:
                for w, e in pending.values():
                    _fence_finding(p, run, w, e, s, "publishes it", first_reader, out)
                pending.clear()


def _fence_finding(p: Protocol, run: SampleRun, w: Step, e: object, at: Step, what: str, readers: dict,
                   out: _Collector) -> None:  # fmt: skip
    operand = e.operand  # type: ignore[attr-defined]
    buf = operand.name
    reader = readers.get(buf)
    secondary = [Label(at.op.loc, f"`{at.op.name}` {what}")]
    if reader is not None and reader.typed.op.loc != at.op.loc:
        secondary.append(Label(reader.typed.op.loc, f"`{reader.typed.op.name}` reads `{buf}` through the async proxy"))
    out.add(Finding(
        "CR117", operand.expr.loc,
        f"`{w.op.name}` writes shared buffer `{buf}` through the generic proxy, and `{at.op.name}` {what} with no "
        f"`fence.proxy_async` in between; `{buf}` is read through the async proxy (TMA, wgmma), which may not see "
        f"the write{run.sample.when if w.loops else ''}",
        label="generic-proxy write without a proxy fence",
        secondary=tuple(secondary),
        notes=("ordinary stores and the async proxy are ordered only by `fence.proxy.async.shared::cta` in the "
               "writing thread, before the barrier that hands the data over",),  # fmt: skip
        help="put `fence.proxy_async` after the write, before the arrival or barrier that publishes it",
    ))  # fmt: skip


# ---------------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------------

_CACHE: weakref.WeakKeyDictionary[Protocol, dict[str, list[Finding]]] = weakref.WeakKeyDictionary()
#: the findings of each kernel model by rule: seven rules ask for them, and finding the model's protocol
#: (its key sorts the compile-time environment) is not free
_BY_MODEL: weakref.WeakKeyDictionary[KernelModel, dict[str, list[Finding]]] = weakref.WeakKeyDictionary()


def _analyse(p: Protocol) -> _Collector:
    out = _Collector()
    if not p.active:
        return out
    runs = [r for r in p.runs if r.skipped is None]
    piped = pipe_findings(p)
    for f in piped:
        out.add(f)
    if not piped:  # a pipe used wrongly: what the barrier rules would add are its consequences
        _barriers(p, runs, out)
    for run in runs:
        _fences(p, run, out)
    return out


def _barriers(p: Protocol, runs: list[SampleRun], out: _Collector) -> None:
    """CR111-CR116 from the traces and their replay."""
    reinit = {name for name, acts in p.facts.barrier_actions.items()
              if any(e.barrier is BarrierAction.INIT for _, e in acts)}  # fmt: skip
    dead = _never_arrived(p, out)
    skip = reinit | dead
    for run in runs:
        ix = _Index.of(run)
        phases = _arrivals(p, run, ix, skip, out)
        bad = _tx(p, run, ix, skip, out) | _parity(p, run, ix, skip, out)
        if not any(r in out.rules() for r in ("CR111", "CR112", "CR113")):
            _reached(p, run, ix, phases, skip, bad, out)
    if not out.rules() & {"CR111", "CR112", "CR113", "CR114"}:
        replayed = _Collector()
        for run in runs:
            # the first sample that goes wrong tells; what larger ones add is mostly its consequences
            if not replayed.found:
                _replayed(p, run, replayed)
        parity = replayed.of("CR113")
        # a wait one phase early makes every later handoff of its ring look racy: report the cause only
        for f in parity or replayed.found.values():
            out.add(f)


def findings(ctx: RuleContext, rule: str) -> Iterable[Finding]:
    """The findings of protocol rule ``rule`` for the kernel model of ``ctx`` (analysed once)."""
    found = _BY_MODEL.get(ctx.model)
    if found is None:
        p = protocol(ctx.model)
        found = _CACHE.get(p)
        if found is None:
            found = _CACHE[p] = _analyse(p).by_rule()
        _BY_MODEL[ctx.model] = found
    return found.get(rule, ())


class ProtocolRule(Rule):
    """A rule whose findings come from the protocol analysis (its ``name`` selects them)."""

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        for f in findings(ctx, self.name):
            yield self.at(f.loc, f.message, label=f.label, secondary=f.secondary, notes=f.notes, help=f.help)


__all__ = ["PROTOCOL_RULES", "Finding", "ProtocolRule", "findings"]
