"""The fused top-k epilogue: the k smallest scores per row, kept as loop-carried register state.

The top-k analogue of ``argmin.update`` / ``argmin.reduce`` (:mod:`cake_core.primitives.compute`):

* ``topk.update vals, idx <- tile, bias, base=B, k=K, scale=S, split=P``: fold a tile of scores into
  a running, sorted list of the ``K`` best ``(value, index)`` pairs per row. The score of column ``j``
  of row ``r`` is ``bias[j] + S * tile[r, j]`` (``||x||^2 - 2 q.x`` for nearest neighbours) and its
  index ``B + j``. The state ``vals`` f32 / ``idx`` i32 is ``[R * P, K]`` in the `rows` layout: with
  ``split=P`` the ``P`` threads that share a row each keep a list for the columns ``j`` with
  ``j % P == p`` (state row ``r * P + p``), so a row's work is spread over ``P`` threads.
* ``topk.reduce vals, idx <- part_vals, part_idx, k=K``: merge the partial lists of every row — the
  ``P`` lists of a split state (``[R * P, KP]``), and/or one list per role instance gathered in a
  staged shared buffer (``[S][R * P, KP]``) — into the ``K`` best per row, ``[R, K]``.

Order and ties are exact and deterministic: pairs compare by value, then by index read as an
unsigned 32-bit number, so of equal scores the smaller index wins and the empty slot ``(inf, -1)``
(what ``fill vals, value=inf`` / ``fill idx, value=-1`` start from) loses to every real candidate.
Lists are kept sorted ascending. Columns whose ``bias`` is out of bounds (``oob=skip``), whose index
reaches ``limit``, or whose score is NaN are never candidates. A row with fewer than ``K`` candidates
keeps empty slots. Scores are computed in float64 and rounded once to fp32, as ``fmaf`` does.

The tile comes from a `rows` register tile, from shared memory, or straight from a ``wgmma``
accumulator (`wgmma_acc`) into a state ``[R, K]`` in the `wgmma_rows` layout. As with ``argmin.update``
over `wgmma_acc`, the interpreter keeps one list per row, while on the GPU each of the four threads of a
quad that share a row keeps the ``K`` best of its own columns: their union holds the row's ``K`` best,
and ``topk.reduce`` (into a `rows` result, through ``scratch``) merges the four by shuffles. So a
`wgmma_rows` state is read only by ``topk.reduce``.

Lowering: a candidate that beats a list's K-th pair takes its place and moves up by compare-and-swap
(constant indices: the lists stay in registers; the lowering relies on the lists being sorted, as
``fill`` and ``topk.update`` leave them). The first comparison, with the list's K-th pair, rejects most
candidates. ``topk.update`` folds a `rows` register tile (``split=1``), a shared tile (its scores read a
batch ahead of the insertions, so the loads overlap), or a `wgmma_acc` tile. ``topk.reduce`` reads
shared partials directly; register partials of ``P`` threads per row (``P`` a power of two up to 32,
neighbouring lanes) and `wgmma_rows` lists (a quad's four threads) merge by warp shuffles, and the merged list
reaches the thread that holds the row through ``scratch``, a shared tile of at least ``2 * R * k``
32-bit words (with ``P = 1`` in the same threads, no scratch is needed).

Lists too long for registers (k up to 128) live in shared memory: ``topk.init`` empties a shared state
``[R, K]``, ``topk.update`` folds a `wgmma_acc` tile into it (the quad threads of a row insert in turn, so
updates never race), and ``topk.reduce`` merges sorted partials (shared or global) into a shared or global
result; :mod:`cake_core.primitives.topk_shared` holds their C++.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from cake_core.diagnostics import codes
from cake_core.diagnostics.diagnostic import Diagnostic
from cake_core.ir.primitive import (
    Access, AttrSpec, CheckContext, CostTerms, ExecContext, Kind, NotLowerable, Primitive, Signature, Slot,
    TypedOp, numel, static_shape,
)  # fmt: skip
from cake_core.ir.primitive import masked
from cake_core.ir.types import DType
from cake_core.lower.tiles import GlobalView, RegView, SharedView
from cake_core.primitives._common import need_static, shape_text
from cake_core.primitives._lower import PAIR_BETTER, const_attr, rows_layout, static_sizes, to_f32, unravel
from cake_core.primitives import topk_shared
from cake_core.primitives._vocab import layout_name, need_dtype, need_layout, need_scratch

_F32 = frozenset({DType.F32})
_I32 = frozenset({DType.I32})
_MASK32 = np.int64(0xFFFFFFFF)
#: the layouts of a top-k state: one list per row (or per split thread), or per quad thread of a wgmma row
_STATE_LAYOUTS = ("rows", "wgmma_rows")
#: scores of a shared tile read ahead of their insertions, per thread
_BATCH = 8
#: where topk.reduce's results and partials may live: registers, or memory (the shared-list path)
_REDUCE_OUT = frozenset({Kind.REGISTERS, Kind.SHARED, Kind.GLOBAL})


def select_best(vals: np.ndarray, idx: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` smallest (value, unsigned 32-bit index) pairs of every row of ``vals``/``idx``, sorted.

    ``vals`` float32 and ``idx`` int64 are [rows, candidates] with at least ``k`` candidates. NaN values
    sort after everything (they are never produced as candidates).
    """
    order = np.lexsort((idx & _MASK32, vals), axis=1)[:, :k]
    return np.take_along_axis(vals, order, axis=1), np.take_along_axis(idx, order, axis=1)


class TopkUpdate(Primitive):
    name = "topk.update"
    summary = "fold a tile of scores into running per-row lists of the k smallest (value, index) pairs"
    doc = (
        "Score of column j of row r: `bias[j] + scale * tile[r, j]`, index `base + j`. With `split=P`, the "
        "state `[R * P, k]` keeps, in row `r * P + p`, the k best of the columns with `j % P == p`. Lists "
        "stay sorted by (value, unsigned index); columns with out-of-bounds bias (`oob=skip`), with "
        "`base + j >= limit`, or with a NaN score are never candidates."
    )
    signature = Signature(
        # a shared state is read and written by the threads of a row one at a time (topk_shared), so
        # updates never race with each other: declared as atomic read-modify-writes
        outs=[Slot("vals", {Kind.REGISTERS, Kind.SHARED}, Access.READWRITE, atomic=True,
                   doc="f32 [R * split, k], `rows` layout, or shared [R, k] (from a `wgmma_acc` tile)"),
              Slot("idx", {Kind.REGISTERS, Kind.SHARED}, Access.READWRITE, atomic=True,
                   doc="i32 [R * split, k], `rows` layout, or shared [R, k] (from a `wgmma_acc` tile)")],
        ins=[Slot("tile", {Kind.REGISTERS, Kind.SHARED}, doc="f32 [R, C] scores (a `rows` tile or shared)"),
             Slot("bias", {Kind.GLOBAL, Kind.SHARED}, mask_attr="oob", doc="[C] per-column bias")],
        attrs=[
            AttrSpec("base", "int", required=True, doc="index of the tile's first column"),
            AttrSpec("k", "const", required=True, doc="pairs kept per list: the state's columns"),
            AttrSpec("scale", "float", default=1.0),
            AttrSpec("limit", "int", doc="columns with `base + j >= limit` are skipped"),
            AttrSpec("split", "const", default=1, doc="threads sharing a row, each with its own list"),
            AttrSpec("oob", "word", choices=("skip", "none"), doc="columns whose bias is out of bounds are skipped"),
        ],
    )  # fmt: skip

    def check(self, op: TypedOp, ctx: CheckContext) -> Iterable[Diagnostic]:
        vals, idx, tile, bias = op.outs[0], op.outs[1], op.ins[0], op.ins[1]
        yield from need_dtype(op, vals, _F32, "f32 values")
        yield from need_dtype(op, idx, _I32, "i32 indices")
        yield from need_dtype(op, tile, _F32, "an f32 tile of scores")
        yield from need_layout(op, vals, _STATE_LAYOUTS, "per-row state in the `rows` or `wgmma_rows` layout")
        yield from need_layout(op, idx, _STATE_LAYOUTS, "per-row state in the `rows` or `wgmma_rows` layout")
        yield from need_layout(
            op, tile, ("rows", "wgmma_acc"),
            "a `rows` or `wgmma_acc` register tile or a shared tile (store an `mma_acc` accumulator to shared "
            "memory first)",
        )  # fmt: skip
        yield from need_static(op, tile)
        k = ctx.const(op.attr("k")) if op.attr("k") is not None else None
        split_e = op.attr("split")
        split = ctx.const(split_e) if split_e is not None else 1
        from_acc = layout_name(tile) == "wgmma_acc"
        for o in (vals, idx):
            if o.kind is Kind.SHARED:
                if not from_acc:
                    yield codes.TYPES.at(o.expr.loc, f"a shared top-k state `{o.name}` takes `wgmma_acc` tiles")
            elif (layout_name(o) == "wgmma_rows") != from_acc:
                yield codes.TYPES.at(
                    o.expr.loc, f"a `{layout_name(tile) or 'shared'}` tile folds into state in layout "
                    f"`{'wgmma_rows' if from_acc else 'rows'}`, `{o.name}` is `{layout_name(o)}`",
                )  # fmt: skip
        if from_acc and split not in (None, 1):
            yield codes.ATTRIBUTES.at(op.op.loc, "a `wgmma_acc` tile is split over its quads already: `split=1`")
        if k is not None and k < 1:
            yield codes.ATTRIBUTES.at(op.op.loc, f"`k` must be at least 1, not {k}")
        if split is not None and split < 1:
            yield codes.ATTRIBUTES.at(op.op.loc, f"`split` must be at least 1, not {split}")
            split = None
        st = static_shape(tile)
        if st is not None and len(st) != 2:
            yield codes.TYPES.at(tile.expr.loc, f"`topk.update` folds a [rows, columns] tile, not {shape_text(st)}")
            return
        for o in (vals, idx):
            so = static_shape(o)
            if so is None:
                continue
            want = (st[0] * split if st and split else None, k)
            if len(so) != 2 or (want[0] is not None and so[0] != want[0]) or (k is not None and so[1] != k):
                wtxt = f"[{want[0] if want[0] is not None else '?'}, {k if k is not None else '?'}]"
                yield codes.TYPES.at(
                    o.expr.loc, f"the state `{o.name}` is {shape_text(so)}; rows * split by k is {wtxt}",
                    label="state shape", help="declare the state `[R * split, k]` for a tile of R rows",
                )  # fmt: skip
        sb = static_shape(bias)
        if st and sb is not None and numel(sb) != st[1]:
            yield codes.TYPES.at(bias.expr.loc, f"the bias has {numel(sb)} columns, the tile {st[1]}")

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        tile = x.read("tile").astype(np.float64)
        rows, cols = tile.shape
        bias = x.read("bias").astype(np.float64).reshape(-1)
        valid = x.in_bounds("bias").reshape(-1).copy()
        base = int(x.attr("base"))
        if x.attr("limit") is not None:
            valid &= base + np.arange(cols) < int(x.attr("limit"))
        k = int(x.attr("k"))
        split = int(x.attr("split", 1))
        with np.errstate(invalid="ignore", over="ignore"):
            score = (bias[None, :] + float(x.attr("scale", 1.0)) * tile).astype(np.float32)
        ok = valid[None, :] & ~np.isnan(score)
        cand_v = np.where(ok, score, np.float32(np.inf)).astype(np.float32)
        cand_i = np.where(ok, base + np.arange(cols)[None, :], -1).astype(np.int64)
        vals = x.read("vals").astype(np.float32).reshape(rows * split, k)
        idx = x.read("idx").astype(np.int64).reshape(rows * split, k)
        for p in range(split):
            cols_p = slice(p, cols, split)
            v, i = select_best(
                np.concatenate([vals[p::split], cand_v[:, cols_p]], axis=1),
                np.concatenate([idx[p::split], cand_i[:, cols_p]], axis=1), k,
            )  # fmt: skip
            vals[p::split], idx[p::split] = v, i
        x.write("vals", vals.reshape(static_shape(op.outs[0])))
        x.write("idx", idx.reshape(static_shape(op.outs[1])))

    def lower(self, op: TypedOp, ctx) -> None:
        vals, idx, tile, bias = op.outs[0], op.outs[1], op.ins[0], op.ins[1]
        k, split = const_attr(op, ctx, "k", 1), const_attr(op, ctx, "split", 1)
        bview = ctx.gview(bias) if bias.kind is Kind.GLOBAL else ctx.sview(bias)
        base = ctx.c(op.attr("base"))
        scale = ctx.c(op.attr("scale")) if op.attr("scale") is not None else "1.0f"
        limit = ctx.c(op.attr("limit")) if op.attr("limit") is not None else None
        if tile.kind is Kind.REGISTERS and layout_name(tile) == "wgmma_acc":
            _update_from_acc(ctx, op, ctx.rview(tile), bview, masked(op), base, scale, limit, k)
            return
        if vals.kind is Kind.SHARED:
            raise NotLowerable("a shared top-k state folds `wgmma_acc` tiles")
        vr, ir = ctx.rview(vals), ctx.rview(idx)
        _insert_helpers(ctx)
        per_thread, _, state_rows = rows_layout(vr)

        def candidate(j: str, col: str, value: str, indent: str) -> None:
            conds = ([bview.in_bounds([col])] if isinstance(bview, GlobalView) and masked(op) else []) + (
                [f"{base} + {col} < {limit}"] if limit else []
            )
            ok = " && ".join(conds) or "true"
            addr = bview.read_addr([col], ok) if conds and isinstance(bview, GlobalView) else bview.addr([col])
            ctx.line(f"{indent}{{ const bool cake_ok = {ok};")
            ctx.line(f"{indent}  const float cake_s = fmaf({scale}, {value}, {to_f32(f'*{addr}', bias.dtype)});")
            ctx.line(f"{indent}  if (cake_ok && cake_s == cake_s) cake_topk_insert<{k}>(&{vr.name}[{j} * {k}], "
                     f"&{ir.name}[{j} * {k}], cake_s, {base} + {col}); }}")  # fmt: skip

        j, s_ = ctx.fresh("j"), ctx.fresh("s")
        ctx.line("#pragma unroll")
        ctx.line(f"for (int {j} = 0; {j} < {per_thread}; ++{j}) {{")
        ctx.line(f"  const int {s_} = {ctx.itid} + {ctx.threads} * {j};")
        ctx.line(f"  if ({s_} < {state_rows}) {{")
        if tile.kind is Kind.REGISTERS:
            tr = ctx.rview(tile)
            t_per, cols, t_rows = rows_layout(tr)
            if split != 1 or t_rows != state_rows:
                raise NotLowerable("a register tile folds into lists of its own rows (`split=1`); store it to "
                                   "shared memory to split its columns over threads")  # fmt: skip
            for c in range(cols):
                candidate(j, str(c), f"{tr.name}[{j} * {cols} + {c}]", "    ")
        else:
            sv = ctx.sview(tile)
            if sv.swizzle:
                raise NotLowerable("`topk.update` from a swizzled shared tile is not lowered")
            rows, cols = static_sizes(sv)
            c, u, sb = ctx.fresh("c"), ctx.fresh("u"), ctx.fresh("sb")
            # a batch of _BATCH scores read ahead of its insertions: the shared loads overlap
            ctx.line("    #pragma unroll 1")
            ctx.line(f"    for (int {c} = {s_} % {split}; {c} < {cols}; {c} += {split * _BATCH}) {{")
            ctx.line(f"      float {sb}[{_BATCH}];")
            ctx.line("      #pragma unroll")
            ctx.line(f"      for (int {u} = 0; {u} < {_BATCH}; ++{u}) {sb}[{u}] = {c} + {u} * {split} < {cols} ? "
                     f"*{sv.addr([f'{s_} / {split}', f'min({c} + {u} * {split}, {cols - 1})'])} : 0.0f;")  # fmt: skip
            ctx.line("      #pragma unroll")
            ctx.line(f"      for (int {u} = 0; {u} < {_BATCH}; ++{u}) if ({c} + {u} * {split} < {cols})")
            candidate(j, f"({c} + {u} * {split})", f"{sb}[{u}]", "        ")
            ctx.line("    }")
        ctx.line("  }")
        ctx.line("}")

    def cost(self, op: TypedOp, ctx: CheckContext) -> CostTerms:
        tile = op.ins[0]
        elems = numel(static_shape(tile) or (0, 0))
        # a fused multiply-add and a comparison with the list's k-th per candidate (insertions are rare)
        return CostTerms(flops=3.0 * elems, shared_bytes=4.0 * elems if tile.kind is Kind.SHARED else 0.0)


class TopkReduce(Primitive):
    name = "topk.reduce"
    summary = "merge the partial top-k lists of every row (split threads, role instances) into the k best"
    doc = (
        "`part_vals`/`part_idx` are `[R * P, KP]` (the P lists of a split state) or `[S, R * P, KP]` (S "
        "such states, e.g. one per role instance in a staged shared buffer); the k best pairs of row r "
        "over all its S * P * KP candidates, by (value, unsigned index), land in `vals`/`idx` `[R, k]`, "
        "sorted. Register partials split over P > 1 threads merge by shuffles and pass through `scratch` "
        "(shared, at least 2 * R * k 32-bit words, written and read here: order it with the tile's other "
        "uses by barriers)."
    )
    signature = Signature(
        outs=[Slot("vals", _REDUCE_OUT, Access.WRITE, mask_attr="oob", doc="f32 [R, k]"),
              Slot("idx", _REDUCE_OUT, Access.WRITE, mask_attr="oob", doc="i32 [R, k]")],
        ins=[Slot("part_vals", _REDUCE_OUT, mask_attr="oob", doc="f32 partial lists"),
             Slot("part_idx", _REDUCE_OUT, mask_attr="oob", doc="i32 partial lists"),
             Slot("scratch", {Kind.SHARED}, Access.READWRITE, optional=True,
                  doc="32-bit shared words, at least 2 * R * k: register partials of P > 1 threads per row pass "
                      "through it to the row's thread")],
        attrs=[AttrSpec("k", "const", required=True, doc="pairs kept per row"),
               AttrSpec("oob", "word", choices=("skip", "none"),
                        doc="rows out of a global result's (or partials') bounds are neither read nor written")],
    )  # fmt: skip

    def check(self, op: TypedOp, ctx: CheckContext) -> Iterable[Diagnostic]:
        vals, idx, pv, pi = op.outs[0], op.outs[1], op.ins[0], op.ins[1]
        yield from need_dtype(op, vals, _F32, "f32 values")
        yield from need_dtype(op, pv, _F32, "f32 values")
        yield from need_dtype(op, idx, _I32, "i32 indices")
        yield from need_dtype(op, pi, _I32, "i32 indices")
        for o in (vals, idx):
            yield from need_layout(op, o, ("rows",), "lists in the `rows` layout")
        for o in (pv, pi):
            yield from need_layout(op, o, _STATE_LAYOUTS, "partial lists in the `rows` or `wgmma_rows` layout")
        for o in (vals, idx, pv, pi):
            yield from need_static(op, o)
        k = ctx.const(op.attr("k")) if op.attr("k") is not None else None
        so, sp = static_shape(vals), static_shape(pv)
        if so is None or sp is None or k is None:
            return
        if static_shape(idx) != so or static_shape(pi) != sp:
            yield codes.TYPES.at(op.op.loc, "values and indices must have one shape, for the result and the partials")
        if len(so) != 2 or so[1] != k:
            yield codes.TYPES.at(vals.expr.loc, f"the result `{vals.name}` is {shape_text(so)}, not [rows, {k}]")
            return
        if len(sp) not in (2, 3) or sp[-2] % so[0]:
            yield codes.TYPES.at(
                pv.expr.loc, f"partials {shape_text(sp)} are not [R * P, KP] or [S, R * P, KP] for R = {so[0]} rows"
            )
            return
        total = numel(sp) // so[0]
        if total < k:
            yield codes.TYPES.at(op.op.loc, f"each row has {total} partial candidates, fewer than k = {k}")
        scratch = op.ins[2] if len(op.ins) > 2 else None
        if scratch is not None:
            yield from need_scratch(op, scratch, 2 * so[0] * k, "a value and an index per row and rank")
        elif layout_name(pv) == "wgmma_rows":
            yield codes.TYPES.at(op.op.loc, f"merging `wgmma_rows` lists into `rows` needs a shared scratch of "
                                 f"{2 * so[0] * k} 32-bit words (a third operand)")  # fmt: skip

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        k = int(x.attr("k"))
        rows = static_shape(op.outs[0])[0]  # type: ignore[index]
        pv = x.read("part_vals").astype(np.float32)
        pi = x.read("part_idx").astype(np.int64)
        sets = pv.shape[0] if pv.ndim == 3 else 1
        kp = pv.shape[-1]
        # [S, R * P, KP] -> [R, S * P * KP]: every candidate of row r
        cand_v = pv.reshape(sets, rows, -1, kp).transpose(1, 0, 2, 3).reshape(rows, -1)
        cand_i = pi.reshape(sets, rows, -1, kp).transpose(1, 0, 2, 3).reshape(rows, -1)
        v, i = select_best(cand_v, cand_i, k)
        x.write("vals", v)
        x.write("idx", i)

    def lower(self, op: TypedOp, ctx) -> None:
        pv, pi = op.ins[0], op.ins[1]
        k = const_attr(op, ctx, "k", 1)
        if op.outs[0].kind is not Kind.REGISTERS or op.outs[1].kind is not Kind.REGISTERS:
            if Kind.REGISTERS in (pv.kind, pi.kind, op.outs[0].kind, op.outs[1].kind):
                raise NotLowerable("`topk.reduce` into memory merges partials in memory (shared or global)")
            topk_shared.reduce_to_memory(ctx, op, k, masked(op))
            return
        if Kind.GLOBAL in (pv.kind, pi.kind):
            raise NotLowerable("global partials merge into a shared or global result")
        vr, ir = ctx.rview(op.outs[0]), ctx.rview(op.outs[1])
        per_thread, _, rows = rows_layout(vr)
        _insert_helpers(ctx)
        if pv.kind is Kind.SHARED:
            _reduce_shared(ctx, vr, ir, ctx.sview(pv), ctx.sview(pi), k)
            return
        tv, tx = ctx.rview(pv), ctx.rview(pi)
        if tv.layout.name == "wgmma_rows":
            _reduce_quads(ctx, vr, ir, tv, tx, op.ins[2] if len(op.ins) > 2 else None, k)
            return
        p_per, kp, p_rows = rows_layout(tv)
        split = p_rows // rows
        if split == 1 and p_per == per_thread:
            # the partials of a row are in the row's own thread
            for j in range(per_thread):
                _empty_list(ctx, vr, ir, j, k)
                for e in range(kp):
                    ctx.line(f"cake_topk_insert<{k}>(&{vr.name}[{j * k}], &{ir.name}[{j * k}], {tv.name}[{j * kp + e}], "
                             f"{tx.name}[{j * kp + e}]);")  # fmt: skip
            return
        if split & (split - 1) or split > 32 or ctx.threads % split:
            raise NotLowerable(f"{split} threads per row: a power of two up to 32 is merged by shuffles")
        if len(op.ins) < 3:
            raise NotLowerable(f"merging the lists of {split} threads per row needs a shared `scratch` of "
                               f"{2 * rows * k} 32-bit words (a third operand)")  # fmt: skip
        scratch = ctx.sview(op.ins[2])
        if scratch.swizzle:
            raise NotLowerable("a swizzled scratch tile is not lowered")
        sizes = static_sizes(scratch)
        as_f32 = op.ins[2].dtype is DType.F32

        def word(row: str, e: str) -> str:
            return f"{scratch.addr(unravel(f'({row}) * {2 * k} + {e}', sizes))}"

        ctx.line("{")
        ctx.line(f"  float cake_mv[{k}]; int cake_mx[{k}]; float cake_ov[{k}]; int cake_ox[{k}];")
        for j in range(p_per):
            ctx.line(f"  #pragma unroll\n  for (int e = 0; e < {k}; ++e) {{ cake_mv[e] = __int_as_float(0x7f800000); "
                     "cake_mx[e] = -1; }")  # fmt: skip
            for e in range(kp):
                ctx.line(f"  cake_topk_insert<{k}>(cake_mv, cake_mx, {tv.name}[{j * kp + e}], {tx.name}[{j * kp + e}]);")
            off = split // 2
            while off:
                ctx.line("  #pragma unroll")
                ctx.line(f"  for (int e = 0; e < {k}; ++e) {{ cake_ov[e] = __shfl_xor_sync(0xffffffffu, cake_mv[e], {off}); "
                         f"cake_ox[e] = __shfl_xor_sync(0xffffffffu, cake_mx[e], {off}); }}")  # fmt: skip
                ctx.line("  #pragma unroll")
                ctx.line(f"  for (int e = 0; e < {k}; ++e) cake_topk_insert<{k}>(cake_mv, cake_mx, cake_ov[e], cake_ox[e]);")
                off //= 2
            s_ = f"({ctx.itid} + {ctx.threads * j})"
            v_w = "cake_mv[e]" if as_f32 else "__float_as_int(cake_mv[e])"
            x_w = "__int_as_float(cake_mx[e])" if as_f32 else "cake_mx[e]"
            ctx.line(f"  if ({s_} % {split} == 0 && {s_} < {p_rows}) {{")
            ctx.line("    #pragma unroll")
            ctx.line(f"    for (int e = 0; e < {k}; ++e) {{ *{word(f'{s_} / {split}', 'e')} = {v_w}; "
                     f"*{word(f'{s_} / {split}', f'{k} + e')} = {x_w}; }}")  # fmt: skip
            ctx.line("  }")
        ctx.line("}")
        _read_scratch(ctx, vr, ir, word, per_thread, rows, k, as_f32)

    def cost(self, op: TypedOp, ctx: CheckContext) -> CostTerms:
        pv = op.ins[0]
        elems = numel(static_shape(pv) or (0,))
        return CostTerms(flops=float(elems), shared_bytes=8.0 * elems if pv.kind is Kind.SHARED else 0.0)


# a candidate that beats the last pair takes its slot and moves up by compare-and-swap; with the loop
# unrolled every index is a constant, so the lists stay in registers
_INSERT = r"""
template <int K>
__device__ __forceinline__ void cake_topk_insert(float* lv, int* lx, float v, int x) {
  if (!cake_argmin_better(v, x, lv[K - 1], lx[K - 1])) return;
  lv[K - 1] = v; lx[K - 1] = x;
  #pragma unroll
  for (int i = K - 1; i > 0; --i) {
    if (cake_argmin_better(lv[i], lx[i], lv[i - 1], lx[i - 1])) {
      const float tv = lv[i]; lv[i] = lv[i - 1]; lv[i - 1] = tv;
      const int tx = lx[i]; lx[i] = lx[i - 1]; lx[i - 1] = tx;
    }
  }
}
"""


def _insert_helpers(ctx) -> None:
    ctx.helper("argmin_better", PAIR_BETTER)
    ctx.helper("topk_insert", _INSERT)


def _update_from_acc(ctx, op: TypedOp, acc: RegView, bview, is_masked: bool, base: str, scale: str,
                     limit: str | None, k: int) -> None:  # fmt: skip
    """Fold a `wgmma_acc` tile into `wgmma_rows` lists (each thread its two rows per 64-row block, its
    columns) or into shared lists [rows, k] (:mod:`cake_core.primitives.topk_shared`)."""
    vals, idx = op.outs[0], op.outs[1]
    shared = vals.kind is Kind.SHARED
    if shared != (idx.kind is Kind.SHARED):
        raise NotLowerable("a top-k state's values and indices live in one place (registers or shared)")
    vr, ir = (None, None) if shared else (ctx.rview(vals), ctx.rview(idx))
    if vr is not None and (len(vr.layout.shape) != 2 or vr.layout.shape[1] != k):
        raise NotLowerable("a `wgmma_acc` tile folds into a `wgmma_rows` state [rows, k]")
    mi_n, ni_n = acc.layout.shape[0] // 64, acc.layout.shape[1] // 8  # m64 blocks; n8 column groups
    col0 = f"(({ctx.lane} & 3) << 1)"
    # a column that is no candidate gets a NaN bias: its score fails every comparison (`<`, `<=` and `==`
    # alike), so neither the threshold tests below nor the insertion take it
    bz = ctx.fresh("bz")
    ctx.line(f"float {bz}[{ni_n * 2}];")
    for ni in range(ni_n):
        for e in range(2):
            col = f"{col0} + {ni * 8 + e}"
            conds = ([bview.in_bounds([col])] if isinstance(bview, GlobalView) and is_masked else []) + (
                [f"{base} + {col} < {limit}"] if limit else []
            )  # fmt: skip
            ok = " && ".join(conds)
            addr = bview.read_addr([col], ok) if conds and isinstance(bview, GlobalView) else bview.addr([col])
            value = to_f32(f"*{addr}", bview.dtype)
            ctx.line(f"{bz}[{ni * 2 + e}] = {f'({ok}) ? {value} : __int_as_float(0x7fc00000)' if ok else value};")
    slots = []
    for mi in range(mi_n):
        for h in range(2):
            cols = [(f"fmaf({scale}, {acc.name}[{(mi * ni_n + ni) * 4 + 2 * h + e}], {bz}[{ni * 2 + e}])",
                     f"{base} + {col0} + {ni * 8 + e}") for ni in range(ni_n) for e in range(2)]  # fmt: skip
            slots.append((f"{mi * 64} + {ctx.iwarp} * 16 + ({ctx.lane} >> 2) + {8 * h}", cols))
    least = [_fmin_tree([score for score, _ in cols]) for _, cols in slots]
    if shared:
        topk_shared.update_shared(ctx, ctx.sview(vals), ctx.sview(idx), slots, least, k)
        return
    _insert_helpers(ctx)
    # per row: one branch-free test of the least of the thread's scores (fminf passes over NaN) against the
    # list's K-th pair, exact: a score equal to the K-th value passes only if the row's first index (the
    # least of the thread's columns) is below the K-th index. So rows whose scores all tie (padding rows of
    # zeros under an inner product) stop entering the insertions once their list is full. Only a row with a
    # candidate that passes takes the insertions (the scores computed again). For k > 1 the passing scores
    # are first gathered into a small array and inserted by one loop: an insertion inlined at every column
    # made the kernel's code 12 times larger at k=10, and hopper_split.cake 4x slower.
    for slot, ((_, cols), low) in enumerate(zip(slots, least, strict=True)):
        lst, kth, kthi = slot * k, f"{vr.name}[{slot * k + k - 1}]", f"{ir.name}[{slot * k + k - 1}]"
        insert = f"cake_topk_insert<{k}>(&{vr.name}[{lst}], &{ir.name}[{lst}], "
        ctx.line(f"{{ if (cake_argmin_better({low}, {cols[0][1]}, {kth}, {kthi})) {{")
        if k == 1:
            for score, index in cols:
                ctx.line(f"    {{ const float cake_s = {score}; if (cake_s <= {kth}) {insert}cake_s, {index}); }}")
        else:
            ctx.line(f"    float cake_pv[{len(cols)}]; int cake_px[{len(cols)}]; int cake_pn = 0;")
            for score, index in cols:
                ctx.line(f"    {{ const float cake_s = {score}; if (cake_argmin_better(cake_s, {index}, {kth}, {kthi})) "
                         f"{{ cake_pv[cake_pn] = cake_s; cake_px[cake_pn] = {index}; ++cake_pn; }} }}")  # fmt: skip
            ctx.line("    #pragma unroll 1")
            ctx.line(f"    for (int cake_t = 0; cake_t < cake_pn; ++cake_t) {insert}cake_pv[cake_t], cake_px[cake_t]);")
        ctx.line("  }")
        ctx.line("}")


def _fmin_tree(terms: list[str]) -> str:
    """``fminf`` of ``terms`` as a balanced tree (independent halves: instruction-level parallelism)."""
    if len(terms) == 1:
        return terms[0]
    half = len(terms) // 2
    return f"fminf({_fmin_tree(terms[:half])}, {_fmin_tree(terms[half:])})"


def _reduce_quads(ctx, vr: RegView, ir: RegView, tv: RegView, tx: RegView, scratch_op, k: int) -> None:
    """Merge the four quad threads' `wgmma_rows` lists of every row by shuffles; the row's list reaches the
    thread that holds it in the `rows` result through ``scratch`` (``2 * R * k`` words)."""
    if scratch_op is None:
        raise NotLowerable("merging `wgmma_rows` lists into `rows` needs a shared `scratch` (a third operand)")
    per_thread, _, rows = rows_layout(vr)
    kp = tv.layout.shape[1] if len(tv.layout.shape) == 2 else 1
    if tv.layout.shape[0] != rows:
        raise NotLowerable(f"`wgmma_rows` partials of {tv.layout.shape[0]} rows merge into {rows} rows")
    scratch = ctx.sview(scratch_op)
    if scratch.swizzle:
        raise NotLowerable("a swizzled scratch tile is not lowered")
    sizes = static_sizes(scratch)
    as_f32 = scratch_op.dtype is DType.F32

    def word(row: str, e: str) -> str:
        return f"{scratch.addr(unravel(f'({row}) * {2 * k} + {e}', sizes))}"

    v_w = "cake_mv[e]" if as_f32 else "__float_as_int(cake_mv[e])"
    x_w = "__int_as_float(cake_mx[e])" if as_f32 else "cake_mx[e]"
    for slot in range(tv.layout.regs_per_thread // kp):
        blk, h = divmod(slot, 2)
        row = f"{blk * 64} + {ctx.iwarp} * 16 + ({ctx.lane} >> 2) + {8 * h}"
        ctx.line(f"{{ float cake_mv[{k}]; int cake_mx[{k}]; float cake_ov[{k}]; int cake_ox[{k}];")
        ctx.line(f"  #pragma unroll\n  for (int e = 0; e < {k}; ++e) {{ cake_mv[e] = __int_as_float(0x7f800000); "
                 "cake_mx[e] = -1; }")  # fmt: skip
        for e in range(kp):
            ctx.line(f"  cake_topk_insert<{k}>(cake_mv, cake_mx, {tv.name}[{slot * kp + e}], "
                     f"{tx.name}[{slot * kp + e}]);")  # fmt: skip
        for off in (1, 2):
            ctx.line("  #pragma unroll")
            ctx.line(f"  for (int e = 0; e < {k}; ++e) {{ cake_ov[e] = __shfl_xor_sync(0xffffffffu, cake_mv[e], "
                     f"{off}); cake_ox[e] = __shfl_xor_sync(0xffffffffu, cake_mx[e], {off}); }}")  # fmt: skip
            ctx.line("  #pragma unroll")
            ctx.line(f"  for (int e = 0; e < {k}; ++e) cake_topk_insert<{k}>(cake_mv, cake_mx, cake_ov[e], "
                     "cake_ox[e]);")  # fmt: skip
        ctx.line(f"  if (({ctx.lane} & 3) == 0) {{")
        ctx.line("    #pragma unroll")
        ctx.line(f"    for (int e = 0; e < {k}; ++e) {{ *{word(row, 'e')} = {v_w}; "
                 f"*{word(row, f'{k} + e')} = {x_w}; }}")  # fmt: skip
        ctx.line("  }")
        ctx.line("}")
    _read_scratch(ctx, vr, ir, word, per_thread, rows, k, as_f32)


def _read_scratch(ctx, vr: RegView, ir: RegView, word, per_thread: int, rows: int, k: int, as_f32: bool) -> None:
    """After a barrier, every thread reads the merged lists of its `rows` rows from the scratch words."""
    ctx.line(ctx.sync_instance())
    v_r = "{}" if as_f32 else "__int_as_float({})"
    x_r = "__float_as_int({})" if as_f32 else "{}"
    for j in range(per_thread):
        r = f"({ctx.itid} + {ctx.threads * j})"
        ctx.line(f"if ({r} < {rows}) {{")
        ctx.line("  #pragma unroll")
        ctx.line(f"  for (int e = 0; e < {k}; ++e) {{ {vr.name}[{j * k} + e] = {v_r.format('*' + word(r, 'e'))}; "
                 f"{ir.name}[{j * k} + e] = {x_r.format('*' + word(r, f'{k} + e'))}; }}")  # fmt: skip
        ctx.line("}")
    ctx.line(ctx.sync_instance())


def _empty_list(ctx, vr: RegView, ir: RegView, j: int | str, k: int) -> None:
    """Set list ``j`` of the result ``vr``/``ir`` to empty slots ``(inf, -1)``."""
    ctx.line("#pragma unroll")
    ctx.line(f"for (int e = 0; e < {k}; ++e) {{ {vr.name}[{j} * {k} + e] = __int_as_float(0x7f800000); "
             f"{ir.name}[{j} * {k} + e] = -1; }}")  # fmt: skip


def _reduce_shared(ctx, vr: RegView, ir: RegView, sv: SharedView, si: SharedView, k: int) -> None:
    """Every thread merges the shared partials (``[R * P, KP]`` or ``[S, R * P, KP]``) of its rows."""
    if sv.swizzle or si.swizzle:
        raise NotLowerable("`topk.reduce` from a swizzled shared tile is not lowered")
    per_thread, _, rows = rows_layout(vr)
    sizes = static_sizes(sv)
    sets = sizes[0] if len(sizes) == 3 else 1
    split, kp = sizes[-2] // rows, sizes[-1]
    for j in range(per_thread):
        _empty_list(ctx, vr, ir, j, k)
        r = f"({ctx.itid} + {ctx.threads * j})"
        ctx.line(f"if ({r} < {rows}) {{")
        ctx.line(f"  #pragma unroll 1\n  for (int cake_q = 0; cake_q < {sets * split * kp}; ++cake_q) {{")
        local = ([f"cake_q / {split * kp}"] if len(sizes) == 3 else []) + [
            f"{r} * {split} + (cake_q / {kp}) % {split}", f"cake_q % {kp}"
        ]  # fmt: skip
        ctx.line(f"    cake_topk_insert<{k}>(&{vr.name}[{j * k}], &{ir.name}[{j * k}], *{sv.addr(local)}, "
                 f"*{si.addr(local)});")  # fmt: skip
        ctx.line("  }")
        ctx.line("}")


PRIMITIVES: tuple[type[Primitive], ...] = (TopkUpdate, TopkReduce, *topk_shared.PRIMITIVES)
