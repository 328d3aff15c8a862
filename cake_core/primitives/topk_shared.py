"""Top-k lists in shared memory: lists too long for registers (k up to 128 and beyond).

The shared-list path of :mod:`cake_core.primitives.topk`:

* ``topk.init vals, idx <-``: set every list of a shared state (f32 values, i32 indices, ``[R, K]``) to
  the empty slots ``(inf, -1)``; a ``bar.sync`` orders it before the state's other uses.
* ``topk.update`` into a shared state ``[R, K]`` from a ``wgmma_acc`` tile: each thread scores its columns
  of its rows, and a row whose least score passes the row's current K-th value (read from the list:
  almost every row once the list is full) inserts the passing columns into the list, sorted. The four
  threads of a quad share a row; they take turns (one quad lane at a time, ``__syncwarp`` between),
  so no two threads ever write one list at once. An insertion finds its place by binary search and
  shifts the worse pairs down by one.
* ``topk.reduce`` into memory (shared or global ``[R, K]`` results, with ``oob=skip`` masking global
  rows) from shared or global partials ``[R * P, KP]`` or ``[S, R * P, KP]``: one thread per row merges
  the ``S * P`` sorted lists by their heads, one pair at a time, so nothing of length K is held in
  registers. The lowering relies on the partial lists being sorted, as ``topk.update`` and
  ``topk.reduce`` leave them; shared partials written by other threads need a ``bar.sync`` before.

The interpreter's semantics are :mod:`cake_core.primitives.topk`'s (one list per row, order and ties by
value then unsigned index); this module adds the init primitive and the C++ of the shared paths.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from cake_core.diagnostics import codes
from cake_core.diagnostics.diagnostic import Diagnostic
from cake_core.ir.primitive import (
    Access, CheckContext, CostTerms, ExecContext, Kind, NotLowerable, Primitive, Signature, Slot, TypedOp, numel,
    static_shape,
)  # fmt: skip
from cake_core.ir.types import DType
from cake_core.lower.tiles import GlobalView, SharedView
from cake_core.primitives._common import need_static, shape_text
from cake_core.primitives._lower import PAIR_BETTER, static_sizes
from cake_core.primitives._vocab import need_dtype

_F32 = frozenset({DType.F32})
_I32 = frozenset({DType.I32})

# a candidate that beats the K-th pair: binary search for its place in the sorted list, then the worse
# pairs move down one slot (independent loads and stores) and the candidate takes the place
_PUSH = r"""
template <int K>
__device__ __forceinline__ void cake_topk_push(float* lv, int* lx, float v, int x) {
  if (!cake_argmin_better(v, x, lv[K - 1], lx[K - 1])) return;
  int lo = 0, hi = K - 1;
  while (lo < hi) {
    const int mid = (lo + hi) >> 1;
    if (cake_argmin_better(v, x, lv[mid], lx[mid])) hi = mid; else lo = mid + 1;
  }
  #pragma unroll 4
  for (int i = K - 1; i > lo; --i) { lv[i] = lv[i - 1]; lx[i] = lx[i - 1]; }
  lv[lo] = v; lx[lo] = x;
}
"""


class TopkInit(Primitive):
    name = "topk.init"
    summary = "set every list of a shared top-k state to empty slots (inf, -1)"
    doc = (
        "`vals` f32 and `idx` i32 are a shared state `[R, K]` (one list per row) that `topk.update` folds "
        "tiles into; order it before their other uses with `bar.sync`."
    )
    signature = Signature(
        outs=[Slot("vals", {Kind.SHARED}, Access.WRITE, doc="f32 [R, k] shared lists"),
              Slot("idx", {Kind.SHARED}, Access.WRITE, doc="i32 [R, k] shared lists")],
    )  # fmt: skip

    def check(self, op: TypedOp, ctx: CheckContext) -> Iterable[Diagnostic]:
        vals, idx = op.outs
        yield from need_dtype(op, vals, _F32, "f32 values")
        yield from need_dtype(op, idx, _I32, "i32 indices")
        for o in (vals, idx):
            yield from need_static(op, o)
        sv, si = static_shape(vals), static_shape(idx)
        if sv is not None and si is not None and (sv != si or len(sv) != 2):
            yield codes.TYPES.at(op.op.loc, f"the state is [rows, k] values and indices of one shape, not "
                                 f"{shape_text(sv)} and {shape_text(si)}")  # fmt: skip

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        shape = static_shape(op.outs[0])
        x.write("vals", np.full(shape, np.inf, dtype=np.float32))
        x.write("idx", np.full(shape, -1, dtype=np.int64))

    def lower(self, op: TypedOp, ctx) -> None:
        for o, value in ((op.outs[0], "__int_as_float(0x7f800000)"), (op.outs[1], "-1")):
            sv = ctx.sview(o)
            if sv.swizzle:
                raise NotLowerable("a swizzled top-k state is not lowered")
            rows, k = static_sizes(sv)
            e = ctx.fresh("e")
            ctx.line("#pragma unroll 1")
            ctx.line(f"for (int {e} = {ctx.itid}; {e} < {rows * k}; {e} += {ctx.threads}) "
                     f"*{sv.addr([f'{e} / {k}', f'{e} % {k}'])} = {value};")  # fmt: skip

    def cost(self, op: TypedOp, ctx: CheckContext) -> CostTerms:
        return CostTerms(shared_bytes=8.0 * numel(static_shape(op.outs[0]) or (0,)))


def push_helpers(ctx) -> None:
    ctx.helper("argmin_better", PAIR_BETTER)
    ctx.helper("topk_push", _PUSH)


def _row_pointers(sv: SharedView, si: SharedView, k: int) -> None:
    if sv.swizzle or si.swizzle:
        raise NotLowerable("a swizzled top-k state is not lowered")
    for v in (sv, si):
        if len(static_sizes(v)) != 2 or static_sizes(v)[1] != k or v.strides[-1] != 1:
            raise NotLowerable(f"a shared top-k state is [rows, {k}] with contiguous rows")


def update_shared(ctx, sv: SharedView, si: SharedView, slots: list[tuple[str, list[tuple[str, str]]]], least: list[str],
                  k: int) -> None:  # fmt: skip
    """Fold a thread's candidates into the shared lists of its rows: ``slots`` holds, per row the thread
    shares with its quad, the row (C++) and its candidates (score, index; a score that is NaN is none);
    ``least`` the branch-free least score of each slot's candidates."""
    _row_pointers(sv, si, k)
    push_helpers(ctx)
    lane = ctx.lane
    for (row, cands), low in zip(slots, least, strict=True):
        ctx.line(f"{{ float* cake_lv = {sv.addr([row, '0'])}; int* cake_lx = {si.addr([row, '0'])};")
        # the K-th value only falls, so a test against it read before the other quad lanes insert passes
        # every candidate the up-to-date one would
        ctx.line(f"  const bool cake_any = {low} <= cake_lv[{k - 1}];")
        ctx.line("  if (__any_sync(0xffffffffu, cake_any)) {")
        ctx.line("    #pragma unroll 1")
        ctx.line("    for (int cake_q = 0; cake_q < 4; ++cake_q) {")
        ctx.line(f"      if (cake_any && ({lane} & 3) == cake_q) {{")
        ctx.line(f"        float cake_th = cake_lv[{k - 1}];")
        for score, index in cands:
            ctx.line(f"        {{ const float cake_s = {score}; if (cake_s <= cake_th) {{ "
                     f"cake_topk_push<{k}>(cake_lv, cake_lx, cake_s, {index}); cake_th = cake_lv[{k - 1}]; }} }}")
        ctx.line("      }")
        ctx.line("      __syncwarp();")
        ctx.line("    }")
        ctx.line("  }")
        ctx.line("}")


def reduce_to_memory(ctx, op: TypedOp, k: int, is_masked: bool) -> None:
    """``topk.reduce`` into a shared or global result ``[R, K]``: each thread merges the sorted partial lists
    of its rows by their heads, writing one pair at a time."""
    outs = [ctx.gview(o) if o.kind is Kind.GLOBAL else ctx.sview(o) for o in op.outs]
    parts = [ctx.gview(o) if o.kind is Kind.GLOBAL else ctx.sview(o) for o in op.ins[:2]]
    for v in outs + parts:
        if isinstance(v, SharedView) and v.swizzle:
            raise NotLowerable("`topk.reduce` with a swizzled shared tile is not lowered")
    rows = static_sizes(outs[0])[0]
    sizes = static_sizes(parts[0])
    sets, split, kp = (sizes[0] if len(sizes) == 3 else 1), sizes[-2] // rows, sizes[-1]
    push_helpers(ctx)
    lists = [(s, p) for s in range(sets) for p in range(split)]
    r = ctx.fresh("r")

    def local(view, s: int, p: int, e: str) -> list[str]:
        return ([str(s)] if len(static_sizes(view)) == 3 else []) + [f"{r} * {split} + {p}", e]

    conds = []
    if is_masked:
        conds += [v.in_bounds([r, "0"]) for v in outs if isinstance(v, GlobalView)]
        conds += [v.in_bounds(local(v, 0, 0, "0")) for v in parts if isinstance(v, GlobalView)]
    ctx.line("#pragma unroll 1")
    ctx.line(f"for (int {r} = {ctx.itid}; {r} < {rows}; {r} += {ctx.threads}) {{")
    if conds:
        ctx.line(f"  if (!({' && '.join(conds)})) continue;")
    ctx.line(f"  int {', '.join(f'cake_h{n} = 0' for n in range(len(lists)))};")
    ctx.line(f"  #pragma unroll 1\n  for (int cake_e = 0; cake_e < {k}; ++cake_e) {{")
    ctx.line("    float cake_bv = __int_as_float(0x7f800000); int cake_bx = -1, cake_bl = -1;")
    for n, (s, p) in enumerate(lists):
        head_v, head_x = (v.addr(local(v, s, p, f"cake_h{n}")) for v in parts)
        ctx.line(f"    if (cake_h{n} < {kp}) {{ const float cake_v = *{head_v}; const int cake_x = *{head_x};")
        ctx.line("      if (cake_bl < 0 || cake_argmin_better(cake_v, cake_x, cake_bv, cake_bx)) "
                 f"{{ cake_bv = cake_v; cake_bx = cake_x; cake_bl = {n}; }} }}")  # fmt: skip
    ctx.line(f"    *{outs[0].addr([r, 'cake_e'])} = cake_bv; *{outs[1].addr([r, 'cake_e'])} = cake_bx;")
    ctx.line("    " + " ".join(f"cake_h{n} += cake_bl == {n};" for n in range(len(lists))))
    ctx.line("  }")
    ctx.line("}")


PRIMITIVES: tuple[type[Primitive], ...] = (TopkInit,)
