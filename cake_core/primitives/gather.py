"""Row gathers: the rows of a global tile that an index register tile selects, into a `rows` register tile.

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
(``(unsigned)index < M``); the row's columns are read with 16-byte vector loads where they are
contiguous and aligned in ``src`` (decided at compile time by :func:`~cake_core.lower.tiles.vector_elems`,
as `load` decides for a `rows` tile: the tensor's rows a multiple of the vector, the column start on the
grid), else one element at a time; a skipped row or element is read from the tensor's first element
(a load that never faults) and replaced by ``value``, without a branch.

Cost: the bytes of the gathered rows, each rounded up to whole 32-byte sectors (what the memory system
moves for a row read on its own: a 4-byte index gathered costs a sector).
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
from cake_core.lower.cuda import fragment_words
from cake_core.lower.tiles import vector_elems
from cake_core.primitives._common import need_static, shape_text
from cake_core.primitives._lower import convert, rows_elements, rows_layout
from cake_core.primitives._vocab import INTEGERS, need_dtype, need_layout, need_rank
from cake_core.primitives.load import _unpack, _vector_width

#: bytes the memory system moves for the smallest read
SECTOR = 32


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
        if dst.dtype is not None and src.dtype is not None and dst.dtype.is_float != src.dtype.is_float:
            yield codes.TYPES.at(
                op.op.loc, f"`gather` converts between float types or between integer types, not `{src.dtype}` "
                f"to `{dst.dtype}`",
            )  # fmt: skip

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
        width = _vector_width(src.dtype, dst.dtype, vector_elems(src, view, ctx.model.env, cols, 16))
        key, row_ok = ctx.fresh("gkey"), ctx.fresh("gok")

        def per_row(r: str, j: str) -> str:
            exists = f"{r} < {reg.layout.shape[0]}" if reg.layout.shape[0] % ctx.threads else "true"
            return (f"const int {key} = ({exists}) ? (int)({keys.name}[{j}]) : -1;\n"
                    f"const bool {row_ok} = (unsigned){key} < (unsigned)({sizes[0]});")  # fmt: skip

        with rows_elements(ctx, reg, per_row) as e:
            local = [key, e.col] if len(sizes) == 2 else [key]
            inside = view.in_bounds(local) if masked(op) else "true"
            ok = row_ok if inside == "true" else f"{row_ok} && {inside}"
            if inside == "true" or fill_oob == fill:
                pick = f"{ok} ? ({ctype})(%s) : ({ctype})({fill})"
            else:  # a skipped row reads `value`; an element outside the tensor 0
                pick = f"{row_ok} ? ({inside} ? ({ctype})(%s) : ({ctype})({fill_oob})) : ({ctype})({fill})"
            addr = view.read_addr(local, ok)
            guard = [e.exists] if e.exists else []
            if width == 1:
                cond = f"if ({' && '.join(guard)}) " if guard else ""
                ctx.line(f"    {cond}{reg.name}[{e.slot}] = {pick % convert(f'*{addr}', src.dtype, dst.dtype)};")
            else:
                # the first of `width` aligned consecutive columns reads them all with one vector load (a
                # masked group is in or out of the tensor as a whole: the tensor's rows are `width`-aligned)
                ctx.line(f"    if ({' && '.join(guard + [f'({e.col}) % {width} == 0'])}) {{")
                values = _unpack(ctx, addr, src.dtype, dst.dtype, width, "      ")
                for k, v in enumerate(values):
                    ctx.line(f"      {reg.name}[{e.slot} + {k}] = {pick % v};")
                ctx.line("    }")

    def cost(self, op: TypedOp, ctx: CheckContext) -> CostTerms:
        dst, src = op.outs[0], op.ins[0]
        shape = static_shape(dst) or (0,)
        row_bytes = (shape[1] if len(shape) == 2 else 1) * (src.dtype.bytes if src.dtype else 4)
        sectors = -(-row_bytes // SECTOR)
        return CostTerms(global_bytes=float(shape[0] * sectors * SECTOR))


PRIMITIVES: tuple[type[Primitive], ...] = (Gather,)
