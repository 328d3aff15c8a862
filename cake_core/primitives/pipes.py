"""The operations on a ``pipe``: take a stage to fill, take a full stage, release it.

``pipe.acquire s <- cring`` (producer) waits until the next stage is free and arms its full barrier
with the bytes of the copies issued into it; ``pipe.wait s <- cring`` (consumer) waits until the next
stage is full; both name the stage ``s`` for the rest of the block. ``pipe.release cring[s]``
(consumer) gives stage ``s`` back. The stage, the phase parity and the bytes are derived by the
compiler (:mod:`cake_core.ir.pipes`), never written; the barriers they act on are the pipe's derived
rings, so the verifier's barrier rules, the protocol replay and the interpreter follow them as any
other barrier — at the lines of these operations.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from cake_core.diagnostics import codes
from cake_core.diagnostics.diagnostic import Diagnostic
from cake_core.ir import nodes as n
from cake_core.ir import pipes
from cake_core.ir.primitive import (
    Access, BarrierAction, Bind, CheckContext, Effect, ExecContext, Kind, Primitive, Signature, Slot, TypedOp,
)  # fmt: skip
from cake_core.primitives.cluster import arrive_everywhere
from cake_core.primitives.hopper import MBAR_WAIT
from cake_core.target import Feature

_STAGE = Slot("stage", {Kind.VALUE}, Access.WRITE, binds=True, doc="the name the stage takes for the rest of the block")
_PIPE = Slot("pipe", {Kind.PIPE}, Access.NONE, doc="the pipe")


class PipeTake(Primitive):
    """Takes the next stage of a pipe: the stage and the parity come from the role instance's count
    of stages taken from it. Public: a plugin's operation that takes a stage its own way subclasses it
    (a tensor-core acquire that waits without arriving)."""

    requires = frozenset({Feature.MBARRIER_TX})
    sass_claims = ("SYNCS",)
    side: str = pipes.CONSUMER

    def check(self, op: TypedOp, ctx: CheckContext) -> Iterable[Diagnostic]:
        yield from _side(op, self.side)

    def effects(self, op: TypedOp) -> tuple[Effect, ...]:
        out = []
        for e in super().effects(op):
            if e.barrier is BarrierAction.WAIT:
                out.append(attrs.evolve(e, amount=op.attr("parity")))
            elif e.barrier is BarrierAction.ARRIVE_EXPECT_TX:
                out.append(attrs.evolve(e, arrivals=n.Num(1), amount=op.attr("bytes")))
        return tuple(out)

    def binds(self, op: TypedOp) -> tuple[Bind, ...]:
        pipe = op.ins[0].name or ""
        stage = op.attr("stage")
        assert stage is not None
        return (Bind(op.outs[0].name or "", stage),
                Bind(pipes.counter(pipe, self.side), pipes.advance(pipe, self.side), counter=True))

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        pass  # the interpreter blocks on the derived barrier itself

    def wait(self, op: TypedOp, ctx, slot: str) -> None:
        ctx.helper("mbar_wait", MBAR_WAIT)
        ctx.line(f"cake_mbar_wait({ctx.barrier_addr(op.operand(slot))}, (unsigned)({ctx.c(op.attr('parity'))}) & 1u);")


class PipeAcquire(PipeTake):
    name = "pipe.acquire"
    summary = "take the pipe's next stage to fill: wait until its consumers released it, then arm it"
    doc = (
        "Producer side. Waits on the stage's `empty` barrier for the phase before the one it fills (every "
        "stage starts free), then arrives once on its `full` barrier expecting the full-box bytes of the "
        "copies issued into the stage after this operation in its block. The copies name the stage "
        "(`tma.load cs[s] <- ...`) and no barrier: theirs is the pipe's."
    )
    side = pipes.PRODUCER
    derives = ("stage", "parity", "bytes")
    signature = Signature(
        outs=[_STAGE],
        ins=[_PIPE,
             Slot("empty", {Kind.BARRIER}, Access.NONE, barrier=BarrierAction.WAIT, derived=True),
             Slot("full", {Kind.BARRIER}, Access.NONE, barrier=BarrierAction.ARRIVE_EXPECT_TX, derived=True)],
    )  # fmt: skip

    def lower(self, op: TypedOp, ctx) -> None:
        self.wait(op, ctx, "empty")
        ctx.line(
            f'if ({ctx.itid} == 0) asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: '
            f'"r"({ctx.barrier_addr(op.operand("full"))}), "r"((unsigned)({ctx.c(op.attr("bytes"))})) : "memory");'
        )


class PipeWait(PipeTake):
    name = "pipe.wait"
    summary = "take the pipe's next stage to read: wait until the copies into it have landed"
    doc = (
        "Consumer side. Waits on the stage's `full` barrier for the phase of this pass over the ring. "
        "Every instance of every consumer role takes every stage, and releases it with `pipe.release`."
    )
    derives = ("stage", "parity")
    signature = Signature(
        outs=[_STAGE],
        ins=[_PIPE, Slot("full", {Kind.BARRIER}, Access.NONE, barrier=BarrierAction.WAIT, derived=True)],
    )

    def lower(self, op: TypedOp, ctx) -> None:
        self.wait(op, ctx, "full")


class PipeRelease(Primitive):
    name = "pipe.release"
    summary = "give a stage of the pipe back to its producer: every thread of the instance arrives"
    doc = (
        "Consumer side. Every thread of the role instance arrives once on the stage's `empty` barrier, "
        "whose count the compiler derives as all threads of all consumer instances: release a stage "
        "after the last read of it has completed (after the `wgmma.wait` that retires a wgmma reading it). "
        "Where the role reads the stage through the generic proxy (`ldmatrix`, loads) and the producer "
        "refills it through the async proxy (TMA), the lowering fences the async proxy before the arrival. "
        "For a `cluster` pipe every thread arrives on the stage's `empty` barrier in every CTA of the cluster."
    )
    requires = frozenset({Feature.MBARRIER_TX})
    signature = Signature(
        ins=[Slot("pipe", {Kind.PIPE}, Access.NONE, doc="the stage, `cring[s]`"),
             Slot("empty", {Kind.BARRIER}, Access.NONE, barrier=BarrierAction.ARRIVE, derived=True)],
    )  # fmt: skip

    def check(self, op: TypedOp, ctx: CheckContext) -> Iterable[Diagnostic]:
        yield from _side(op, pipes.CONSUMER)
        if op.ins[0].stage is None:
            name = op.ins[0].name
            yield codes.PIPE.at(
                op.op.loc, f"`pipe.release` gives back one stage: name it, `pipe.release {name}[s]`",
                label="which stage?",
            )  # fmt: skip

    def effects(self, op: TypedOp) -> tuple[Effect, ...]:
        p = op.ins[0].decl
        cluster = isinstance(p, n.Pipe) and p.cluster  # a cluster pipe's stages are released in every CTA
        return tuple(
            attrs.evolve(e, arrivals=n.Name("THREADS"), cluster=cluster)
            for e in super().effects(op) if e.barrier is BarrierAction.ARRIVE
        )  # fmt: skip

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        pass

    def lower(self, op: TypedOp, ctx) -> None:
        p = op.ins[0].decl
        role = op.role.role.name  # type: ignore[attr-defined]
        if isinstance(p, n.Pipe) and pipes.release_fences_async_proxy(ctx.model.ops, p, role):
            # this thread's ldmatrix / loads of the stage complete before the TMA refill may begin
            ctx.line('asm volatile("fence.proxy.async.shared::cta;" ::: "memory");')
        addr = ctx.barrier_addr(op.operand("empty"))
        if isinstance(p, n.Pipe) and p.cluster and ctx.cluster > 1:
            arrive_everywhere(ctx, addr, ctx.cluster)  # the stage is every CTA's: each one's producer waits
            return
        ctx.line(f'asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"({addr}) : "memory");')


def _side(op: TypedOp, side: str) -> Iterable[Diagnostic]:
    """A finding when the operation's role is not on ``side`` of its pipe."""
    p = op.ins[0].decl
    role = op.role.role.name  # type: ignore[attr-defined]
    if not isinstance(p, n.Pipe) or side in pipes.sides(p, role):
        return
    roles = p.producers if side == pipes.PRODUCER else p.consumers
    yield codes.PIPE.at(
        op.op.loc, f"`{op.op.name}` runs on the {side} side of pipe `{p.name}`, but role `{role}` is not its "
        f"{side} ({', '.join(f'`{r}`' for r in roles)})",
        label=f"not a {side} of `{p.name}`",
    )  # fmt: skip


PRIMITIVES: tuple[type[Primitive], ...] = (PipeAcquire, PipeWait, PipeRelease)
