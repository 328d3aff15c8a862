"""Scatter reductions and their finishing step: the vocabulary of the K-Means centroid update.

* ``atomic.add dst <- src, index``: row ``r`` of the register tile ``src`` is added, atomically, to
  row ``index[r]`` of ``dst`` (a slice of a global tensor or a shared buffer). The destination's
  effect is an **atomic** read-modify-write (:attr:`cake_core.ir.primitive.Slot.atomic`): atomics from
  different threads, warps or role instances do not race with each other, but they race with plain
  reads and writes of the same region, which must be ordered by a barrier (or, across CTAs, by the
  end of the launch).
* ``segment.add dst <- src, keys``: the sorted-segmented alternative. Consecutive rows with equal keys
  form a segment, summed first (in registers and warp shuffles on a GPU); one atomic add per segment
  then lands in ``dst``. Its result equals ``atomic.add``'s up to the order of fp32 additions; it pays
  off when the rows arrive sorted by key (points sorted by cluster), where most atomics disappear.
  The sort is a counting sort: ``atomic.add`` for the histogram, ``atomic.fetch_add`` for each row's
  slot, ``atomic.add`` onto zeros to scatter the rows (exact: one value per slot); an exclusive scan has
  no primitive yet (kmeans-update's ``sorted.cake`` adds count j to every k > j instead, K^2 atomics).
* ``atomic.fetch_add old, dst <- src, index``: ``atomic.add`` of integer vectors that also returns, in
  ``old[r]``, the value ``dst[index[r]]`` held just before row ``r``'s addition (-1 for a skipped row):
  with ``dst`` holding each cluster's first position, ``old`` is each point's slot in the sorted order
  (the scatter step of a counting sort).
* ``iota dst, start=E``: ``dst[r] = E + r``, the row indices a scatter of a whole tile needs (a
  privatized accumulator in shared memory flushed row ``r`` to cluster ``k0 + r``).
* ``rowdiv dst <- num, den[, fallback]``: ``dst[r, :] = num[r, :] / den[r]`` where ``den[r] != 0``,
  else ``fallback[r, :]`` (or zero): the mean of each segment, keeping a previous value where a
  segment is empty.

The row indices are a register operand, not an attribute: attributes are expressions, one value per
operation. Index faults depend on data, not on the operands' regions: an index outside ``dst``'s rows
is skipped with ``oob=skip`` and raises :class:`~cake_core.ir.primitive.ExecFault` (the interpreter's
CS001) without it, as an unguarded GPU store would fault or corrupt memory. The interpreter treats
``dst`` as one region: all of it must hold defined values (zero it first), and race checks cover all
of it, whichever rows the indices select.

Interpreter semantics are exact and deterministic: one operation adds its rows in order, each
addition rounded to ``dst``'s type (fp32 for f32); operations of different role instances land in
the order the interpreter's (seeded) scheduler runs them. On a GPU the order of atomics varies from
run to run, so float sums differ by rounding between runs; integer sums (counts) never do.

Lowering: ``atomic.add`` is one ``red.global.add`` / ``red.shared.add`` per element (``.f32``,
``.f64``, ``.s32``, ``.u32``), each thread adding the rows it holds; with ``oob=skip`` a row whose
index is negative or not below ``dst``'s rows, and an element outside ``dst``'s tensor, is not added.
From sm_90, f32 into global memory goes 4 or 2 consecutive columns at a time
(``red.global.add.v4.f32`` / ``.v2.f32``, PTX ISA 8.1) where they are contiguous and aligned in
``dst``, decided at compile time (:func:`~cake_core.lower.tiles.vector_elems`): a ragged row length
or a column start off the grid keeps the scalar form. Besides `rows` tiles it takes a wgmma
accumulator's rows: `wgmma_acc` values (column pairs, one ``.v2`` each where aligned) or a
`wgmma_rows` vector (added once per quad of lanes), with `wgmma_rows` indices.
``segment.add`` first sums each run of equal indices within a warp (a segmented scan by shuffles over
the warp's 32 consecutive rows), then the run's last lane adds the sum once. ``rowdiv`` is one
correctly rounded fp32 division per element (``__fdiv_rn``). ``iota`` is one integer addition per row
a thread holds. ``atomic.fetch_add`` is one ``atom.global.add`` / ``atom.shared.add`` (``.s32``, ``.u32``)
per row.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import ClassVar

import numpy as np

from cake_core.diagnostics import codes
from cake_core.diagnostics.diagnostic import Diagnostic
from cake_core.ir import nodes as n
from cake_core.ir.primitive import (
    Access, AttrSpec, CheckContext, CostTerms, ExecContext, ExecFault, Kind, NotLowerable, Operand, Primitive,
    Signature, Slot, TILES, TypedOp, numel, static_shape,
)  # fmt: skip
from cake_core.ir.primitive import masked
from cake_core.ir.types import DType
from cake_core.lower.cuda import storage
from cake_core.lower.tiles import GlobalView, RegView, SharedView, vector_elems
from cake_core.primitives._common import need_static, shape_text
from cake_core.primitives._lower import convert, rows_elements, rows_layout, static_sizes, to_f32, unravel
from cake_core.primitives._vocab import INTEGERS, layout_name, need_dtype, need_layout, need_rank, rows_cols

_ATOMIC_TYPES = frozenset({DType.F32, DType.F64, DType.I32, DType.U32})
#: PTX type and asm constraint of the atomic add into each destination type
_RED_TYPES = {DType.F32: ("f32", "f"), DType.F64: ("f64", "d"), DType.I32: ("s32", "r"), DType.U32: ("u32", "r")}
#: the index layout that goes with each value layout: a `rows` tile's rows, or the rows of a wgmma accumulator
_INDEX_LAYOUT = {"rows": "rows", "wgmma_acc": "wgmma_rows", "wgmma_rows": "wgmma_rows"}
_SRC_LAYOUTS = tuple(_INDEX_LAYOUT)
_OOB_SKIP = AttrSpec(
    "oob", "word", choices=("skip", "none"),
    doc="rows whose index lies outside `dst` are skipped; without it such an index faults",
)  # fmt: skip


def add_rows(op: TypedOp, x: ExecContext, src: np.ndarray, keys: np.ndarray, key_name: str | None,
             segmented: bool) -> None:  # fmt: skip
    """CPU semantics of the scatter adds: row ``r`` of ``src`` ([R, C] values) added to row ``keys[r]`` of the
    operand ``dst``, in order, rounded to its type; with ``segmented`` each run of equal consecutive keys
    summed first and added once. A key outside ``dst`` is skipped where ``dst`` is masked and raises
    :class:`ExecFault` (naming the tile ``key_name``) where it is not."""
    dst = x.read("dst")
    dst_shape = dst.shape
    rows = dst_shape[0]
    dst = dst.reshape(rows, -1)
    src = src.astype(dst.dtype)
    keys = keys.reshape(-1).astype(np.int64)
    inside = x.in_bounds("dst").reshape(rows, -1).any(axis=1)
    valid = (keys >= 0) & (keys < rows)
    valid[valid] = inside[keys[valid]]
    if not valid.all() and not x.masked("dst"):
        r = int(np.argmin(valid))
        raise ExecFault(
            f"row {r} of `{key_name}` holds the index {int(keys[r])}, outside the {rows} rows of "
            f"`{op.operand('dst').name}`; mask the scatter with `oob=skip` if such rows are meant to be dropped"
        )
    if segmented:
        # runs of equal consecutive keys; each run is summed first, then added once
        starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if keys.size else np.zeros(0, np.int64)
        sums = np.add.reduceat(src, starts, axis=0) if keys.size else src[:0]
        run_keys, run_valid = keys[starts], valid[starts]
        np.add.at(dst, run_keys[run_valid], sums[run_valid])
    else:
        np.add.at(dst, keys[valid], src[valid])
    x.write("dst", dst.reshape(dst_shape))


class _ScatterAdd(Primitive):
    """``dst[index[r], ...] += src[r, ...]`` for every row ``r``; subclasses decide how rows combine."""

    index_slot: ClassVar[str] = "index"
    segmented: ClassVar[bool] = False

    def check(self, op: TypedOp, ctx: CheckContext) -> Iterable[Diagnostic]:
        dst, src, index = op.outs[0], op.ins[0], op.ins[1]
        yield from need_static(op, src)
        yield from need_rank(op, dst, (1, 2), "a [rows] or [rows, columns] destination")
        yield from need_dtype(op, dst, _ATOMIC_TYPES, "a destination of f32, f64, i32 or u32 (what atomics add)")
        yield from need_dtype(op, index, INTEGERS, "integer row indices")
        yield from need_layout(op, src, _SRC_LAYOUTS, "a `rows` (or `wgmma_acc` / `wgmma_rows`) register tile of values")
        yield from need_layout(op, index, _INDEX_LAYOUT, "a register tile of row indices laid out as `src`'s rows")
        got = (layout_name(src), layout_name(index))
        if None not in got and _INDEX_LAYOUT.get(got[0]) != got[1]:
            yield codes.TYPES.at(
                index.expr.loc, f"`{src.name}` is in layout `{got[0]}`, so its row indices must be in "
                f"`{_INDEX_LAYOUT.get(got[0], 'rows')}`, not `{got[1]}`", label="layouts differ",
            )  # fmt: skip
        if self.segmented and got[0] not in (None, "rows"):
            yield codes.TYPES.at(op.op.loc, "`segment.add` takes `rows` tiles (its runs are a warp's consecutive rows)")
        sd, ss, si = dst.shape, static_shape(src), static_shape(index)
        if ss and (len(ss) != len(sd) or (len(sd) == 2 and isinstance(sd[1], int) and ss[1] != sd[1])):
            yield codes.TYPES.at(
                op.op.loc, f"`{op.op.name}` adds rows of {shape_text(ss)} into rows of {shape_text(sd)}: the row "
                "shapes differ", label="shape mismatch",
            )  # fmt: skip
        if ss and si and numel(si) != ss[0]:
            yield codes.TYPES.at(
                index.expr.loc, f"`{index.name}` holds {numel(si)} indices for the {ss[0]} rows of `{src.name}`"
            )
        if dst.dtype is not None and src.dtype is not None and dst.dtype.is_float != src.dtype.is_float:
            yield codes.TYPES.at(
                op.op.loc, f"`{op.op.name}` adds `{src.dtype}` values into `{dst.dtype}`: both float or both integer"
            )

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        src = x.read("src")
        add_rows(op, x, src.reshape(src.shape[0], -1), x.read(self.index_slot), op.ins[1].name, self.segmented)

    def lower(self, op: TypedOp, ctx) -> None:
        dst, src, index = op.outs[0], op.ins[0], op.ins[1]
        view = ctx.gview(dst) if dst.kind is Kind.GLOBAL else ctx.sview(dst)
        if isinstance(view, SharedView) and view.swizzle:
            raise NotLowerable("atomics into a swizzled shared buffer are not lowered")
        if dst.dtype not in _RED_TYPES:
            raise NotLowerable(f"no atomic add for `{dst.dtype}`")
        vals, keys = ctx.rview(src), ctx.rview(index)
        ptx, constraint = _RED_TYPES[dst.dtype]
        width = _red_width(dst, vals.layout.name, vals.layout.shape, view, ctx.model.env, ctx.target.sm)
        if vals.layout.name != "rows":
            _scatter_wgmma(op, ctx, view, vals, keys, width)
            return
        per_thread, _, rows = rows_layout(vals)
        if rows_layout(keys)[0] != per_thread:
            raise NotLowerable("values and indices must spread over the threads alike")
        space = "global" if dst.kind is Kind.GLOBAL else "shared"
        key, ok, run = ctx.fresh("key"), ctx.fresh("ok"), ctx.fresh("run")
        lane = ctx.lane

        def per_row(r: str, j: str) -> str:
            exists = f"{r} < {rows}" if rows % ctx.threads else "true"
            # the row's index; one outside `dst` (with oob=skip) or of a row past the tile adds nothing
            lines = [f"const int {key} = ({exists}) ? (int)({keys.name}[{j}]) : -1;"]
            inside = f" && (unsigned){key} < (unsigned)({view.sizes[0]})" if masked(op) else ""
            lines.append(f"const bool {ok} = ({exists}){inside};")
            if self.segmented:
                # the lanes of a warp hold consecutive rows: a run of equal indices starts at `run`
                # (its head, the highest at or below this lane) and ends where the next lane's differs
                lines += [
                    f"const int {run}_prev = __shfl_up_sync(0xffffffffu, {key}, 1);",
                    f"const int {run}_next = __shfl_down_sync(0xffffffffu, {key}, 1);",
                    f"const unsigned {run}_heads = __ballot_sync(0xffffffffu, {lane} == 0 || {run}_prev != {key});",
                    f"const int {run} = 31 - __clz({run}_heads & (0xffffffffu >> (31 - {lane})));",
                    f"const bool {run}_last = {lane} == 31 || {run}_next != {key};",
                ]
            return "\n".join(lines)

        with rows_elements(ctx, vals, per_row) as e:
            local = [key, e.col] if len(view.sizes) == 2 else [key]
            cond = [ok] + ([view.in_bounds(local)] if masked(op) and isinstance(view, GlobalView) else [])
            value = convert(f"{vals.name}[{e.slot}]", src.dtype, dst.dtype)
            if self.segmented:
                # each lane's inclusive sum over its run so far (a segmented scan); the run's last lane adds it
                ctype = storage(dst.dtype)
                ctx.line(f"    {ctype} cake_v = {e.exists or 'true'} ? ({ctype})({value}) : ({ctype})0;")
                for off in (1, 2, 4, 8, 16):
                    ctx.line(f"    {{ const {ctype} o = __shfl_up_sync(0xffffffffu, cake_v, {off}); "
                             f"if ({lane} >= {run} + {off}) cake_v += o; }}")  # fmt: skip
                value, cond = "cake_v", [f"{run}_last"] + cond
            if width > 1 and not self.segmented:
                # the first of `width` aligned consecutive columns adds them all (in or out of bounds together)
                values = [convert(f"{vals.name}[{e.slot} + {i}]", src.dtype, dst.dtype) for i in range(width)]
                ctx.line(f"    if (({e.col}) % {width} == 0 && {' && '.join(cond)}) {red_vector(view.addr(local), values)}")
            else:
                ctx.line(f'    if ({" && ".join(cond)}) {red_scalar(space, ptx, constraint, view.addr(local), value)}')

    def cost(self, op: TypedOp, ctx: CheckContext) -> CostTerms:
        dst, src = op.outs[0], op.ins[0]
        elems = numel(static_shape(src) or (0,))
        traffic = 2.0 * elems * (dst.dtype.bytes if dst.dtype else 4)  # read and write at the L2 / in shared
        flops = float(elems) if dst.dtype is not None and dst.dtype.is_float else 0.0
        if dst.kind is not Kind.GLOBAL:
            return CostTerms(flops=flops, shared_bytes=traffic, shared_atomics=float(elems))
        # L2 requests: a lane of a `rows` tile adds to a row of its own, one request per vector; the four
        # lanes of a quad holding a `wgmma_acc` row's 8 consecutive columns share one (``width`` each), the
        # runs of `segment.add` are not known statically (one per element, an upper bound)
        width = 1 if self.segmented else _cost_width(op, ctx)
        requests = elems / (4 * width) if layout_name(src) == "wgmma_acc" else elems / width
        return CostTerms(flops=flops, global_bytes=traffic, global_atomics=float(requests))


def _cost_width(op: TypedOp, ctx: CheckContext) -> int:
    """The vector width the lowering picks for ``op``'s scatter into global memory, seen from its operands
    alone (what ``cost`` has): :func:`_red_width` on a view of ``dst`` that knows its dimensions but not
    their C++ names."""
    dst, src = op.outs[0], op.ins[0]
    shape = static_shape(src)
    if ctx.target is None or not shape or dst.decl is None:
        return 1
    rank = len(dst.decl.shape)
    index = list(dst.index) + [n.All()] * (rank - len(dst.index))
    dims = tuple(d for d, item in enumerate(index) if not isinstance(item, n.At))
    blank = ("",) * rank
    view = GlobalView("", dst.dtype, blank, blank, blank, dims, blank[: len(dims)], (False,) * len(dims))
    return _red_width(dst, layout_name(src), shape, view, ctx.spec, ctx.target.sm)


def _red_width(dst: Operand, layout: str | None, shape: Sequence[int], view: GlobalView | SharedView,
               env: Mapping[str, object], sm: int) -> int:  # fmt: skip
    """How many consecutive f32 columns one vector reduction adds (``red.global.add.v4/.v2.f32``, PTX ISA
    8.1, sm_90 on): 4 or 2 where they are contiguous and aligned in ``dst`` (decided statically by
    :func:`~cake_core.lower.tiles.vector_elems`) and held by one thread in consecutive registers (a
    `rows` tile's columns, a `wgmma_acc` tile's pairs: ``layout`` and ``shape`` are the values'); 1
    (scalar) otherwise, into shared memory, for other types and before sm_90."""
    if dst.dtype is not DType.F32 or dst.kind is not Kind.GLOBAL or sm < 90 or len(view.tile_dims) != 2:
        return 1
    run = (shape[1] if len(shape) == 2 else 1) if layout == "rows" else 2 if layout == "wgmma_acc" else 0
    return vector_elems(dst, view, env, run) if run else 1


def red_scalar(space: str, ptx: str, constraint: str, addr: str, value: str) -> str:
    """C++ statement: one scalar ``red.{global,shared}.add`` of ``value`` at ``addr``."""
    operand = f'"l"({addr})' if space == "global" else f'"r"(cake_smem_addr({addr}))'
    return f'asm volatile("red.{space}.add.{ptx} [%0], %1;" :: {operand}, "{constraint}"({value}) : "memory");'


def red_vector(addr: str, values: list[str]) -> str:
    """C++ statement: one ``red.global.add.vN.f32`` of ``values`` at ``addr`` (16- or 8-byte aligned)."""
    regs = ", ".join(f"%{i + 1}" for i in range(len(values)))
    args = ", ".join(f'"f"({v})' for v in values)
    return f'asm volatile("red.global.add.v{len(values)}.f32 [%0], {{{regs}}};" :: "l"({addr}), {args} : "memory");'


def _scatter_wgmma(op: TypedOp, ctx, view: GlobalView | SharedView, vals: RegView, keys: RegView, width: int) -> None:
    """``atomic.add`` of a wgmma accumulator's rows: a `wgmma_acc` tile (into [K, C]) or a `wgmma_rows`
    vector (into [K]) with `wgmma_rows` indices. Thread (warp w, lane l) holds rows ``64*m + 16*w + l/4``
    and ``+8`` of every 64-row block; of a `wgmma_acc` tile, columns ``8*g + 2*(l%4)`` and ``+1`` of every
    8-column group (a pair: one ``.v2`` reduction where aligned); of a `wgmma_rows` vector the row's value,
    which the four lanes of a quad hold alike (lane ``l%4 == 0`` adds it)."""
    dst, src = op.outs[0], op.ins[0]
    if keys.layout.name != "wgmma_rows" or vals.layout.name not in ("wgmma_acc", "wgmma_rows"):
        raise NotLowerable("a wgmma tile is scattered with `wgmma_rows` indices")
    if vals.layout.shape[0] != keys.layout.shape[0]:
        raise NotLowerable("values and indices must hold the same rows")
    ptx, constraint = _RED_TYPES[dst.dtype]  # type: ignore[index]
    space = "global" if dst.kind is Kind.GLOBAL else "shared"
    guard = masked(op)
    for slot in range(keys.layout.regs_per_thread):
        blk, h = divmod(slot, 2)
        key = ctx.fresh("key")
        ctx.line(f"{{ const int {key} = (int)({keys.name}[{slot}]);  // row {blk * 64} + 16 * warp + lane / 4 + {8 * h}")
        inside = [f"(unsigned){key} < (unsigned)({view.sizes[0]})"] if guard else []
        if vals.layout.name == "wgmma_rows":
            bounds = [view.in_bounds([key])] if guard and isinstance(view, GlobalView) else []
            cond = [f"({ctx.lane} & 3) == 0"] + inside + bounds
            value = convert(f"{vals.name}[{slot}]", src.dtype, dst.dtype)
            ctx.line(f'  if ({" && ".join(cond)}) {red_scalar(space, ptx, constraint, view.addr([key]), value)}}}')
            continue
        groups = vals.layout.shape[1] // 8
        for g in range(groups):
            pair = [(blk * groups + g) * 4 + 2 * h + e for e in range(2)]
            cols = [f"{g * 8} + (({ctx.lane} & 3) << 1) + {e}" for e in range(2)]
            values = [convert(f"{vals.name}[{p}]", src.dtype, dst.dtype) for p in pair]
            conds = [inside + ([view.in_bounds([key, c])] if guard and isinstance(view, GlobalView) else []) for c in cols]
            if width >= 2:
                cond = " && ".join(conds[0]) or "true"
                ctx.line(f"  if ({cond}) {red_vector(view.addr([key, cols[0]]), values)}")
                continue
            for c, v, cd in zip(cols, values, conds, strict=True):
                ctx.line(f'  if ({" && ".join(cd) or "true"}) {red_scalar(space, ptx, constraint, view.addr([key, c]), v)}')
        ctx.line("}")


class AtomicAdd(_ScatterAdd):
    name = "atomic.add"
    summary = "add each row of a register tile, atomically, to the row of `dst` its index selects"
    doc = (
        "`atomic.add dst <- src, index, oob=skip`: for r in order, `dst[index[r], :] += src[r, :]` (or "
        "`dst[index[r]] += src[r]` for vectors), each addition rounded to `dst`'s type. `dst` is a slice of "
        "a global tensor or a shared buffer, of f32, f64, i32 or u32; its effect is an atomic read-modify-"
        "write, which does not race with other atomics but does with plain accesses. With `oob=skip`, rows "
        "whose index is outside `dst` (an index tile loaded with `oob=fill, value=-1` past a ragged edge) are "
        "skipped; without it they fault."
    )
    signature = Signature(
        outs=[Slot("dst", {Kind.GLOBAL, Kind.SHARED}, Access.READWRITE, mask_attr="oob", atomic=True,
                   doc="rows [K] or [K, C] the indices select among")],
        ins=[Slot("src", {Kind.REGISTERS}, doc="values, [R] or [R, C], `rows` layout (or `wgmma_acc` / `wgmma_rows`)"),
             Slot("index", {Kind.REGISTERS}, doc="[R] row indices into `dst`, `rows` layout (`wgmma_rows` with wgmma values)")],
        attrs=[_OOB_SKIP],
    )  # fmt: skip


class SegmentAdd(_ScatterAdd):
    name = "segment.add"
    index_slot = "keys"
    segmented = True
    summary = "sum runs of rows with equal consecutive keys, then add each run once, atomically, to `dst`"
    doc = (
        "`segment.add dst <- src, keys, oob=skip`: the rows of `src` split into maximal runs of equal "
        "consecutive `keys`; each run is summed (in `dst`'s type) and added once to `dst[key]`. Same result "
        "as `atomic.add` up to the order of float additions; far fewer atomics when rows come sorted by key. "
        "Same effects, masking and faults as `atomic.add`. Its cost terms charge one atomic per row, an "
        "upper bound (the runs are not known statically). Lowered as a segmented scan by shuffles within "
        "each warp's 32 consecutive rows, then one atomic per run and warp."
    )
    signature = Signature(
        outs=[Slot("dst", {Kind.GLOBAL, Kind.SHARED}, Access.READWRITE, mask_attr="oob", atomic=True,
                   doc="rows [K] or [K, C] the keys select among")],
        ins=[Slot("src", {Kind.REGISTERS}, doc="values, [R] or [R, C], `rows` layout"),
             Slot("keys", {Kind.REGISTERS}, doc="[R] row indices into `dst`, best sorted, `rows` layout")],
        attrs=[_OOB_SKIP],
    )  # fmt: skip


class AtomicFetchAdd(Primitive):
    name = "atomic.fetch_add"
    summary = "atomic.add of integer vectors that returns each row's value of `dst` before its addition"
    doc = (
        "`atomic.fetch_add old, dst <- src, index, oob=skip`: for r in order, `old[r] = dst[index[r]]`, then "
        "`dst[index[r]] += src[r]`. `dst` is a [K] slice of a global tensor or a shared buffer of i32 or u32, "
        "`src`, `index` and `old` are [R] `rows` register tiles of integers. Its effect on `dst` is atomic, as "
        "`atomic.add`'s; the values `old` receives depend on the order in which concurrent rows land, their "
        "set does not (each is a distinct slot when `src` is all ones). With `oob=skip` a row whose index is "
        "outside `dst` is skipped and its `old` is -1; without it such a row faults."
    )
    signature = Signature(
        outs=[Slot("old", {Kind.REGISTERS}, Access.WRITE, doc="[R] values of `dst` before each row's addition"),
              Slot("dst", {Kind.GLOBAL, Kind.SHARED}, Access.READWRITE, mask_attr="oob", atomic=True,
                   doc="[K] counters the indices select among")],
        ins=[Slot("src", {Kind.REGISTERS}, doc="[R] integers to add, `rows` layout"),
             Slot("index", {Kind.REGISTERS}, doc="[R] indices into `dst`, `rows` layout")],
        attrs=[_OOB_SKIP],
    )  # fmt: skip

    def check(self, op: TypedOp, ctx: CheckContext) -> Iterable[Diagnostic]:
        old, dst = op.outs
        src, index = op.ins
        for o in (old, src, index):
            yield from need_static(op, o)
            yield from need_rank(op, o, (1,), "[R] register vectors")
            yield from need_layout(op, o, ("rows",), "`rows` register tiles")
            yield from need_dtype(op, o, INTEGERS, "integers")
        yield from need_rank(op, dst, (1,), "a [K] destination")
        yield from need_dtype(op, dst, frozenset({DType.I32, DType.U32}), "a destination of i32 or u32")
        sizes = {numel(static_shape(o)) for o in (old, src, index) if static_shape(o)}
        if len(sizes) > 1:
            yield codes.TYPES.at(op.op.loc, f"`{op.op.name}` needs `{old.name}`, `{src.name}` and `{index.name}` "
                                 "of one length")  # fmt: skip

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        dst = x.read("dst").reshape(-1).copy()
        rows = dst.shape[0]
        src = x.read("src").reshape(-1).astype(np.int64)
        keys = x.read("index").reshape(-1).astype(np.int64)
        inside = x.in_bounds("dst").reshape(-1)
        old = np.full(keys.shape, -1, dtype=np.int64)
        for r, k in enumerate(keys):
            if not (0 <= k < rows and inside[k]):
                if not x.masked("dst"):
                    raise ExecFault(
                        f"row {r} of `{op.ins[1].name}` holds the index {int(k)}, outside the {rows} rows of "
                        f"`{op.outs[1].name}`; mask it with `oob=skip` if such rows are meant to be dropped"
                    )
                continue
            old[r] = dst[k]
            dst[k] += src[r]
        x.write("dst", dst.reshape(x.read("dst").shape))
        x.write("old", old.reshape(static_shape(op.outs[0])))

    def lower(self, op: TypedOp, ctx) -> None:
        old_o, dst = op.outs
        src, index = op.ins
        view = ctx.gview(dst) if dst.kind is Kind.GLOBAL else ctx.sview(dst)
        if isinstance(view, SharedView) and view.swizzle:
            raise NotLowerable("atomics into a swizzled shared buffer are not lowered")
        old, vals, keys = ctx.rview(old_o), ctx.rview(src), ctx.rview(index)
        per_thread = rows_layout(vals)[0]
        if rows_layout(keys)[0] != per_thread or rows_layout(old)[0] != per_thread:
            raise NotLowerable("values, indices and results must spread over the threads alike")
        ptx = "u32" if dst.dtype is DType.U32 else "s32"
        space = "global" if dst.kind is Kind.GLOBAL else "shared"
        key, ok, got = ctx.fresh("key"), ctx.fresh("ok"), ctx.fresh("got")
        with rows_elements(ctx, vals) as e:
            exists = e.exists or "true"
            ctx.line(f"    const int {key} = ({exists}) ? (int)({keys.name}[{e.slot}]) : -1;")
            inside = f" && (unsigned){key} < (unsigned)({view.sizes[0]})" if masked(op) else ""
            bounds = f" && {view.in_bounds([key])}" if masked(op) and isinstance(view, GlobalView) else ""
            ctx.line(f"    const bool {ok} = ({exists}){inside}{bounds};")
            ctx.line(f"    int {got} = -1;")
            addr = f'"l"({view.addr([key])})' if space == "global" else f'"r"(cake_smem_addr({view.addr([key])}))'
            ctx.line(f'    if ({ok}) asm volatile("atom.{space}.add.{ptx} %0, [%1], %2;" : "=r"({got}) : {addr}, '
                     f'"r"((int)({vals.name}[{e.slot}])) : "memory");')  # fmt: skip
            ctx.line(f"    if ({exists}) {old.name}[{e.slot}] = ({storage(old_o.dtype)})({got});")

    def cost(self, op: TypedOp, ctx: CheckContext) -> CostTerms:
        dst, src = op.outs[1], op.ins[0]
        rows = float(numel(static_shape(src) or (0,)))
        traffic = 2.0 * rows * (dst.dtype.bytes if dst.dtype else 4)
        if dst.kind is Kind.GLOBAL:  # one `atom` per row, each lane at an address of its own
            return CostTerms(global_bytes=traffic, global_atomics=rows)
        return CostTerms(shared_bytes=traffic, shared_atomics=rows)


class Iota(Primitive):
    name = "iota"
    summary = "dst[r] = start + r: consecutive row indices in a `rows` register tile"
    doc = (
        "`iota dst, start=E`: `dst` is an integer `rows` register tile of R elements; element `r` gets "
        "`E + r` (`E` an integer expression, 0 when not given). The indices of a whole tile's rows for "
        "`atomic.add`: a shared accumulator flushed row `r` to row `k0 + r` of a global one, rows past the "
        "destination's end skipped with `oob=skip`."
    )
    signature = Signature(
        ins=[Slot("dst", {Kind.REGISTERS}, Access.WRITE)],
        attrs=[AttrSpec("start", "int", default=0, doc="the first index")],
    )

    def check(self, op: TypedOp, ctx: CheckContext) -> Iterable[Diagnostic]:
        dst = op.ins[0]
        yield from need_static(op, dst)
        yield from need_rank(op, dst, (1,), "a [R] tile of indices")
        yield from need_dtype(op, dst, INTEGERS, "integer indices")
        yield from need_layout(op, dst, ("rows",), "a `rows` register tile")

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        shape = static_shape(op.ins[0])
        x.write("dst", int(x.attr("start", 0)) + np.arange(numel(shape), dtype=np.int64).reshape(shape))

    def lower(self, op: TypedOp, ctx) -> None:
        reg = ctx.rview(op.ins[0])
        start = op.attr("start")
        first = ctx.c(start) if start is not None else "0"
        with rows_elements(ctx, reg) as e:
            ctx.line(f"    {reg.name}[{e.slot}] = ({storage(op.ins[0].dtype)})(({first}) + {e.flat});")

    def cost(self, op: TypedOp, ctx: CheckContext) -> CostTerms:
        return CostTerms(flops=0.0)


class RowDiv(Primitive):
    name = "rowdiv"
    summary = "dst[r, :] = num[r, :] / den[r] where den[r] != 0, else fallback[r, :] (or zero)"
    doc = (
        "The division of a segmented sum by its count, in fp32: `num` [R, C] (or [R]) floats, `den` [R] "
        "counts (integer or float), `fallback` [R, C] what a row with `den[r] == 0` gets (zero when not "
        "given). Memory operands are read with `oob=zero` (elements outside read as 0: such rows fall back)."
    )
    signature = Signature(
        outs=[Slot("dst", {Kind.REGISTERS}, Access.WRITE)],
        ins=[
            Slot("num", TILES, mask_attr="oob"),
            Slot("den", TILES, mask_attr="oob"),
            Slot("fallback", TILES, mask_attr="oob", optional=True),
        ],
        attrs=[AttrSpec("oob", "word", choices=("zero", "none"), doc="out-of-bounds elements read as zero")],
    )

    def check(self, op: TypedOp, ctx: CheckContext) -> Iterable[Diagnostic]:
        dst, num, den = op.outs[0], op.ins[0], op.ins[1]
        fallback = op.ins[2] if len(op.ins) > 2 else None
        for o in op.outs + op.ins:
            yield from need_static(op, o)
        yield from need_layout(op, dst, ("rows",), "a `rows` register tile")
        yield from need_dtype(op, dst, frozenset({DType.F32}), "an f32 result")
        yield from need_rank(op, num, (1, 2), "a [R] or [R, C] numerator")
        sd, sn, sden = static_shape(dst), static_shape(num), static_shape(den)
        if sd and sn and numel(sd) != numel(sn):
            yield codes.TYPES.at(op.op.loc, f"`rowdiv` of {shape_text(sn)} into {shape_text(sd)}: the shapes differ")
        r, _ = rows_cols(num)
        if r is not None and sden and numel(sden) != r:
            yield codes.TYPES.at(den.expr.loc, f"`{den.name}` holds {numel(sden)} divisors for {r} rows")
        if fallback is not None and sn and static_shape(fallback) and numel(static_shape(fallback)) != numel(sn):
            yield codes.TYPES.at(
                fallback.expr.loc, f"the fallback `{fallback.name}` does not match the numerator's shape"
            )
        for o in (num, fallback):
            if o is not None and o.dtype is not None and not o.dtype.is_float:
                yield codes.TYPES.at(o.expr.loc, f"`rowdiv` divides float rows; `{o.name}` holds `{o.dtype}`")

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        num = x.read("num").astype(np.float32)
        rows = num.shape[0]
        num = num.reshape(rows, -1)
        den = x.read("den").reshape(rows, 1).astype(np.float32)
        if len(op.ins) > 2:
            other = x.read("fallback").astype(np.float32).reshape(rows, -1)
        else:
            other = np.zeros_like(num)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.where(den != 0, num / np.where(den != 0, den, np.float32(1)), other).astype(np.float32)
        x.write("dst", out.reshape(static_shape(op.outs[0])))

    def lower(self, op: TypedOp, ctx) -> None:
        dst = ctx.rview(op.outs[0])
        den = ctx.fresh("den")
        with rows_elements(ctx, dst, lambda r, j: f"const float {den} = {_element(op, ctx, 1, dst, r, j)};") as e:
            num = _element(op, ctx, 0, dst, e.flat, e.slot)
            other = _element(op, ctx, 2, dst, e.flat, e.slot) if len(op.ins) > 2 else "0.0f"
            ctx.line(f"    {dst.name}[{e.slot}] = {den} != 0.0f ? __fdiv_rn({num}, {den}) : {other};")

    def cost(self, op: TypedOp, ctx: CheckContext) -> CostTerms:
        elems = numel(static_shape(op.outs[0]) or (0,))
        gbytes = sum(numel(static_shape(o) or (0,)) * (o.dtype.bytes if o.dtype else 4)
                     for o in op.ins if o.kind is Kind.GLOBAL)  # fmt: skip
        sbytes = sum(numel(static_shape(o) or (0,)) * (o.dtype.bytes if o.dtype else 4)
                     for o in op.ins if o.kind is Kind.SHARED)  # fmt: skip
        return CostTerms(flops=float(elems), global_bytes=gbytes, shared_bytes=sbytes)


def _element(op: TypedOp, ctx, i: int, dst: RegView, flat: str, slot: str) -> str:
    """C++ f32 value of element ``flat`` of input ``i`` of ``op``, read by the thread that holds element
    ``flat`` (register slot ``slot``) of the `rows` tile ``dst``: a masked global element outside its
    tensor reads 0; a register input must be a `rows` tile of as many rows as ``dst``."""
    o = op.ins[i]
    if o.kind is Kind.REGISTERS:
        reg = ctx.rview(o)
        if reg.layout.name != "rows" or reg.layout.shape[0] != dst.layout.shape[0]:
            raise NotLowerable(f"`{o.name}` must be a `rows` tile of {dst.layout.shape[0]} rows")
        return to_f32(f"{reg.name}[{slot}]", o.dtype)
    view = ctx.gview(o) if o.kind is Kind.GLOBAL else ctx.sview(o)
    if isinstance(view, SharedView) and view.swizzle:
        raise NotLowerable("reads of a swizzled shared buffer are not lowered")
    local = unravel(flat, static_sizes(view))
    if isinstance(view, GlobalView) and masked(op):
        ok = view.in_bounds(local)
        return f"(({ok}) ? {to_f32(f'*{view.read_addr(local, ok)}', o.dtype)} : 0.0f)"
    return to_f32(f"*{view.addr(local)}", o.dtype)


PRIMITIVES: tuple[type[Primitive], ...] = (AtomicAdd, SegmentAdd, AtomicFetchAdd, Iota, RowDiv)
