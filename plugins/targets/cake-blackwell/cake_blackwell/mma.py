"""``tcgen05.mma`` (one CTA, accumulator in tensor memory, both operands from swizzled shared memory)
and ``tcgen05.commit``, which makes an mbarrier track its completion; ``tcgen05.acquire`` and
``tcgen05.commit.stage``, the producer's side of a pipe whose stages the mma fills (a ring of
tensor-memory accumulators handed to epilogue warps).

One operation covers the whole k extent of its operands: one ``tcgen05.mma.cta_group::1.kind::f16``
per k step of 16 (the PTX ISA's ``tcgen05.mma`` section; for ``.kind::f16`` with one CTA the type rule
takes M = 128 with N a multiple of 16 from 16 to 256 and K = 16 per instruction: from the ISA's shape
table as read for this slice, checked here only by ptxas accepting N = 64 and 128), issued by one thread. The shared
memory and instruction descriptors are derived here (:mod:`cake_blackwell.descriptors`): K-major
operands in 128-byte swizzled buffers, 8-row groups 1024 bytes apart (the stride-dimension offset;
the leading-dimension offset is unused for swizzled K-major layouts and set to 1, per 9.7.16.3.1.1), a
k step advancing the start address by 32 bytes inside a 128-byte row and a panel's bytes across
panels.

On the CPU each ``tcgen05.mma`` is an asynchronous group of its own, performed by one unit for the
role instance (``collective``): its operands are in flight until the next ``tcgen05.commit``, which
lands them and arrives on its barrier with them, so a reader that waits on that barrier is ordered
after the product and one that does not is a race (CS003). The issuing thread itself does not block
at the commit on the GPU; the interpreter lands the work there, so hazards of the issuer between the
commit and the barrier's completion are not seen.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from cake_core.diagnostics import codes
from cake_core.diagnostics.diagnostic import Diagnostic
from cake_core.ir import nodes as n
from cake_core.ir import pipes
from cake_core.ir.primitive import (
    Access, AttrSpec, BarrierAction, CheckContext, CostTerms, ExecContext, Kind, NotLowerable, Primitive,
    Signature, Slot, TypedOp, numel, static_shape,
)  # fmt: skip
from cake_core.primitives.authoring import mma_operands, shape_text
from cake_core.primitives.pipes import PipeTake
from cake_core.target import Feature

from cake_blackwell import descriptors as dsc
from cake_blackwell.tmem import LANES, TCGEN05, TMEM, TMEM_FEATURE, column_offset

#: the swizzle the operands are read with, its row bytes, and the bytes between 8-row groups
SWIZZLE, ROW_BYTES, GROUP_BYTES = "128B", 128, 1024
K_STEP = 16


class Tcgen05Mma(Primitive):
    name = "tcgen05.mma"
    sass_claims = ("UTCHMMA",)
    summary = "tensor-core MMA into tensor memory: acc (+)= a @ b^T, a [128, K] and b [N, K] in shared memory"
    doc = (
        "Issued by thread 0 of the role instance, one instruction per k step of 16; `accumulate=0` starts "
        "from zero. The operands are read through the async proxy (a `fence.proxy_async` orders ordinary "
        "stores into them first); a `tcgen05.commit` afterwards tells an mbarrier when the product is done."
    )
    requires = frozenset({TCGEN05, TMEM_FEATURE})
    # on the CPU: one asynchronous unit's work for the role instance, a group of its own that the next
    # `tcgen05.commit` completes
    collective = True
    group = "tcgen05"
    group_commit = "tcgen05"
    signature = Signature(
        outs=[Slot("acc", {TMEM}, Access.READWRITE, asynchronous=True)],
        ins=[
            Slot("a", {Kind.SHARED}, Access.READ, async_proxy=True, asynchronous=True),
            Slot("b", {Kind.SHARED}, Access.READ, async_proxy=True, asynchronous=True),
        ],
        attrs=[AttrSpec("accumulate", "int", default=1, doc="0: acc = a @ b^T; 1: acc += a @ b^T")],
    )

    def check(self, op: TypedOp, ctx: CheckContext) -> Iterable[Diagnostic]:
        acc, a, b = op.outs[0], op.ins[0], op.ins[1]
        yield from mma_operands(op, acc, a, b)
        sc = static_shape(acc)
        if sc is not None and len(sc) == 2 and (sc[0] != LANES or sc[1] % 16 or not 16 <= sc[1] <= 256):
            yield codes.TYPES.at(op.op.loc, f"`tcgen05.mma` (one CTA) makes M={LANES} by N a multiple of 16 "
                                 f"from 16 to 256, not {shape_text(sc)}")  # fmt: skip

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        a = x.read("a").astype(np.float32)
        b = x.read("b").astype(np.float32)
        acc = x.read("acc").astype(np.float32) if int(x.attr("accumulate", 1)) else 0.0
        x.write("acc", acc + a @ b.T)

    def descriptors(self, op: TypedOp) -> tuple[int, int]:
        """The compile-time fields of the operands' shared-memory descriptors (A's and B's are alike)
        and the instruction descriptor."""
        acc, a = op.outs[0], op.ins[0]
        m, nn = static_shape(acc)  # type: ignore[misc]
        fields = dsc.smem_fields(SWIZZLE, lbo_bytes=16, sbo_bytes=GROUP_BYTES)
        return fields, dsc.instr_desc(m, nn, a.dtype)  # type: ignore[arg-type]

    def lower(self, op: TypedOp, ctx) -> None:
        acc, (a_op, b_op) = op.outs[0], op.ins
        views = ctx.sview(a_op), ctx.sview(b_op)
        for o, v in zip((a_op, b_op), views, strict=True):
            if o.index and not all(isinstance(i, n.All) for i in o.index):
                raise NotLowerable("tcgen05.mma operands are whole buffer stages")
            if v.swizzle != SWIZZLE:
                raise NotLowerable(f"tcgen05.mma operands are read from {SWIZZLE}-swizzled K-major buffers here")
        k = static_shape(a_op)[1]  # type: ignore[index]
        elem = a_op.dtype.bytes  # type: ignore[union-attr]
        panel_elems = ROW_BYTES // elem
        fields, idesc = self.descriptors(op)
        e = op.attr("accumulate")
        scale = ctx.c(e) if e is not None else "1"
        ctx.helper("tc_desc", dsc.SDESC_HELPER)
        a_base, b_base = (f"cake_smem_addr({v.base})" for v in views)
        ctx.line(f"if ({ctx.itid} == 0) {{")
        ctx.line(f"  const unsigned cake_td = {ctx.handle(acc)} + {column_offset(ctx, acc)};")
        for ks in range(k // K_STEP):
            kp, kin = divmod(ks * K_STEP, panel_elems)
            a_addr = f"{a_base} + {kp * ctx.panel_bytes(a_op) + kin * elem}"
            b_addr = f"{b_base} + {kp * ctx.panel_bytes(b_op) + kin * elem}"
            enable = scale if ks == 0 else "1"
            ctx.line(
                f'  asm volatile("{{ .reg .pred p; setp.ne.b32 p, %4, 0; tcgen05.mma.cta_group::1.kind::f16 '
                f'[%0], %1, %2, %3, p; }}" :: "r"(cake_td), "l"(cake_tc_desc({a_addr}, {fields:#x}ull)), '
                f'"l"(cake_tc_desc({b_addr}, {fields:#x}ull)), "r"({idesc:#x}u), "r"((int)({enable})) : "memory");'
            )
        ctx.line("}")

    def cost(self, op: TypedOp, ctx: CheckContext) -> CostTerms:
        sc = static_shape(op.outs[0]) or (0, 0)
        sa = static_shape(op.ins[0]) or (0, 0)
        f = 2.0 * sc[0] * sc[1] * sa[1]
        nbytes = sum(numel(static_shape(o) or (0,)) * (o.dtype.bytes if o.dtype else 2) for o in op.ins)
        return CostTerms(flops=f, tensor_flops=f, shared_bytes=nbytes, dtype=str(op.ins[0].dtype))


class Tcgen05Commit(Primitive):
    name = "tcgen05.commit"
    sass_claims = ("UTCBAR",)
    summary = "arrive once on an mbarrier when every tcgen05 operation this thread issued has completed"
    doc = (
        "`tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64` by thread 0 of the role "
        "instance (the thread that issued the `tcgen05.mma`): one arrival, so the barrier's count is 1."
    )
    requires = frozenset({TCGEN05})
    # on the CPU the issuing instance's mma work lands here, and the arrival carries it to the waiters
    group_wait = "tcgen05"
    signature = Signature(ins=[Slot("bar", {Kind.BARRIER}, Access.NONE, barrier=BarrierAction.ARRIVE)])

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        pass

    def lower(self, op: TypedOp, ctx) -> None:
        _commit(ctx, ctx.barrier_addr(op.ins[0]))


def _commit(ctx, addr: str) -> None:
    ctx.line(f'if ({ctx.itid} == 0) asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster'
             f'.b64 [%0];" :: "r"({addr}) : "memory");')  # fmt: skip


class Tcgen05Acquire(PipeTake):
    name = "tcgen05.acquire"
    summary = "take a pipe's next stage for `tcgen05.mma` to fill: wait until its consumers released it"
    doc = (
        "Producer side of a pipe whose stages `tcgen05.mma` fills (a ring of tensor-memory accumulators, "
        "`pipe accs: mma -> epilogue of acc`). Waits on the stage's `empty` barrier for the phase before the "
        "one it fills, as `pipe.acquire` does, but does not arrive on its `full` barrier: "
        "`tcgen05.commit.stage` arrives there once the mma work completes. Stage and parity are derived."
    )
    requires = frozenset({TCGEN05, Feature.MBARRIER_TX})
    side = pipes.PRODUCER
    derives = ("stage", "parity")
    signature = Signature(
        outs=[Slot("stage", {Kind.VALUE}, Access.WRITE, binds=True, doc="the stage's name for the rest of the block")],
        ins=[Slot("pipe", {Kind.PIPE}, Access.NONE, doc="the pipe"),
             Slot("empty", {Kind.BARRIER}, Access.NONE, barrier=BarrierAction.WAIT, derived=True)],
    )  # fmt: skip

    def lower(self, op: TypedOp, ctx) -> None:
        self.wait(op, ctx, "empty")


class Tcgen05CommitStage(Primitive):
    name = "tcgen05.commit.stage"
    sass_claims = ("UTCBAR",)
    summary = "mark a pipe's stage full once every tcgen05 operation this thread issued has completed"
    doc = (
        "`tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64` on the stage's derived `full` "
        "barrier, by thread 0 of the role instance (the `tcgen05.mma` issuer): the one arrival the phase "
        "counts, taken with `tcgen05.acquire`. Consumers take the stage with `pipe.wait` and give it back "
        "with `pipe.release`."
    )
    requires = frozenset({TCGEN05})
    group_wait = "tcgen05"
    signature = Signature(
        ins=[Slot("pipe", {Kind.PIPE}, Access.NONE, doc="the stage, `accs[a]`"),
             Slot("full", {Kind.BARRIER}, Access.NONE, barrier=BarrierAction.ARRIVE, derived=True)],
    )  # fmt: skip

    def check(self, op: TypedOp, ctx: CheckContext) -> Iterable[Diagnostic]:
        p = op.ins[0].decl
        role = op.role.role.name  # type: ignore[attr-defined]
        if isinstance(p, n.Pipe) and pipes.PRODUCER not in pipes.sides(p, role):
            yield codes.PIPE.at(op.op.loc, f"`tcgen05.commit.stage` fills a stage of pipe `{p.name}`, whose producer "
                                f"is not role `{role}`", label="not the producer")  # fmt: skip
        if op.ins[0].stage is None:
            yield codes.PIPE.at(op.op.loc, f"name the stage: `tcgen05.commit.stage {op.ins[0].name}[a]`")

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        pass

    def lower(self, op: TypedOp, ctx) -> None:
        _commit(ctx, ctx.barrier_addr(op.operand("full")))
