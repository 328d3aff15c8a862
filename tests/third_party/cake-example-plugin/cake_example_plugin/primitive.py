"""``scale.rows``: a scaled copy of a global or shared tile, written into a global tile.

Written in the generic operation form, so the core's grammar needs nothing new::

    scale.rows out[t * 128 : +128, :] <- x[t * 128 : +128, :], factor=2.0, oob=skip

The primitive brings the whole contract of :class:`cake_core.ir.primitive.Primitive`:

* **signature and effects**: ``dst`` is a global tile it *writes*, bounds-masked when ``oob`` is
  given (``mask_attr="oob"``); ``src`` is a global or shared tile it reads. Only a *global* ``src``
  is masked by ``oob`` (:meth:`ScaleRows.effects` says so): the lowering guards global extents, and a
  shared tile has no partial edge to guard. Verifier rules read these effects, so CR108 finds an
  unmasked write past the end of ``dst`` without knowing this primitive;
* **type rule**: both tiles have one static shape and float element types;
* **CPU semantics**: ``dst = factor * src`` in f32, rounded to ``dst``'s element type; with
  ``oob=skip`` elements outside ``dst`` are not written and elements outside ``src`` read as zero;
* **lowering**: a strided loop over the tile by the threads of the role instance; plain loads and
  stores, so it needs no target feature and lowers for every architecture;
* **cost terms**: one multiply per element, the bytes each tier moves.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Protocol

import attrs
import numpy as np
from cake_core.diagnostics import codes
from cake_core.diagnostics.diagnostic import Diagnostic
from cake_core.ir import nodes as n
from cake_core.ir.primitive import (
    Access,
    AttrSpec,
    CheckContext,
    CostTerms,
    Effect,
    ExecContext,
    Kind,
    LowerContext,
    NotLowerable,
    Operand,
    Primitive,
    Signature,
    Slot,
    TypedOp,
    masked,
    static_shape,
)
from cake_core.ir.types import DType
from cake_core.lower.tiles import GlobalView, SharedView

#: the distribution name diagnostics of this primitive carry
PLUGIN = "cake-example-plugin"

FACTOR = AttrSpec("factor", "float", default=2.0, doc="the scale every element is multiplied by")
OOB = AttrSpec(
    "oob",
    "word",
    choices=("skip", "none"),
    doc="`skip`: elements outside `dst` are not written, elements outside a global `src` read as zero",
)


class TileLowerContext(LowerContext, Protocol):
    """What this lowering uses of the core's lowering context beyond :class:`LowerContext`: operand
    views (so addresses and masks are derived, never written) and the role instance's threads."""

    threads: int  # threads of the current role instance
    itid: str  # C++ expression: this thread's index within the role instance

    def gview(self, o: Operand) -> GlobalView: ...

    def sview(self, o: Operand) -> SharedView: ...


class ScaleRows(Primitive):
    """``scale.rows dst <- src, factor=2.0, oob=skip``."""

    name = "scale.rows"
    summary = "write `factor` times a global or shared tile into a global tile of the same shape"
    doc = (
        "Every element `dst[i] = factor * src[i]`, computed in f32 and rounded to `dst`'s element "
        "type. With `oob=skip`, elements outside `dst` are not written and elements outside a global "
        "`src` read as zero."
    )
    signature = Signature(
        outs=[Slot("dst", {Kind.GLOBAL}, Access.WRITE, mask_attr="oob", doc="the global tile written")],
        ins=[Slot("src", {Kind.GLOBAL, Kind.SHARED}, Access.READ, mask_attr="oob", doc="the tile read")],
        attrs=[FACTOR, OOB],
    )

    # -- effects ------------------------------------------------------------------------------------

    def effects(self, op: TypedOp) -> tuple[Effect, ...]:
        """The signature's effects, except that ``oob`` never masks a shared ``src`` (the lowering
        guards global extents only)."""
        return tuple(
            attrs.evolve(e, masked=False) if e.tier is Kind.SHARED else e for e in super().effects(op)
        )

    # -- type rule ----------------------------------------------------------------------------------

    def check(self, op: TypedOp, ctx: CheckContext) -> Iterable[Diagnostic]:
        dst, src = op.operand("dst"), op.operand("src")
        for o in (dst, src):
            if static_shape(o) is None:
                yield codes.TYPES.at(
                    o.expr.loc,
                    f"the tile `{o.name}` of `scale.rows` must have a shape known at compile time",
                    label=f"shape {_shape_text(o.shape)}",
                    plugin=PLUGIN,
                )
            if o.dtype is not None and not o.dtype.is_float:
                yield codes.TYPES.at(
                    o.expr.loc, f"`scale.rows` scales float tiles, `{o.name}` holds `{o.dtype}`", plugin=PLUGIN
                )
        sd, ss = static_shape(dst), static_shape(src)
        if sd is not None and ss is not None and sd != ss:
            yield codes.TYPES.at(
                op.op.loc,
                f"`scale.rows` writes {_shape_text(ss)} into {_shape_text(sd)}: the tile shapes must match",
                label="shape mismatch",
                plugin=PLUGIN,
            )

    # -- CPU semantics ------------------------------------------------------------------------------

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        factor = np.float32(x.attr("factor", FACTOR.default))
        values = x.read("src").astype(np.float32) * factor
        shape = static_shape(op.operand("dst"))
        assert shape is not None  # the type rule demands it
        x.write("dst", values.reshape(shape))

    # -- lowering -----------------------------------------------------------------------------------

    def lower(self, op: TypedOp, ctx: LowerContext) -> None:
        tctx: TileLowerContext = ctx  # type: ignore[assignment]  # the core's KernelLowering
        dst, src = op.operand("dst"), op.operand("src")
        out = tctx.gview(dst)
        inp: GlobalView | SharedView = tctx.gview(src) if src.kind is Kind.GLOBAL else tctx.sview(src)
        if isinstance(inp, SharedView) and inp.swizzle:
            raise NotLowerable("`scale.rows` does not read swizzled shared buffers")
        sizes = _static_sizes(out.sizes)
        is_masked = masked(op, "oob")
        factor = op.attr("factor")
        scale = f"(float)({ctx.c(factor)})" if factor is not None else f"{float(FACTOR.default)}f"
        i = ctx.fresh("i")
        local = _unravel(i, sizes)
        value = _to_f32(f"*{inp.addr(local)}", src.dtype)
        if is_masked and isinstance(inp, GlobalView):
            value = f"(({inp.in_bounds(local)}) ? {value} : 0.0f)"
        store = f"*{out.addr(local)} = {_from_f32(f'{scale} * {value}', dst.dtype)};"
        ctx.line(f"for (int {i} = {tctx.itid}; {i} < {math.prod(sizes)}; {i} += {tctx.threads}) {{")
        ctx.line(f"  if ({out.in_bounds(local)}) {store}" if is_masked else f"  {store}")
        ctx.line("}")

    # -- cost ---------------------------------------------------------------------------------------

    def cost(self, op: TypedOp, ctx: CheckContext) -> CostTerms:
        dst, src = op.operand("dst"), op.operand("src")
        count = math.prod(static_shape(dst) or (0,))
        read = count * (src.dtype.bytes if src.dtype else 4)
        written = count * (dst.dtype.bytes if dst.dtype else 4)
        on_global = src.kind is Kind.GLOBAL
        return CostTerms(
            flops=float(count),
            global_bytes=float(written + (read if on_global else 0)),
            shared_bytes=float(0 if on_global else read),
        )


# ---------------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------------


def _shape_text(shape: Sequence[int | n.Expr]) -> str:
    return "[" + ", ".join(str(s) if isinstance(s, int) else "?" for s in shape) + "]"


def _static_sizes(sizes: Sequence[int | str]) -> list[int]:
    if not all(isinstance(s, int) for s in sizes):
        raise NotLowerable("`scale.rows` needs tiles whose shape is known at compile time")
    return [int(s) for s in sizes]


def _unravel(flat: str, sizes: Sequence[int]) -> list[str]:
    """C++ indices of element ``flat`` of a row-major tile of ``sizes``."""
    out = []
    for d in range(len(sizes)):
        inner = math.prod(sizes[d + 1 :])
        index = f"({flat})" if inner == 1 else f"(({flat}) / {inner})"
        out.append(f"({index} % {sizes[d]})" if d else index)
    return out


def _to_f32(expr: str, dtype: DType | None) -> str:
    # cake_to_f32 / cake_from_f32 come with the prelude of every file the core generates
    if dtype in (DType.BF16, DType.F16):
        return f"cake_to_f32({expr}, {int(dtype is DType.F16)})"
    return f"(float)({expr})"


def _from_f32(expr: str, dtype: DType | None) -> str:
    if dtype in (DType.BF16, DType.F16):
        return f"cake_from_f32({expr}, {int(dtype is DType.F16)})"
    if dtype is DType.F64:
        return f"(double)({expr})"
    return f"({expr})"


__all__ = ["PLUGIN", "ScaleRows", "TileLowerContext"]
