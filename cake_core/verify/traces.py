"""A kernel's role programs walked into traces: the exact sequence of synchronizing operations of each
role instance of one CTA, at concrete sizes.

Control flow in Cake IR never depends on data — loop bounds, ``let`` values and ``if`` conditions are
functions of sizes, grid variables, ``self`` and loop variables — so one walk per role instance gives
its **trace**. Each operation is planned once (:func:`plan`: what it does to the protocol, its
expressions compiled by :mod:`cake_core.ir.exprs`); each role body is compiled once into a program of
the operations that matter (:func:`program`); :func:`simulate` walks every instance of one CTA (every
grid variable 0) at a :class:`~cake_core.verify.samples.Sample`.

Only what synchronizes or touches shared memory is kept: mbarrier actions (waits with their parity,
arrivals with their count — ``THREADS`` is the instance's threads —, expect-tx and complete-tx
bytes), CTA barriers, asynchronous groups (issue, commit, wait), async-proxy fences, and shared-memory
accesses as boxes of concrete indices. Values are never computed.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from cake_core.ir import nodes as n
from cake_core.ir.cluster import CRANK, cluster_size, crank
from cake_core.ir.exprs import Compiled, EvalError, Fn
from cake_core.ir.primitive import Access, BarrierAction, Effect, Kind, numel, static_shape
from cake_core.ir.model import KernelModel
from cake_core.ir.pipes import CONSUMER, PRODUCER, counter
from cake_core.semantics.engine import instance_words
from cake_core.verify.facts import OpFacts, is_proxy_fence
from cake_core.verify.replay import Replay, ReplayResult
from cake_core.verify.samples import Sample, per_kernel

Env = dict[str, Any]


@attrs.frozen
class Instance:
    """One role instance of the simulated CTA."""

    index: int  # position among the CTA's instances (the replay's priority)
    role: str
    instance: int
    instances: int  # instances of the role
    threads: int

    @property
    def who(self) -> str:
        return instance_words(self.role, self.instance, self.instances)


@attrs.define(eq=False, slots=True)
class SharedAccess:
    """One evaluated shared-memory access of one step."""

    buffer: str
    box: tuple[tuple[int, int], ...]  # [lo, hi) per dimension, the stage first for a ring
    stage: int | None  # the stage when the access selects one
    read: bool
    write: bool
    async_proxy: bool
    asynchronous: bool
    atomic: bool
    effect: Effect


@attrs.define(eq=False, slots=True)
class Step:
    """One execution of one operation by one instance, with everything evaluated."""

    facts: OpFacts
    inst: int
    pos: int  # position in the instance's trace
    loops: tuple[tuple[int, str, int], ...]  # enclosing loops, outermost first: (loop id, variable, value)
    waits: tuple[tuple[str, int, int | None, Effect], ...]  # barrier, stage, parity (None: derived)
    signals: tuple[tuple[BarrierAction, str, int, int, int | None, Effect], ...]  # action, bar, stage, arrivals, bytes
    completes: tuple[tuple[str, int, int, Effect], ...]  # barrier, stage, bytes the copy delivers
    accesses: tuple[SharedAccess, ...]
    pending: int | None = None  # a group wait's `pending`
    plan: Plan | None = None  # what the operation does, evaluated once per operation

    @property
    def asynchronous(self) -> bool:
        """Whether the step issues an asynchronous operation (a copy, or an access completing later)."""
        return bool(self.completes) or any(x.asynchronous for x in self.accesses)

    @property
    def op(self) -> n.Op:
        return self.facts.typed.op

    @property
    def where(self) -> str:
        """``tile=0, kt=3`` — the loop variables' values (empty outside loops)."""
        return ", ".join(f"{v}={x}" for _, v, x in self.loops)


#: one dimension of an access's box: (start, size) functions for an index or a span (no size: an index),
#: or (None, extent) for the whole dimension
_DimFn = tuple[Fn | None, Any]


@attrs.define(eq=False, slots=True)
class Plan:
    """What one operation does to the protocol, its expressions compiled: evaluated at each step."""

    facts: OpFacts
    waits: list[tuple[str, Fn | None, int, Fn | None, Effect]]  # barrier, stage, ring size, parity
    signals: list[tuple[BarrierAction, str, Fn | None, int, Fn | None, Fn | None, Effect]]
    completes: list[tuple[str, Fn | None, int, Fn | None, int, Effect]]
    accesses: list[tuple[str, bool, list[_DimFn], tuple[bool, bool, bool, bool, bool], Effect]]
    pending: Fn | None
    relevant: bool
    cta: bool = False
    group: str | None = None
    group_commit: str | None = None
    group_wait: str | None = None
    asynchronous: bool = False  # some shared access completes after issue, or the operation signals complete-tx
    binds: list[tuple[str, Fn]] = attrs.field(factory=list)  # what the operation assigns once it has run


def compiler(model: KernelModel) -> Compiled:
    """:func:`~cake_core.ir.exprs.compile_expr` with a cache shared by every specialization of the
    model's kernel (within one type check): the protocol simulator and other analyses that evaluate the
    same expressions at concrete sizes compile each node once."""
    return Compiled(per_kernel(model, "protocol expressions", lambda k: {}))


def copy_bytes(of: OpFacts) -> int:
    """Full box bytes of an operation's asynchronous writes (what a complete-tx signals without an amount)."""
    total = 0
    for e in of.effects:
        if e.asynchronous and e.tier in (Kind.SHARED, Kind.GLOBAL, Kind.REGISTERS) and e.access in (
            Access.WRITE, Access.READWRITE
        ):
            shape = static_shape(e.operand)
            if shape is not None and e.operand.dtype is not None:
                total += numel(shape) * e.operand.dtype.bytes
    return total


def box_fns(index: tuple[n.Idx, ...], shape: Iterable[Any], comp: Compiled,
            whole: Callable[[Any], _DimFn]) -> list[_DimFn]:  # fmt: skip
    """The compiled box of an access indexing a tensor of ``shape`` with ``index``: per dimension the
    start and size functions of a span, the start of an index (no size), or ``whole(extent)``."""
    dims: list[_DimFn] = []
    for d, ext in enumerate(shape):
        item = index[d] if d < len(index) else None
        if isinstance(item, n.At):
            dims.append((comp(item.expr), None))
        elif isinstance(item, n.Span):
            dims.append((comp(item.start), comp(item.size)))
        else:
            dims.append(whole(ext))
    return dims


def plan(of: OpFacts, model: KernelModel, comp: Compiled) -> Plan:
    """The plan of one operation of ``model``."""
    waits, signals, completes, accesses = [], [], [], []
    # one CTA of a thread-block cluster stands for all: its peers run the same program (their `crank`
    # aside), so what a cluster effect does in every CTA arrives here from each of them
    size = cluster_size(model.kernel, model.env)
    for e in of.effects:
        o = e.operand
        peers = size if e.cluster else 1
        if e.tier is Kind.BARRIER and e.barrier is not None and o.name in model.barriers:
            stage = comp(o.stage)
            ring = model.barriers[o.name].stages or 1
            if e.barrier is BarrierAction.WAIT:
                waits.append((o.name, stage, ring, comp(e.amount), e))
            elif e.barrier is BarrierAction.COMPLETE_TX:
                amount = n.Bin("*", e.amount, n.Num(peers)) if peers > 1 and e.amount is not None else e.amount
                completes.append((o.name, stage, ring, comp(amount), copy_bytes(of) * peers, e))
            elif e.barrier is not BarrierAction.INIT:
                arrivals = e.arrivals
                if peers > 1 and e.barrier in (BarrierAction.ARRIVE, BarrierAction.ARRIVE_EXPECT_TX):
                    arrivals = n.Bin("*", arrivals or n.Num(1), n.Num(peers))
                signals.append((e.barrier, o.name, stage, ring, comp(arrivals), comp(e.amount), e))
        elif e.tier is Kind.SHARED and e.access is not Access.NONE and o.name in model.smem:
            info = model.smem[o.name]
            dims: list[_DimFn] = []
            if info.stages is not None:
                dims.append((comp(o.stage), None) if o.stage is not None else (None, info.stages))
            dims += box_fns(o.index, info.shape, comp, lambda ext: (None, ext))
            acc = e.access
            flags = (acc in (Access.READ, Access.READWRITE), acc in (Access.WRITE, Access.READWRITE), e.async_proxy,
                     e.asynchronous, bool(getattr(o.slot, "atomic", False)))  # fmt: skip
            for r in range(peers):  # a multicast write: each rank's box lands here too
                at = dims if peers == 1 else [tuple(_at_rank(f, r) for f in d) for d in dims]
                accesses.append((o.name, info.stages is not None and o.stage is not None, at, flags, e))
    prim = of.prim
    pending = comp(of.typed.attr("pending")) if prim.group_wait is not None else None
    relevant = bool(
        waits or signals or completes or accesses or prim.cta_barrier or prim.group is not None
        or prim.group_commit is not None or prim.group_wait is not None or is_proxy_fence(prim)
    )  # fmt: skip
    asynchronous = bool(completes) or any(e.asynchronous for *_, e in accesses)
    binds = [(b.name, comp(b.value)) for b in prim.binds(of.typed)]
    return Plan(of, waits, signals, completes, accesses, pending, relevant or bool(binds), prim.cta_barrier,
                prim.group, prim.group_commit, prim.group_wait, asynchronous, binds)  # fmt: skip


def _at_rank(fn: Fn | int | None, rank: int) -> Fn | int | None:
    """``fn`` evaluated as the CTA of cluster rank ``rank`` would (``crank`` bound to it); a constant as is."""
    if not callable(fn):
        return fn
    return lambda env: fn({**env, CRANK: rank})


class _TooLong(Exception):
    pass


_OP, _LET, _FOR, _IF = 0, 1, 2, 3
#: a role body compiled for walking (:func:`program`)
Program = list[tuple]


def program(body: tuple[n.Stmt, ...], plans: Mapping[int, Plan], comp: Compiled) -> Program:
    """A role body compiled for walking: relevant operations, lets, loops and conditionals with their
    expressions compiled; loops and conditionals that contain no relevant operation are dropped."""
    out: Program = []
    for s in body:
        if isinstance(s, n.Op):
            plan = plans.get(id(s))
            if plan is not None and plan.relevant:
                out.append((_OP, plan))
        elif isinstance(s, n.Let):
            out.append((_LET, s.name, comp(s.value)))
        elif isinstance(s, n.For):
            inner = program(s.body, plans, comp)
            if any(ins[0] != _LET for ins in inner):
                out.append((_FOR, id(s), s.var, comp(s.start), comp(s.stop), comp(s.step), inner))
        elif isinstance(s, n.If):
            then, orelse = program(s.then, plans, comp), program(s.orelse, plans, comp)
            if any(ins[0] != _LET for ins in then + orelse):
                out.append((_IF, comp(s.cond), then, orelse))
    return out


class Walker:
    """Walks every role instance of one CTA through its loops, emitting steps."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.count = 0

    def run(self, prog: Program, env: Env, inst: int) -> list[Step]:
        out: list[Step] = []
        self._block(prog, env, inst, (), out)
        return out

    def _block(self, prog: Program, env: Env, inst: int, loops: tuple, out: list[Step]) -> None:
        for ins in prog:
            kind = ins[0]
            if kind == _OP:
                p = ins[1]
                out.append(self._step(p, env, inst, loops, len(out)))
                for name, fn in p.binds:
                    env[name] = fn(env)
                self.count += 1
                if self.count > self.budget:
                    raise _TooLong
            elif kind == _LET:
                env[ins[1]] = ins[2](env)
            elif kind == _FOR:
                _, lid, var, start, stop, step_fn, body = ins
                step = int(step_fn(env)) if step_fn is not None else 1
                if step == 0:
                    raise ZeroDivisionError("a loop with step 0")
                for v in range(int(start(env)), int(stop(env)), step):
                    env[var] = v
                    self._block(body, env, inst, loops + ((lid, var, v),), out)
            else:
                self._block(ins[2] if ins[1](env) else ins[3], env, inst, loops, out)

    def _step(self, p: Plan, env: Env, inst: int, loops: tuple, pos: int) -> Step:
        waits: tuple = ()
        signals: tuple = ()
        completes: tuple = ()
        accesses: tuple = ()
        # list comprehensions turned into tuples: cheaper than generator expressions, at every step
        if p.waits:
            waits = tuple([(b, _stage(st, env, ring), int(par(env)) if par else None, e)
                           for b, st, ring, par, e in p.waits])  # fmt: skip
        if p.signals:
            signals = tuple([
                (act, b, _stage(st, env, ring), int(arr(env)) if arr else 1, int(amt(env)) if amt else None, e)
                for act, b, st, ring, arr, amt, e in p.signals
            ])  # fmt: skip
        if p.completes:
            completes = tuple([(b, _stage(st, env, ring), int(amt(env)) if amt else nbytes, e)
                               for b, st, ring, amt, nbytes, e in p.completes])  # fmt: skip
        if p.accesses:
            out = []
            for buf, staged, dims, (read, write, proxy, asynchronous, atomic), e in p.accesses:
                box = []
                for start, size in dims:
                    if start is None:
                        box.append((0, size))
                    else:
                        lo = int(start(env))
                        box.append((lo, lo + 1 if size is None else lo + max(int(size(env)), 0)))
                out.append(SharedAccess(buf, tuple(box), box[0][0] if staged else None, read, write, proxy,
                                          asynchronous, atomic, e))  # fmt: skip
            accesses = tuple(out)
        pending = (int(p.pending(env)) if p.pending is not None else 0) if p.group_wait is not None else None
        return Step(p.facts, inst, pos, loops, waits, signals, completes, accesses, pending, p)


class _BadStage(Exception):
    """A barrier stage index outside its ring (CR108 reports where)."""


def _stage(fn: Fn | None, env: Env, ring: int) -> int:
    v = int(fn(env)) if fn is not None else 0
    if not 0 <= v < ring:
        raise _BadStage(v)
    return v


@attrs.define(eq=False)
class SampleRun:
    """The traces of one sample: one list of steps per role instance (empty when skipped)."""

    sample: Sample
    instances: list[Instance]
    traces: list[list[Step]]
    skipped: str | None = None  # why the sample was not simulated
    _replay: ReplayResult | None = None

    def replay(self, model: KernelModel) -> ReplayResult:
        """The interleaved replay of the traces (computed once)."""
        if self._replay is None:
            self._replay = Replay(model, self.traces).run()
        return self._replay

    def steps(self) -> Iterable[Step]:
        for t in self.traces:
            yield from t


def cta_env(model: KernelModel, sample: Sample, cta: Mapping[str, int] | None = None) -> Env:
    """What one CTA's role bodies start from at ``sample``: the constants, the sizes, the simulated
    ``SMS``, scalar parameters at 1, the grid coordinates ``cta`` (each 0 where not given) and the
    CTA's rank in its thread-block cluster, ``crank``."""
    base: Env = dict(model.env)
    base.update(sample.sizes)
    if sample.sms is not None:
        base["SMS"] = sample.sms
    for p in model.kernel.params:
        if p.tier == "scalar":
            base[p.name] = 1
    for v in model.kernel.grid.vars:
        base[v] = cta.get(v, 0) if cta is not None else 0
    if model.kernel.grid.vars:  # the CTA's rank in its thread-block cluster
        base[CRANK] = crank(model.kernel, model.env, int(base[model.kernel.grid.vars[0]]))
    return base


def simulate(model: KernelModel, sample: Sample, programs: Mapping[str, Program], budget: int,
             cta: Mapping[str, int] | None = None) -> SampleRun:
    """Every role instance of one CTA (``cta``'s grid coordinates, else every grid variable 0) walked
    through its loops at ``sample``: the traces, or why not (more than ``budget`` operations, a stage
    index outside its ring, an expression without a value)."""
    base = cta_env(model, sample, cta)
    for p in model.pipes:
        base[counter(p, PRODUCER)] = base[counter(p, CONSUMER)] = 0
    instances: list[Instance] = []
    traces: list[list[Step]] = []
    walker = Walker(budget)
    try:
        for info in model.roles:
            for i in range(info.instances):
                env = dict(base)
                env["self"] = i
                env.setdefault("THREADS", info.per * 32)
                inst = Instance(len(instances), info.role.name, i, info.instances, info.per * 32)
                instances.append(inst)
                traces.append(walker.run(programs[info.role.name], env, inst.index))
    except _TooLong:
        return SampleRun(sample, instances, [], f"more than {budget} operations")
    except _BadStage:
        return SampleRun(sample, instances, [], "a barrier stage index leaves its ring (CR108 says where)")
    except (EvalError, ZeroDivisionError, TypeError, ValueError, OverflowError) as exc:
        return SampleRun(sample, instances, [], f"an expression has no value at these sizes ({exc})")
    return SampleRun(sample, instances, traces)


def covered(run: SampleRun) -> bool:
    """Whether every barrier stage that an instance waits on inside a loop is waited on twice by it
    (each ring has wrapped, so parities have alternated and stages have been refilled)."""
    waits: dict[tuple[int, str], collections.Counter] = collections.defaultdict(collections.Counter)
    stages: dict[str, int] = {}
    for trace in run.traces:
        for st in trace:
            if st.loops:
                for name, stage, _, e in st.waits:
                    waits[(st.inst, name)][stage] += 1
                    stages[name] = max(stages.get(name, 1), stage + 1)
    return all(min(c[i] for i in range(stages[name])) >= 2 for (_, name), c in waits.items())
