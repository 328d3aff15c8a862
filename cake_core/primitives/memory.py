"""Movement between memory tiers: stores, cp.async rings, ldmatrix."""

from __future__ import annotations

from collections.abc import Iterable

from cake_core.diagnostics import codes
from cake_core.diagnostics.diagnostic import Diagnostic
from cake_core.ir.primitive import (
    Access, AttrSpec, CheckContext, CostTerms, ExecContext, Kind, NotLowerable, Primitive, Signature,
    Slot, TypedOp, masked, numel, static_shape,
)  # fmt: skip
from cake_core.primitives._common import need_static, same_dtype, same_numel, shape_text
from cake_core.lower.tiles import SharedView
from cake_core.primitives._lower import const_attr, from_f32, mma_acc_elements, rows_elements, static_sizes, unravel
from cake_core.target import Feature

OOB_LOAD = AttrSpec("oob", "word", choices=("zero", "none"), doc="out-of-bounds elements read as zero")
OOB_STORE = AttrSpec("oob", "word", choices=("skip", "none"), doc="out-of-bounds elements are not written")


class Store(Primitive):
    name = "store"
    summary = "write a register tile to global or shared memory"
    signature = Signature(
        outs=[Slot("dst", {Kind.GLOBAL, Kind.SHARED}, Access.WRITE, mask_attr="oob")],
        ins=[Slot("src", {Kind.REGISTERS})],
        attrs=[OOB_STORE],
    )

    def check(self, op: TypedOp, ctx: CheckContext) -> Iterable[Diagnostic]:
        dst, src = op.outs[0], op.ins[0]
        yield from need_static(op, dst)
        yield from same_numel(op, dst, src)
        if dst.dtype is not None and src.dtype is not None and dst.dtype != src.dtype:
            if not (dst.dtype.is_float and src.dtype.is_float):
                yield codes.TYPES.at(
                    op.op.loc, f"`store` converts only between float types, not `{src.dtype}` to `{dst.dtype}`"
                )

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        dst = op.outs[0]
        x.write("dst", x.read("src").reshape(static_shape(dst)))

    def lower(self, op: TypedOp, ctx) -> None:
        dst, src = op.outs[0], op.ins[0]
        view = ctx.gview(dst) if dst.kind is Kind.GLOBAL else ctx.sview(dst)
        if isinstance(view, SharedView) and view.swizzle:
            raise NotLowerable("stores to a swizzled shared buffer are not lowered")
        reg = ctx.rview(src)
        sizes = static_sizes(view)
        is_masked = masked(op) and dst.kind is Kind.GLOBAL

        def value(slot: str) -> str:
            return f"{reg.name}[{slot}]" if src.dtype == dst.dtype else from_f32(f"{reg.name}[{slot}]", dst.dtype)

        def put(cond: list[str], local: list[str], slot: str, indent: str = "") -> None:
            cond = cond + ([view.in_bounds(local)] if is_masked else [])  # type: ignore[union-attr]
            guard = f"if ({' && '.join(cond)}) " if cond else ""
            ctx.line(f"{indent}{guard}*{view.addr(local)} = {value(slot)};")

        if reg.layout.name == "wgmma_rows":
            if len(reg.layout.shape) != 1:
                raise NotLowerable("a [rows, C] `wgmma_rows` tile is stored after a reduce into `rows`")
            # rows g and g+8 of each warp's 16 of every 64-row block, held alike by the quad: one writes
            for slot in range(reg.layout.regs_per_thread):
                blk, h = divmod(slot, 2)
                row = f"{blk * 64} + {ctx.iwarp} * 16 + ({ctx.lane} >> 2) + {8 * h}"
                put([f"({ctx.lane} & 3) == 0"], unravel(row, sizes), str(slot))
            return
        if reg.layout.name == "wgmma_acc":
            if len(sizes) != 2:
                raise NotLowerable("a `wgmma_acc` tile is stored into a [rows, columns] tile")
            # m64nN: each warp of the warpgroup holds rows g and g+8 of its 16, two columns per 8-column group
            m_blocks, n_groups = reg.layout.shape[0] // 64, reg.layout.shape[1] // 8
            for mi in range(m_blocks):
                for ni in range(n_groups):
                    for h in range(2):
                        for e in range(2):
                            row = f"{mi * 64} + {ctx.iwarp} * 16 + ({ctx.lane} >> 2) + {8 * h}"
                            col = f"{ni * 8} + (({ctx.lane} & 3) << 1) + {e}"
                            put([], [row, col], str((mi * n_groups + ni) * 4 + 2 * h + e))
            return
        if reg.layout.name == "mma_acc":
            if len(sizes) != 2:
                raise NotLowerable("an `mma_acc` tile is stored into a [rows, columns] tile")
            for slot, row, col in mma_acc_elements(ctx, reg):
                put([], [row, col], str(slot))
            return
        with rows_elements(ctx, reg) as e:
            put([e.exists] if e.exists else [], unravel(e.flat, sizes), e.slot, "    ")

    def cost(self, op: TypedOp, ctx: CheckContext) -> CostTerms:
        dst = op.outs[0]
        shape = static_shape(dst) or (0,)
        nbytes = numel(shape) * (dst.dtype.bytes if dst.dtype else 4)
        return CostTerms(global_bytes=nbytes if dst.kind is Kind.GLOBAL else 0,
                         shared_bytes=nbytes if dst.kind is Kind.SHARED else 0)  # fmt: skip


class CpAsync(Primitive):
    name = "cp.async"
    sass_claims = ("LDGSTS",)
    summary = "asynchronous copy of a global tile into a shared buffer, 16 bytes per thread per step"
    requires = frozenset({Feature.CP_ASYNC})
    group = "cp.async"
    swizzle_aware = True  # its lowering addresses a swizzled buffer's chunks (SharedView.smem_addr)
    signature = Signature(
        outs=[Slot("dst", {Kind.SHARED}, Access.WRITE, asynchronous=True)],
        ins=[Slot("src", {Kind.GLOBAL}, Access.READ, asynchronous=True, mask_attr="oob")],
        attrs=[OOB_LOAD, AttrSpec("bytes", "const", default=16, doc="bytes per thread per copy: 4, 8 or 16")],
    )

    def check(self, op: TypedOp, ctx: CheckContext) -> Iterable[Diagnostic]:
        dst, src = op.outs[0], op.ins[0]
        yield from need_static(op, dst)
        yield from same_numel(op, dst, src)
        yield from same_dtype(op, dst, src)
        if static_shape(dst) is not None and static_shape(src) is not None and static_shape(dst) != static_shape(src):
            yield codes.TYPES.at(
                op.op.loc, f"`cp.async` copies {shape_text(src.shape)} into {shape_text(dst.shape)}: "
                "tile shapes must match", label="shape mismatch",
            )  # fmt: skip

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        # the interpreter defers the write until the group completes (cp.async.wait)
        x.write("dst", x.read("src"))

    def lower(self, op: TypedOp, ctx) -> None:
        dst, src = op.outs[0], op.ins[0]
        g, sh = ctx.gview(src), ctx.sview(dst)
        sizes = static_sizes(sh)
        if len(sizes) not in (1, 2):
            raise NotLowerable("cp.async copies tiles of rank 1 or 2")
        nbytes = const_attr(op, ctx, "bytes", 16)
        if sh.swizzle and nbytes != 16:
            raise NotLowerable("cp.async into a swizzled buffer copies whole 16-byte chunks (`bytes=16`)")
        elem = dst.dtype.bytes if dst.dtype else 2
        inner = sizes[-1]
        per_chunk = nbytes // elem
        if (inner * elem) % nbytes:
            raise NotLowerable(f"rows of {inner * elem} bytes do not split into {nbytes}-byte copies")
        rows = sizes[0] if len(sizes) == 2 else 1
        cpr = inner // per_chunk
        total = rows * cpr
        is_masked = masked(op)
        ci = ctx.fresh("ci")
        kind = "cg" if nbytes == 16 else "ca"
        ctx.line("#pragma unroll")
        ctx.line(f"for (int {ci} = {ctx.itid}; {ci} < {total}; {ci} += {ctx.threads}) {{")
        local = [f"{ci} / {cpr}", f"({ci} % {cpr}) * {per_chunk}"] if len(sizes) == 2 else [f"{ci} * {per_chunk}"]
        ctx.line(f"  const unsigned cake_dst = {sh.smem_addr(local)};")
        if is_masked:
            ctx.line(f"  const bool cake_ok = {g.in_bounds(local)};")
            ctx.line(f"  const void* cake_src = cake_ok ? (const void*){g.addr(local)} : (const void*){g.ptr};")
            ctx.line(
                f'  asm volatile("cp.async.{kind}.shared.global [%0], [%1], {nbytes}, %2;" :: "r"(cake_dst), '
                f'"l"(cake_src), "r"(cake_ok ? {nbytes} : 0) : "memory");'
            )
        else:
            ctx.line(
                f'  asm volatile("cp.async.{kind}.shared.global [%0], [%1], {nbytes};" :: "r"(cake_dst), '
                f'"l"((const void*){g.addr(local)}) : "memory");'
            )
        ctx.line("}")

    def cost(self, op: TypedOp, ctx: CheckContext) -> CostTerms:
        dst = op.outs[0]
        nbytes = numel(static_shape(dst) or (0,)) * (dst.dtype.bytes if dst.dtype else 2)
        return CostTerms(global_bytes=nbytes, shared_bytes=nbytes)


class CpAsyncCommit(Primitive):
    name = "cp.async.commit"
    summary = "close this thread's open group of cp.async copies"
    requires = frozenset({Feature.CP_ASYNC})
    group_commit = "cp.async"
    signature = Signature()

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        pass  # the interpreter tracks groups itself

    def lower(self, op: TypedOp, ctx) -> None:
        ctx.line('asm volatile("cp.async.commit_group;" ::: "memory");')


class CpAsyncWait(Primitive):
    name = "cp.async.wait"
    summary = "wait until at most `pending` committed cp.async groups are still in flight"
    requires = frozenset({Feature.CP_ASYNC})
    group_wait = "cp.async"
    signature = Signature(attrs=[AttrSpec("pending", "const", required=True, doc="groups left in flight")])

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        pass  # the interpreter completes groups itself

    def lower(self, op: TypedOp, ctx) -> None:
        pending = const_attr(op, ctx, "pending", 0)
        ctx.line(f'asm volatile("cp.async.wait_group {pending};" ::: "memory");')


class LdMatrix(Primitive):
    name = "ldmatrix"
    sass_claims = ("LDSM",)
    summary = "warp-cooperative load of mma.sync operand fragments from shared memory"
    requires = frozenset({Feature.LDMATRIX})
    swizzle_aware = True  # its lowering addresses a swizzled buffer's chunks (SharedView.smem_addr)
    signature = Signature(
        outs=[Slot("dst", {Kind.REGISTERS}, Access.WRITE)],
        ins=[Slot("src", {Kind.SHARED})],
    )

    def check(self, op: TypedOp, ctx: CheckContext) -> Iterable[Diagnostic]:
        dst, src = op.outs[0], op.ins[0]
        yield from need_static(op, src)
        yield from same_dtype(op, dst, src)
        if dst.layout is None or dst.layout.name not in ("mma_a", "mma_b"):
            yield codes.TYPES.at(
                dst.expr.loc, "`ldmatrix` fills an `mma_a` or `mma_b` fragment",
                help="declare the tile with `layout mma_a(WM, WN)` or `layout mma_b(WM, WN)`",
            )  # fmt: skip
        if static_shape(src) is not None and static_shape(src) != static_shape(dst):
            yield codes.TYPES.at(
                op.op.loc, f"`ldmatrix` loads {shape_text(src.shape)} into a {shape_text(dst.shape)} fragment",
                label="shape mismatch",
            )  # fmt: skip
        if src.dtype is not None and src.dtype.bytes != 2:
            yield codes.TYPES.at(op.op.loc, f"`ldmatrix` moves 16-bit elements, not `{src.dtype}`")

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        x.write("dst", x.read("src"))

    def lower(self, op: TypedOp, ctx) -> None:
        dst, src = op.outs[0], op.ins[0]
        sh = ctx.sview(src)
        reg = ctx.rview(dst)
        info = reg.layout
        wm_n, wn_n = info.warp_grid
        tile_rows = info.warp_tile[0]
        warp_row = f"({ctx.iwarp} / {wn_n})" if info.name == "mma_a" else f"({ctx.iwarp} % {wn_n})"
        lane = ctx.lane
        if info.name == "mma_a":
            for mi in range(tile_rows // 16):
                local = [f"{warp_row} * {tile_rows} + {mi * 16} + ({lane} & 15)", f"({lane} >> 4) * 8"]
                regs = ", ".join(f'"=r"({reg.name}[{mi * 4 + e}])' for e in range(4))
                ctx.line(
                    f'asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{%0, %1, %2, %3}}, [%4];" : {regs} '
                    f': "r"({sh.smem_addr(local)}));'
                )
            return
        ni_count = tile_rows // 8
        ni = 0
        while ni < ni_count:
            if ni + 1 < ni_count:
                local = [f"{warp_row} * {tile_rows} + {ni * 8} + (({lane} >> 4) << 3) + ({lane} & 7)",
                         f"(({lane} >> 3) & 1) * 8"]  # fmt: skip
                outs = [f"{reg.name}[{ni * 2}]", f"{reg.name}[{ni * 2 + 1}]", f"{reg.name}[{ni * 2 + 2}]",
                        f"{reg.name}[{ni * 2 + 3}]"]  # fmt: skip
                regs = ", ".join(f'"=r"({o})' for o in outs)
                ctx.line(
                    f'asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{%0, %1, %2, %3}}, [%4];" : {regs} '
                    f': "r"({sh.smem_addr(local)}));'
                )
                ni += 2
            else:
                local = [f"{warp_row} * {tile_rows} + {ni * 8} + ({lane} & 7)", f"(({lane} >> 3) & 1) * 8"]
                regs = f'"=r"({reg.name}[{ni * 2}]), "=r"({reg.name}[{ni * 2 + 1}])'
                ctx.line(
                    f'asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {{%0, %1}}, [%2];" : {regs} '
                    f': "r"({sh.smem_addr(local)}));'
                )
                ni += 1

    def cost(self, op: TypedOp, ctx: CheckContext) -> CostTerms:
        src = op.ins[0]
        return CostTerms(shared_bytes=numel(static_shape(src) or (0,)) * 2)


PRIMITIVES: tuple[type[Primitive], ...] = (Store, CpAsync, CpAsyncCommit, CpAsyncWait, LdMatrix)
