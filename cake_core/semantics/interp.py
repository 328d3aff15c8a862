"""The CPU reference interpreter of Cake IR: runs a checked program on small shapes, on logical tiles.

Semantics
---------
**Program.** Program parameters bind to the caller's arrays by name (copied: the caller's arrays are
never written); parameters the caller leaves out (outputs) and program buffers are allocated
poisoned. The sizes (and type variables, ``T -> "bf16"``) select the program's specialization and,
through each launch's bindings, each kernel's (:func:`cake_core.ir.sema.kernel_spec`). Launches run in
order; a fatal finding (a fault, a deadlock, the step bound) ends the run, as a dead GPU context ends
every launch after it.

**Launch.** Every CTA of the grid runs in turn, the first grid variable varying fastest. CTAs are
independent here: nothing orders them on a GPU either, and the interpreter does not look for races
between CTAs.

**CTA.** Each role instance is an *agent* running the role's body on logical tiles: ``self`` is the
instance index; grid variables, runtime sizes, constants, loop variables and ``let`` values are
plain integers. Register tiles are per-agent arrays of their declared shape, poisoned at each
execution of their declaration; shared buffers are per-CTA arrays; global tensors are the host
arrays. Values are rounded to the element type whenever they are stored.

**Operations.** An operation's primitive says what it does through its declared effects; the
interpreter never looks at primitive names. Per execution, in order:

1. waits (``BarrierAction.WAIT``): block until the barrier phase of the wanted parity completes —
   the effect's ``amount`` when the primitive gives one, else the parity of the agent's own count of
   waits on that barrier stage (the derived phase bit);
2. a CTA barrier (``cta_barrier``): block until every agent of the CTA has arrived;
3. a group wait (``group_wait = G``): complete, in order, all but the ``pending`` most recent
   committed groups ``G`` of this agent;
4. resolve every tile operand to a region; an unmasked access outside its tensor is a fault (CS001)
   that stops the run; check the accesses for races (CS003);
5. ``execute`` through :class:`ExecContext`; a read of never-written elements is CS002; a fault that
   depends on data (:class:`~cake_core.ir.primitive.ExecFault`: a scatter index outside its tensor)
   is CS001 and stops the run. Writes
   through ``asynchronous`` effects are held in a *transfer* (values as at issue) instead of landing:
   in the agent's open group ``G`` when the primitive has ``group = G`` (it lands at the group wait);
   otherwise in flight until the machine completes it. A transfer signals every barrier operand with
   ``complete_tx`` when it lands (such a transfer the machine may complete before its group wait).
   The operations of one agent's group are processed in issue order by one asynchronous unit: an
   asynchronous read sees what earlier in-flight operations of the group wrote (a chain of ``wgmma``
   on one accumulator), and they do not race with each other;
6. barrier actions: ``init`` (before executing; the effect's ``arrivals`` is the new count, else the
   declared one), ``expect_tx`` (the effect's ``amount`` in bytes, else the bytes of the operation's own
   asynchronous writes), ``arrive`` (the effect's ``arrivals``, 1 when it gives none),
   ``arrive_expect_tx`` (both). ``complete_tx`` signals the effect's ``amount``, else the transfer's
   bytes. Effect expressions are evaluated where the operation runs, with ``THREADS`` bound to the
   threads of the role instance;
7. ``group_commit = G`` closes the open group ``G``.

When an agent finishes, its open and committed groups complete; copies still in flight when every
agent has finished complete at the end of the CTA.

**Scheduling.** ``policy="sequential"`` always runs the lowest-numbered agent that can run and lets the
machine complete in-flight copies only when no agent can. ``policy="random"`` picks, after every
operation, whether to keep running the same agent or to switch to a random runnable one (or to
complete a random in-flight copy), from a seeded generator: producers run ahead and consumers lag.
When no agent can run and no copy is in flight, the CTA is deadlocked (CS004): the finding names every
blocked role instance and what it waits on. Races are found by happens-before
(:mod:`cake_core.semantics.races`), not by luck of the interleaving: a missing synchronization is
found under either policy, though what goes wrong after it (wrong values, a deadlock) may differ.
The threads of one role instance are ordered among themselves only by CTA barriers, so shared data
one operation of an instance writes reaches its other operations after a ``bar.sync``.

**Sizes.** ``SMS`` (the target's multiprocessor count, for persistent grids) is the checked model's
when it was checked for a target, else the caller's (:data:`DEFAULT_SMS` when not given).

Where this differs from a GPU
-----------------------------
* One agent stands for all threads of a role instance. An mbarrier arrival counts the arrivals its
  effect declares all at once, and releases everything the instance did before it — also when one
  elected thread arrives for the instance (``per=instance``), where on a GPU only that thread's own
  earlier accesses are released.
* An asynchronous copy reads its source when issued; the read is checked for races at issue and kept
  in flight (writes to the source meanwhile are races) until it completes.
* A copy tracked by an asynchronous group never completes before its group wait, so a read before
  the wait is always reported, never lucky.
* A copy of an asynchronous group that also signals a barrier keeps its own clock; its issuing
  instance is ordered after it at its group wait without a CTA barrier.
* Global memory is checked for races only inside one CTA, and only for tensors the kernel writes.
* A fault ends the whole run, not only its launch: on a GPU it poisons the context, so no later
  launch of the program would run either.
* Shared-memory padding, swizzles and fragment layouts do not change values: tiles are logical.
* Proxies are not modelled: a generic-proxy write read through the async proxy needs a proxy fence
  on a GPU, which no declared effect describes yet, so a missing ``fence.proxy_async`` goes unseen.
"""

from __future__ import annotations

import collections
import itertools
import time
from collections.abc import Iterator, Mapping
from typing import Any

import attrs
import numpy as np

from cake_core.diagnostics.diagnostic import Diagnostic, DiagnosticError, Label
from cake_core.errors import CakeInternalError, CakeUserError
from cake_core.hostdata import encode, storage_dtype
from cake_core.ir import nodes as n
from cake_core.ir.exprs import WORDS, EvalError, evaluate
from cake_core.location import UNKNOWN, Loc
from cake_core.ir.primitive import Access, BarrierAction, Effect, ExecFault, Kind, Operand, Primitive
from cake_core.ir.model import CheckedModule, KernelModel, LaunchModel, RoleInfo, TypedOpImpl
from cake_core.ir.program import kernel_spec
from cake_core.ir.types import DTYPE_NAMES, DType
from cake_core.semantics import codes
from cake_core.semantics.barriers import BarState
from cake_core.semantics.findings import Finding
from cake_core.semantics.memory import Region, Store, region_text
from cake_core.semantics.races import VC, Actor, Conflict, Tracker, Transfer, join

POLICIES = ("random", "sequential")
DEFAULT_MAX_STEPS = 1_000_000
#: the multiprocessor count ``SMS`` a persistent kernel sees when neither the checked module (checked
#: for a target) nor the caller fixes it: small, so that each CTA loops over several tiles
DEFAULT_SMS = 2

_TILES = (Kind.GLOBAL, Kind.SHARED, Kind.REGISTERS)
_STORAGE_TO_DTYPE = {
    np.dtype(np.uint16): "bf16", np.dtype(np.float16): "f16", np.dtype(np.float32): "f32",
    np.dtype(np.float64): "f64", np.dtype(np.int32): "i32", np.dtype(np.int64): "i64",
    np.dtype(np.uint32): "u32", np.dtype(np.int8): "i8", np.dtype(np.uint8): "u8",
}  # fmt: skip

# agent states
_READY, _CTA, _MBAR, _DONE = "ready", "cta-barrier", "mbarrier", "done"


# ---------------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------------


@attrs.define(eq=False)
class InterpResult:
    """What a run produced and found.

    ``outputs`` holds every program parameter after the run (inputs included, as the kernels left
    them), ``buffers`` the program's intermediate buffers, both in host storage. ``stopped`` says a
    fatal finding ended the run before every launch finished.
    """

    outputs: dict[str, np.ndarray]
    buffers: dict[str, np.ndarray]
    findings: list[Finding]
    steps: int
    launches: int  # launches run to the end
    ctas: int  # CTAs run to the end
    stopped: bool
    seconds: float
    policy: str
    seed: int

    @property
    def ok(self) -> bool:
        """No findings at all."""
        return not self.findings

    @property
    def codes(self) -> list[str]:
        """The codes found, in order of first appearance, without repeats."""
        return list(dict.fromkeys(f.code.code for f in self.findings))

    def by_code(self, code: str) -> list[Finding]:
        return [f for f in self.findings if f.code.code == code]

    def diagnostics(self) -> list[Diagnostic]:
        return [f.to_diagnostic() for f in self.findings]

    def summary(self) -> str:
        state = "stopped early" if self.stopped else "ran to the end"
        found = ", ".join(f"{f.code.code}x{f.count}" for f in self.findings) or "nothing"
        return (
            f"{self.launches} launch(es), {self.ctas} CTA(s), {self.steps} operations in {self.seconds:.3f}s "
            f"({self.policy}, seed {self.seed}); {state}; found {found}"
        )


class _Stop(Exception):
    """A fatal finding: the run ends."""

    def __init__(self, finding: Finding) -> None:
        super().__init__(finding.message)
        self.finding = finding


# ---------------------------------------------------------------------------------------------------
# Per-operation facts, computed once per typed operation
# ---------------------------------------------------------------------------------------------------


@attrs.define(eq=False)
class _OpInfo:
    typed: TypedOpImpl
    prim: Primitive
    effects: tuple[Effect, ...]
    by_slot: dict[str, Effect]
    tiles: tuple[Effect, ...]
    waits: tuple[Effect, ...]
    inits: tuple[Effect, ...]
    signals: tuple[Effect, ...]  # arrive, expect_tx, arrive_expect_tx (after executing)
    completes: tuple[Effect, ...]  # complete_tx
    asynchronous: bool

    @classmethod
    def of(cls, typed: TypedOpImpl) -> _OpInfo:
        prim = typed.prim
        effects = tuple(prim.effects(typed))
        tiles = tuple(e for e in effects if e.tier in _TILES)
        bars = [e for e in effects if e.tier is Kind.BARRIER and e.barrier is not None]
        return cls(
            typed, prim, effects, {e.operand.slot.name: e for e in effects}, tiles,
            tuple(e for e in bars if e.barrier is BarrierAction.WAIT),
            tuple(e for e in bars if e.barrier is BarrierAction.INIT),
            tuple(e for e in bars if e.barrier in (BarrierAction.ARRIVE, BarrierAction.EXPECT_TX,
                                                   BarrierAction.ARRIVE_EXPECT_TX)),
            tuple(e for e in bars if e.barrier is BarrierAction.COMPLETE_TX),
            any(e.asynchronous for e in tiles),
        )  # fmt: skip

    @property
    def op(self) -> n.Op:
        return self.typed.op


def _accesses(e: Effect) -> tuple[str, ...]:
    if e.access is Access.READ:
        return ("read",)
    if e.access is Access.WRITE:
        return ("write",)
    if e.access is Access.READWRITE:
        return ("read", "write")
    return ()


# ---------------------------------------------------------------------------------------------------
# Agents and CTAs
# ---------------------------------------------------------------------------------------------------


@attrs.define(eq=False)
class _Group:
    open: list[Transfer] = attrs.field(factory=list)
    committed: collections.deque[list[Transfer]] = attrs.field(factory=collections.deque)


@attrs.define(eq=False)
class _Agent:
    """One role instance of one CTA."""

    comp: int
    role: RoleInfo
    instance: int
    env: dict[str, Any]
    cta: _Cta
    regs: dict[str, Store] = attrs.field(factory=dict)
    vc: VC = attrs.field(factory=dict)
    sync_clock: int = 0
    state: str = _READY
    wait: tuple[BarState, int, n.Op] | None = None
    blocked_op: n.Op | None = None
    waits: dict[tuple[str, int | None], int] = attrs.field(factory=dict)
    groups: dict[str, _Group] = attrs.field(factory=dict)
    gen: Iterator[Any] | None = None

    @property
    def who(self) -> str:
        if self.role.instances > 1:
            return f"role `{self.role.role.name}` instance {self.instance}"
        return f"role `{self.role.role.name}`"

    def tick(self) -> int:
        self.vc[self.comp] = self.vc.get(self.comp, 0) + 1
        return self.vc[self.comp]

    def actor(self, loc: Loc) -> Actor:
        return Actor(self.vc, self.comp, self.sync_clock, self.who, loc)

    def group(self, name: str) -> _Group:
        return self.groups.setdefault(name, _Group())


@attrs.define(eq=False)
class _Cta:
    model: KernelModel
    coords: tuple[tuple[str, int], ...]
    globals: dict[str, Store]
    shared: dict[str, Store]
    barriers: dict[str, list[BarState]]
    tracker: Tracker = attrs.field(factory=Tracker)
    agents: list[_Agent] = attrs.field(factory=list)
    next_comp: int = 0

    def new_comp(self) -> int:
        self.next_comp += 1
        return self.next_comp - 1


# ---------------------------------------------------------------------------------------------------
# The operand view primitives execute against
# ---------------------------------------------------------------------------------------------------


class ExecContext:
    """:class:`cake_core.ir.primitive.ExecContext` for one execution of one operation by one agent."""

    __slots__ = ("_run", "_agent", "_info", "_regions", "_transfer")

    def __init__(self, run: _Run, agent: _Agent, info: _OpInfo, regions: dict[str, Region],
                 transfer: Transfer | None) -> None:  # fmt: skip
        self._run, self._agent, self._info, self._regions, self._transfer = run, agent, info, regions, transfer

    def _region(self, slot: str) -> Region:
        try:
            return self._regions[slot]
        except KeyError:
            raise CakeInternalError(
                f"primitive `{self._info.prim.name}` accessed operand `{slot}`, which is not a tile operand "
                f"of this operation"
            ) from None

    def read(self, slot: str) -> np.ndarray:
        region = self._region(slot)
        overlays: list = []
        effect = self._info.by_slot.get(slot)
        if self._transfer is not None and effect is not None and effect.asynchronous:
            # an asynchronous unit sees what the earlier operations of its group wrote
            overlays = self._agent.cta.tracker.chain(self._transfer, region)
        missing, first = region.unwritten(overlays)
        if missing:
            self._run.uninitialized(self._agent, self._info, slot, region, missing, first)
        return region.read(overlays)

    def write(self, slot: str, value: np.ndarray) -> None:
        region = self._region(slot)
        try:
            part = region.storage_part(value)
        except ValueError as exc:
            raise CakeInternalError(
                f"primitive `{self._info.prim.name}` wrote a {np.shape(value)} value to operand `{slot}` "
                f"of shape {region.shape}: {exc}"
            ) from None
        effect = self._info.by_slot.get(slot)
        if self._transfer is not None and effect is not None and effect.asynchronous:
            self._transfer.values[id(region)] = part
        else:
            region.apply(part)

    def value(self, e: n.Expr) -> int | float:
        return self._run.eval(self._agent, e, self._info.op)  # type: ignore[return-value]

    def attr(self, key: str, default: Any = None) -> Any:
        e = self._info.typed.attr(key)
        spec = self._info.prim.signature.attr(key)
        if e is None:
            return default if default is not None else (spec.default if spec is not None else None)
        if (spec is not None and spec.kind == "word") or (
            isinstance(e, n.Name) and e.id not in self._agent.env and e.id not in WORDS
        ):
            return e.id if isinstance(e, n.Name) else self.value(e)
        v = self.value(e)
        if spec is not None and spec.kind == "float":
            return float(v)
        return v

    def masked(self, slot: str) -> bool:
        effect = self._info.by_slot.get(slot)
        return bool(effect is not None and effect.masked)

    def in_bounds(self, slot: str) -> np.ndarray:
        return self._region(slot).in_bounds()


# ---------------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------------


def run_program(
    checked: CheckedModule,
    inputs: Mapping[str, np.ndarray],
    sizes: Mapping[str, int | str],
    *,
    seed: int = 0,
    policy: str = "random",
    max_steps: int = DEFAULT_MAX_STEPS,
    switch: float = 0.3,
    sms: int | None = None,
) -> InterpResult:
    """Run ``checked``'s program on ``inputs`` at ``sizes``; see the module docstring for the semantics.

    ``inputs`` maps program parameter names to host arrays (``bf16`` as ``uint16`` bits; a float array
    for a ``bf16``/``f16`` parameter is rounded to it). ``sizes`` gives the program's sizes and type
    variables (``{"B": 2, "N": 130, "K": 37, "D": 64, "T": "bf16"}``); sizes and type variables it
    leaves out are taken from the input arrays' shapes and storage types. ``max_steps`` bounds the
    operations executed over the whole run; ``switch`` is the chance, under the random policy, of
    switching agents after an operation. ``sms`` is the target constant ``SMS`` (multiprocessors) for
    kernels checked without a target: ``sms``, else ``sizes["SMS"]``, else :data:`DEFAULT_SMS`.
    """
    if policy not in POLICIES:
        raise CakeUserError(f"unknown scheduling policy `{policy}` (choices: {', '.join(POLICIES)})")
    if not checked.ok:
        raise DiagnosticError([d for d in checked.diagnostics if d.is_error])
    run = _Run(checked, seed, policy, max_steps, switch)
    run.sms = int(sms) if sms is not None else int(sizes.get("SMS", DEFAULT_SMS))
    return run.program(inputs, sizes)


class _Run:
    def __init__(self, checked: CheckedModule, seed: int, policy: str, max_steps: int, switch: float) -> None:
        self.checked = checked
        self.seed, self.policy, self.max_steps, self.switch = seed, policy, max_steps, switch
        self.rng = np.random.default_rng(seed)
        self.steps = 0
        self.ctas_done = 0
        self.findings: dict[tuple, Finding] = {}
        self.infos: dict[int, _OpInfo] = {}
        self.sms = DEFAULT_SMS
        # where we are, for findings
        self.kernel: str | None = None
        self.coords: tuple[tuple[str, int], ...] = ()

    # -- program ------------------------------------------------------------------------------------

    def program(self, inputs: Mapping[str, np.ndarray], sizes: Mapping[str, int | str]) -> InterpResult:
        start = time.perf_counter()
        prog = self.checked.module.entry
        env = _program_env(prog, inputs, sizes)
        stores: dict[str, Store] = {}
        for p in prog.params:
            if p.tier != "global":
                raise CakeUserError(f"program parameter `{p.name}` is a scalar; the interpreter runs tensors only")
            dtype = _dtype(p.dtype, env, p.name)
            shape = _shape(p.shape, env, p.name)
            if p.name in inputs:
                data = _host_array(p.name, inputs[p.name], dtype, shape)
                stores[p.name] = Store.of(p.name, Kind.GLOBAL, dtype, data)
            else:
                stores[p.name] = Store.poisoned(p.name, Kind.GLOBAL, dtype, shape)
        for b in prog.buffers:
            dtype = _dtype(b.dtype, env, b.name)
            stores[b.name] = Store.poisoned(b.name, Kind.GLOBAL, dtype, _shape(b.shape, env, b.name))
        launches = 0
        stopped = False
        try:
            for lm in self.checked.launches:
                self.launch(lm, env, stores)
                launches += 1
        except _Stop as stop:
            self.report(stop.finding)
            stopped = True
        return InterpResult(
            {p.name: stores[p.name].data for p in prog.params},
            {b.name: stores[b.name].data for b in prog.buffers},
            list(self.findings.values()), self.steps, launches, self.ctas_done, stopped,
            time.perf_counter() - start, self.policy, self.seed,
        )  # fmt: skip

    def launch(self, lm: LaunchModel, env: dict[str, int | str], stores: dict[str, Store]) -> None:
        k = lm.kernel
        spec = kernel_spec(lm, env)
        model = self.checked.models.get((k.name, spec)) if spec is not None else None
        if model is None:
            raise CakeUserError(
                f"kernel `{k.name}` has no specialization for the sizes of this run "
                f"({', '.join(f'{a}={b}' for a, b in env.items())})"
            )
        kenv: dict[str, Any] = {"SMS": self.sms}
        for name, expr in lm.sizes.items():
            try:
                kenv[name] = evaluate(expr, env)
            except EvalError as exc:
                raise CakeUserError(f"size `{name}` of kernel `{k.name}` cannot be evaluated: {exc}") from None
        kenv.update(model.env)
        _check_domain(k.domain, kenv, f"kernel `{k.name}`")
        globals_: dict[str, Store] = {}
        for p, arg in zip(k.params, lm.launch.args, strict=True):
            store = stores[arg]
            declared = _shape(p.shape, kenv, p.name)
            if declared != store.shape:
                raise CakeUserError(
                    f"`{arg}` has shape {list(store.shape)}, parameter `{p.name}` of `{k.name}` declares "
                    f"{list(declared)}"
                )
            globals_[p.name] = store
        written = set()
        for typed in model.ops:
            for e in self.info(typed).tiles:
                if e.tier is Kind.GLOBAL and e.access in (Access.WRITE, Access.READWRITE):
                    written.add(e.operand.name)
        for name, store in globals_.items():
            store.tracked = name in written
        self.kernel = k.name
        extents = []
        for e in k.grid.extents:
            v = evaluate(e, kenv)
            extents.append(int(v))
        for rev in itertools.product(*[range(x) for x in reversed(extents)]):
            coords = tuple(zip(k.grid.vars, reversed(rev), strict=True))
            self.coords = coords
            self.cta(model, kenv, globals_, coords)
            self.ctas_done += 1
        for store in globals_.values():
            store.tracked = False
        self.coords = ()

    # -- CTA ----------------------------------------------------------------------------------------

    def cta(self, model: KernelModel, kenv: dict[str, Any], globals_: dict[str, Store],
            coords: tuple[tuple[str, int], ...]) -> None:  # fmt: skip
        shared = {
            name: Store.poisoned(name, Kind.SHARED, info.dtype, info.shape, info.stages)
            for name, info in model.smem.items()
        }
        barriers = {
            name: [BarState(name, s if info.stages is not None else None, info.count) for s in range(info.stages or 1)]
            for name, info in model.barriers.items()
        }
        cta = _Cta(model, coords, globals_, shared, barriers)
        base = dict(kenv)
        base.update(coords)
        for info in model.roles:
            for inst in range(info.instances):
                env = dict(base)
                env["self"] = inst
                a = _Agent(cta.new_comp(), info, inst, env, cta)
                a.gen = self.body(a, info.role.body)
                cta.agents.append(a)
        self.schedule(cta)

    def schedule(self, cta: _Cta) -> None:
        agents = cta.agents
        current: _Agent | None = None
        while True:
            live = [a for a in agents if a.state != _DONE]
            if not live:
                break
            runnable = [a for a in live if a.state == _READY or (a.state == _MBAR and a.wait is not None
                                                                 and a.wait[0].ready(a.wait[1]))]  # fmt: skip
            machine = [t for t in cta.tracker.inflight if t.group is None or t.tx_barriers]
            if not runnable and not machine:
                raise _Stop(self.deadlock(cta))
            if self.policy == "sequential":
                if runnable:
                    self.step(cta, runnable[0])
                else:
                    self.complete(cta, machine[0])
                continue
            if current is not None and current in runnable and self.rng.random() >= self.switch:
                self.step(cta, current)
                continue
            options = len(runnable) + (1 if machine else 0)
            pick = int(self.rng.integers(options))
            if pick < len(runnable):
                current = runnable[pick]
                self.step(cta, current)
            else:
                self.complete(cta, machine[int(self.rng.integers(len(machine)))])
        for t in [t for t in cta.tracker.inflight if t.group is None or t.tx_barriers]:
            self.complete(cta, t)

    def step(self, cta: _Cta, a: _Agent) -> None:
        a.state = _READY
        assert a.gen is not None
        try:
            next(a.gen)
        except StopIteration:
            self.finish(a)
            return
        if a.state == _CTA and all(b.state == _CTA for b in cta.agents):
            joined: VC = {}
            for b in cta.agents:
                join(joined, b.vc)
            for b in cta.agents:
                b.vc = dict(joined)
                b.sync_clock = b.tick()
                b.state = _READY
                b.blocked_op = None

    def finish(self, a: _Agent) -> None:
        """An agent ran off the end of its role: its asynchronous groups complete."""
        t = a.tick()
        for g in a.groups.values():
            while g.committed:
                for tr in g.committed.popleft():
                    self.land(a, tr, t)
            for tr in g.open:
                self.land(a, tr, t)
            g.open = []
        a.state = _DONE

    def land(self, a: _Agent, tr: Transfer, clock: int) -> None:
        """A transfer of ``a``'s group completes at ``a``'s group wait (or exit), in ``a``'s program order.

        Its writes are ``a``'s at ``clock``: other threads of the instance see them after a CTA
        barrier. A transfer that also signals a barrier keeps its own epoch, which ``a`` acquires here.
        """
        self.complete(a.cta, tr, a.comp, clock)
        if tr.tx_barriers:
            join(a.vc, tr.vc)

    def complete(self, cta: _Cta, tr: Transfer, comp: int | None = None, clock: int = 1) -> None:
        """A transfer lands: its writes apply and are recorded, its barriers get their bytes.

        A transfer of a group that signals a barrier may have landed before its group wait (the
        machine completes it so the barrier can move); the wait then finds it done.
        """
        if tr.done:
            return
        tr.done = True
        if comp is None or tr.tx_barriers:
            # the copy's own epoch: a barrier it signals passes it on to the waiters
            comp, clock = tr.comp, 1
        for region in tr.writes:
            part = tr.values.get(id(region))
            if part is not None:
                region.apply(part)
            cta.tracker.record(region, "write", comp, clock, tr.loc, tr.who, tr.op_name)
        for region in tr.reads:
            cta.tracker.record(region, "read", comp, clock, tr.loc, tr.who, tr.op_name)
        cta.tracker.inflight.remove(tr)
        for bar, nbytes in tr.tx_barriers:
            bar.complete_tx(nbytes, tr.vc)

    # -- bodies -------------------------------------------------------------------------------------

    def body(self, a: _Agent, body: tuple[n.Stmt, ...]) -> Iterator[None]:
        for s in body:
            if isinstance(s, n.Op):
                yield from self.op(a, s)
            elif isinstance(s, n.Let):
                a.env[s.name] = self.eval(a, s.value, s)
            elif isinstance(s, n.RegDecl):
                info = a.cta.model.regs[s.name]
                a.regs[s.name] = Store.poisoned(s.name, Kind.REGISTERS, info.dtype, info.shape, owner=a.who)
            elif isinstance(s, n.For):
                lo = self.eval(a, s.start, s)
                hi = self.eval(a, s.stop, s)
                step = self.eval(a, s.step, s) if s.step is not None else 1
                if step == 0:
                    raise _Stop(self.finding(codes.BAD_VALUE, s.loc, f"the loop over `{s.var}` has step 0",
                                             a, fatal=True))  # fmt: skip
                for v in range(int(lo), int(hi), int(step)):
                    a.env[s.var] = v
                    yield from self.body(a, s.body)
            elif isinstance(s, n.If):
                yield from self.body(a, s.then if self.eval(a, s.cond, s) else s.orelse)

    def eval(self, a: _Agent, e: n.Expr, where: Any) -> Any:
        try:
            return evaluate(e, a.env)
        except EvalError as exc:
            loc = exc.expr.loc if exc.expr.loc.line else getattr(where, "loc", UNKNOWN)
            raise _Stop(self.finding(codes.BAD_VALUE, loc, f"cannot evaluate this at run time: {exc}", a,
                                     fatal=True)) from None  # fmt: skip

    def effect_value(self, a: _Agent, e: n.Expr, op: n.Op) -> Any:
        """An effect's ``arrivals`` or ``amount``, with ``THREADS`` the threads of ``a``'s role instance."""
        if "THREADS" in a.env:
            return self.eval(a, e, op)
        a.env["THREADS"] = a.role.per * 32
        try:
            return self.eval(a, e, op)
        finally:
            del a.env["THREADS"]

    def info(self, typed: TypedOpImpl) -> _OpInfo:
        info = self.infos.get(id(typed))
        if info is None:
            info = self.infos[id(typed)] = _OpInfo.of(typed)
        return info

    # -- one operation ------------------------------------------------------------------------------

    def op(self, a: _Agent, op: n.Op) -> Iterator[None]:
        cta = a.cta
        info = self.info(cta.model.typed(op))
        prim = info.prim
        self.steps += 1
        if self.steps > self.max_steps:
            raise _Stop(self.finding(
                codes.STEP_LIMIT, op.loc, f"the run exceeded its bound of {self.max_steps} operations", a,
                fatal=True, help="run smaller shapes, or pass a larger `max_steps`",
            ))  # fmt: skip

        # 1. mbarrier waits
        for e in info.waits:
            bar = self.barrier(a, e.operand, op)
            key = (bar.name, bar.stage)
            k = a.waits.get(key, 0)
            if e.amount is not None:
                parity = int(self.effect_value(a, e.amount, op)) & 1
            else:
                parity = k & 1
                if bar.completed >= k + 2:
                    self.report(self.finding(
                        codes.PHASE_OVERRUN, op.loc,
                        f"{bar.label} has completed {bar.completed} phases, but this is wait number {k + 1} of "
                        f"{a.who} on it: the barrier ran two phases ahead and the wait cannot tell",
                        a, label="waits here", help="wait on the slot's `empty` barrier before refilling it",
                    ))  # fmt: skip
            if not bar.ready(parity):
                a.state, a.wait = _MBAR, (bar, parity, op)
                yield None
                a.wait = None
            join(a.vc, bar.done_vc)
            a.waits[key] = k + 1

        # 2. CTA barrier
        if prim.cta_barrier:
            a.state, a.blocked_op = _CTA, op
            yield None

        t = a.tick()

        # 3. group wait
        if prim.group_wait is not None:
            pending_e = op.attr("pending")
            pending = int(self.eval(a, pending_e, op)) if pending_e is not None else 0
            g = a.group(prim.group_wait)
            while len(g.committed) > max(pending, 0):
                for tr in g.committed.popleft():
                    self.land(a, tr, t)

        for e in info.inits:
            bar = self.barrier(a, e.operand, op)
            declared = cta.model.barriers[bar.name].count
            bar.init(int(self.effect_value(a, e.arrivals, op)) if e.arrivals is not None else declared)

        # 4. regions, bounds, races
        regions: dict[str, Region] = {}
        for e in info.tiles:
            region = self.region(a, e.operand, op)
            self.bounds(a, info, e, region)
            regions[e.operand.slot.name] = region
        transfer: Transfer | None = None
        if info.asynchronous:
            comp = cta.new_comp()
            vc = dict(a.vc)
            vc[comp] = 1
            transfer = Transfer(comp, a, op.name, op.loc, a.who, vc, a.sync_clock, prim.group)
        actor = a.actor(op.loc)
        for e in info.tiles:
            region = regions[e.operand.slot.name]
            for access in _accesses(e):
                for c in cta.tracker.check(actor, region, access, transfer, e.asynchronous, atomic=e.atomic):
                    self.race(a, info, c, e.operand.expr.loc)

        # 5. execute
        try:
            prim.execute(info.typed, ExecContext(self, a, info, regions, transfer))
        except NotImplementedError as exc:
            raise _Stop(self.finding(codes.NO_SEMANTICS, op.loc, f"`{op.name}` cannot run on the CPU: {exc}", a,
                                     fatal=True))  # fmt: skip
        except ExecFault as exc:
            # a data-dependent fault (a scatter index outside its tensor): the GPU would fault here
            raise _Stop(self.finding(codes.OUT_OF_BOUNDS, op.loc, f"`{op.name}`: {exc}", a, fatal=True,
                                     label="index outside the tensor"))  # fmt: skip

        for e in info.tiles:
            region = regions[e.operand.slot.name]
            if e.asynchronous and transfer is not None:
                if e.access in (Access.WRITE, Access.READWRITE):
                    transfer.writes.append(region)
                    transfer.nbytes += region.nbytes
                if e.access in (Access.READ, Access.READWRITE):
                    transfer.reads.append(region)
            else:
                for access in _accesses(e):
                    cta.tracker.record(region, access, a.comp, t, op.loc, a.who, op.name, atomic=e.atomic)
        if transfer is not None:
            for e in info.completes:
                nbytes = int(self.effect_value(a, e.amount, op)) if e.amount is not None else transfer.nbytes
                transfer.tx_barriers.append((self.barrier(a, e.operand, op), nbytes))
            cta.tracker.inflight.append(transfer)
            if prim.group is not None:
                a.group(prim.group).open.append(transfer)

        # 6. barrier signals
        for e in info.signals:
            bar = self.barrier(a, e.operand, op)
            if e.barrier in (BarrierAction.EXPECT_TX, BarrierAction.ARRIVE_EXPECT_TX):
                if e.amount is not None:
                    nbytes = int(self.effect_value(a, e.amount, op))
                else:
                    nbytes = transfer.nbytes if transfer is not None else 0
                bar.expect(nbytes)
            if e.barrier in (BarrierAction.ARRIVE, BarrierAction.ARRIVE_EXPECT_TX):
                count = int(self.effect_value(a, e.arrivals, op)) if e.arrivals is not None else 1
                bar.arrive(a.vc, a.who, count)

        # 7. group commit
        if prim.group_commit is not None:
            g = a.group(prim.group_commit)
            g.committed.append(g.open)
            g.open = []

        yield None

    # -- operands -----------------------------------------------------------------------------------

    def region(self, a: _Agent, o: Operand, op: n.Op) -> Region:
        cta = a.cta
        name = o.name or ""
        if o.kind is Kind.GLOBAL:
            store = cta.globals[name]
        elif o.kind is Kind.SHARED:
            store = cta.shared[name]
        else:
            store = a.regs.get(name)  # type: ignore[assignment]
            if store is None:
                info = cta.model.regs[name]
                store = a.regs[name] = Store.poisoned(name, Kind.REGISTERS, info.dtype, info.shape, owner=a.who)
        lo: list[int] = []
        size: list[int] = []
        keep: list[bool] = []
        dims = store.shape
        first = 0
        if store.stages is not None:
            first = 1
            if o.stage is not None:
                lo.append(int(self.eval(a, o.stage, op)))
                size.append(1)
                keep.append(False)
            else:
                lo.append(0)
                size.append(store.stages)
                keep.append(True)
        for d in range(first, len(dims)):
            i = d - first
            item = o.index[i] if i < len(o.index) else None
            if isinstance(item, n.At):
                lo.append(int(self.eval(a, item.expr, op)))
                size.append(1)
                keep.append(False)
            elif isinstance(item, n.Span):
                lo.append(int(self.eval(a, item.start, op)))
                size.append(max(int(self.eval(a, item.size, op)), 0))
                keep.append(True)
            else:
                lo.append(0)
                size.append(dims[d])
                keep.append(True)
        return Region(store, tuple(lo), tuple(size), tuple(keep))

    def barrier(self, a: _Agent, o: Operand, op: n.Op) -> BarState:
        states = a.cta.barriers[o.name or ""]
        stage = int(self.eval(a, o.stage, op)) if o.stage is not None else 0
        if not 0 <= stage < len(states):
            raise _Stop(self.finding(
                codes.OUT_OF_BOUNDS, o.expr.loc,
                f"`{op.name}` uses stage {stage} of the barrier ring `{o.name}`, which has {len(states)} stage(s)",
                a, label="stage out of range", fatal=True,
            ))  # fmt: skip
        return states[stage]

    def bounds(self, a: _Agent, info: _OpInfo, e: Effect, region: Region) -> None:
        """An unmasked access outside the store (or any access to a stage outside a ring) faults."""
        store = region.store
        bad_stage = store.stages is not None and not 0 <= region.lo[0] < store.stages
        if not region.oob or (e.masked and not bad_stage):
            return
        op = info.op
        what = {Access.READ: "read", Access.WRITE: "write", Access.READWRITE: "access"}.get(e.access, "access")
        parts = []
        first = 0
        if store.stages is not None:
            first = 1
            if bad_stage:
                parts.append(f"stage {region.lo[0]} of a {store.stages}-stage ring")
        for d in range(first, len(store.shape)):
            lo, size, ext = region.lo[d], region.size[d], store.shape[d]
            if lo < 0 or lo + size > ext:
                idx = str(lo) if size == 1 and not region.keep[d] else f"{lo}..{lo + size - 1}"
                parts.append(f"index {idx} of dimension {d - first} (extent {ext})")
        slot = e.operand.slot
        help_ = None
        if slot.mask_attr is not None and not bad_stage:
            spec = info.prim.signature.attr(slot.mask_attr)
            choice = next((c for c in (spec.choices if spec else ()) if c != "none"), None)
            if choice is not None:
                help_ = (f"if the edge tile is meant to be partial, mask it with `{slot.mask_attr}={choice}`; "
                         "otherwise fix the tile's offset")  # fmt: skip
        tier = {Kind.GLOBAL: "global tensor", Kind.SHARED: "shared buffer", Kind.REGISTERS: "register tile"}[store.kind]
        raise _Stop(self.finding(
            codes.OUT_OF_BOUNDS, e.operand.expr.loc,
            f"out-of-bounds {what} of {region.text()} by `{op.name}`: " + "; ".join(parts) +
            f" of the {tier} `{store.name}` {list(store.shape[first:])}",
            a, label="outside the tensor", fatal=True, help=help_,
            notes=(f"operand `{slot.name}` of `{op.name}` is not masked: a GPU faults here",),
        ))  # fmt: skip

    # -- findings -----------------------------------------------------------------------------------

    def finding(self, code: Any, loc: Loc, message: str, a: _Agent | None = None, **kw: Any) -> Finding:
        return Finding(code, message, loc, kernel=self.kernel, cta=self.coords, agent=a.who if a else None, **kw)

    def report(self, f: Finding) -> None:
        key = f.key()
        if key in self.findings:
            self.findings[key].count += 1
        else:
            self.findings[key] = f

    def uninitialized(self, a: _Agent, info: _OpInfo, slot: str, region: Region, missing: int,
                      first: tuple[int, ...] | None) -> None:  # fmt: skip
        store = region.store
        tier = {Kind.GLOBAL: "global tensor", Kind.SHARED: "shared buffer", Kind.REGISTERS: "register tile"}[store.kind]
        total = int(np.count_nonzero(region.in_bounds()))
        self.report(self.finding(
            codes.UNINITIALIZED, info.typed.operand(slot).expr.loc,
            f"`{info.op.name}` reads {region.text()} ({tier}): {missing} of its {total} elements were never "
            f"written (the first at {list(first) if first else '?'})",
            a, label="reads undefined elements",
        ))  # fmt: skip

    def race(self, a: _Agent, info: _OpInfo, c: Conflict, loc: Loc) -> None:
        op = info.op
        where = region_text(c.store, c.box)
        by = f"`{op.name}` ({a.who})"
        if c.transfer is not None:
            t = c.transfer
            copy = all(w.store.kind is not Kind.REGISTERS for w in t.writes)
            if c.kind == "pending-write" and c.access == "read" and copy:
                msg = (f"read of {where} by {by} before its copy completed: the `{t.op_name}` issued by {t.who} "
                       f"at line {t.loc.line} is still in flight")  # fmt: skip
                label, other = "read before the copy completed", "the copy, still in flight"
                help_ = ("wait for the copy first: for its asynchronous group (fewer groups `pending`), or for "
                         "the barrier phase it completes")  # fmt: skip
            elif c.kind == "pending-write" and c.access == "read":
                msg = (f"read of {where} by {by} before the asynchronous `{t.op_name}` that writes it completed: "
                       f"issued by {t.who} at line {t.loc.line}, it is still in flight")  # fmt: skip
                label, other = "read before the asynchronous write completed", "still in flight"
                help_ = "wait for its asynchronous group first (fewer groups `pending`)"
            elif c.kind == "pending-write":
                msg = (f"write of {where} by {by} while the asynchronous `{t.op_name}` issued by {t.who} at line "
                       f"{t.loc.line} still writes it")  # fmt: skip
                label, other = "write during an asynchronous write", "still in flight"
                help_ = "wait for the asynchronous operation to complete before writing the region"
            else:
                msg = (f"write of {where} by {by} while the asynchronous `{t.op_name}` issued by {t.who} at line "
                       f"{t.loc.line} still reads it")  # fmt: skip
                label, other = "write during an asynchronous read", "the asynchronous read, still in flight"
                help_ = "wait for the asynchronous operation to complete before overwriting what it reads"
            secondary = (Label(t.loc, other),)
            notes: tuple[str, ...] = ()
        else:
            r = c.other
            assert r is not None
            same = r.comp == a.comp
            if c.kind == "raw":
                msg = f"read of {where} by {by} is not ordered after its write by `{r.op}` ({r.who}, line {r.loc.line})"
                label, other = "unordered read", "the write"
                help_ = ("put a CTA barrier (`bar.sync`) between the write and the read" if same else
                         "make the reader wait on a barrier phase the writer completes after writing")  # fmt: skip
            elif c.kind == "war":
                msg = (f"write of {where} by {by} may overwrite it before `{r.op}` ({r.who}, line {r.loc.line}) "
                       "has read it (overwrite before empty)")  # fmt: skip
                label, other = "overwrite before empty", "the read"
                help_ = ("put a CTA barrier (`bar.sync`) between the read and the write" if same else
                         "make the writer wait on a barrier phase the reader completes after reading")  # fmt: skip
            else:
                msg = f"write of {where} by {by} is not ordered with the write by `{r.op}` ({r.who}, line {r.loc.line})"
                label, other = "unordered writes", "the other write"
                help_ = "order the two writes with a barrier"
            secondary = (Label(r.loc, other),)
            notes = (("the threads of one role instance are ordered among themselves only by a CTA barrier: "
                      "one operation's shared-memory data reaches another operation's threads after `bar.sync`",)
                     if same else ())  # fmt: skip
        self.report(self.finding(codes.RACE, loc, msg, a, label=label, secondary=secondary, notes=notes, help=help_))

    def deadlock(self, cta: _Cta) -> Finding:
        lines: list[str] = []
        secondary: list[Label] = []
        primary: Loc | None = None
        finished = [a for a in cta.agents if a.state == _DONE]
        for a in cta.agents:
            if a.state == _MBAR and a.wait is not None:
                bar, parity, op = a.wait
                lines.append(f"{a.who} waits on {bar.label} for the phase of parity {parity} ({bar.state_text()})")
                secondary.append(Label(op.loc, f"{a.who} waits on {bar.label}"))
                primary = primary or op.loc
            elif a.state == _CTA and a.blocked_op is not None:
                lines.append(f"{a.who} waits at `{a.blocked_op.name}` for every role of the CTA")
                secondary.append(Label(a.blocked_op.loc, f"{a.who} waits here"))
                primary = primary or a.blocked_op.loc
        for a in finished:
            lines.append(f"{a.who} has finished")
        notes = []
        if finished and any(a.state == _CTA for a in cta.agents):
            notes.append("a CTA barrier needs every warp of the CTA; a role that has finished never arrives")
        blocked_roles = ", ".join(dict.fromkeys(a.who for a in cta.agents if a.state in (_MBAR, _CTA)))
        return Finding(
            codes.DEADLOCK, f"deadlock: {blocked_roles} can never go on — " + "; ".join(lines),
            primary or cta.model.kernel.loc,
            label="blocked forever", secondary=tuple(secondary[1:]), notes=tuple(notes),
            kernel=self.kernel, cta=self.coords, fatal=True,
            help="every phase a role waits for needs its arrivals (the barrier's `count`) and its transaction bytes",
        )  # fmt: skip


# ---------------------------------------------------------------------------------------------------
# Program sizes and host arrays
# ---------------------------------------------------------------------------------------------------


def _program_env(
    prog: n.Program, inputs: Mapping[str, np.ndarray], sizes: Mapping[str, int | str]
) -> dict[str, int | str]:
    """The program's sizes and type variables: ``sizes``, then what the input arrays' shapes and storage
    types tell; the program's domain must hold."""
    env: dict[str, int | str] = {}
    for k, v in sizes.items():
        env[k] = v if isinstance(v, str) else int(v)
    for p in prog.params:
        if p.name not in inputs or p.tier != "global":
            continue
        arr = np.asarray(inputs[p.name])
        if p.dtype not in DTYPE_NAMES and p.dtype not in env and arr.dtype in _STORAGE_TO_DTYPE:
            env[p.dtype] = _STORAGE_TO_DTYPE[arr.dtype]
        if arr.ndim == len(p.shape):
            for e, actual in zip(p.shape, arr.shape, strict=True):
                if isinstance(e, n.Name) and e.id not in env:
                    env[e.id] = int(actual)
    _check_domain(prog.domain, env, f"program `{prog.name}`")
    return env


def _check_domain(domain: tuple[n.Constraint, ...], env: Mapping[str, Any], what: str) -> None:
    for c in domain:
        if c.var not in env:
            raise CakeUserError(f"{what} needs the size `{c.var}`")
        v = env[c.var]
        if c.op == "in":
            allowed = [x.id if isinstance(x, n.Name) else evaluate(x, env) for x in c.values]
            if v not in allowed:
                raise CakeUserError(f"{what}: `{c.var}` = {v} is outside its domain {{{', '.join(map(str, allowed))}}}")
        elif c.op in (">=", "<="):
            bound = evaluate(c.values[0], env)
            if (v < bound) if c.op == ">=" else (v > bound):  # type: ignore[operator]
                raise CakeUserError(f"{what}: `{c.var}` = {v} violates `{c.var} {c.op} {bound}`")
        elif c.op == "%":
            m = evaluate(c.values[0], env)
            if m and v % m:  # type: ignore[operator]
                raise CakeUserError(f"{what}: `{c.var}` = {v} is not a multiple of {m}")


def _dtype(name: str, env: Mapping[str, Any], what: str) -> DType:
    resolved = env.get(name, name) if name not in DTYPE_NAMES else name
    if resolved not in DTYPE_NAMES:
        raise CakeUserError(f"the element type `{name}` of `{what}` is not given (pass it in `sizes`)")
    return DType(resolved)


def _shape(shape: tuple[n.Expr, ...], env: Mapping[str, Any], what: str) -> tuple[int, ...]:
    out = []
    for e in shape:
        try:
            out.append(int(evaluate(e, env)))
        except EvalError as exc:
            raise CakeUserError(f"the shape of `{what}` needs {exc}") from None
    return tuple(out)


def _host_array(name: str, arr: np.ndarray, dtype: DType, shape: tuple[int, ...]) -> np.ndarray:
    a = np.asarray(arr)
    if tuple(a.shape) != shape:
        raise CakeUserError(f"input `{name}` has shape {list(a.shape)}, the program expects {list(shape)}")
    want = storage_dtype(dtype)
    if a.dtype == want:
        return a.copy()
    if a.dtype.kind == "f" and dtype.is_float:
        return encode(a, dtype)
    if a.dtype.kind in "iu" and not dtype.is_float:
        return a.astype(want)
    raise CakeUserError(f"input `{name}` holds {a.dtype}, the program expects `{dtype}` ({want} storage)")

