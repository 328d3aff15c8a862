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


def rows_of(shape: tuple) -> int | None:
    return shape[0] if shape and isinstance(shape[0], int) else None
