"""Row gathers: the rows of a global tile that an index register tile selects, loaded into a `rows`
register tile (``gather``) or summed by runs of equal keys straight into a global tensor
(``segment.gather_add``).

``gather dst <- src, index[, oob=zero|fill][, value=V]``: ``dst[r, :] = src[index[r], :]`` (``dst[r] =
src[index[r]]`` for vectors), where ``src`` is a [M, C] (or [M]) slice of a global tensor whose first
tile dimension the indices select among, ``index`` an [R] integer `rows` tile, ``dst`` an [R, C] (or [R])
`rows` tile of the same element kind (16-bit floats widen to f32 as `load` does). The K-Means update
gathers each cluster's points by their indices sorted by cluster: x is read once, in cluster order,
without a sorted copy of it.

**Bounds hold by construction.** No rule can prove data-dependent indices in bounds, so none is asked
to: a row whose index lies outside ``[0, M)`` is skipped, always, on the GPU and in the interpreter
alike, and reads as ``value`` (0 when not given); no memory outside ``src``'s tile is touched for it.
The verifier's rules see the read of the whole tile ``src`` (its bounds proved as any tile's, its races
with every writer of the tile), which is exactly what a gather may read. ``oob`` masks the tile itself,
as for `load`: elements of the tile outside its tensor (a column span past the tensor's edge) read as 0
(``oob=zero``) or ``value`` (``oob=fill``); without it the bounds rule asks for the tile to lie inside.

Lowering: each thread reads the rows it holds of ``dst``. Its row's index is checked once
(``(unsigned)index < M``); the row's columns are read with vector loads of up to 16 bytes where they
are contiguous and aligned in ``src`` (decided at compile time by :func:`~cake_core.lower.tiles.vector_elems`,
as `load` decides for a `rows` tile: the tensor's rows a multiple of the vector, the column start on the
grid), else one element at a time; a skipped row or element is read from the tensor's first element
(a load that never faults) and replaced by ``value``, without a branch.

Cost: the bytes of the gathered rows, each rounded up to whole 32-byte sectors (what the memory system
moves for a row read on its own: a 4-byte index gathered costs a sector).

``segment.gather_add dst <- src, index, keys[, oob=skip]``: for every row r in order, ``dst[keys[r], :] +=
src[index[r], :]``, the rows of a run of equal consecutive keys summed first in fp32 registers and added
once. ``src`` is a [M, C] slice of a global tensor (bf16, f16 or f32), ``dst`` a [K, C] slice of a
global f32 tensor, ``index`` and ``keys`` [R] integer `rows` tiles. An index outside ``[0, M)`` adds
nothing (checked at run time, as ``gather``'s); a key outside ``dst``'s rows is skipped with
``oob=skip`` and faults in the interpreter without it, as ``atomic.add``'s. Its result equals
``gather`` then ``segment.add`` up to the order of fp32 additions. It is the centroid update's inner
step once the points are sorted by cluster: x read once, in order, and one atomic per run.

Lowering: each warp walks its rows of the tile in order (rows ``32 w + i`` of every ``threads`` block
for warp ``w``), its lanes across the columns (``C / 32`` consecutive columns a lane, so C is 32, 64,
128 or 256): a group of 8 rows is loaded first, each row's index and key taken from the lane that holds
them by a shuffle, each lane's columns read with one 16-, 8- or 4-byte load where aligned (the warp
reads a whole row at once); then the group is added into fp32 registers in order, and where the key
changes the run so far is added to ``dst`` with ``red.global.add.v4/.v2.f32`` (sm_90 on, where aligned;
scalar otherwise) by every lane. No shuffles between lanes for the sums, one vector reduction per lane
and run. A run that spans the rows of two warps (or two role instances) is added once by each.
Cost: the gathered rows' bytes, plus one run per warp added into ``dst`` (read and write): the fewest
possible; the runs beyond depend on the keys, which the cost terms cannot see.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from cake_core.diagnostics import codes
from cake_core.diagnostics.diagnostic import Diagnostic
from cake_core.ir.primitive import (
    Access, AttrSpec, CheckContext, CostTerms, ExecContext, Kind, NotLowerable, Primitive, Signature, Slot,
    TypedOp, masked, static_shape,
)  # fmt: skip
from cake_core.ir.types import DType
from cake_core.lower.cuda import fragment_words
from cake_core.lower.tiles import vector_elems
from cake_core.primitives._common import need_static, same_kind, shape_text
from cake_core.primitives._lower import convert, rows_elements, rows_layout
from cake_core.primitives._vocab import INTEGERS, need_dtype, need_layout, need_rank
from cake_core.primitives.load import unpack_vector, vector_width
from cake_core.primitives.reduce import add_rows, red_scalar, red_vector

#: bytes the memory system moves for the smallest read
SECTOR = 32
#: rows a warp of `segment.gather_add` loads before it adds them
GROUP = 8


class Gather(Primitive):
    name = "gather"
    summary = "the rows of a global tile an index tile selects, into a `rows` register tile (indices checked)"
    doc = (
        "`gather dst <- src, index`: for every row r, `dst[r, :] = src[index[r], :]` when `0 <= index[r] < M` "
        "(M the rows of the tile `src`), else `value` (0 when not given): a row outside is skipped, never "
        "read, on the GPU as in the interpreter. `src` is a [M, C] or [M] slice of a global tensor, `index` "
        "an [R] integer `rows` tile, `dst` an [R, C] or [R] `rows` tile; floats convert as `load` converts "
        "them. `oob=zero` / `oob=fill` mask elements of the tile outside its tensor, as for `load`."
    )
    signature = Signature(
        outs=[Slot("dst", {Kind.REGISTERS}, Access.WRITE, doc="[R] or [R, C] `rows` tile of the gathered rows")],
        ins=[Slot("src", {Kind.GLOBAL}, Access.READ, mask_attr="oob",
                  doc="[M] or [M, C] slice of a global tensor; the indices select among its M rows"),
             Slot("index", {Kind.REGISTERS}, doc="[R] row indices into `src`, integers, `rows` layout")],
        attrs=[AttrSpec("oob", "word", choices=("zero", "fill", "none"),
                        doc="elements of `src`'s tile outside its tensor read as 0 (`zero`) or `value` (`fill`)"),
               AttrSpec("value", "float", default=0.0,
                        doc="what a skipped row (index outside `src`'s rows) reads as, and with `oob=fill` an "
                            "element outside the tensor")],
    )  # fmt: skip

    def check(self, op: TypedOp, ctx: CheckContext) -> Iterable[Diagnostic]:
        dst, src, index = op.outs[0], op.ins[0], op.ins[1]
        yield from need_static(op, dst)
        yield from need_static(op, index)
        yield from need_rank(op, src, (1, 2), "a [rows] or [rows, columns] source")
        yield from need_rank(op, dst, (1, 2), "a [R] or [R, C] destination")
        yield from need_rank(op, index, (1,), "an [R] tile of row indices")
        yield from need_layout(op, dst, ("rows",), "a `rows` register tile")
        yield from need_layout(op, index, ("rows",), "row indices in a `rows` register tile")
        yield from need_dtype(op, index, INTEGERS, "integer row indices")
        sd, si = static_shape(dst), static_shape(index)
        if sd and si and len(si) == 1 and si[0] != sd[0]:
            yield codes.TYPES.at(
                index.expr.loc, f"`{index.name}` holds {si[0]} indices for the {sd[0]} rows of `{dst.name}`"
            )
        if sd and len(src.shape) in (1, 2) and len(sd) != len(src.shape):
            yield codes.TYPES.at(
                op.op.loc, f"`gather` reads rows of {shape_text(src.shape)} into rows of {shape_text(sd)}: both "
                "vectors or both matrices", label="shape mismatch",
            )  # fmt: skip
        elif sd and len(sd) == 2 and len(src.shape) == 2:
            if not isinstance(src.shape[1], int):
                yield codes.TYPES.at(src.expr.loc, f"the rows of `{src.name}` must have a length known at compile time")
            elif src.shape[1] != sd[1]:
                yield codes.TYPES.at(
                    op.op.loc, f"`gather` reads rows of {src.shape[1]} elements into rows of {sd[1]}",
                    label="row lengths differ",
                )  # fmt: skip
        yield from same_kind(op, dst, src)

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        src = x.read("src")
        rows = src.shape[0]
        fill = float(x.attr("value", 0.0))
        table = src.reshape(rows, -1)
        if x.attr("oob") == "fill":
            table = np.where(x.in_bounds("src").reshape(rows, -1), table, fill)
        keys = x.read("index").reshape(-1).astype(np.int64)
        inside = (keys >= 0) & (keys < rows)
        out = np.full((keys.size, table.shape[1]), fill).astype(table.dtype)
        out[inside] = table[keys[inside]]
        x.write("dst", out.reshape(static_shape(op.outs[0])))

    def lower(self, op: TypedOp, ctx) -> None:
        dst, src, index = op.outs[0], op.ins[0], op.ins[1]
        reg, keys = ctx.rview(dst), ctx.rview(index)
        view = ctx.gview(src)
        per_thread, cols, _ = rows_layout(reg)
        if rows_layout(keys)[0] != per_thread:
            raise NotLowerable("the rows and their indices must spread over the threads alike")
        sizes = view.sizes
        if len(sizes) == 2 and not isinstance(sizes[1], int):
            raise NotLowerable("the gathered rows' length must be known at compile time")
        ctype = fragment_words(reg)[0]
        value = op.attr("value")
        fill = ctx.c(value) if value is not None else "0"
        fill_oob = fill if op.attr("oob") is not None and getattr(op.attr("oob"), "id", None) == "fill" else "0"
        width = vector_width(src.dtype, dst.dtype, vector_elems(src, view, ctx.model.env, cols, 16))
        key, row_ok = ctx.fresh("gkey"), ctx.fresh("gok")

        def per_row(r: str, j: str) -> str:
            exists = f"{r} < {reg.layout.shape[0]}" if reg.layout.shape[0] % ctx.threads else "true"
            return (f"const int {key} = ({exists}) ? (int)({keys.name}[{j}]) : -1;\n"
                    f"const bool {row_ok} = (unsigned){key} < (unsigned)({sizes[0]});")  # fmt: skip

        with rows_elements(ctx, reg, per_row) as e:
            local = [key, e.col] if len(sizes) == 2 else [key]
            inside = view.in_bounds(local) if masked(op) else "true"
            ok = row_ok if inside == "true" else f"{row_ok} && {inside}"
            def pick(v: str) -> str:
                if inside == "true" or fill_oob == fill:
                    return f"{ok} ? ({ctype})({v}) : ({ctype})({fill})"
                # a skipped row reads `value`; an element outside the tensor 0
                return f"{row_ok} ? ({inside} ? ({ctype})({v}) : ({ctype})({fill_oob})) : ({ctype})({fill})"

            addr = view.read_addr(local, ok)
            guard = [e.exists] if e.exists else []
            if width == 1:
                cond = f"if ({' && '.join(guard)}) " if guard else ""
                ctx.line(f"    {cond}{reg.name}[{e.slot}] = {pick(convert(f'*{addr}', src.dtype, dst.dtype))};")
            else:
                # the first of `width` aligned consecutive columns reads them all with one vector load (a
                # masked group is in or out of the tensor as a whole: the tensor's rows are `width`-aligned)
                ctx.line(f"    if ({' && '.join(guard + [f'({e.col}) % {width} == 0'])}) {{")
                values = unpack_vector(ctx, addr, src.dtype, dst.dtype, width, "      ")
                for k, v in enumerate(values):
                    ctx.line(f"      {reg.name}[{e.slot} + {k}] = {pick(v)};")
                ctx.line("    }")

    def cost(self, op: TypedOp, ctx: CheckContext) -> CostTerms:
        dst, src = op.outs[0], op.ins[0]
        shape = static_shape(dst) or (0,)
        row_bytes = (shape[1] if len(shape) == 2 else 1) * (src.dtype.bytes if src.dtype else 4)
        sectors = -(-row_bytes // SECTOR)
        return CostTerms(global_bytes=float(shape[0] * sectors * SECTOR))


class SegmentGatherAdd(Primitive):
    name = "segment.gather_add"
    summary = "add the rows an index tile picks to the rows its keys select, each run of equal keys summed once"
    doc = (
        "`segment.gather_add dst <- src, index, keys, oob=skip`: for r in order, `dst[keys[r], :] += "
        "src[index[r], :]`; the rows of a run of equal consecutive keys are summed in fp32 first and added once. "
        "An index outside `src`'s M rows adds nothing (checked at run time); a key outside `dst`'s rows is "
        "skipped with `oob=skip` and faults without it. `src` [M, C] bf16, f16 or f32 and `dst` [K, C] f32 are "
        "slices of global tensors, `index` and `keys` [R] integer `rows` tiles. Its effect on `dst` is atomic, "
        "as `atomic.add`'s. Lowered with a warp's lanes across the columns (C in 32, 64, 128, 256): no shuffles "
        "for the sums, one vector reduction per lane and run."
    )
    signature = Signature(
        outs=[Slot("dst", {Kind.GLOBAL}, Access.READWRITE, mask_attr="oob", atomic=True,
                   doc="[K, C] f32 rows the keys select among")],
        ins=[Slot("src", {Kind.GLOBAL}, Access.READ, doc="[M, C] rows the indices select among"),
             Slot("index", {Kind.REGISTERS}, doc="[R] row indices into `src`, integers, `rows` layout"),
             Slot("keys", {Kind.REGISTERS}, doc="[R] row indices into `dst`, best sorted, `rows` layout")],
        attrs=[AttrSpec("oob", "word", choices=("skip", "none"),
                        doc="rows whose key lies outside `dst` are skipped; without it such a key faults")],
    )  # fmt: skip

    def check(self, op: TypedOp, ctx: CheckContext) -> Iterable[Diagnostic]:
        dst, src, index, keys = op.outs[0], *op.ins
        yield from need_rank(op, dst, (2,), "a [rows, columns] destination")
        yield from need_rank(op, src, (2,), "a [rows, columns] source")
        yield from need_dtype(op, dst, frozenset({DType.F32}), "an f32 destination")
        yield from need_dtype(op, src, frozenset({DType.BF16, DType.F16, DType.F32}), "a bf16, f16 or f32 source")
        for o in (index, keys):
            yield from need_static(op, o)
            yield from need_rank(op, o, (1,), "[R] register vectors")
            yield from need_layout(op, o, ("rows",), "`rows` register tiles")
            yield from need_dtype(op, o, INTEGERS, "integer row indices")
        si, sk = static_shape(index), static_shape(keys)
        if si and sk and si != sk:
            yield codes.TYPES.at(op.op.loc, f"`{index.name}` and `{keys.name}` must hold as many rows")
        cols = [o.shape[1] for o in (dst, src) if len(o.shape) == 2]
        if len(cols) == 2 and all(isinstance(c, int) for c in cols) and cols[0] != cols[1]:
            yield codes.TYPES.at(
                op.op.loc, f"`segment.gather_add` adds rows of {cols[1]} elements into rows of {cols[0]}",
                label="row lengths differ",
            )  # fmt: skip

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        src = x.read("src")
        table = src.reshape(src.shape[0], -1)
        idx = x.read("index").reshape(-1).astype(np.int64)
        vals = np.zeros((idx.size, table.shape[1]), np.float32)
        picked = (idx >= 0) & (idx < table.shape[0])
        vals[picked] = table[idx[picked]]
        add_rows(op, x, vals, x.read("keys"), op.ins[2].name, segmented=True)

    def lower(self, op: TypedOp, ctx) -> None:
        dst, src, index, keys = op.outs[0], *op.ins
        dview, sview = ctx.gview(dst), ctx.gview(src)
        idx, kv = ctx.rview(index), ctx.rview(keys)
        per_thread, _, rows = rows_layout(idx)
        if rows_layout(kv)[0] != per_thread:
            raise NotLowerable("the indices and keys must spread over the threads alike")
        cols = sview.sizes[1] if len(sview.sizes) == 2 else None
        if not isinstance(cols, int) or cols % 32 or cols // 32 not in (1, 2, 4, 8):
            raise NotLowerable("a warp's lanes take the columns: rows of 32, 64, 128 or 256 elements")
        per_lane = cols // 32
        env = ctx.model.env
        lw = vector_width(src.dtype, DType.F32, vector_elems(src, sview, env, per_lane, 16))
        rw = vector_elems(dst, dview, env, per_lane, 16) if ctx.target.sm >= 90 else 1
        lane, guard = ctx.lane, masked(op)
        acc, cur, vals, ks = ctx.fresh("acc"), ctx.fresh("cur"), ctx.fresh("rowv"), ctx.fresh("rowk")
        col0 = f"{lane} * {per_lane}"
        none = "(-2147483647 - 1)"  # the key of no row (one past the tile, or before the first run)
        ctx.line("{")
        ctx.line(f"  float {acc}[{per_lane}] = {{}};")
        ctx.line(f"  int {cur} = {none};")
        ctx.line(f"  float {vals}[{GROUP}][{per_lane}];")
        ctx.line(f"  int {ks}[{GROUP}];")

        def flush(indent: str) -> None:
            # every lane adds its columns of the run that ends here
            ok = [f"{cur} != {none}"] + ([f"(unsigned){cur} < (unsigned)({dview.sizes[0]})"] if guard else [])
            for k in range(0, per_lane, rw):
                local = [cur, f"{col0} + {k}"]
                inside = dview.in_bounds(local) if guard else "true"
                cond = " && ".join(ok + ([inside] if inside != "true" else []))
                values = [f"{acc}[{k + e}]" for e in range(rw)]
                if rw > 1:
                    ctx.line(f"{indent}if ({cond}) {red_vector(dview.addr(local), values)}")
                else:
                    ctx.line(f"{indent}if ({cond}) {red_scalar('global', 'f32', 'f', dview.addr(local), values[0])}")

        for j in range(per_thread):
            for g in range(0, 32, GROUP):
                if ctx.threads * j + g >= rows:
                    break  # these rows are past the tile in every warp
                ctx.line(f"  {{  // rows {ctx.threads} * {j} + 32 * warp + {g} ..")
                for i in range(GROUP):
                    r, key, ok = ctx.fresh("r"), ctx.fresh("gi"), ctx.fresh("gok")
                    row = f"{ctx.threads * j} + 32 * {ctx.iwarp} + {g + i}"
                    ctx.line(f"    const int {r} = {row};")
                    ctx.line(f"    const int {key} = __shfl_sync(0xffffffffu, (int)({idx.name}[{j}]), {g + i});")
                    ctx.line(f"    {ks}[{i}] = __shfl_sync(0xffffffffu, (int)({kv.name}[{j}]), {g + i});")
                    if rows % ctx.threads:
                        ctx.line(f"    if ({r} >= {rows}) {ks}[{i}] = {none};")
                    ctx.line(f"    const bool {ok} = {r} < {rows} && (unsigned){key} < (unsigned)({sview.sizes[0]});")
                    for k in range(0, per_lane, lw):
                        addr = sview.read_addr([key, f"{col0} + {k}"], ok)
                        if lw == 1:
                            got = [convert(f"*{addr}", src.dtype, DType.F32)]
                        else:
                            got = unpack_vector(ctx, addr, src.dtype, DType.F32, lw, "    ")
                        for e, v in enumerate(got):
                            ctx.line(f"    {vals}[{i}][{k + e}] = {ok} ? (float)({v}) : 0.0f;")
                ctx.line("  }")
                ii, cc = ctx.fresh("i"), ctx.fresh("c")
                ctx.line("  #pragma unroll")
                ctx.line(f"  for (int {ii} = 0; {ii} < {GROUP}; ++{ii}) {{")
                ctx.line(f"    if ({ks}[{ii}] == {none}) continue;")
                ctx.line(f"    if ({ks}[{ii}] != {cur}) {{")
                flush("      ")
                each = f"for (int {cc} = 0; {cc} < {per_lane}; ++{cc})"
                ctx.line(f"      #pragma unroll\n      {each} {acc}[{cc}] = 0.0f;")
                ctx.line(f"      {cur} = {ks}[{ii}];")
                ctx.line("    }")
                ctx.line(f"    #pragma unroll\n    {each} {acc}[{cc}] += {vals}[{ii}][{cc}];")
                ctx.line("  }")
        flush("  ")
        ctx.line("}")

    def cost(self, op: TypedOp, ctx: CheckContext) -> CostTerms:
        dst, src, index = op.outs[0], op.ins[0], op.ins[1]
        rows = static_shape(index)[0] if static_shape(index) else 0
        cols = src.shape[1] if len(src.shape) == 2 and isinstance(src.shape[1], int) else 0
        row_bytes = cols * (src.dtype.bytes if src.dtype else 4)
        gathered = rows * -(-row_bytes // SECTOR) * SECTOR
        runs = 2.0 * ctx.role_warps() * cols * 4  # one run per warp, read and written at the L2
        # the lanes of a warp add a run's consecutive columns: one L2 request per 32-byte sector
        return CostTerms(flops=float(rows * cols), global_bytes=float(gathered) + runs,
                         global_atomics=-(-runs / 2 // SECTOR))  # fmt: skip


PRIMITIVES: tuple[type[Primitive], ...] = (Gather, SegmentGatherAdd)
