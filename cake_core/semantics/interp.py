"""The CPU reference interpreter of Cake IR: runs a checked program on small shapes, on logical tiles.

This module runs a program's launches, CTAs and operations; the model it runs on is shared with the
verifier's protocol replay (:mod:`cake_core.semantics.engine`, :mod:`~cake_core.semantics.barriers`,
:mod:`~cake_core.semantics.clocks`, :mod:`~cake_core.semantics.boxes`); operand regions, scheduling,
races and the words of findings have modules of their own.

Semantics
---------
**Program.** Program parameters bind to the caller's arrays by name (copied: the caller's arrays are
never written); parameters the caller leaves out (outputs) and program buffers are allocated
poisoned. The sizes (and type variables, ``T -> "bf16"``) select the program's specialization and,
through each launch's bindings, each kernel's (:func:`cake_core.ir.program.kernel_spec`). Launches run in
order; a fatal finding (a fault, a deadlock, the step bound) ends the run, as a dead GPU context ends
every launch after it.
At the end of a run that no fatal finding stopped, each program parameter some kernel wrote and the
caller did not pass in must be written everywhere: elements no store touched are CS010, at the grid or
loop of the last kernel writing it that should have covered them (:func:`cake_core.ir.holes.site`).

**Launch.** Every CTA of the grid runs in turn, the first grid variable varying fastest. CTAs are
independent here: nothing orders them on a GPU either, and the interpreter does not look for races
between CTAs — except those of one thread-block cluster (``cta ... cluster (C)``: ``C`` consecutive
CTAs along the first grid variable, ``crank`` each one's rank), which run together under one scheduler
with one clock numbering and race tracker; a multicast copy lands, and a cluster arrival arrives, in
every member (:mod:`cake_core.semantics.cluster`).

**CTA.** Each role instance runs the role's body on logical tiles: ``self`` is the instance index;
grid variables, runtime sizes, constants, loop variables and ``let`` values are plain integers
(expressions compiled once, :func:`cake_core.ir.exprs.compile_expr`). Register tiles are
per-instance arrays of their declared shape, poisoned at each execution of their declaration; shared
buffers and the regions of plugin tiers (``tmem acc: f32[128, 128]``) are per-CTA arrays; global
tensors are the host arrays. Values are rounded to the element type whenever they are stored.

**Operations.** An operation's primitive says what it does through its declared effects; the
interpreter never looks at primitive names. Per execution, in order:

1. waits (``BarrierAction.WAIT``): block until the barrier phase of the wanted parity completes —
   the effect's ``amount`` when the primitive gives one, else the parity of the instance's own count of
   waits on that barrier stage (the derived phase bit);
2. a CTA barrier (``cta_barrier``): block until every instance of the CTA has arrived; a cluster
   barrier (``cluster_barrier``): until every instance of every CTA of the cluster has;
3. a group wait (``group_wait = G``): complete, in order, all but the ``pending`` most recent
   committed groups ``G`` of this instance;
4. resolve every tile operand to a region; an unmasked access outside its tensor is a fault (CS001)
   that stops the run; check the accesses for races (CS003);
5. ``execute`` through :class:`ExecContext`; a read of never-written elements is CS002; a fault that
   depends on data (:class:`~cake_core.ir.primitive.ExecFault`: a scatter index outside its tensor)
   is CS001 and stops the run. Writes
   through ``asynchronous`` effects are held in a *transfer* (values as at issue) instead of landing:
   in the instance's open group ``G`` when the primitive has ``group = G`` (it lands at the group wait);
   otherwise in flight until the machine completes it. A transfer signals every barrier operand with
   ``complete_tx`` when it lands (such a transfer the machine may complete before its group wait).
   The operations of one instance's group are processed in issue order by one asynchronous unit: an
   asynchronous read sees what earlier in-flight operations of the group wrote (a chain of ``wgmma``
   on one accumulator), and they do not race with each other;
6. barrier actions: ``init`` (before executing; the effect's ``arrivals`` is the new count, else the
   declared one), ``expect_tx`` (the effect's ``amount`` in bytes, else the bytes of the operation's own
   asynchronous writes), ``arrive`` (the effect's ``arrivals``, 1 when it gives none),
   ``arrive_expect_tx`` (both). ``complete_tx`` signals the effect's ``amount``, else the transfer's
   bytes. Effect expressions are evaluated where the operation runs, with ``THREADS`` bound to the
   threads of the role instance;
7. ``group_commit = G`` closes the open group ``G``;
8. the primitive's binds (:meth:`~cake_core.ir.primitive.Primitive.binds`) are assigned in order: the
   stage a pipe operation took, and its pipe's counter (every instance starts each at 0).

When an instance finishes, its open and committed groups complete; copies still in flight when every
instance has finished complete at the end of the CTA.

**Scheduling** (:mod:`cake_core.semantics.scheduler`). ``policy="sequential"`` always runs the
lowest-numbered instance that can run and lets the machine complete in-flight copies only when no
instance can. ``policy="random"`` picks, after every operation, whether to keep running the same
instance or to switch to a random runnable one (or to complete a random in-flight copy), from a
seeded generator: producers run ahead and consumers lag. When no instance can run and no copy is in
flight, the CTA is deadlocked (CS004): the finding names every blocked role instance and what it
waits on. Races are found by happens-before
(:mod:`cake_core.semantics.races`), not by luck of the interleaving: a missing synchronization is
found under either policy, though what goes wrong after it (wrong values, a deadlock) may differ.
The threads of one role instance are ordered among themselves only by CTA barriers, so shared data
one operation of an instance writes reaches its other operations after a ``bar.sync``.

**Sizes.** ``SMS`` (the target's multiprocessor count, for persistent grids) is the checked model's
when it was checked for a target (asking for another is an error), else the caller's
(:data:`DEFAULT_SMS` when not given): :func:`~cake_core.semantics.binding.run_sms`.

Where this differs from a GPU
-----------------------------
* One instance stands for all its threads, each accessing its part of every tile. An mbarrier
  arrival counts the arrivals its effect declares all at once. When every thread arrives (or the
  effect declares no ``arrivals``: the instance arrives as a whole) it releases everything the
  instance did before it; when fewer do (one elected thread, ``per=instance``), only
  what the instance did before its last CTA barrier, what it acquired by waits, and its asynchronous
  operations — so another instance's access after the arrival races with the other threads' accesses
  (CS003 names the threads). The elected thread's own accesses since the barrier are left out too:
  no operation says which thread is elected, and no primitive accesses memory from one thread alone
  but asynchronous copies (their own components).
* A *collective* asynchronous operation (a primitive declaring ``collective`` or ``warpgroup = True``)
  is one unit's for all the issuing threads: when it lands at the
  group wait every thread has waited for it, so its accesses keep their own epoch, which the
  instance acquires there; a per-thread asynchronous operation (``cp.async``) lands as the issuing
  threads' own accesses, which reach the instance's other threads after a CTA barrier.
* An asynchronous copy reads its source when issued; the read is checked for races at issue and kept
  in flight (writes to the source meanwhile are races) until it completes.
* A copy tracked by an asynchronous group never completes before its group wait, so a read before
  the wait is always reported, never lucky.
* A copy of an asynchronous group that also signals a barrier keeps its own clock; its issuing
  instance is ordered after it at its group wait without a CTA barrier.
* Global memory is checked for races only inside one CTA (one cluster), and only for tensors the kernel
  writes. A CTA reaches its peers' shared memory only through multicast copies and cluster arrivals:
  no primitive loads or stores distributed shared memory yet.
* A fault ends the whole run, not only its launch: on a GPU it poisons the context, so no later
  launch of the program would run either.
* Shared-memory padding, swizzles and fragment layouts do not change values: tiles are logical.
* Proxies are not modelled: a generic-proxy write read through the async proxy needs a proxy fence
  on a GPU, which no declared effect describes yet, so a missing ``fence.proxy_async`` goes unseen.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator, Mapping
from typing import Any

import attrs
import numpy as np

from cake_core.diagnostics.diagnostic import Diagnostic, DiagnosticError
from cake_core.errors import CakeUserError
from cake_core.hostdata import host_array
from cake_core.ir import nodes as n
from cake_core.ir import pipes
from cake_core.ir.cluster import CRANK, cluster_size
from cake_core.ir.holes import ADVICE, site
from cake_core.ir.exprs import Compiled, EvalError, evaluate
from cake_core.location import UNKNOWN
from cake_core.ir.primitive import Access, ExecFault, Kind, is_warpgroup_wide
from cake_core.ir.model import CheckedModule, KernelModel, LaunchModel, TypedOpImpl
from cake_core.ir.program import kernel_spec
from cake_core.semantics import codes, operands, reports
from cake_core.semantics.barriers import ARRIVES, EXPECTS, BarState
from cake_core.semantics.binding import DEFAULT_SMS, check_domain, element_type, program_env, run_sms, shape_of
from cake_core.semantics.cluster import ClusterRun, everywhere, peer_regions
from cake_core.semantics.engine import CLUSTER, CTA, MBAR
from cake_core.semantics.findings import Finding, Findings, Stop
from cake_core.semantics.memory import Region, Store
from cake_core.semantics.operands import ExecContext, OpInfo, accesses, barrier
from cake_core.semantics.clocks import join
from cake_core.semantics.races import RegionTransfer
from cake_core.semantics.scheduler import POLICIES, InterpCta, InterpInstance, Scheduler

DEFAULT_MAX_STEPS = 1_000_000


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
    switching instances after an operation. ``sms`` is the target constant ``SMS`` (multiprocessors) for
    kernels checked without a target: ``sms``, else ``sizes["SMS"]``, else :data:`DEFAULT_SMS`; for a
    module checked for a target, a value other than the target's raises :class:`ValueError`.
    """
    if policy not in POLICIES:
        raise CakeUserError(f"unknown scheduling policy `{policy}` (choices: {', '.join(POLICIES)})")
    if not checked.ok:
        raise DiagnosticError([d for d in checked.diagnostics if d.is_error])
    run = Interpreter(checked, seed, policy, max_steps, switch)
    run.sms = run_sms(checked, sms, sizes)
    return run.program(inputs, sizes)


class Interpreter:
    """One run of a checked program: launches, CTAs, and the operations of each role instance."""

    def __init__(self, checked: CheckedModule, seed: int, policy: str, max_steps: int, switch: float) -> None:
        self.checked = checked
        self.seed, self.policy, self.max_steps, self.switch = seed, policy, max_steps, switch
        self.findings = Findings()
        self.scheduler = Scheduler(policy, seed, switch, self.findings)
        self.steps = 0
        self.ctas_done = 0
        self.infos: dict[int, OpInfo] = {}
        self.collectives: dict[int, bool] = {}
        self.exprs = Compiled()
        self.sms = DEFAULT_SMS
        self.writers: dict[str, tuple[KernelModel, str]] = {}  # tensor -> the last kernel writing it, its parameter

    # -- program ------------------------------------------------------------------------------------

    def program(self, inputs: Mapping[str, np.ndarray], sizes: Mapping[str, int | str]) -> InterpResult:
        start = time.perf_counter()
        prog = self.checked.module.entry
        env = program_env(prog, inputs, sizes)
        stores: dict[str, Store] = {}
        for p in prog.params:
            if p.tier != "global":
                raise CakeUserError(f"program parameter `{p.name}` is a scalar; the interpreter runs tensors only")
            dtype = element_type(p.dtype, env, p.name)
            shape = shape_of(p.shape, env, p.name)
            if p.name in inputs:
                data = host_array(p.name, inputs[p.name], dtype, shape)
                stores[p.name] = Store.of(p.name, Kind.GLOBAL, dtype, data)
            else:
                stores[p.name] = Store.poisoned(p.name, Kind.GLOBAL, dtype, shape)
        for b in prog.buffers:
            dtype = element_type(b.dtype, env, b.name)
            stores[b.name] = Store.poisoned(b.name, Kind.GLOBAL, dtype, shape_of(b.shape, env, b.name))
        launches = 0
        stopped = False
        try:
            for lm in self.checked.launches:
                self.launch(lm, env, stores)
                launches += 1
        except Stop as stop:
            self.findings.report(stop.finding)
            stopped = True
        if not stopped:
            self.never_written(prog, inputs, stores)
        return InterpResult(
            {p.name: stores[p.name].data for p in prog.params},
            {b.name: stores[b.name].data for b in prog.buffers},
            list(self.findings.found.values()), self.steps, launches, self.ctas_done, stopped,
            time.perf_counter() - start, self.policy, self.seed,
        )  # fmt: skip

    def never_written(self, prog: n.Program, inputs: Mapping[str, np.ndarray], stores: dict[str, Store]) -> None:
        """CS010 for each program parameter some kernel wrote, not given as input, with elements no
        store touched: at the loop or grid that should have covered them (:func:`~cake_core.ir.holes.site`)."""
        for p in prog.params:
            if p.name in inputs or p.name not in self.writers:
                continue
            written = stores[p.name].written
            if written.all():
                continue
            first = tuple(int(i) for i in np.argwhere(~written)[0])
            dims = tuple(d for d, i in enumerate(first) if not written.take(i, axis=d).any())
            model, param = self.writers[p.name]
            loc, what = site(model, param, dims)
            element = f"`{p.name}[{', '.join(str(i) for i in first)}]`"
            self.findings.kernel, self.findings.coords = model.kernel.name, ()
            self.findings.report(self.findings.make(
                codes.OUTPUT_NEVER_WRITTEN, loc,
                f"{int((~written).sum())} of the {written.size} elements of output `{p.name}` were never written; "
                f"the first is {element}",
                label=f"this {what} leaves {element} unwritten",
                help=ADVICE[what],
            ))  # fmt: skip
        self.findings.kernel = None

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
        check_domain(k.domain, kenv, f"kernel `{k.name}`")
        globals_: dict[str, Store] = {}
        for p, arg in zip(k.params, lm.launch.args, strict=True):
            store = stores[arg]
            declared = shape_of(p.shape, kenv, p.name)
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
        for p, arg in zip(k.params, lm.launch.args, strict=True):
            if p.name in written:
                self.writers[arg] = (model, p.name)
        self.findings.kernel = k.name
        extents = []
        for e in k.grid.extents:
            v = evaluate(e, kenv)
            extents.append(int(v))
        size = cluster_size(k, model.env)
        if extents and extents[0] % size:
            raise CakeUserError(f"kernel `{k.name}`: the grid's first extent {extents[0]} is not a multiple of its "
                                f"cluster size {size} (a cluster launch takes whole clusters)")  # fmt: skip
        # the first grid variable varies fastest: a cluster is `size` consecutive CTAs along it
        grid = [tuple(zip(k.grid.vars, reversed(rev), strict=True))
                for rev in itertools.product(*[range(x) for x in reversed(extents)])]  # fmt: skip
        for i in range(0, len(grid), size):
            self.findings.coords = grid[i]
            self.cta(model, kenv, globals_, grid[i : i + size])
            self.ctas_done += len(grid[i : i + size])
        for store in globals_.values():
            store.tracked = False
        self.findings.coords = ()

    # -- CTA ----------------------------------------------------------------------------------------

    def cta(self, model: KernelModel, kenv: dict[str, Any], globals_: dict[str, Store],
            cluster: list[tuple[tuple[str, int], ...]]) -> None:  # fmt: skip
        """Run the CTAs of one cluster (one CTA without clusters), at their grid coordinates, together."""
        members: list[InterpCta] = []
        for rank, coords in enumerate(cluster):
            members.append(self.member(model, kenv, globals_, coords, members[0] if members else None, rank))
        for m in members:
            m.cluster = tuple(members)
        self.scheduler.run(members[0] if len(members) == 1 else ClusterRun(members))

    def member(self, model: KernelModel, kenv: dict[str, Any], globals_: dict[str, Store],
               coords: tuple[tuple[str, int], ...], peer: InterpCta | None, rank: int) -> InterpCta:  # fmt: skip
        """One CTA, its role instances ready to run; ``peer``: a CTA of its cluster, ``rank``: its own."""
        shared = {
            name: Store.poisoned(name, Kind.SHARED, info.dtype, info.shape, info.stages)
            for name, info in model.smem.items()
        }
        for name, mem in model.mems.items():  # regions of plugin tiers: per-CTA arrays, race-tracked
            store = Store.poisoned(name, Kind(mem.tier), mem.dtype, mem.shape, mem.stages)
            store.tracked = True
            shared[name] = store
        barriers = {
            name: [BarState(name, s if info.stages is not None else None, info.count) for s in range(info.stages or 1)]
            for name, info in model.barriers.items()
        }
        cta = InterpCta(model, coords, globals_, shared, barriers, peer, rank)
        base = dict(kenv)
        base.update(coords)
        base[CRANK] = rank
        for p in model.pipes:
            base[pipes.counter(p, pipes.PRODUCER)] = base[pipes.counter(p, pipes.CONSUMER)] = 0
        for info in model.roles:
            for inst in range(info.instances):
                env = dict(base)
                env["self"] = inst
                a = InterpInstance(cta.new_comp(), role=info, instance=inst, env=env, cta=cta)
                a.gen = self.body(a, info.role.body)
                cta.instances.append(a)
        return cta

    # -- bodies -------------------------------------------------------------------------------------

    def body(self, a: InterpInstance, body: tuple[n.Stmt, ...]) -> Iterator[None]:
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
                    raise self.findings.stop(codes.BAD_VALUE, s.loc, f"the loop over `{s.var}` has step 0", a.who)
                for v in range(int(lo), int(hi), int(step)):
                    a.env[s.var] = v
                    yield from self.body(a, s.body)
            elif isinstance(s, n.If):
                yield from self.body(a, s.then if self.eval(a, s.cond, s) else s.orelse)

    def eval(self, a: InterpInstance, e: n.Expr, where: Any) -> Any:
        try:
            return self.exprs(e)(a.env)  # type: ignore[misc]
        except EvalError as exc:
            loc = exc.expr.loc if exc.expr.loc.line else getattr(where, "loc", UNKNOWN)
            raise self.findings.stop(codes.BAD_VALUE, loc, f"cannot evaluate this at run time: {exc}", a.who) from None

    def effect_value(self, a: InterpInstance, e: n.Expr, op: n.Op) -> Any:
        """An effect's ``arrivals`` or ``amount``, with ``THREADS`` the threads of ``a``'s role instance."""
        if "THREADS" in a.env:
            return self.eval(a, e, op)
        a.env["THREADS"] = a.role.per * 32
        try:
            return self.eval(a, e, op)
        finally:
            del a.env["THREADS"]

    def info(self, typed: TypedOpImpl) -> OpInfo:
        info = self.infos.get(id(typed))
        if info is None:
            info = self.infos[id(typed)] = OpInfo.of(typed)
        return info

    def collective(self, info: OpInfo) -> bool:
        """Whether one unit executes the operation for all the issuing threads: a primitive that declares
        ``collective`` or ``warpgroup``."""
        found = self.collectives.get(id(info.typed))
        if found is None:
            found = self.collectives[id(info.typed)] = info.prim.collective or is_warpgroup_wide(info.prim)
        return found

    def race(self, a: InterpInstance, info: OpInfo, e: Any, c: Any) -> None:
        """Report the conflict ``c`` of effect ``e`` of ``a``'s operation (CS003), naming the threads a
        partial release left unordered."""
        found = reports.race(self.findings, a.who, a.comp, info, c, e.operand.expr.loc)
        partial = a.cta.partial_release(c.other) if c.other is not None else None
        if partial is not None:
            found = attrs.evolve(found, message=f"{found.message}: {partial.words(c.other)}",
                                 help="put a CTA barrier (`bar.sync`) between the accesses and the "
                                 "release, or let every thread arrive (`per=thread`)")  # fmt: skip
        self.findings.report(found)

    # -- one operation ------------------------------------------------------------------------------

    def op(self, a: InterpInstance, op: n.Op) -> Iterator[None]:
        cta = a.cta
        info = self.info(cta.model.typed(op))
        prim = info.prim
        self.steps += 1
        if self.steps > self.max_steps:
            raise self.findings.stop(
                codes.STEP_LIMIT, op.loc, f"the run exceeded its bound of {self.max_steps} operations", a.who,
                help="run smaller shapes, or pass a larger `max_steps`",
            )  # fmt: skip

        # 1. mbarrier waits
        for e in info.waits:
            bar = barrier(a, e.operand, op, self.eval, self.findings)
            key = (bar.name, bar.stage)
            k = a.waits.get(key, 0)
            if e.amount is not None:
                parity = int(self.effect_value(a, e.amount, op)) & 1
            else:
                parity = k & 1
                if bar.completed >= k + 2:
                    self.findings.report(self.findings.make(
                        codes.PHASE_OVERRUN, op.loc,
                        f"{bar.label} has completed {bar.completed} phases, but this is wait number {k + 1} of "
                        f"{a.who} on it: the barrier ran two phases ahead and the wait cannot tell",
                        a.who, label="waits here", help="wait on the slot's `empty` barrier before refilling it",
                    ))  # fmt: skip
            if not bar.ready(parity):
                a.state, a.wait = MBAR, (bar, parity, op)
                yield None
                a.wait = None
            join(a.vc, bar.done_vc)
            # every thread of the instance arrived in that phase and every one waits for it: its accesses
            # before the arrival are ordered for all of its threads, as by a CTA barrier
            a.sync_clock = max(a.sync_clock, bar.done_whole.get(a.comp, 0))
            a.waits[key] = k + 1

        # 2. CTA barrier, cluster barrier
        if prim.cta_barrier or prim.cluster_barrier:
            a.state, a.blocked_op = (CLUSTER if prim.cluster_barrier else CTA), op
            yield None

        t = a.tick()

        # 3. group wait
        if prim.group_wait is not None:
            pending_e = op.attr("pending")
            pending = int(self.eval(a, pending_e, op)) if pending_e is not None else 0
            for tr in a.group(prim.group_wait).retire(pending):
                cta.land(a, tr, t)

        for e in info.inits:
            bar = barrier(a, e.operand, op, self.eval, self.findings)
            declared = cta.model.barriers[bar.name].count
            bar.init(int(self.effect_value(a, e.arrivals, op)) if e.arrivals is not None else declared)

        # 4. regions, bounds, races
        regions: dict[str, Region] = {}
        for e in info.tiles:
            region = operands.region(a, e.operand, op, self.eval)
            fault = reports.out_of_bounds(self.findings, a.who, info, e, region)
            if fault is not None:
                raise fault
            regions[e.operand.slot.name] = region
        # a multicast write also lands in every other CTA of the cluster
        peers = {e.operand.slot.name: peer_regions(a, e, op, self.eval) for e in info.tiles if e.cluster}
        transfer: RegionTransfer | None = None
        if info.asynchronous:
            comp = cta.new_comp()
            vc = dict(a.vc)
            vc[comp] = 1
            transfer = RegionTransfer(comp, 1, vc, a.comp, prim.group, op_name=op.name, loc=op.loc, who=a.who,
                                      sync_clock=a.sync_clock, collective=self.collective(info))
        actor = a.actor(op.loc)
        for e in info.tiles:
            for region in (regions[e.operand.slot.name], *peers.get(e.operand.slot.name, ())):
                for access in accesses(e):
                    for c in cta.tracker.check(actor, region, access, transfer, e.asynchronous, atomic=e.atomic):
                        self.race(a, info, e, c)

        # 5. execute
        try:
            prim.execute(info.typed, ExecContext(self, a, info, regions, transfer))
        except NotImplementedError as exc:
            raise self.findings.stop(codes.NO_SEMANTICS, op.loc, f"`{op.name}` cannot run on the CPU: {exc}", a.who)
        except ExecFault as exc:
            # a data-dependent fault (a scatter index outside its tensor): the GPU would fault here
            raise self.findings.stop(codes.OUT_OF_BOUNDS, op.loc, f"`{op.name}`: {exc}", a.who,
                                     label="index outside the tensor")  # fmt: skip

        for e in info.tiles:
            region = regions[e.operand.slot.name]
            if e.asynchronous and transfer is not None:
                if e.access in (Access.WRITE, Access.READWRITE):
                    transfer.writes.append(region)
                    transfer.nbytes += region.nbytes
                    for peer in peers.get(e.operand.slot.name, ()):  # the same values, in every other CTA
                        transfer.writes.append(peer)
                        if id(region) in transfer.values:
                            transfer.values[id(peer)] = transfer.values[id(region)]
                if e.access in (Access.READ, Access.READWRITE):
                    transfer.reads.append(region)
            else:
                for access in accesses(e):
                    cta.tracker.record(region, access, a.comp, t, op.loc, a.who, op.name, atomic=e.atomic)
        if transfer is not None:
            for e in info.completes:
                nbytes = int(self.effect_value(a, e.amount, op)) if e.amount is not None else transfer.nbytes
                for bar in everywhere(a, e, op, self.eval, self.findings):
                    transfer.tx_barriers.append((bar, nbytes))
            cta.inflight.append(transfer)
            if prim.group is not None:
                a.group(prim.group).open.append(transfer)

        # 6. barrier signals
        for e in info.signals:
            nbytes = 0
            if e.barrier in EXPECTS:
                if e.amount is not None:
                    nbytes = int(self.effect_value(a, e.amount, op))
                else:
                    nbytes = transfer.nbytes if transfer is not None else 0
            counted = e.barrier in ARRIVES and e.arrivals is not None
            count = int(self.effect_value(a, e.arrivals, op)) if counted else 0
            released = a.release(count, op, t) if counted else a.vc
            for bar in everywhere(a, e, op, self.eval, self.findings):  # a cluster arrival reaches every CTA
                if e.barrier not in ARRIVES:
                    bar.signal(nbytes)
                elif e.arrivals is None:  # the instance arrives once, as a whole
                    bar.signal(nbytes, a.vc, 1, a.who)
                else:
                    whole = (a.comp, t) if count >= a.threads else None
                    bar.signal(nbytes, released, count, a.who, whole)

        # 7. group commit
        if prim.group_commit is not None:
            a.group(prim.group_commit).commit()

        # 8. what the operation binds (a pipe stage) and the counters it advances
        for b in info.binds:
            a.env[b.name] = self.eval(a, b.value, op)

        yield None
