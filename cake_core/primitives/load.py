"""Loads into registers: a global or shared tile into a `rows` register tile, one row per thread.

The counterpart of :class:`cake_core.primitives.memory.Store`. Kernels that scatter rows with
``atomic.add`` or divide rows with ``rowdiv`` keep their data in `rows` tiles; the tensor-core paths
keep using ``cp.async`` / ``tma.load`` into shared memory and ``ldmatrix``.

A `wgmma_acc` / `wgmma_rows` destination takes the elements a wgmma accumulator's thread holds (so a
consumer warpgroup can pair an argmin's indices, still in `wgmma_rows` registers, with rows re-read from
global memory and scatter them with ``atomic.add``, no exchange between threads needed).

Lowering: each thread reads the elements of its rows (converted to the register type, 16-bit floats
widened to f32), out-of-bounds elements of a masked global tile replaced by 0 or ``value`` without
being read; shared tiles must not be swizzled. Where a thread's consecutive elements are contiguous and
aligned in the source (decided at compile time by :func:`~cake_core.lower.tiles.vector_elems`: 16 bytes
of a `rows` tile's row, 4 or 8 bytes of a `wgmma_acc` column pair) they are read with one vector load;
elsewhere (a ragged or misaligned column start, an odd row length) one element at a time.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from cake_core.diagnostics import codes
from cake_core.diagnostics.diagnostic import Diagnostic
from cake_core.ir.primitive import (
    Access, AttrSpec, CheckContext, CostTerms, ExecContext, Kind, NotLowerable, Primitive, Signature, Slot,
    TypedOp, masked, numel, static_shape,
)  # fmt: skip
from cake_core.ir.types import DType
from cake_core.lower.cuda import fragment_words, storage
from cake_core.lower.tiles import GlobalView, SharedView, vector_elems
from cake_core.primitives._common import need_static, same_kind, same_numel
from cake_core.primitives._lower import convert, rows_elements, static_sizes, unravel
from cake_core.primitives._vocab import need_layout

_OOB = AttrSpec(
    "oob", "word", choices=("zero", "fill", "none"),
    doc="out-of-bounds elements read as zero (`zero`) or as `value` (`fill`); `none`: they fault",
)  # fmt: skip


class Load(Primitive):
    name = "load"
    summary = "synchronous load of a global or shared tile into a `rows` register tile"
    doc = (
        "Copies `src` into `dst` element by element in row-major order (the tiles have as many elements), "
        "converting between float types or between integer types. With `oob=zero` elements outside "
        "`src`'s tensor read as 0, with `oob=fill` as `value` (an index tile loaded with `value=-1` marks "
        "the rows past a ragged edge, which a masked `atomic.add` then skips)."
    )
    signature = Signature(
        outs=[Slot("dst", {Kind.REGISTERS}, Access.WRITE)],
        ins=[Slot("src", {Kind.GLOBAL, Kind.SHARED}, Access.READ, mask_attr="oob")],
        attrs=[_OOB, AttrSpec("value", "float", default=0.0, doc="what out-of-bounds elements read as (`oob=fill`)")],
    )

    def check(self, op: TypedOp, ctx: CheckContext) -> Iterable[Diagnostic]:
        dst, src = op.outs[0], op.ins[0]
        yield from need_static(op, src)
        yield from same_numel(op, dst, src)
        yield from need_layout(
            op, dst, ("rows", "wgmma_acc", "wgmma_rows"),
            "a `rows` register tile, or a wgmma accumulator's layout (mma fragments are loaded with `ldmatrix`)",
        )  # fmt: skip
        yield from same_kind(op, dst, src)
        oob = op.attr("oob")
        fill = oob is not None and getattr(oob, "id", None) == "fill"
        if op.attr("value") is not None and not fill:
            yield codes.ATTRIBUTES.at(op.op.loc, "`value` is what out-of-bounds elements read as: it needs `oob=fill`")

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        v = x.read("src")
        if x.attr("oob") == "fill":
            v = np.where(x.in_bounds("src"), v, float(x.attr("value", 0.0)))
        x.write("dst", v.reshape(static_shape(op.outs[0])))

    def lower(self, op: TypedOp, ctx) -> None:
        dst, src = op.outs[0], op.ins[0]
        reg = ctx.rview(dst)
        view = ctx.gview(src) if src.kind is Kind.GLOBAL else ctx.sview(src)
        if isinstance(view, SharedView) and view.swizzle:
            raise NotLowerable("`load` from a swizzled shared buffer is not lowered")
        sizes = static_sizes(view)
        ctype = fragment_words(reg)[0]
        oob = op.attr("oob")
        fill = ctx.c(op.attr("value")) if oob is not None and getattr(oob, "id", None) == "fill" else "0"
        guard = isinstance(view, GlobalView) and masked(op)
        smem = ctx.model.smem.get(src.name) if src.kind is Kind.SHARED else None

        def read(local: list[str], exists: str | None, slots: list[str], width: int, indent: str) -> None:
            # `width` consecutive elements from `local` on into registers `slots`; a masked group is in or
            # out of bounds as a whole (its start and the tensor's row are `width`-aligned)
            ok = " && ".join(([exists] if exists else []) + ([view.in_bounds(local)] if guard else []))
            addr = view.read_addr(local, ok) if ok and isinstance(view, GlobalView) else view.addr(local)
            if width == 1:
                values = [convert(f"*{addr}", src.dtype, dst.dtype)]
            else:
                values = unpack_vector(ctx, addr, src.dtype, dst.dtype, width, indent)
            for slot, value in zip(slots, values, strict=True):
                picked = f"({ok}) ? ({ctype})({value}) : ({ctype})({fill});" if ok else f"{value};"
                ctx.line(f"{indent}{reg.name}[{slot}] = {picked}")

        if reg.layout.name in ("wgmma_acc", "wgmma_rows"):
            _load_wgmma(ctx, reg, sizes, read, vector_elems(src, view, ctx.model.env, 2, 2 * view.dtype.bytes, smem))
            return
        run = reg.layout.shape[1] if len(reg.layout.shape) == 2 else 1
        width = vector_width(src.dtype, dst.dtype, vector_elems(src, view, ctx.model.env, run, 16, smem))
        with rows_elements(ctx, reg) as e:
            local = unravel(e.flat, sizes)
            if width == 1:
                read(local, e.exists, [e.slot], 1, "    ")
            else:
                # the first of `width` aligned consecutive columns reads them all with one vector load
                ctx.line(f"    if (({e.col}) % {width} == 0) {{")
                read(local, e.exists, [f"{e.slot} + {k}" for k in range(width)], width, "      ")
                ctx.line("    }")

    def cost(self, op: TypedOp, ctx: CheckContext) -> CostTerms:
        src = op.ins[0]
        nbytes = numel(static_shape(src) or (0,)) * (src.dtype.bytes if src.dtype else 4)
        if src.kind is Kind.GLOBAL:
            return CostTerms(global_bytes=nbytes)
        return CostTerms(shared_bytes=nbytes)


def vector_width(src: DType | None, dst: DType | None, width: int) -> int:
    """``width`` where a vector load of ``src`` elements can fill ``dst`` registers (16-bit floats widened,
    32-bit values as they are) and moves at least 4 bytes; else 1."""
    if src in (DType.BF16, DType.F16) and dst in (DType.F32, DType.BF16, DType.F16) and width >= 2:
        return width
    if src in (DType.F32, DType.I32, DType.U32) and dst == src and width >= 1:
        return width
    return 1


def unpack_vector(ctx, addr: str, src: DType | None, dst: DType | None, width: int, indent: str) -> list[str]:
    """Emit one aligned vector load of ``width`` ``src`` elements at ``addr``; C++ of each element as ``dst``."""
    assert src is not None
    words = width * src.bytes // 4
    wtype = {1: "unsigned", 2: "uint2", 4: "uint4"}[words]
    v = ctx.fresh("v")
    ctx.line(f"{indent}const {wtype} {v}_raw = *(const {wtype}*)({addr});")
    parts = ["x", "y", "z", "w"][:words] if words > 1 else [""]
    wv = [f"{v}_raw.{p}" if p else f"{v}_raw" for p in parts]
    if src in (DType.BF16, DType.F16):
        half = [f"(cake_bf16)(({wv[k // 2]} >> {16 * (k % 2)}) & 0xffffu)" for k in range(width)]
        return [convert(h, src, dst) for h in half]
    if src is DType.F32:
        return [f"__uint_as_float({w})" for w in wv]
    return [f"({storage(src)})({w})" for w in wv]


def _load_wgmma(ctx, reg, sizes: list[int], read, width: int) -> None:
    """Into a wgmma accumulator's layout: thread (warp w, lane l) takes rows ``64*m + 16*w + l/4`` and
    ``+8`` of every 64-row block; of a [rows, C] tile, the column pair ``8*g + 2*(l%4)``, ``+1`` of every
    8-column group (one vector load where the pair is aligned), of a [rows] vector the row's element."""
    info = reg.layout
    blocks = info.shape[0] // 64
    row = [[f"{blk * 64} + {ctx.iwarp} * 16 + ({ctx.lane} >> 2) + {8 * h}" for h in range(2)] for blk in range(blocks)]
    if info.name == "wgmma_rows":
        for blk in range(blocks):
            for h in range(2):
                read(unravel(row[blk][h], sizes), None, [str(blk * 2 + h)], 1, "")
        return
    if len(sizes) != 2:
        raise NotLowerable("a `wgmma_acc` tile is loaded from a [rows, columns] tile")
    groups = info.shape[1] // 8
    for blk in range(blocks):
        for g in range(groups):
            for h in range(2):
                slots = [(blk * groups + g) * 4 + 2 * h + e for e in range(2)]
                cols = [f"{g * 8} + (({ctx.lane} & 3) << 1) + {e}" for e in range(2)]
                if width >= 2:
                    ctx.line("{")
                    read([row[blk][h], cols[0]], None, [str(x) for x in slots], 2, "  ")
                    ctx.line("}")
                    continue
                for slot, col in zip(slots, cols, strict=True):
                    read([row[blk][h], col], None, [str(slot)], 1, "")


PRIMITIVES: tuple[type[Primitive], ...] = (Load,)
