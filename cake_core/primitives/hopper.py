"""Hopper (sm_90a) primitives: TMA bulk tensor copies, mbarriers, warpgroup MMA, proxy fences.

What is mechanical is derived here, never written in the IR: tensor maps (box, swizzle, strides)
from the shared buffer and the global tensor, barrier addresses, wgmma shared-memory descriptors
and the k-step walk over 128-byte swizzle panels. What decides speed is the author's: which
buffer, which stage, which barrier, when to wait.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from cake_core.diagnostics import codes
from cake_core.diagnostics.diagnostic import Diagnostic
from cake_core.ir import nodes as n
from cake_core.ir.cluster import CRANK
from cake_core.ir.exprs import try_int
from cake_core.ir.primitive import (
    Access, AttrSpec, BarrierAction, CheckContext, CostTerms, Effect, ExecContext, Kind, NotLowerable,
    Primitive, Signature, Slot, TypedOp, numel, static_shape,
)  # fmt: skip
from cake_core.ir.swizzle import SWIZZLE_BYTES
from cake_core.ir.types import DType
from cake_core.primitives._common import mma_operands, need_static, same_dtype, shape_text
from cake_core.primitives.cluster import arrive_everywhere
from cake_core.target import Feature


def _tile_bytes(o) -> int:
    shape = static_shape(o) or (0,)
    return numel(shape) * (o.dtype.bytes if o.dtype else 1)


class TmaLoad(Primitive):
    name = "tma.load"
    sass_claims = ("UTMALDG",)
    summary = "bulk tensor copy of a global tile into a shared buffer, completing on an mbarrier"
    doc = (
        "Out-of-bounds elements are filled with zeros by the copy engine, and the barrier's transaction "
        "count still receives the full box bytes. The destination is a stage, or a row slice of one whose "
        "first row is a multiple of the swizzle atom's 8 rows. With `, multicast` the box lands in every CTA "
        "of the thread-block cluster (`.multicast::cluster`): ranks usually split a stage, each copying its "
        "slice (`cs[s][crank * 64 : +64, :] <- c[b, kt * 128 + crank * 64 : +64, :], multicast`)."
    )
    requires = frozenset({Feature.TMA, Feature.MBARRIER_TX})
    signature = Signature(
        outs=[Slot("dst", {Kind.SHARED}, Access.WRITE, async_proxy=True, asynchronous=True)],
        ins=[
            Slot("src", {Kind.GLOBAL}, Access.READ, async_proxy=True, asynchronous=True, masked_always=True),
            Slot("bar", {Kind.BARRIER}, Access.NONE, barrier=BarrierAction.COMPLETE_TX, optional=True,
                 doc="the barrier the copy completes on; derived, and left out, for a copy into a pipe's stage"),
        ],
        attrs=[AttrSpec("multicast", "flag", doc="the box lands at the same shared offset in every CTA of the "
                        "cluster and completes its bytes on the barrier at the same offset in every CTA")],
    )

    def check(self, op: TypedOp, ctx: CheckContext) -> Iterable[Diagnostic]:
        dst, src = op.outs[0], op.ins[0]
        yield from need_static(op, dst)
        yield from same_dtype(op, dst, src)
        sd, ss = static_shape(dst), static_shape(src)
        if sd is not None and ss is not None and sd != ss:
            yield codes.TYPES.at(
                op.op.loc, f"`tma.load` copies {shape_text(src.shape)} into {shape_text(dst.shape)}: shapes differ",
                label="shape mismatch",
            )  # fmt: skip

    def effects(self, op: TypedOp) -> tuple[Effect, ...]:
        out = []
        multicast = op.attr("multicast") is not None
        for e in super().effects(op):
            if e.barrier is BarrierAction.COMPLETE_TX:
                e = attrs.evolve(e, amount=n.Num(_tile_bytes(op.outs[0])))
            if multicast and (e.barrier is BarrierAction.COMPLETE_TX or e.tier is Kind.SHARED):
                e = attrs.evolve(e, cluster=True)
            out.append(e)
        return tuple(out)

    def features(self, op: TypedOp) -> frozenset[Feature]:
        return self.requires | ({Feature.CLUSTERS} if op.attr("multicast") is not None else frozenset())

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        x.write("dst", x.read("src"))

    def prepare(self, op: TypedOp, ctx) -> None:
        ctx.tensor_map_for(op.ins[0], op.outs[0])

    def lower(self, op: TypedOp, ctx) -> None:
        dst, src = op.outs[0], op.ins[0]
        tmap = ctx.tensor_map_for(src, dst)
        sh = ctx.sview(dst)
        row0 = _first_row(ctx, dst, tmap)
        g = ctx.gview(src)
        bar = ctx.barrier_addr(op.operand("bar"))
        cluster = ctx.cluster if op.attr("multicast") is not None else 1
        # every CTA of the cluster receives the box (and its barrier the bytes): ctaMask (1 << C) - 1
        mcast, mask = "", ""
        if cluster > 1:
            mcast, mask = ".multicast::cluster", f', "h"((unsigned short){(1 << cluster) - 1})'
        # coordinates innermost first; the innermost advances by one swizzle panel per copy
        coords = list(reversed(g.starts))
        rank = len(coords)
        inner_box = tmap.box[0]
        panels = tmap.panels
        rows_per_box = tmap.box[1] if rank > 1 else 1
        row_boxes = tmap.row_boxes
        ctx.line(f"if ({ctx.itid} == 0) {{")
        for p in range(panels):
            for rb in range(row_boxes):
                c = list(coords)
                c[0] = f"{coords[0]} + {p * inner_box}" if coords[0] != "0" else str(p * inner_box)
                if rank > 1 and rb:
                    c[1] = f"{coords[1]} + {rb * rows_per_box}"
                offset = p * tmap.panel_bytes + rb * rows_per_box * tmap.box_row_bytes
                at = f"{offset} + ({row0})" if row0 != "0" else str(offset)
                dst_addr = f"cake_smem_addr((const char*)({sh.base}) + {at})"
                regs = ", ".join(f"%{i + 3}" for i in range(rank))
                tail = f", %{rank + 3}" if mask else ""
                ctx.line(
                    f'  asm volatile("cp.async.bulk.tensor.{rank}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes{mcast} '
                    f'[%0], [%1, {{{regs}}}], [%2]{tail};" :: "r"({dst_addr}), "l"(&{tmap.name}), "r"({bar}), '
                    + ", ".join(f'"r"((int)({x}))' for x in c) + mask + ' : "memory");'
                )
        ctx.line("}")

    def cost(self, op: TypedOp, ctx: CheckContext) -> CostTerms:
        b = _tile_bytes(op.outs[0])
        # a multicast copy reads its box from global memory (L2) once and writes it into every CTA
        copies = ctx.cluster_size() if op.attr("multicast") is not None else 1
        return CostTerms(global_bytes=b, shared_bytes=b * copies)


class MbarrierWait(Primitive):
    name = "mbarrier.wait"
    sass_claims = ("SYNCS",)
    summary = "wait until the phase of `parity` of an mbarrier completes"
    requires = frozenset({Feature.MBARRIER_TX})
    signature = Signature(
        ins=[Slot("bar", {Kind.BARRIER}, Access.NONE, barrier=BarrierAction.WAIT)],
        attrs=[AttrSpec("parity", "int", required=True, doc="0 or 1: the phase parity to wait for")],
    )

    def effects(self, op: TypedOp) -> tuple[Effect, ...]:
        (e,) = super().effects(op)
        return (attrs.evolve(e, amount=op.attr("parity")),)

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        pass  # the interpreter blocks on the barrier itself

    def lower(self, op: TypedOp, ctx) -> None:
        ctx.helper("mbar_wait", MBAR_WAIT)
        ctx.line(f"cake_mbar_wait({ctx.barrier_addr(op.ins[0])}, (unsigned)({ctx.c(op.attr('parity'))}) & 1u);")


class MbarrierArrive(Primitive):
    name = "mbarrier.arrive"
    summary = "arrive on an mbarrier: once per thread of the role instance, or once for it (`per=instance`)"
    doc = "With `, cluster` the arrival reaches the barrier at the same offset in every CTA of the cluster."
    requires = frozenset({Feature.MBARRIER_TX})
    signature = Signature(
        ins=[Slot("bar", {Kind.BARRIER}, Access.NONE, barrier=BarrierAction.ARRIVE)],
        attrs=[AttrSpec("per", "word", choices=("thread", "instance"), default="thread"),
               AttrSpec("cluster", "flag", doc="arrive on this barrier in every CTA of the cluster")],
    )

    def features(self, op: TypedOp) -> frozenset[Feature]:
        return self.requires | ({Feature.CLUSTERS} if op.attr("cluster") is not None else frozenset())

    def arrivals(self, op: TypedOp, threads: int) -> int:
        per = op.attr("per")
        return 1 if isinstance(per, n.Name) and per.id == "instance" else threads

    def effects(self, op: TypedOp) -> tuple[Effect, ...]:
        (e,) = super().effects(op)
        per = op.attr("per")
        count = n.Num(1) if isinstance(per, n.Name) and per.id == "instance" else n.Name("THREADS")
        return (attrs.evolve(e, arrivals=count, cluster=op.attr("cluster") is not None),)

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        pass

    def lower(self, op: TypedOp, ctx) -> None:
        addr = ctx.barrier_addr(op.ins[0])
        per = op.attr("per")
        one = isinstance(per, n.Name) and per.id == "instance"
        if op.attr("cluster") is not None and ctx.cluster > 1:
            arrive_everywhere(ctx, addr, ctx.cluster, f"{ctx.itid} == 0" if one else "")
            return
        stmt = f'asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"({addr}) : "memory");'
        if one:
            ctx.line(f"if ({ctx.itid} == 0) {stmt}")
        else:
            ctx.line(stmt)


class MbarrierArriveExpectTx(Primitive):
    name = "mbarrier.arrive.expect_tx"
    summary = "one arrival on an mbarrier that also expects `bytes` of transactions in this phase"
    requires = frozenset({Feature.MBARRIER_TX})
    signature = Signature(
        ins=[Slot("bar", {Kind.BARRIER}, Access.NONE, barrier=BarrierAction.ARRIVE_EXPECT_TX)],
        attrs=[AttrSpec("bytes", "int", required=True, doc="bytes the copies signalling this phase deliver")],
    )

    def effects(self, op: TypedOp) -> tuple[Effect, ...]:
        (e,) = super().effects(op)
        return (attrs.evolve(e, arrivals=n.Num(1), amount=op.attr("bytes")),)

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        pass

    def lower(self, op: TypedOp, ctx) -> None:
        addr = ctx.barrier_addr(op.ins[0])
        ctx.line(
            f'if ({ctx.itid} == 0) asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: '
            f'"r"({addr}), "r"((unsigned)({ctx.c(op.attr("bytes"))})) : "memory");'
        )


class Wgmma(Primitive):
    name = "wgmma"
    sass_claims = ("HGMMA",)
    summary = "warpgroup MMA: acc (+)= a @ b^T with a and b in shared memory, issued asynchronously"
    doc = (
        "One operation covers the whole k extent of its operands: D/16 k-steps of m64nNk16 per 64-row "
        "block of the accumulator. `accumulate=0` starts from zero. The operands are read through the "
        "async proxy until a `wgmma.wait` retires the group."
    )
    warpgroup = True  # issued by one whole warpgroup
    requires = frozenset({Feature.WGMMA})
    group = "wgmma"
    signature = Signature(
        outs=[Slot("acc", {Kind.REGISTERS}, Access.READWRITE, asynchronous=True)],
        ins=[
            Slot("a", {Kind.SHARED}, Access.READ, async_proxy=True, asynchronous=True),
            Slot("b", {Kind.SHARED}, Access.READ, async_proxy=True, asynchronous=True),
        ],
        attrs=[AttrSpec("accumulate", "int", default=1, doc="0: acc = a @ b^T; 1: acc += a @ b^T")],
    )

    def check(self, op: TypedOp, ctx: CheckContext) -> Iterable[Diagnostic]:
        acc, a, b = op.outs[0], op.ins[0], op.ins[1]
        if acc.layout is None or acc.layout.name != "wgmma_acc":
            yield codes.TYPES.at(acc.expr.loc, "`wgmma` accumulates into a `wgmma_acc` register tile")
        yield from mma_operands(op, acc, a, b)

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        import numpy as np

        a = x.read("a").astype(np.float32)
        b = x.read("b").astype(np.float32)
        acc = x.read("acc").astype(np.float32) if int(x.attr("accumulate", 1)) else 0.0
        x.write("acc", acc + a @ b.T)

    def lower(self, op: TypedOp, ctx) -> None:
        acc = ctx.rview(op.outs[0])
        a_op, b_op = op.ins
        a, b = ctx.sview(a_op), ctx.sview(b_op)
        for o in (a_op, b_op):
            if len(o.index) > 1 and not _whole_rows(o.index[1:]):
                raise NotLowerable("wgmma operands span their buffer's whole k extent from column 0 (CR119)")
        if b_op.index and not _whole_rows(b_op.index[:1]):
            raise NotLowerable("wgmma's `b` operand starts at row 0 of its stage")
        for v in (a, b):
            if v.swizzle != "128B":
                raise NotLowerable("wgmma operands are read from 128B-swizzled K-major buffers here")
        rows_a, k = static_shape(a_op)  # type: ignore[misc]
        n_cols = static_shape(b_op)[0]  # type: ignore[index]
        t = "f16" if a_op.dtype is DType.F16 else "bf16"
        acc_e = op.attr("accumulate")
        scale_d = ctx.c(acc_e) if acc_e is not None else "1"
        ctx.helper("wgmma_desc", _DESC)
        ctx.line('asm volatile("wgmma.fence.sync.aligned;" ::: "memory");')
        per_block = n_cols // 2
        elem = a_op.dtype.bytes  # type: ignore[union-attr]
        panel_elems = 128 // elem
        a_base = _panel_origin(ctx, a_op, a)
        b_base = _panel_origin(ctx, b_op, b)
        a_panel_bytes = ctx.panel_bytes(a_op)
        b_panel_bytes = ctx.panel_bytes(b_op)
        for ks in range(k // 16):
            kp, kin = divmod(ks * 16, panel_elems)
            for blk in range(rows_a // 64):
                regs = [f"{acc.name}[{blk * per_block + i}]" for i in range(per_block)]
                a_addr = f"{a_base} + {kp * a_panel_bytes + blk * 64 * 128 + kin * elem}"
                b_addr = f"{b_base} + {kp * b_panel_bytes + kin * elem}"
                scale = scale_d if ks == 0 else "1"
                outs = ", ".join(f"%{i}" for i in range(per_block))
                pa, pb, ps = per_block, per_block + 1, per_block + 2
                ctx.line(
                    f'asm volatile("{{ .reg .pred p; setp.ne.b32 p, %{ps}, 0; '
                    f'wgmma.mma_async.sync.aligned.m64n{n_cols}k16.f32.{t}.{t} {{{outs}}}, %{pa}, %{pb}, p, 1, 1, 0, 0; }}" : '
                    + ", ".join(f'"+f"({r})' for r in regs)
                    + f' : "l"(cake_wgmma_desc({a_addr})), "l"(cake_wgmma_desc({b_addr})), "r"((int)({scale})) : "memory");'
                )

    def cost(self, op: TypedOp, ctx: CheckContext) -> CostTerms:
        sc = static_shape(op.outs[0]) or (0, 0)
        sa = static_shape(op.ins[0]) or (0, 0)
        f = 2.0 * sc[0] * sc[1] * sa[1]
        return CostTerms(flops=f, tensor_flops=f, shared_bytes=_tile_bytes(op.ins[0]) + _tile_bytes(op.ins[1]),
                         dtype=str(op.ins[0].dtype))  # fmt: skip


def _first_row(ctx, dst, tmap) -> str:
    """C++ byte offset, inside its stage, of the first row of a TMA destination: ``"0"`` for a whole
    stage; a row slice of a 2-D stage starts at a row the swizzle atom (8 rows) divides, for every
    rank of the cluster when it depends on ``crank``."""
    if _whole_rows(dst.index):
        return "0"
    first = dst.index[0] if dst.index else None
    if len(dst.index) > 2 or not isinstance(first, n.Span) or not _whole_rows(dst.index[1:]):
        raise NotLowerable("a TMA destination is a whole buffer stage or a slice of its rows (CR118)")
    env = dict(ctx.model.env)
    rows = []
    for r in range(ctx.cluster):
        env[CRANK] = r
        rows.append(try_int(first.start, env))
    if any(v is None for v in rows):
        raise NotLowerable("the first row of a TMA destination slice must follow from constants and `crank`")
    if tmap.swizzle != "none" and any(v % 8 for v in rows):  # type: ignore[operator]
        raise NotLowerable(f"a swizzled TMA destination starts at a multiple of 8 rows (the swizzle atom), not {rows}")
    return f"({ctx.c(first.start)}) * {tmap.box_row_bytes if tmap.swizzle != 'none' else ctx.sview(dst).row_bytes}"


def _whole_rows(index) -> bool:
    """Every index item covers its dimension from 0: ``:`` or ``0 : +size``."""
    for item in index:
        if isinstance(item, n.All):
            continue
        if isinstance(item, n.Span) and isinstance(item.start, n.Num) and item.start.value == 0:
            continue
        return False
    return True


def _panel_origin(ctx, o, view) -> str:
    """Shared address (u32) of a K-major swizzled tile's first row in panel 0."""
    row0 = view.starts[0] if view.starts else "0"
    return f"(cake_smem_addr({view.base}) + ({row0}) * 128)"


class WgmmaCommit(Primitive):
    name = "wgmma.commit"
    summary = "close this warpgroup's open group of wgmma operations"
    warpgroup = True  # issued by one whole warpgroup
    requires = frozenset({Feature.WGMMA})
    group_commit = "wgmma"
    signature = Signature()

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        pass

    def lower(self, op: TypedOp, ctx) -> None:
        ctx.line('asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");')


class WgmmaWait(Primitive):
    name = "wgmma.wait"
    summary = "wait until at most `pending` committed wgmma groups are in flight"
    doc = (
        "The accumulators named as operands are the ones this wait makes final; the compiler is kept "
        "from touching them earlier. Without operands, every accumulator of the role is (write "
        "`pending=0` then). Accumulators of groups still in flight must not be named."
    )
    warpgroup = True  # issued by one whole warpgroup
    requires = frozenset({Feature.WGMMA})
    group_wait = "wgmma"
    signature = Signature(
        ins=[Slot("done", {Kind.REGISTERS}, Access.NONE, optional=True),
             Slot("done2", {Kind.REGISTERS}, Access.NONE, optional=True)],
        attrs=[AttrSpec("pending", "const", required=True)],
    )  # fmt: skip

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        pass

    def lower(self, op: TypedOp, ctx) -> None:
        pending = try_int(op.attr("pending"), ctx.model.env)
        ctx.line(f'asm volatile("wgmma.wait_group.sync.aligned {pending};" ::: "memory");')
        # the retired accumulators are final here: keep the compiler from reading them earlier
        ctx.line(ctx.fence_registers(op, [o.name for o in op.ins] or None))


class FenceProxyAsync(Primitive):
    name = "fence.proxy_async"
    summary = "order this thread's generic-proxy shared-memory writes before later async-proxy accesses"
    doc = (
        "Declares `proxy_fence = True`: verifier rules (cake-rules-core CR117) recognise an async-proxy fence "
        "by that class attribute on a primitive without operands, never by its name."
    )
    requires = frozenset({Feature.TMA})
    signature = Signature()
    #: an async-proxy fence (read by `cake_core.verify.facts.is_proxy_fence`)
    proxy_fence = True

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        pass

    def lower(self, op: TypedOp, ctx) -> None:
        ctx.line('asm volatile("fence.proxy.async.shared::cta;" ::: "memory");')


MBAR_WAIT = r"""
__device__ __forceinline__ void cake_mbar_wait(unsigned addr, unsigned parity) {
  unsigned done;
  do {
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done) : "r"(addr), "r"(parity) : "memory");
  } while (!done);
}
"""

_DESC = r"""
// wgmma shared-memory descriptor of a K-major, 128B-swizzled operand: 8-row groups 1024 B apart
__device__ __forceinline__ unsigned long long cake_wgmma_desc(unsigned addr) {
  return (unsigned long long)((addr & 0x3FFFFu) >> 4) | (1ull << 16) | ((unsigned long long)(1024 >> 4) << 32)
         | (1ull << 62);
}
"""

PRIMITIVES: tuple[type[Primitive], ...] = (
    TmaLoad, MbarrierWait, MbarrierArrive, MbarrierArriveExpectTx, Wgmma, WgmmaCommit, WgmmaWait, FenceProxyAsync,
)  # fmt: skip
