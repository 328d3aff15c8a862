"""Arithmetic on register tiles: fills, tensor-core MMA, row reductions and the argmin epilogue."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from cake_core.diagnostics import codes
from cake_core.diagnostics.diagnostic import Diagnostic
from cake_core.ir.primitive import (
    Access, AttrSpec, CheckContext, CostTerms, ExecContext, Kind, NotLowerable, Primitive, Signature,
    Slot, TypedOp, masked, numel, static_shape,
)  # fmt: skip
from cake_core.lower.cuda import fragment_words
from cake_core.primitives._lower import DOT8, PAIR_BETTER, rows_layout, static_sizes, to_f32
from cake_core.ir.types import DType
from cake_core.primitives._common import need_static, shape_text
from cake_core.primitives._vocab import need_scratch
from cake_core.target import Feature

TILE = {Kind.GLOBAL, Kind.SHARED}


class Fill(Primitive):
    name = "fill"
    summary = "set every element of a register tile to one value"
    signature = Signature(
        ins=[Slot("dst", {Kind.REGISTERS}, Access.WRITE)],
        attrs=[AttrSpec("value", "float", required=True)],
    )

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        dst = op.ins[0]
        x.write("dst", np.full(static_shape(dst), x.attr("value"), dtype=np.float64))

    def lower(self, op: TypedOp, ctx) -> None:
        reg = ctx.rview(op.ins[0])
        ctype, count = fragment_words(reg)
        value = ctx.c(op.attr("value"))
        if ctype == "unsigned":
            value = "0u" if value in ("0", "0.0f", "0.0") else None
            if value is None:
                raise NotLowerable("packed 16-bit fragments can only be filled with 0")
        i = ctx.fresh("i")
        ctx.line("#pragma unroll")
        ctx.line(f"for (int {i} = 0; {i} < {count}; ++{i}) {reg.name}[{i}] = ({ctype})({value});")


class MmaSync(Primitive):
    name = "mma.sync"
    sass_claims = ("HMMA",)
    summary = "acc += a @ b^T on tensor cores, m16n8k16 per warp instruction, fp32 accumulation"
    requires = frozenset({Feature.MMA_SYNC})
    signature = Signature(
        outs=[Slot("acc", {Kind.REGISTERS}, Access.READWRITE)],
        ins=[Slot("a", {Kind.REGISTERS}), Slot("b", {Kind.REGISTERS})],
    )

    def check(self, op: TypedOp, ctx: CheckContext) -> Iterable[Diagnostic]:
        acc, a, b = op.outs[0], op.ins[0], op.ins[1]
        layouts = (acc.layout and acc.layout.name, a.layout and a.layout.name, b.layout and b.layout.name)
        if layouts != ("mma_acc", "mma_a", "mma_b"):
            yield codes.TYPES.at(
                op.op.loc, "`mma.sync` takes an `mma_acc` accumulator and `mma_a`, `mma_b` fragments",
                label=f"layouts {', '.join(str(x) for x in layouts)}",
            )  # fmt: skip
            return
        grids = {tuple(ctx.const(e) for e in t.layout.args) for t in (acc, a, b)}  # type: ignore[union-attr]
        if len(grids) != 1:
            yield codes.TYPES.at(op.op.loc, "`mma.sync` operands must share one warp grid")
        if not b.transpose:
            yield codes.TYPES.at(
                b.expr.loc, "`mma.sync` multiplies by the transpose of its `b` fragment (stored [N, 16])",
                help=f"write `{b.name}^T`",
            )  # fmt: skip
        if a.dtype != b.dtype or a.dtype not in (DType.BF16, DType.F16):
            yield codes.TYPES.at(
                op.op.loc, f"`mma.sync` multiplies bf16 or f16 fragments of one type, got `{a.dtype}` and `{b.dtype}`"
            )
        if acc.dtype is not DType.F32:
            yield codes.TYPES.at(acc.expr.loc, f"`mma.sync` accumulates in f32, not `{acc.dtype}`")
        sa, sb, sc = static_shape(a), static_shape(b), static_shape(acc)
        if sa and sb and sc and (sa[0] != sc[0] or sb[0] != sc[1]):
            yield codes.TYPES.at(
                op.op.loc, f"`mma.sync` of {shape_text(sa)} by {shape_text(sb)}^T does not give "
                f"{shape_text(sc)}", label="shape mismatch",
            )  # fmt: skip

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        a = x.read("a").astype(np.float32)
        b = x.read("b").astype(np.float32)
        acc = x.read("acc").astype(np.float32)
        x.write("acc", acc + a @ b.T)

    def lower(self, op: TypedOp, ctx) -> None:
        acc, a, b = ctx.rview(op.outs[0]), ctx.rview(op.ins[0]), ctx.rview(op.ins[1])
        mi_n = acc.layout.warp_tile[0] // 16
        ni_n = acc.layout.warp_tile[1] // 8
        t = "f16" if a.dtype is DType.F16 else "bf16"
        for mi in range(mi_n):
            for ni in range(ni_n):
                d = [f"{acc.name}[{(mi * ni_n + ni) * 4 + e}]" for e in range(4)]
                av = [f"{a.name}[{mi * 4 + e}]" for e in range(4)]
                bv = [f"{b.name}[{ni * 2 + e}]" for e in range(2)]
                ctx.line(
                    f'asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.{t}.{t}.f32 {{%0, %1, %2, %3}}, '
                    f'{{%4, %5, %6, %7}}, {{%8, %9}}, {{%0, %1, %2, %3}};" : '
                    + ", ".join(f'"+f"({x})' for x in d) + " : "
                    + ", ".join(f'"r"({x})' for x in av + bv) + ");"
                )

    def cost(self, op: TypedOp, ctx: CheckContext) -> CostTerms:
        acc = static_shape(op.outs[0]) or (0, 0)
        f = 2.0 * acc[0] * acc[1] * 16
        return CostTerms(flops=f, tensor_flops=f, dtype=str(op.ins[0].dtype))


class RowDot(Primitive):
    name = "rowdot"
    summary = "per-row dot products of a tile with one vector, fp32 on CUDA cores"
    signature = Signature(
        outs=[Slot("dst", {Kind.REGISTERS}, Access.WRITE)],
        ins=[Slot("a", TILE, mask_attr="oob"), Slot("v", TILE, mask_attr="oob")],
        attrs=[AttrSpec("oob", "word", choices=("zero", "none"))],
    )

    def check(self, op: TypedOp, ctx: CheckContext) -> Iterable[Diagnostic]:
        dst, a, v = op.outs[0], op.ins[0], op.ins[1]
        yield from need_static(op, a)
        sa, sv, sd = static_shape(a), static_shape(v), static_shape(dst)
        if sa and sv and (len(sa) != 2 or numel(sv) != sa[1]):
            yield codes.TYPES.at(op.op.loc, f"`rowdot` needs a [R, D] tile and a [D] vector, got "
                                 f"{shape_text(a.shape)} and {shape_text(v.shape)}")  # fmt: skip
        if sa and sd and numel(sd) != sa[0]:
            yield codes.TYPES.at(op.op.loc, f"`rowdot` of {sa[0]} rows into {shape_text(dst.shape)}")

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        a = x.read("a").astype(np.float32)
        v = x.read("v").astype(np.float32).reshape(-1)
        x.write("dst", (a @ v).reshape(static_shape(op.outs[0])))

    def lower(self, op: TypedOp, ctx) -> None:
        _row_reduce(op, ctx, op.ins[0], op.ins[1])

    def cost(self, op: TypedOp, ctx: CheckContext) -> CostTerms:
        a = op.ins[0]
        s = static_shape(a) or (0, 0)
        return CostTerms(flops=2.0 * numel(s), global_bytes=numel(s) * (a.dtype.bytes if a.dtype else 2))


class SumSq(Primitive):
    name = "sumsq"
    summary = "per-row sums of squares of a tile, fp32"
    signature = Signature(
        outs=[Slot("dst", {Kind.REGISTERS}, Access.WRITE)],
        ins=[Slot("src", TILE, mask_attr="oob")],
        attrs=[AttrSpec("oob", "word", choices=("zero", "none"))],
    )

    def check(self, op: TypedOp, ctx: CheckContext) -> Iterable[Diagnostic]:
        dst, src = op.outs[0], op.ins[0]
        yield from need_static(op, src)
        ss, sd = static_shape(src), static_shape(dst)
        if ss and (len(ss) != 2 or (sd and numel(sd) != ss[0])):
            yield codes.TYPES.at(op.op.loc, f"`sumsq` reduces [R, D] rows into [R], got {shape_text(src.shape)} "
                                 f"into {shape_text(dst.shape)}")  # fmt: skip

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        s = x.read("src").astype(np.float32)
        x.write("dst", (s * s).sum(axis=1, dtype=np.float32).reshape(static_shape(op.outs[0])))

    def lower(self, op: TypedOp, ctx) -> None:
        _row_reduce(op, ctx, op.ins[0], None)

    def cost(self, op: TypedOp, ctx: CheckContext) -> CostTerms:
        src = op.ins[0]
        s = static_shape(src) or (0, 0)
        return CostTerms(flops=2.0 * numel(s), global_bytes=numel(s) * (src.dtype.bytes if src.dtype else 2))


class ArgminUpdate(Primitive):
    name = "argmin.update"
    summary = "fold a tile of scores into a running per-row (min, index): d = bias + scale * tile"
    doc = (
        "For every row r and column j of `tile` whose `bias[j]` is in bounds, the score is "
        "`bias[j] + scale * tile[r, j]`; where the row's smallest score beats `best[r]` strictly, "
        "`best[r]` and `index[r]` (as `base + j`) take it."
    )
    signature = Signature(
        outs=[Slot("best", {Kind.REGISTERS}, Access.READWRITE), Slot("index", {Kind.REGISTERS}, Access.READWRITE)],
        ins=[Slot("tile", {Kind.REGISTERS}), Slot("bias", TILE, mask_attr="oob")],
        attrs=[
            AttrSpec("base", "int", required=True, doc="index of the tile's first column"),
            AttrSpec("scale", "float", default=1.0),
            AttrSpec("oob", "word", choices=("skip", "none"), doc="columns whose bias is out of bounds are skipped"),
            AttrSpec("limit", "int", doc="columns with `base + j >= limit` are skipped"),
        ],
    )

    def check(self, op: TypedOp, ctx: CheckContext) -> Iterable[Diagnostic]:
        best, index, tile, bias = op.outs[0], op.outs[1], op.ins[0], op.ins[1]
        st, sb = static_shape(tile), static_shape(bias)
        if best.dtype is not DType.F32 or index.dtype is not DType.I32:
            yield codes.TYPES.at(op.op.loc, "`argmin.update` keeps an f32 best value and an i32 index")
        if st and len(st) == 2:
            for o in (best, index):
                so = static_shape(o)
                if so and numel(so) != st[0]:
                    yield codes.TYPES.at(o.expr.loc, f"`{o.name}` holds {numel(so)} rows, the tile {st[0]}")
            if sb and numel(sb) != st[1]:
                yield codes.TYPES.at(bias.expr.loc, f"the bias has {numel(sb)} columns, the tile {st[1]}")
        elif st:
            yield codes.TYPES.at(tile.expr.loc, "`argmin.update` folds a [rows, columns] tile")
        pairs = {"mma_acc": "mma_rows", "wgmma_acc": "wgmma_rows", "rows": "rows"}
        tl = tile.layout.name if tile.layout else "rows"
        for o in (best, index):
            ol = o.layout.name if o.layout else "rows"
            if pairs.get(tl) != ol:
                yield codes.TYPES.at(
                    o.expr.loc, f"a tile in layout `{tl}` folds into per-row state in layout `{pairs.get(tl)}`, "
                    f"not `{ol}`",
                )  # fmt: skip

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        tile = x.read("tile").astype(np.float32)
        rows, cols = tile.shape
        bias = x.read("bias").astype(np.float32).reshape(-1)
        valid = x.in_bounds("bias").reshape(-1)
        if x.attr("limit") is not None:
            valid = valid & (int(x.attr("base")) + np.arange(cols) < int(x.attr("limit")))
        scale = np.float32(x.attr("scale", 1.0))
        score = bias[None, :] + scale * tile
        score = np.where(valid[None, :], score, np.inf).astype(np.float32)
        j = np.argmin(score, axis=1)
        m = score[np.arange(rows), j]
        best = x.read("best").astype(np.float32).reshape(-1)
        index = x.read("index").reshape(-1).astype(np.int64)
        better = m < best
        best = np.where(better, m, best)
        index = np.where(better, int(x.attr("base")) + j, index)
        x.write("best", best.reshape(static_shape(op.outs[0])))
        x.write("index", index.reshape(static_shape(op.outs[1])))

    def lower(self, op: TypedOp, ctx) -> None:
        best, index, tile = ctx.rview(op.outs[0]), ctx.rview(op.outs[1]), ctx.rview(op.ins[0])
        bias_op = op.ins[1]
        view = ctx.gview(bias_op) if bias_op.kind is Kind.GLOBAL else ctx.sview(bias_op)
        is_masked = masked(op) and bias_op.kind is Kind.GLOBAL
        base = ctx.c(op.attr("base"))
        scale = ctx.c(op.attr("scale")) if op.attr("scale") is not None else "1.0f"
        limit = ctx.c(op.attr("limit")) if op.attr("limit") is not None else None
        inf = "__int_as_float(0x7f800000)"

        def bias_at(col: str) -> str:
            value = to_f32(f"*{view.addr([col])}", bias_op.dtype)
            conds = ([view.in_bounds([col])] if is_masked else []) + ([f"{base} + {col} < {limit}"] if limit else [])
            return f"(({' && '.join(conds)}) ? {value} : {inf})" if conds else value

        def update(slot: str, score: str, col: str) -> None:
            ctx.line(f"{{ const float cake_s = {score};")
            ctx.line(f"  if (cake_s < {best.name}[{slot}]) {{ {best.name}[{slot}] = cake_s; "
                     f"{index.name}[{slot}] = {base} + {col}; }} }}")  # fmt: skip

        layout = tile.layout
        if layout.name == "rows":
            per_thread, cols, _ = rows_layout(tile)
            for c in range(cols):
                bz = ctx.fresh("bz")
                ctx.line(f"const float {bz} = {bias_at(str(c))};")
                for j in range(per_thread):
                    update(str(j), f"fmaf({scale}, {tile.name}[{j * cols + c}], {bz})", str(c))
            return
        if layout.name == "wgmma_acc":
            mi_n, ni_n = layout.shape[0] // 64, layout.shape[1] // 8  # m64 blocks; n8 column groups
            col0 = f"(({ctx.lane} & 3) << 1)"
        elif layout.name == "mma_acc":
            wm_n, wn_n = layout.warp_grid
            tm, tn = layout.warp_tile
            mi_n, ni_n = tm // 16, tn // 8
            col0 = f"({ctx.iwarp} % {wn_n}) * {tn} + (({ctx.lane} & 3) << 1)"
        else:
            raise NotLowerable(f"argmin over a `{layout.name}` tile is not lowered yet")
        bz = ctx.fresh("bz")
        ctx.line(f"float {bz}[{ni_n * 2}];")
        for ni in range(ni_n):
            for e in range(2):
                ctx.line(f"{bz}[{ni * 2 + e}] = {bias_at(f'{col0} + {ni * 8 + e}')};")
        # per row: the tile's own minimum with its column as a compile-time constant (a select of an
        # immediate), folded into the running best once per tile
        for mi in range(mi_n):
            for h in range(2):
                slot = mi * 2 + h
                ctx.line(f"{{ float cake_tv = __int_as_float(0x7f800000); int cake_tj = 0;")
                for ni in range(ni_n):
                    for e in range(2):
                        acc = f"{tile.name}[{(mi * ni_n + ni) * 4 + 2 * h + e}]"
                        ctx.line(f"  {{ const float cake_s = fmaf({scale}, {acc}, {bz}[{ni * 2 + e}]); "
                                 f"if (cake_s < cake_tv) {{ cake_tv = cake_s; cake_tj = {ni * 8 + e}; }} }}")  # fmt: skip
                ctx.line(f"  if (cake_tv < {best.name}[{slot}]) {{ {best.name}[{slot}] = cake_tv; "
                         f"{index.name}[{slot}] = {base} + {col0} + cake_tj; }} }}")  # fmt: skip

    def cost(self, op: TypedOp, ctx: CheckContext) -> CostTerms:
        s = static_shape(op.ins[0]) or (0, 0)
        return CostTerms(flops=3.0 * numel(s))


class ArgminReduce(Primitive):
    name = "argmin.reduce"
    summary = "combine partial per-row (min, index) pairs across the threads and warps that share a row"
    signature = Signature(
        outs=[Slot("best", {Kind.REGISTERS}, Access.WRITE), Slot("index", {Kind.REGISTERS}, Access.WRITE)],
        ins=[
            Slot("part_best", {Kind.REGISTERS}),
            Slot("part_index", {Kind.REGISTERS}),
            Slot("scratch", {Kind.SHARED}, Access.READWRITE, optional=True,
                 doc="shared memory for combining across warps; not needed within a warp (wgmma_rows)"),
        ],
    )

    def check(self, op: TypedOp, ctx: CheckContext) -> Iterable[Diagnostic]:
        best, index, pb, pi = op.outs + op.ins[:2]
        scratch = op.ins[2] if len(op.ins) > 2 else None
        src = pb.layout.name if pb.layout else "rows"
        want = "wgmma_rows" if src == "wgmma_rows" else "rows"
        for o in (best, index):
            got = o.layout.name if o.layout else "rows"
            if got != want:
                yield codes.TYPES.at(o.expr.loc, f"`argmin.reduce` of `{src}` partials writes `{want}` tiles, "
                                     f"`{o.name}` is `{got}`")  # fmt: skip
        if src == "mma_rows":
            if scratch is None:
                yield codes.TYPES.at(op.op.loc, "combining `mma_rows` partials across warps needs a shared scratch buffer")
                return
            sp = static_shape(pb)
            wn = ctx.const(pb.layout.args[1]) if pb.layout and len(pb.layout.args) == 2 else 1  # type: ignore[union-attr]
            need = 2 * numel(sp) * (wn or 1) if sp else 0
            yield from need_scratch(op, scratch, need, "a value and an index per row and warp column")

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        x.write("best", x.read("part_best").reshape(static_shape(op.outs[0])))
        x.write("index", x.read("part_index").reshape(static_shape(op.outs[1])))

    def lower(self, op: TypedOp, ctx) -> None:
        best, index, pb, pi = (ctx.rview(o) for o in op.outs + op.ins[:2])
        layout = pb.layout
        ctx.helper("argmin_better", PAIR_BETTER)
        if layout.name == "wgmma_rows":
            # the four threads of a quad hold the same rows: combine them with shuffles, in place
            for slot in range(layout.regs_per_thread):
                ctx.line(f"{{ float cake_v = {pb.name}[{slot}]; int cake_x = {pi.name}[{slot}];")
                for off in (1, 2):
                    ctx.line(f"  {{ const float ov = __shfl_xor_sync(0xffffffffu, cake_v, {off}); "
                             f"const int ox = __shfl_xor_sync(0xffffffffu, cake_x, {off}); "
                             f"if (cake_argmin_better(ov, ox, cake_v, cake_x)) {{ cake_v = ov; cake_x = ox; }} }}")  # fmt: skip
                ctx.line(f"  {best.name}[{slot}] = cake_v; {index.name}[{slot}] = cake_x; }}")
            return
        per_thread, _, rows = rows_layout(best)
        if layout.name == "rows":
            ctx.line("#pragma unroll")
            ctx.line(f"for (int cake_j = 0; cake_j < {per_thread}; ++cake_j) "
                     f"{{ {best.name}[cake_j] = {pb.name}[cake_j]; {index.name}[cake_j] = {pi.name}[cake_j]; }}")
            return
        if layout.name != "mma_rows":
            raise NotLowerable(f"argmin.reduce from `{layout.name}` is not lowered yet")
        scratch = ctx.sview(op.ins[2])
        wm_n, wn_n = layout.warp_grid
        tm = layout.warp_tile[0]
        sbase = f"((float*){scratch.base})"
        for mi in range(tm // 16):
            for h in range(2):
                slot = mi * 2 + h
                ctx.line(f"{{ float cake_v = {pb.name}[{slot}]; int cake_x = {pi.name}[{slot}];")
                for off in (1, 2):
                    ctx.line(f"  {{ const float ov = __shfl_xor_sync(0xffffffffu, cake_v, {off}); "
                             f"const int ox = __shfl_xor_sync(0xffffffffu, cake_x, {off}); "
                             f"if (cake_argmin_better(ov, ox, cake_v, cake_x)) {{ cake_v = ov; cake_x = ox; }} }}")  # fmt: skip
                row = f"({ctx.iwarp} / {wn_n}) * {tm} + {mi * 16} + ({ctx.lane} >> 2) + {8 * h}"
                ctx.line(f"  if (({ctx.lane} & 3) == 0) {{ {sbase}[({row}) * {wn_n} + {ctx.iwarp} % {wn_n}] = cake_v; "
                         f"{sbase}[{rows * wn_n} + ({row}) * {wn_n} + {ctx.iwarp} % {wn_n}] = __int_as_float(cake_x); }} }}")  # fmt: skip
        ctx.line(ctx.sync_instance())
        ctx.line("#pragma unroll")
        ctx.line(f"for (int cake_j = 0; cake_j < {per_thread}; ++cake_j) {{")
        ctx.line(f"  const int cake_r = {ctx.itid} + {ctx.threads} * cake_j;")
        ctx.line(f"  float cake_v = __int_as_float(0x7f800000); int cake_x = -1;")
        ctx.line(f"  if (cake_r < {rows}) {{")
        ctx.line("    #pragma unroll")
        ctx.line(f"    for (int w = 0; w < {wn_n}; ++w) {{ const float ov = {sbase}[cake_r * {wn_n} + w]; "
                 f"const int ox = __float_as_int({sbase}[{rows * wn_n} + cake_r * {wn_n} + w]); "
                 f"if (cake_argmin_better(ov, ox, cake_v, cake_x)) {{ cake_v = ov; cake_x = ox; }} }}")  # fmt: skip
        ctx.line("  }")
        ctx.line(f"  {best.name}[cake_j] = cake_v; {index.name}[cake_j] = cake_x;")
        ctx.line("}")
        ctx.line(ctx.sync_instance())


def _row_reduce(op: TypedOp, ctx, a_op, v_op) -> None:
    """Per-row sums over the last axis of a [R, D] global tile: of squares, or of products with a vector."""
    if a_op.kind is not Kind.GLOBAL or (v_op is not None and v_op.kind is not Kind.GLOBAL):
        raise NotLowerable("row reductions read global tiles")
    dst = ctx.rview(op.outs[0])
    per_thread, _, rows = rows_layout(dst)
    a = ctx.gview(a_op)
    v = ctx.gview(v_op) if v_op is not None else None
    _, d_sz = static_sizes(a)
    is_masked = masked(op)
    f16 = 1 if a_op.dtype is DType.F16 else 0
    vec = a_op.dtype in (DType.BF16, DType.F16) and d_sz % 8 == 0 and (v is None or v_op.dtype == a_op.dtype)
    ctx.helper("unpack8", DOT8)
    j = ctx.fresh("j")
    ctx.line("#pragma unroll")
    ctx.line(f"for (int {j} = 0; {j} < {per_thread}; ++{j}) {{")
    ctx.line(f"  const int cake_r = {ctx.itid} + {ctx.threads} * {j};")
    ctx.line("  float cake_acc = 0.0f;")
    cond = [f"cake_r < {rows}"] if rows % ctx.threads else []
    if is_masked:
        cond.append(a.in_bounds(["cake_r", "0"]))
    ctx.line(f"  if ({' && '.join(cond) or 'true'}) {{")
    ctx.line(f"    const auto* cake_pa = {a.addr(['cake_r', '0'])};")
    if v is not None:
        ctx.line(f"    const auto* cake_pv = {v.addr(['0'] * len(v.tile_dims))};")
    if vec:
        ctx.line("    #pragma unroll 4")
        ctx.line(f"    for (int cake_d = 0; cake_d < {d_sz}; cake_d += 8) {{")
        ctx.line("      float fa[8];")
        ctx.line(f"      cake_unpack8(*(const uint4*)(cake_pa + cake_d), fa, {f16});")
        if v is not None:
            ctx.line("      float fv[8];")
            ctx.line(f"      cake_unpack8(*(const uint4*)(cake_pv + cake_d), fv, {f16});")
            ctx.line("      #pragma unroll")
            ctx.line("      for (int e = 0; e < 8; ++e) cake_acc = fmaf(fa[e], fv[e], cake_acc);")
        else:
            ctx.line("      #pragma unroll")
            ctx.line("      for (int e = 0; e < 8; ++e) cake_acc = fmaf(fa[e], fa[e], cake_acc);")
        ctx.line("    }")
    else:
        ctx.line(f"    for (int cake_d = 0; cake_d < {d_sz}; ++cake_d) {{")
        ctx.line(f"      const float fa = {to_f32('cake_pa[cake_d]', a_op.dtype)};")
        other = to_f32("cake_pv[cake_d]", v_op.dtype) if v is not None else "fa"
        ctx.line(f"      cake_acc = fmaf(fa, {other}, cake_acc);")
        ctx.line("    }")
    ctx.line("  }")
    ctx.line(f"  {dst.name}[{j}] = cake_acc;")
    ctx.line("}")


PRIMITIVES: tuple[type[Primitive], ...] = (Fill, MmaSync, RowDot, SumSq, ArgminUpdate, ArgminReduce)
