"""Loads into registers: a global or shared tile into a `rows` register tile, one row per thread.

The counterpart of :class:`cake_core.primitives.memory.Store`. Kernels that scatter rows with
``atomic.add`` or divide rows with ``rowdiv`` keep their data in `rows` tiles; the tensor-core paths
keep using ``cp.async`` / ``tma.load`` into shared memory and ``ldmatrix``.

Lowering: each thread reads the elements of its rows one by one (converted to the register type,
16-bit floats widened to f32), out-of-bounds elements of a masked global tile replaced by 0 or
``value`` without being read; shared tiles must not be swizzled.
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
from cake_core.lower.cuda import fragment_words
from cake_core.lower.tiles import GlobalView, SharedView
from cake_core.primitives._common import need_static, same_numel
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
        yield from need_layout(op, dst, ("rows",), "a `rows` register tile (fragments are loaded with `ldmatrix`)")
        if dst.dtype is not None and src.dtype is not None and dst.dtype.is_float != src.dtype.is_float:
            yield codes.TYPES.at(
                op.op.loc, f"`load` converts between float types or between integer types, not `{src.dtype}` "
                f"to `{dst.dtype}`",
            )  # fmt: skip
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
        with rows_elements(ctx, reg) as e:
            local = unravel(e.flat, sizes)
            cond = ([e.exists] if e.exists else []) + (
                [view.in_bounds(local)] if isinstance(view, GlobalView) and masked(op) else []
            )
            ok = " && ".join(cond)
            addr = view.read_addr(local, ok) if ok and isinstance(view, GlobalView) else view.addr(local)
            value = convert(f"*{addr}", src.dtype, dst.dtype)
            ctx.line(f"    {reg.name}[{e.slot}] = " + (f"({ok}) ? ({ctype})({value}) : ({ctype})({fill});" if ok else f"{value};"))

    def cost(self, op: TypedOp, ctx: CheckContext) -> CostTerms:
        src = op.ins[0]
        nbytes = numel(static_shape(src) or (0,)) * (src.dtype.bytes if src.dtype else 4)
        if src.kind is Kind.GLOBAL:
            return CostTerms(global_bytes=nbytes)
        return CostTerms(shared_bytes=nbytes)


PRIMITIVES: tuple[type[Primitive], ...] = (Load,)
