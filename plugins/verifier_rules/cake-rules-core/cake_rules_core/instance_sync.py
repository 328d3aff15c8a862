"""CR125, CR126: ordering between the threads of one role instance.

A role instance is many threads (a warp, a warpgroup), each accessing its part of every tile the
instance touches; one operation's parts are distributed over the threads by one mapping and the next
operation's by another. Only a CTA barrier (a primitive declaring ``cta_barrier``: ``bar.sync``)
orders the threads of an instance among themselves. Both rules follow each role's body in program
order, through both branches of every ``if`` and around every loop (a loop's body twice, so what its
end leaves reaches its start), keeping the shared buffers its threads accessed since the last CTA
barrier:

* CR125: a barrier arrival by fewer threads than the instance has (the effect's declared
  ``arrivals`` below ``THREADS``: ``per=instance``, ``arrive.expect_tx``) after its threads read a
  buffer that the roles waiting on that barrier write. An arrival by every thread releases what they
  read before it; a collective asynchronous read (a warpgroup-wide ``wgmma``, declared ``warpgroup``
  or needing the feature) is one unit's, complete for the elected thread once it waited for it.
* CR126: a read of a shared buffer that another operation of the same role wrote through the
  instance's threads (an ordinary store, or a per-thread asynchronous copy that completes at its
  group wait, ``cp.async``) with no CTA barrier between. Copies that complete on an mbarrier (TMA)
  and collective operations are seen complete by every waiting thread.
"""

from __future__ import annotations

from collections.abc import Iterator

import attrs

from cake_core.diagnostics.diagnostic import Diagnostic, Label
from cake_core.ir import nodes as n
from cake_core.ir.exprs import EvalError, evaluate
from cake_core.ir.model import KernelModel
from cake_core.ir.primitive import Access, BarrierAction, Effect
from cake_core.verify.analyses import for_model
from cake_core.verify.facts import KernelFacts, OpFacts, facts, is_warpgroup_wide
from cake_core.verify.rule import Rule, RuleContext

_RELEASES = (BarrierAction.ARRIVE, BarrierAction.ARRIVE_EXPECT_TX)
_READS = (Access.READ, Access.READWRITE)
_WRITES = (Access.WRITE, Access.READWRITE)


@attrs.define(eq=False)
class _State:
    """Shared buffers the instance's threads read and wrote since its last CTA barrier: buffer -> the
    operation and operand of the access."""

    reads: dict[str, tuple[n.Op, Effect]] = attrs.field(factory=dict)
    writes: dict[str, tuple[n.Op, Effect]] = attrs.field(factory=dict)

    def copy(self) -> _State:
        return _State(dict(self.reads), dict(self.writes))

    def merge(self, other: _State) -> None:
        for k, v in other.reads.items():
            self.reads.setdefault(k, v)
        for k, v in other.writes.items():
            self.writes.setdefault(k, v)


def _collective(of: OpFacts) -> bool:
    return is_warpgroup_wide(of.prim, of.features)


def _thread_write(of: OpFacts, e: Effect) -> bool:
    """A write the instance's threads make themselves, each seeing only its own part complete."""
    if not e.asynchronous:
        return True
    completes = any(b.barrier is BarrierAction.COMPLETE_TX for b in of.barrier_effects)
    return not completes and not _collective(of)


def _threads_read(of: OpFacts, e: Effect) -> bool:
    """A read each of the instance's threads makes (not one collective unit's)."""
    return not (e.asynchronous and _collective(of))


def _arrivals(model: KernelModel, e: Effect, threads: int) -> int | None:
    """The arrivals an effect declares, where they are known statically (None: undeclared or unknown)."""
    if e.arrivals is None:
        return None
    try:
        return int(evaluate(e.arrivals, {**model.env, "THREADS": threads}))
    except (EvalError, TypeError, ValueError):
        return None


def _guarded(kf: KernelFacts) -> dict[str, set[str]]:
    """Barrier -> the shared buffers written by the roles that wait on it."""
    writes: dict[str, set[str]] = {}
    for buf, acc in kf.shared_accesses.items():
        for of, e in acc:
            if e.access in _WRITES:
                writes.setdefault(of.role.role.name, set()).add(buf)
    out: dict[str, set[str]] = {}
    for bar, actions in kf.barrier_actions.items():
        for of, e in actions:
            if e.barrier is BarrierAction.WAIT:
                out.setdefault(bar, set()).update(writes.get(of.role.role.name, ()))
    return out


@attrs.define(eq=False)
class _Walk:
    """One role's body followed in program order; the findings of both rules."""

    model: KernelModel
    kf: KernelFacts
    guarded: dict[str, set[str]]
    threads: int
    #: CR125: release operation -> (it, its barrier effect, the buffer, the read, the arriving threads)
    early: dict[int, tuple[n.Op, Effect, str, tuple[n.Op, Effect], int]] = attrs.field(factory=dict)
    #: CR126: reading operation -> (it, its read, the write)
    unsynced: dict[int, tuple[n.Op, Effect, tuple[n.Op, Effect]]] = attrs.field(factory=dict)

    def body(self, stmts: tuple[n.Stmt, ...], st: _State) -> _State:
        for s in stmts:
            if isinstance(s, n.Op):
                self.op(s, st)
            elif isinstance(s, n.For):
                for _ in range(2):
                    after = self.body(s.body, st.copy())
                    st.merge(after)
            elif isinstance(s, n.If):
                then = self.body(s.then, st.copy())
                other = self.body(s.orelse, st.copy())
                then.merge(other)
                st = then
        return st

    def op(self, op: n.Op, st: _State) -> None:
        of = self.kf.of(self.model.typed(op))
        if getattr(of.prim, "cta_barrier", False):
            st.reads.clear()
            st.writes.clear()
            return
        for e in of.shared_effects:
            buf = e.operand.name
            assert buf is not None
            if e.access in _READS:
                w = st.writes.get(buf)
                if w is not None and w[0] is not op:
                    self.unsynced.setdefault(id(op), (op, e, w))
                if _threads_read(of, e):
                    st.reads.setdefault(buf, (op, e))
        for e in of.shared_effects:
            if e.access in _WRITES and _thread_write(of, e):
                st.writes[e.operand.name] = (op, e)  # type: ignore[index]
        for e in of.barrier_effects:
            if e.barrier not in _RELEASES:
                continue
            bar = e.operand.name or ""
            guarded = self.guarded.get(bar, set())
            count = _arrivals(self.model, e, self.threads)
            if count is None or count >= self.threads:
                for buf in guarded:
                    st.reads.pop(buf, None)
                continue
            for buf, read in st.reads.items():
                if buf in guarded:
                    self.early.setdefault(id(op), (op, e, buf, read, count))
                    break


def _walks(model: KernelModel) -> list[_Walk]:
    """Every role of the kernel followed once, kept in the model's analyses for both rules."""
    table = for_model(model)
    if table is None:
        return _walk_roles(model)
    return table.get("instance_sync", id(model), lambda: _walk_roles(model))


def _walk_roles(model: KernelModel) -> list[_Walk]:
    kf = facts(model)
    guarded = _guarded(kf)
    out = []
    for info in model.roles:
        w = _Walk(model, kf, guarded, info.per * 32)
        w.body(info.role.body, _State())
        out.append(w)
    return out


# ---------------------------------------------------------------------------------------------------
# CR125
# ---------------------------------------------------------------------------------------------------


class ReleaseBeforeInstanceSync(Rule):
    name = "CR125"
    slug = "release-before-instance-sync"
    summary = "a buffer released by fewer threads than read it, with no CTA barrier between the reads and the release"
    explanation = """
## What it does
Follows each role in program order (both branches of every `if`, around every loop) and finds an
arrival on a barrier by fewer threads than the role instance has — `mbarrier.arrive ..., per=instance`,
or any effect that declares fewer `arrivals` than `THREADS` — after the instance's threads read a
shared buffer that a role waiting on that barrier writes, with no CTA barrier (`bar.sync`) between
the reads and the arrival. An arrival by every thread (`per=thread`, `pipe.release`) releases what
each thread read; a warpgroup-wide asynchronous read (`wgmma`) is one unit's, complete for the
elected thread once it waited for its group.

## Why is this bad?
An arrival orders only the arriving thread's own earlier accesses. The elected thread arrives as soon
as it finished its own part of the read; the other threads of its warpgroup may still be reading when
the producer, released by the barrier, overwrites the buffer. The result is wrong only sometimes.

## Example
```
  barrier cempty: mbarrier[S] count WG
    ...
        argmin.update bv, bi <- acc, csq[s], base=kt * BN, scale=-2.0, limit=K
        mbarrier.arrive cempty[s], per=instance        # thread 0 releases csq[s] for 128 readers
```

## Use instead
```
  barrier cempty: mbarrier[S] count 128 * WG
    ...
        argmin.update bv, bi <- acc, csq[s], base=kt * BN, scale=-2.0, limit=K
        mbarrier.arrive cempty[s]                      # every reading thread arrives
```
"""

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        for w in _walks(ctx.model):
            for op, e, buf, (rop, re), count in w.early.values():
                arriving = "one elected thread" if count == 1 else f"{count} threads"
                role = ctx.model.typed(op).role.role.name
                yield self.at(
                    op.loc,
                    f"`{op.name}` releases `{e.operand.name}` by {arriving} of the {w.threads} threads of role "
                    f"`{role}`, but all {w.threads} read `{buf}` (line {rop.loc.line}) with no "
                    "CTA barrier between: the other threads may still be reading it when its writer goes on",
                    label=f"released by {arriving}",
                    secondary=(Label(re.operand.expr.loc, f"read by all {w.threads} threads"),),
                    help="let every thread arrive (`per=thread`, with the barrier's count to match), or put "
                    "`bar.sync` between the reads and the arrival",
                )


# ---------------------------------------------------------------------------------------------------
# CR126
# ---------------------------------------------------------------------------------------------------


class MissingInstanceBarrier(Rule):
    name = "CR126"
    slug = "missing-instance-barrier"
    summary = "threads of one role instance write shared memory and then read it with no CTA barrier between"
    explanation = """
## What it does
Follows each role in program order (both branches of every `if`, around every loop) and finds a read
of a shared buffer that another operation of the same role wrote through the instance's threads — an
ordinary store, or a per-thread asynchronous copy completed by its group wait (`cp.async.wait`) — with
no CTA barrier (`bar.sync`) on the way from the write to the read. Copies that complete on an mbarrier
(TMA) and warpgroup-wide operations are complete for every thread that waited for them.

## Why is this bad?
Each operation spreads its tile over the instance's threads its own way: the rows a thread stores are
not the rows it reads next. Without a barrier between, a thread reads rows another thread has not
stored yet (or whose `cp.async` it cannot see complete), and the result depends on timing.

## Example
```
    store red <- part
    argmin.rows bi <- red            # reads the rows the other warps stored
```

## Use instead
```
    store red <- part
    bar.sync
    argmin.rows bi <- red
```
"""

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        for w in _walks(ctx.model):
            for op, e, (wop, we) in w.unsynced.values():
                yield self.at(
                    e.operand.expr.loc,
                    f"`{op.name}` reads `{e.operand.name}`, which `{wop.name}` (line {wop.loc.line}) of the same role "
                    f"wrote through its {w.threads} threads, with no CTA barrier between: a thread may read rows "
                    "another thread has not written yet",
                    label="read without a barrier after the write",
                    secondary=(Label(we.operand.expr.loc, "written by the instance's threads"),),
                    help="put `bar.sync` between the write and the read",
                )
