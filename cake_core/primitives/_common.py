"""Helpers the core primitives share: shape agreement and diagnostics."""

from __future__ import annotations

from collections.abc import Iterator

from cake_core.diagnostics import codes
from cake_core.diagnostics.diagnostic import Diagnostic
from cake_core.ir.primitive import Operand, TypedOp, numel, static_shape


def shape_text(shape) -> str:
    return "[" + ", ".join(str(s) if isinstance(s, int) else "?" for s in shape) + "]"


def need_static(op: TypedOp, o: Operand) -> Iterator[Diagnostic]:
    if static_shape(o) is None:
        yield codes.TYPES.at(
            o.expr.loc, f"the tile `{o.name}` of `{op.op.name}` must have a shape known at compile time",
            label=f"shape {shape_text(o.shape)}",
        )  # fmt: skip


def same_numel(op: TypedOp, a: Operand, b: Operand) -> Iterator[Diagnostic]:
    sa, sb = static_shape(a), static_shape(b)
    if sa is not None and sb is not None and numel(sa) != numel(sb):
        yield codes.TYPES.at(
            op.op.loc, f"`{op.op.name}` moves {shape_text(sb)} into {shape_text(sa)}: the shapes differ",
            label="shape mismatch",
        )  # fmt: skip


def same_dtype(op: TypedOp, a: Operand, b: Operand) -> Iterator[Diagnostic]:
    if a.dtype is not None and b.dtype is not None and a.dtype != b.dtype:
        yield codes.TYPES.at(
            op.op.loc, f"`{op.op.name}` needs `{a.name}` and `{b.name}` of one element type, got "
            f"`{a.dtype}` and `{b.dtype}`", label="element types differ",
        )  # fmt: skip


def same_kind(op: TypedOp, dst: Operand, src: Operand) -> Iterator[Diagnostic]:
    """A copy that converts (``load``, ``gather``) converts between float types or between integer types."""
    if dst.dtype is not None and src.dtype is not None and dst.dtype.is_float != src.dtype.is_float:
        yield codes.TYPES.at(
            op.op.loc, f"`{op.op.name}` converts between float types or between integer types, not `{src.dtype}` "
            f"to `{dst.dtype}`",
        )  # fmt: skip


def mma_operands(op: TypedOp, acc: Operand, a: Operand, b: Operand) -> Iterator[Diagnostic]:
    """The type rule of a tensor-core MMA ``acc (+)= a @ b^T`` from shared memory: ``b`` written
    transposed (stored [N, K]), ``a`` and ``b`` bf16 or f16 alike, an f32 accumulator, and shapes
    [M, K] by [N, K] giving [M, N] with K a multiple of 16."""
    from cake_core.ir.types import DType

    name = op.op.name
    if not b.transpose:
        yield codes.TYPES.at(b.expr.loc, f"`{name}` multiplies by the transpose of `b` (stored [N, K])",
                             help=f"write `{b.name}^T`")  # fmt: skip
    yield from same_dtype(op, a, b)
    if a.dtype not in (DType.BF16, DType.F16):
        yield codes.TYPES.at(op.op.loc, f"`{name}` here multiplies bf16 or f16, not `{a.dtype}`")
    if acc.dtype is not DType.F32:
        yield codes.TYPES.at(acc.expr.loc, f"`{name}` accumulates in f32")
    sa, sb, sc = static_shape(a), static_shape(b), static_shape(acc)
    if sa and sb and sc:
        if len(sa) != 2 or len(sb) != 2 or sa[0] != sc[0] or sb[0] != sc[1] or sa[1] != sb[1] or sa[1] % 16:
            yield codes.TYPES.at(
                op.op.loc, f"`{name}` of {shape_text(sa)} by {shape_text(sb)}^T does not give {shape_text(sc)} "
                "(k a multiple of 16)", label="shape mismatch",
            )  # fmt: skip


def rows_of(shape: tuple) -> int | None:
    return shape[0] if shape and isinstance(shape[0], int) else None
