"""A kernel's synchronization protocol, simulated on one CTA at concrete sizes, for verifier rules.

Barrier counts, expect-tx bytes, parities and the stages of a ring are mechanical consequences of the
loop structure: whether they agree is decided by following each role instance through its loops.
Control flow in Cake IR never depends on data — loop bounds, ``let`` values and ``if`` conditions are
functions of sizes, grid variables, ``self`` and loop variables — so one walk per role instance gives
the exact sequence of its synchronizing operations, its **trace**. Rules compare traces (arrivals per
phase, expect-tx against the copies of the same iteration, the parity of successive waits on one
stage), and a **replay** interleaves them with the mbarrier semantics of the interpreter to find the
reads and writes of shared memory that no synchronization orders, and waits that never complete.

What is simulated
-----------------
* **Samples.** Each kernel model is simulated at every run-time size's least admissible value (at
  least 1), and at a *grown* assignment: each size that the kernel divides by a constant ``c``
  (``cdiv(N, c)``, ``N / c``, ``N % c``) is ``k * c`` for ``k`` in :data:`GROWTH` — snapped to the
  domain's ranges and divisibility — growing until every barrier stage an instance waits on inside a
  loop is waited on twice by it (every ring has wrapped, parities have alternated, stages have been
  refilled), or until the next factor would exceed :data:`WIDE_STEPS` operations. Sizes the kernel
  never divides keep their least value; scalar parameters are 1. The target constant ``SMS`` is
  simulated as 2 when no compile-time declaration uses it, so persistent loops
  (``for tile in w .. TILES step min(SMS, TILES)``) run several times at small sizes: a protocol must
  not depend on the machine's size.
* **One CTA**, every grid variable 0; every role instance of it.
* **Only what synchronizes or touches shared memory**: mbarrier actions (waits with their parity,
  arrivals with their count — ``THREADS`` is the instance's threads —, expect-tx and complete-tx bytes),
  CTA barriers, asynchronous groups (issue, commit, wait), async-proxy fences, and shared-memory
  accesses as boxes of concrete indices. Values are never computed.
* **Budget.** A sample whose traces exceed :data:`MAX_STEPS` operations in all (:data:`WIDE_STEPS` for a
  grown one), whose expressions cannot be evaluated (a division by zero at that size), or whose barrier
  stage indices leave their rings (CR108's finding) is skipped: rules see why in
  :attr:`SampleRun.skipped` and say nothing about it.
* **Sharing.** Specializations that differ only in element types of one size (``T in {bf16, f16}``)
  have the same protocol: within one checked module they share one simulation.

The replay
----------
Mirrors :mod:`cake_core.semantics.interp` under its ``sequential`` policy, without data: the
lowest-numbered instance that can run executes its next operation; asynchronous copies stay in flight
until no instance can run (or their group is waited for); a wait for parity ``P`` passes once the
barrier's last completed phase has parity ``P``; a phase completes at ``count`` arrivals with no
outstanding transaction bytes. Happens-before is tracked with vector clocks: each instance is a
component, and so is each *lane* of asynchronous operations — those of one issuer that signal the
same barrier stages (or join the same group), which complete in issue order, so a lane's clock counts
them and clocks stay small. Arrivals and completed copies join a phase's clock, a passing wait
acquires it, a CTA barrier joins everyone. A read of shared memory not ordered after an overlapping
write of another component (or overlapping a copy still in flight) is a ``raw`` conflict; a write not
ordered after another component's read or write is ``war``/``waw``. Accesses of one instance are in
program order (the threads inside an instance are the interpreter's business). Atomic accesses do not
conflict with each other. When no instance can run, no copy is in flight and some instance is not
finished, the replay records the deadlock and stops.

What this proves
----------------
Nothing beyond the samples: a finding is a concrete run (sizes named) that goes wrong; a clean result
means the protocol held at those sizes. The samples are chosen to exercise every stage of every ring
more than once and the first and later iterations of every loop, which is where protocol mistakes
show (a parity that does not alternate, a count off by an instance, a stage index off by one).
"""

from __future__ import annotations

import collections
import math
import operator
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from cake_core.ir import nodes as n
from cake_core.ir.primitive import Access, BarrierAction, Effect, Kind, numel, static_shape
from cake_core.ir.sema import CheckedModule, KernelModel, _int_value
from cake_core.verify.facts import KernelFacts, OpFacts, facts, is_proxy_fence

__all__ = [
    "GROWTH", "MAX_STEPS", "SIM_SMS", "WIDE_STEPS", "Blocked", "Conflict", "Instance", "Protocol", "ReplayResult",
    "Sample", "SampleRun", "SharedAccess", "Step", "compile_expr", "compiler", "protocol",
]  # fmt: skip

MAX_STEPS = 4000  # operations of the least sizes' traces, all instances together
WIDE_STEPS = 800  # operations of a grown sample's traces
GROWTH = (4, 8, 16)  # factors the sizes are grown by until every ring has wrapped
SIM_SMS = 2  # the multiprocessor count persistent loops are simulated with (when nothing compiled uses it)

Env = dict[str, Any]
Fn = Callable[[Env], Any]


# ---------------------------------------------------------------------------------------------------
# Expressions, compiled once to Python closures
# ---------------------------------------------------------------------------------------------------


def _fdiv(a: Any, b: Any) -> Any:
    if isinstance(a, float) or isinstance(b, float):
        return a / b
    return a // b


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": _fdiv, "%": operator.mod,
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
    "!=": operator.ne,
}  # fmt: skip
_CALLS: dict[str, Callable[[Any, Any], Any]] = {"cdiv": _cdiv, "min": min, "max": max}


def _fail(env: Env) -> Any:
    raise KeyError("not an integer expression")


def compile_expr(e: n.Expr) -> Fn:
    """``e`` as a function of an environment, built from closures once; evaluation agrees with
    :func:`cake_core.ir.exprs.evaluate` (``/`` floor division on integers, ``%`` the non-negative
    remainder, ``cdiv``, ``min``, ``max``). A free name or a division by zero raises ``KeyError`` or
    ``ZeroDivisionError`` when the function is called."""
    if isinstance(e, n.Num):
        v = e.value
        return lambda env: v
    if isinstance(e, n.Name):
        if e.id == "inf":
            return lambda env: math.inf
        key = e.id
        return lambda env: env[key]
    if isinstance(e, n.Unary):
        x = compile_expr(e.operand)
        if e.op == "not":
            return lambda env: not x(env)
        return lambda env: -x(env)
    if isinstance(e, n.Bin) and e.op in ("and", "or"):
        a, b = compile_expr(e.left), compile_expr(e.right)
        if e.op == "and":
            return lambda env: bool(a(env)) and bool(b(env))
        return lambda env: bool(a(env)) or bool(b(env))
    if isinstance(e, n.Bin):
        f = _BINARY.get(e.op)
        if f is None:
            return _fail
        return _binary(f, e.left, e.right)
    if isinstance(e, n.Call) and e.fn in _CALLS and len(e.args) == 2:
        return _binary(_CALLS[e.fn], *e.args)
    return _fail


def _variable(e: n.Expr) -> str | None:
    return e.id if isinstance(e, n.Name) and e.id != "inf" else None


def _binary(f: Callable[[Any, Any], Any], left: n.Expr, right: n.Expr) -> Fn:
    """``f`` of two operands. An operand that is a variable or a number is read in place, not through a
    function of its own: expressions are evaluated at every step of every trace, and most operands are
    leaves. The left operand is evaluated first, as :func:`compile_expr`'s functions do."""
    x, y = _variable(left), _variable(right)
    if isinstance(right, n.Num):
        v = right.value
        if x is not None:
            return lambda env: f(env[x], v)
        a = compile_expr(left)
        return lambda env: f(a(env), v)
    if y is not None:
        if x is not None:
            return lambda env: f(env[x], env[y])
        a = compile_expr(left)
        return lambda env: f(a(env), env[y])
    b = compile_expr(right)
    if x is not None:
        return lambda env: f(env[x], b(env))
    a = compile_expr(left)
    return lambda env: f(a(env), b(env))


# ---------------------------------------------------------------------------------------------------
# Samples
# ---------------------------------------------------------------------------------------------------


@attrs.frozen
class Sample:
    """Concrete sizes a protocol is simulated at (and the multiprocessor count, when overridden)."""

    sizes: tuple[tuple[str, int], ...]
    sms: int | None = None  # the simulated `SMS`, when it differs from the target's

    @property
    def when(self) -> str:
        """``; seen at B=1, N=1`` — the tail of a finding's message (nothing without run-time sizes)."""
        words = ", ".join(f"{k}={v}" for k, v in self.sizes)
        return f"; seen at {words}" if words else ""

    @property
    def note(self) -> str | None:
        if self.sms is None:
            return None
        return (f"simulated on one CTA with `SMS` = {self.sms}, so that persistent loops run more than once at "
                "small sizes; the protocol must not depend on the machine's size")  # fmt: skip


def _snap(v: int, lo: int, hi: int | None, mod: int) -> int | None:
    """The least admissible value at least ``v`` (the greatest admissible when ``v`` is past the top)."""
    x = max(v, lo)
    x = -(-x // mod) * mod
    if hi is not None and x > hi:
        x = (hi // mod) * mod
        if x < lo:
            return None
    return x


def _per_kernel(model: KernelModel, key: str, make: Callable[[n.Kernel], Any]) -> Any:
    """``make(model.kernel)``, computed once for all specializations of the kernel: memoized in the
    models' ``shared`` dict (for what depends on the kernel's syntax alone)."""
    found = model.shared.get(key)
    if found is None:
        found = model.shared[key] = make(model.kernel)
    return found


def _divisions(k: n.Kernel) -> list[tuple[n.Expr, frozenset[str]]]:
    """Every division in the kernel's grid and role bodies (``cdiv``, ``/``, ``%``): the divisor, and the
    names the dividend mentions. Only the divisor's value depends on the specialization."""
    exprs: list[n.Expr] = list(k.grid.extents)
    for role in k.roles:
        for s in n.walk_stmts(role.body):
            if isinstance(s, n.For):
                exprs += [s.start, s.stop] + ([s.step] if s.step is not None else [])
            elif isinstance(s, n.Let):
                exprs.append(s.value)
            elif isinstance(s, n.If):
                exprs.append(s.cond)
            elif isinstance(s, n.Op):
                exprs += list(s.operands) + [a.value for a in s.attrs]
    out: list[tuple[n.Expr, frozenset[str]]] = []
    for e in exprs:
        _scan(e, out)
    return out


def _scan(e: n.Expr, out: list[tuple[n.Expr, frozenset[str]]]) -> None:
    """Appends each division in ``e`` to ``out``: its divisor and the names its dividend mentions (as
    :func:`cake_core.ir.nodes.walk_expr` finds them). Divisions are rare: names are gathered for dividends
    only, not for every subexpression."""
    for c in n.children(e):
        _scan(c, out)
    if isinstance(e, n.Bin) and e.op in ("/", "%"):
        out.append((e.right, frozenset(_names(e.left, set()))))
    elif isinstance(e, n.Call) and e.fn == "cdiv" and len(e.args) == 2:
        out.append((e.args[1], frozenset(_names(e.args[0], set()))))


def _names(e: n.Expr, into: set[str]) -> set[str]:
    """``into`` with the names ``e`` mentions (those :func:`cake_core.ir.nodes.walk_expr` yields)."""
    if isinstance(e, n.Name):
        into.add(e.id)
    else:
        for c in n.children(e):
            _names(c, into)
    return into


def _divisors(model: KernelModel, sizes: Iterable[str]) -> dict[str, int]:
    """For each run-time size, the largest constant the kernel divides an expression of it by."""
    unit = {s: 1 for s in sizes}
    if not unit:
        return unit  # no run-time size to grow: the kernel's divisions need not be found
    env = model.env
    for den, names in _per_kernel(model, "protocol divisions", _divisions):
        if names.isdisjoint(unit):
            continue  # a dividend of no run-time size (a stage index `g % S`): evaluated for nothing
        c = _int_value(den, env)
        if c is None or c < 2:
            continue
        for name in names:
            if name in unit:
                unit[name] = max(unit[name], c)
    return unit


def _uses_sms_at_compile_time(k: n.Kernel) -> bool:
    exprs: list[n.Expr] = [c.value for c in k.consts] + [k.cta.warps]
    if k.cta.occupancy is not None:
        exprs.append(k.cta.occupancy)
    for s in k.smem:
        exprs += list(s.shape) + [x for x in (s.stages, s.pad, s.align) if x is not None]
    for b in k.barriers:
        exprs += [b.count] + ([b.stages] if b.stages is not None else [])
    for r in k.roles:
        exprs += [r.warp_start, r.warp_stop] + [x for x in (r.per, r.regs) if x is not None]
    names: set[str] = set()
    for e in exprs:
        _names(e, names)
    return "SMS" in names


@attrs.frozen
class _Sizes:
    """How a kernel's run-time sizes are sampled: the least admissible values, and growth by a factor."""

    small: tuple[tuple[str, int], ...]
    ranges: tuple[tuple[str, int, int | None, int, int], ...]  # name, lo, hi, modulus, divisor
    sms: int | None

    def at(self, k: int) -> Sample:
        """Every size the kernel divides by a constant ``c`` at about ``k * c``; the others at their least."""
        out = []
        for (name, least), (_, lo, hi, mod, unit) in zip(self.small, self.ranges, strict=True):
            grown = _snap(k * unit, lo, hi, mod) if unit > 1 else None
            out.append((name, least if grown is None else grown))
        return Sample(tuple(out), self.sms)


def _sizes(model: KernelModel) -> _Sizes | None:
    from cake_core.verify.shapes import ShapeDomain

    shape = ShapeDomain.of(model)
    if shape.empty():
        return None
    sms = None
    if "SMS" in model.env and not _per_kernel(model, "protocol uses SMS", _uses_sms_at_compile_time):
        sms = SIM_SMS
    unit = _divisors(model, shape.sizes)
    small, ranges = [], []
    for name, r in sorted(shape.sizes.items()):
        least = _snap(1, r.lo, r.hi, r.modulus)
        if least is None:
            return None
        small.append((name, least))
        ranges.append((name, r.lo, r.hi, r.modulus, unit[name]))
    return _Sizes(tuple(small), tuple(ranges), sms)


def _covered(run: SampleRun) -> bool:
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


# ---------------------------------------------------------------------------------------------------
# Operation plans and traces
# ---------------------------------------------------------------------------------------------------


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
        if self.instances > 1:
            return f"role `{self.role}` instance {self.instance}"
        return f"role `{self.role}`"


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
    plan: _Plan | None = None  # what the operation does, evaluated once per operation

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
class _Plan:
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


# Step, SharedAccess and _Plan with every field given, built by slot stores (one per simulated operation,
# one per operation planned)


class _Compiler:
    """Compiles expressions once per node: the cache is shared by every specialization of a kernel (a
    compiled expression depends on the node alone), and keeps the nodes it is keyed by alive."""

    def __init__(self, cache: dict[int, tuple[n.Expr, Fn]] | None = None) -> None:
        self.cache = {} if cache is None else cache

    def __call__(self, e: n.Expr | None) -> Fn | None:
        if e is None:
            return None
        hit = self.cache.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        fn = compile_expr(e)
        self.cache[id(e)] = (e, fn)
        return fn


def compiler(model: KernelModel) -> Callable[[n.Expr | None], Fn | None]:
    """:func:`compile_expr` with a cache shared by every specialization of the model's kernel (within
    one type check): the protocol simulator and other analyses that evaluate the same expressions at
    concrete sizes compile each node once."""
    return _Compiler(_per_kernel(model, "protocol expressions", lambda k: {}))


def _copy_bytes(of: OpFacts) -> int:
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


def _plan(of: OpFacts, model: KernelModel, comp: _Compiler) -> _Plan:
    waits, signals, completes, accesses = [], [], [], []
    for e in of.effects:
        o = e.operand
        if e.tier is Kind.BARRIER and e.barrier is not None and o.name in model.barriers:
            stage = comp(o.stage)
            ring = model.barriers[o.name].stages or 1
            if e.barrier is BarrierAction.WAIT:
                waits.append((o.name, stage, ring, comp(e.amount), e))
            elif e.barrier is BarrierAction.COMPLETE_TX:
                completes.append((o.name, stage, ring, comp(e.amount), _copy_bytes(of), e))
            elif e.barrier is not BarrierAction.INIT:
                signals.append((e.barrier, o.name, stage, ring, comp(e.arrivals), comp(e.amount), e))
        elif e.tier is Kind.SHARED and e.access is not Access.NONE and o.name in model.smem:
            info = model.smem[o.name]
            dims: list[_DimFn] = []
            if info.stages is not None:
                dims.append((comp(o.stage), None) if o.stage is not None else (None, info.stages))
            for d, ext in enumerate(info.shape):
                item = o.index[d] if d < len(o.index) else None
                if isinstance(item, n.At):
                    dims.append((comp(item.expr), None))
                elif isinstance(item, n.Span):
                    dims.append((comp(item.start), comp(item.size)))
                else:
                    dims.append((None, ext))
            acc = e.access
            flags = (acc in (Access.READ, Access.READWRITE), acc in (Access.WRITE, Access.READWRITE), e.async_proxy,
                     e.asynchronous, bool(getattr(o.slot, "atomic", False)))  # fmt: skip
            accesses.append((o.name, info.stages is not None and o.stage is not None, dims, flags, e))
    prim = of.prim
    pending = comp(of.typed.attr("pending")) if prim.group_wait is not None else None
    relevant = bool(
        waits or signals or completes or accesses or prim.cta_barrier or prim.group is not None
        or prim.group_commit is not None or prim.group_wait is not None or is_proxy_fence(prim)
    )  # fmt: skip
    asynchronous = bool(completes) or any(e.asynchronous for *_, e in accesses)
    return _Plan(of, waits, signals, completes, accesses, pending, relevant, prim.cta_barrier, prim.group,
                    prim.group_commit, prim.group_wait, asynchronous)  # fmt: skip


class _TooLong(Exception):
    pass


_OP, _LET, _FOR, _IF = 0, 1, 2, 3
_Program = list[tuple]


def _program(body: tuple[n.Stmt, ...], plans: Mapping[int, _Plan], comp: _Compiler) -> _Program:
    """A role body compiled for walking: relevant operations, lets, loops and conditionals with their
    expressions compiled; loops and conditionals that contain no relevant operation are dropped."""
    out: _Program = []
    for s in body:
        if isinstance(s, n.Op):
            plan = plans.get(id(s))
            if plan is not None and plan.relevant:
                out.append((_OP, plan))
        elif isinstance(s, n.Let):
            out.append((_LET, s.name, comp(s.value)))
        elif isinstance(s, n.For):
            inner = _program(s.body, plans, comp)
            if any(ins[0] != _LET for ins in inner):
                out.append((_FOR, id(s), s.var, comp(s.start), comp(s.stop), comp(s.step), inner))
        elif isinstance(s, n.If):
            then, orelse = _program(s.then, plans, comp), _program(s.orelse, plans, comp)
            if any(ins[0] != _LET for ins in then + orelse):
                out.append((_IF, comp(s.cond), then, orelse))
    return out


class _Walker:
    """Walks every role instance of one CTA through its loops, emitting steps."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.count = 0

    def run(self, prog: _Program, env: Env, inst: int) -> list[Step]:
        out: list[Step] = []
        self._block(prog, env, inst, (), out)
        return out

    def _block(self, prog: _Program, env: Env, inst: int, loops: tuple, out: list[Step]) -> None:
        for ins in prog:
            kind = ins[0]
            if kind == _OP:
                out.append(self._step(ins[1], env, inst, loops, len(out)))
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

    def _step(self, p: _Plan, env: Env, inst: int, loops: tuple, pos: int) -> Step:
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
            self._replay = _Replay(model, self).run()
        return self._replay

    def steps(self) -> Iterable[Step]:
        for t in self.traces:
            yield from t


@attrs.define(eq=False)
class Protocol:
    """Every sample's traces for one kernel model."""

    model: KernelModel
    facts: KernelFacts
    runs: list[SampleRun]
    #: whether the kernel has anything a protocol rule looks at (barriers, async-proxy readers)
    active: bool


def _simulate(model: KernelModel, sample: Sample, programs: Mapping[str, _Program], budget: int) -> SampleRun:
    base: Env = dict(model.env)
    base.update(sample.sizes)
    if sample.sms is not None:
        base["SMS"] = sample.sms
    for p in model.kernel.params:
        if p.tier == "scalar":
            base[p.name] = 1
    for v in model.kernel.grid.vars:
        base[v] = 0
    instances: list[Instance] = []
    traces: list[list[Step]] = []
    walker = _Walker(budget)
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
    except (KeyError, ZeroDivisionError, TypeError, ValueError, OverflowError) as exc:
        return SampleRun(sample, instances, [], f"an expression has no value at these sizes ({exc})")
    return SampleRun(sample, instances, traces)


_CACHE: weakref.WeakKeyDictionary[CheckedModule, dict[tuple, Protocol]] = weakref.WeakKeyDictionary()


def _protocol_key(model: KernelModel) -> tuple:
    """What a protocol depends on: integer compile-time values and element sizes (not the dtype names)."""
    ints = tuple(sorted((k, v) for k, v in model.env.items() if isinstance(v, int) and not isinstance(v, bool)))
    sizes = tuple(sorted((k, t.bytes) for k, t in model.typevars.items()))
    return (model.kernel.name, ints, sizes)


def protocol(model: KernelModel, checked: CheckedModule | None = None) -> Protocol:
    """The simulated protocol of ``model``; specializations that differ only in element types of
    equal size share one simulation within a checked module."""
    key = _protocol_key(model)
    per = _CACHE.get(checked) if checked is not None else None
    if per is not None and key in per:
        # the same protocol under another specialization (element types of equal size): its steps refer to
        # that model's operations, which have the same source locations; rules report by location
        return per[key]
    kf = facts(model)
    active = bool(model.barriers) or bool(kf.async_proxy_readers())
    runs: list[SampleRun] = []
    if active:
        comp = compiler(model)
        plans = {id(of.typed.op): _plan(of, model, comp) for of in kf.ops}
        programs = {info.role.name: _program(info.role.body, plans, comp) for info in model.roles}
        sizes = _sizes(model)
        if sizes is not None:
            small = Sample(sizes.small, sizes.sms)
            runs.append(_simulate(model, small, programs, MAX_STEPS))
            wide: SampleRun | None = None
            for k in GROWTH:
                sample = sizes.at(k)
                if sample == small or (wide is not None and sample == wide.sample):
                    continue
                run = _simulate(model, sample, programs, WIDE_STEPS)
                if run.skipped is not None:
                    break
                wide = run
                # doubling the sizes of two nested loops quadruples the operations: stop before the budget
                if _covered(run) or 4 * sum(len(t) for t in run.traces) > WIDE_STEPS:
                    break
            if wide is not None:
                runs.append(wide)
    out = Protocol(model, kf, runs, active)
    if checked is not None:
        _CACHE.setdefault(checked, {})[key] = out
    return out


# ---------------------------------------------------------------------------------------------------
# The replay
# ---------------------------------------------------------------------------------------------------

VC = dict[int, int]


def _join(into: VC, other: VC) -> None:
    for k, v in other.items():
        if into.get(k, 0) < v:
            into[k] = v


def _overlap(a: tuple[tuple[int, int], ...], b: tuple[tuple[int, int], ...]) -> bool:
    for (x0, x1), (y0, y1) in zip(a, b):  # noqa: B905 - boxes of one buffer have one rank
        if x0 >= y1 or y0 >= x1:
            return False
    return True


def _contains(outer: tuple[tuple[int, int], ...], inner: tuple[tuple[int, int], ...]) -> bool:
    for (o0, o1), (i0, i1) in zip(outer, inner):  # noqa: B905
        if i0 < o0 or o1 < i1:
            return False
    return True


@attrs.define(eq=False)
class Conflict:
    """Two accesses to overlapping shared memory that nothing orders.

    ``step`` is the later access (the one found unordered), ``other`` the earlier one — for a copy, the
    step that issued it. ``signals`` are the barrier phases the earlier access's copy completes
    (``(barrier, stage, phase)``), and ``waits`` the later accessor's last passed wait on each barrier:
    ``barrier -> (stage, phase it saw complete (-1: none yet), step)``.
    """

    kind: str  # "raw" (read before the write is ordered), "war", "waw" (write before the earlier access is)
    buffer: str
    step: Step
    access: SharedAccess
    other: Step
    in_flight: bool
    signals: tuple[tuple[str, int, int], ...]
    waits: dict[str, tuple[int, int, Step]]
    released: Step | None = None  # the later accessor's last arrival on any barrier before this access


@attrs.define(eq=False)
class Blocked:
    """One instance that can never go on: at a barrier wait, or at a CTA barrier."""

    inst: int
    step: Step
    barrier: str | None  # None: a CTA barrier
    stage: int = 0
    parity: int = 0
    state: str = ""


@attrs.define(eq=False)
class ReplayResult:
    conflicts: list[Conflict]
    deadlock: list[Blocked] | None  # every blocked instance, when the replay deadlocked
    finished: list[int]  # instances that had finished when it did


@attrs.define(eq=False, slots=True)
class _Bar:
    count: int
    completed: int = 0
    arrived: int = 0
    tx: int = 0
    phase_vc: VC = attrs.field(factory=dict)
    done_vc: VC = attrs.field(factory=dict)

    def ready(self, parity: int) -> bool:
        return (self.completed & 1) != (parity & 1)

    def maybe_complete(self) -> bool:
        """Complete the phase if its arrivals are in and no bytes are outstanding; whether it did."""
        if self.arrived >= self.count and self.tx == 0:
            self.completed += 1
            self.arrived = 0
            self.done_vc, self.phase_vc = self.phase_vc, {}
            return True
        return False

    def text(self) -> str:
        return (f"{self.completed} phase(s) completed; the current one has {self.arrived} of {self.count} "
                f"arrivals, {self.tx} transaction bytes outstanding")  # fmt: skip


@attrs.define(eq=False, slots=True)
class _Transfer:
    comp: int  # the lane: one component for every asynchronous operation of one issuer that completes alike
    clock: int  # its position on the lane
    vc: VC
    step: Step
    agent: int
    group: str | None
    reads: list[SharedAccess] = attrs.field(factory=list)
    writes: list[SharedAccess] = attrs.field(factory=list)
    tx: list[tuple[_Bar, int]] = attrs.field(factory=list)
    signals: list[tuple[str, int, int]] = attrs.field(factory=list)
    buffers: set[str] = attrs.field(factory=set)
    done: bool = False


@attrs.define(eq=False, slots=True)
class _Rec:
    box: tuple[tuple[int, int], ...]
    comp: int
    clock: int
    write: bool
    step: Step
    atomic: bool
    signals: tuple[tuple[str, int, int], ...] = ()


_READY, _MBAR, _CTA, _DONE = 0, 1, 2, 3
# the actions that add expected bytes, and those that arrive (tuples: looking an enum member up on its
# class is slow, and the replay asks for every signal)
_EXPECTS = (BarrierAction.EXPECT_TX, BarrierAction.ARRIVE_EXPECT_TX)
_ARRIVES = (BarrierAction.ARRIVE, BarrierAction.ARRIVE_EXPECT_TX)


@attrs.define(eq=False, slots=True)
class _Agent:
    inst: int
    trace: list[Step]
    comp: int
    pc: int = 0
    sub: int = 0
    clock: int = 0
    state: int = _READY
    vc: VC = attrs.field(factory=dict)
    wait: tuple[_Bar, int, str, int] | None = None
    cta_passed: bool = False
    counts: dict[tuple[str, int], int] = attrs.field(factory=dict)
    last_wait: dict[str, tuple[int, int, Step]] = attrs.field(factory=dict)
    last_arrive: Step | None = None
    groups: dict[str, tuple[list[_Transfer], collections.deque[list[_Transfer]]]] = attrs.field(factory=dict)

    def tick(self) -> int:
        self.clock += 1
        self.vc[self.comp] = self.clock
        return self.clock

    def group(self, name: str) -> tuple[list[_Transfer], collections.deque[list[_Transfer]]]:
        g = self.groups.get(name)
        if g is None:
            g = self.groups[name] = ([], collections.deque())
        return g


class _Replay:
    def __init__(self, model: KernelModel, run: SampleRun) -> None:
        self.model = model
        self.run_ = run
        self.bars: dict[tuple[str, int], _Bar] = {}
        for name, info in model.barriers.items():
            for s in range(info.stages or 1):
                self.bars[(name, s)] = _Bar(info.count)
        self.agents = [_Agent(i, t, i) for i, t in enumerate(run.traces)]
        self.next_comp = len(self.agents)
        # Asynchronous operations of one issuer that signal the same barrier stages (or join the same
        # group) complete in issue order: one vector-clock component ("lane") stands for all of them,
        # its clock counting them, so clocks stay as small as the number of lanes
        self.lanes: dict[tuple, int] = {}
        self.lane_clock: dict[int, int] = {}
        self.inflight: list[_Transfer] = []
        # access records per (buffer, stage): a ring's accesses to one stage are keyed by it, accesses
        # to a whole ring or to an unstaged buffer by None
        self.records: dict[tuple[str, int | None], list[_Rec]] = collections.defaultdict(list)
        self.conflicts: list[Conflict] = []
        self.seen: set[tuple] = set()
        self.changed = False  # a barrier phase completed during the current step

    # -- scheduling ----------------------------------------------------------------------------------

    def run(self) -> ReplayResult:
        agents = self.agents
        for a in agents:
            if not a.trace:
                a.state = _DONE
        while True:
            progressed = False
            for a in agents:
                if a.state == _DONE:
                    continue
                if a.state == _MBAR:
                    assert a.wait is not None
                    if not a.wait[0].ready(a.wait[1]):
                        continue
                    a.state = _READY
                if a.state == _CTA:
                    continue
                self.changed = False
                self.advance(a)
                # nothing an earlier instance waits for has changed: the same instance goes on
                while a.state == _READY and not self.changed:
                    self.advance(a)
                progressed = True
                break
            if progressed:
                continue
            if any(a.state == _CTA for a in agents) and all(a.state == _CTA for a in agents):
                joined: VC = {}
                for a in agents:
                    _join(joined, a.vc)
                for a in agents:
                    a.vc = dict(joined)
                    a.state = _READY
                    a.cta_passed = True
                continue
            machine = [t for t in self.inflight if not t.done and (t.group is None or t.tx)]
            if machine:
                self.complete(machine[0])
                continue
            if all(a.state == _DONE for a in agents):
                break
            return ReplayResult(self.conflicts, self.deadlock(), [a.inst for a in agents if a.state == _DONE])
        for t in list(self.inflight):
            if not t.done:
                self.complete(t)
        return ReplayResult(self.conflicts, None, [a.inst for a in agents])

    def deadlock(self) -> list[Blocked]:
        out = []
        for a in self.agents:
            if a.state == _MBAR and a.wait is not None:
                bar, parity, name, stage = a.wait
                out.append(Blocked(a.inst, a.trace[a.pc], name, stage, parity, bar.text()))
            elif a.state == _CTA:
                out.append(Blocked(a.inst, a.trace[a.pc], None))
        return out

    # -- one operation -------------------------------------------------------------------------------

    def advance(self, a: _Agent) -> None:
        st = a.trace[a.pc]
        waits = st.waits
        while a.sub < len(waits):
            name, stage, parity, _ = waits[a.sub]
            key = (name, stage)
            bar = self.bars[key]
            k = a.counts.get(key, 0)
            p = (parity if parity is not None else k) & 1
            if not bar.ready(p):
                a.state, a.wait = _MBAR, (bar, p, name, stage)
                return
            a.wait = None
            _join(a.vc, bar.done_vc)
            a.counts[key] = k + 1
            a.last_wait[name] = (stage, bar.completed - 1, st)
            a.sub += 1
        plan = st.plan
        assert plan is not None
        if plan.cta and not a.cta_passed:
            a.state = _CTA
            return
        a.cta_passed = False
        a.sub = 0
        a.clock += 1
        t = a.vc[a.comp] = a.clock
        if plan.group_wait is not None:
            _, committed = a.group(plan.group_wait)
            keep = max(st.pending or 0, 0)
            while len(committed) > keep:
                for tr in committed.popleft():
                    self.land(a, tr, t)
        tr: _Transfer | None = None
        if plan.asynchronous:
            lane = (a.inst, id(plan), tuple([stg for _, stg, _, _ in st.completes]))
            comp = self.lanes.get(lane)
            if comp is None:
                comp = self.lanes[lane] = self.next_comp
                self.next_comp += 1
            clock = self.lane_clock[comp] = self.lane_clock.get(comp, 0) + 1
            vc = dict(a.vc)
            vc[comp] = clock
            tr = _Transfer(comp, clock, vc, st, a.inst, plan.group)
        accesses = st.accesses
        if accesses:
            for x in accesses:
                self.check(a, st, x, tr)
            for x in accesses:
                if x.asynchronous and tr is not None:
                    if x.write:
                        tr.writes.append(x)
                    if x.read:
                        tr.reads.append(x)
                    tr.buffers.add(x.buffer)
                else:
                    self.record(x, a.comp, t, st, ())
        if tr is not None:
            for name, stage, nbytes, _ in st.completes:
                bar = self.bars[(name, stage)]
                tr.tx.append((bar, nbytes))
                tr.signals.append((name, stage, bar.completed))
            self.inflight.append(tr)
            if plan.group is not None:
                a.group(plan.group)[0].append(tr)
        for act, name, stage, arrivals, nbytes, _ in st.signals:
            bar = self.bars[(name, stage)]
            if act in _EXPECTS:
                bar.tx += nbytes if nbytes is not None else (sum(b for _, b in tr.tx) if tr is not None else 0)
            if act in _ARRIVES:
                bar.arrived += arrivals
                _join(bar.phase_vc, a.vc)
                a.last_arrive = st
            if bar.maybe_complete():
                self.changed = True
        if plan.group_commit is not None:
            open_, committed = a.group(plan.group_commit)
            committed.append(list(open_))
            open_.clear()
        a.pc += 1
        if a.pc >= len(a.trace):
            self.finish(a)

    def finish(self, a: _Agent) -> None:
        t = a.tick()
        for open_, committed in a.groups.values():
            while committed:
                for tr in committed.popleft():
                    self.land(a, tr, t)
            for tr in open_:
                self.land(a, tr, t)
            open_.clear()
        a.state = _DONE

    def land(self, a: _Agent, tr: _Transfer, clock: int) -> None:
        self.complete(tr, a.comp, clock)
        if tr.tx:
            _join(a.vc, tr.vc)

    def complete(self, tr: _Transfer, comp: int | None = None, clock: int = 1) -> None:
        if tr.done:
            return
        tr.done = True
        if comp is None or tr.tx:
            comp, clock = tr.comp, tr.clock
        signals = tuple(tr.signals)
        for x in tr.writes:
            self.record(x, comp, clock, tr.step, signals)
        for x in tr.reads:
            if not x.write:
                self.record(x, comp, clock, tr.step, signals)
        self.inflight.remove(tr)
        for bar, nbytes in tr.tx:
            bar.tx -= nbytes
            _join(bar.phase_vc, tr.vc)
            if bar.maybe_complete():
                self.changed = True

    # -- memory --------------------------------------------------------------------------------------

    def _keys(self, x: SharedAccess) -> list[tuple[str, int | None]]:
        """The record lists an access may overlap."""
        if x.stage is not None:
            return [(x.buffer, x.stage), (x.buffer, None)]
        return [k for k in self.records if k[0] == x.buffer]

    def record(self, x: SharedAccess, comp: int, clock: int, step: Step, signals: tuple) -> None:
        recs = self.records[(x.buffer, x.stage)]
        if x.write:
            recs[:] = [r for r in recs if not _contains(x.box, r.box)]
            recs.append(_Rec(x.box, comp, clock, True, step, x.atomic, signals))
        if x.read and not x.write:
            recs[:] = [r for r in recs if r.write or r.comp != comp or not _contains(x.box, r.box)]
            recs.append(_Rec(x.box, comp, clock, False, step, x.atomic, signals))

    def check(self, a: _Agent, st: Step, x: SharedAccess, tr: _Transfer | None) -> None:
        vc, comp, box = a.vc, a.comp, x.box
        for key in self._keys(x):
            for r in self.records.get(key, ()):
                if r.comp == comp or vc.get(r.comp, 0) >= r.clock or not _overlap(box, r.box):
                    continue
                if x.atomic and r.atomic:
                    continue
                if r.write and x.read:
                    self.conflict("raw", a, st, x, r.step, False, r.signals)
                elif x.write:
                    self.conflict("waw" if r.write else "war", a, st, x, r.step, False, r.signals)
        buf = x.buffer
        for t in self.inflight:
            if t is tr or t.done or buf not in t.buffers:
                continue
            if t.agent == a.inst and tr is not None and t.group is not None and t.group == tr.group:
                continue  # one asynchronous unit processes its group in issue order
            if x.read and any(w.buffer == x.buffer and _overlap(w.box, x.box) for w in t.writes):
                self.conflict("raw", a, st, x, t.step, True, tuple(t.signals))
            elif x.write and any(o.buffer == x.buffer and _overlap(o.box, x.box) for o in t.writes + t.reads):
                kind = "waw" if any(w.buffer == x.buffer and _overlap(w.box, x.box) for w in t.writes) else "war"
                self.conflict(kind, a, st, x, t.step, True, tuple(t.signals))

    def conflict(self, kind: str, a: _Agent, st: Step, x: SharedAccess, other: Step, in_flight: bool,
                 signals: tuple) -> None:  # fmt: skip
        key = (kind, id(st.op), id(other.op), x.buffer)
        if key in self.seen:
            return
        self.seen.add(key)
        self.conflicts.append(
            Conflict(kind, x.buffer, st, x, other, in_flight, signals, dict(a.last_wait), a.last_arrive)
        )
