"""Type-rule helpers the reduction, scatter and top-k primitives share."""

from __future__ import annotations

from collections.abc import Iterator

from cake_core.diagnostics import codes
from cake_core.diagnostics.diagnostic import Diagnostic
from cake_core.ir.primitive import Kind, Operand, TypedOp, numel, static_shape
from cake_core.ir.types import DType
from cake_core.primitives._common import shape_text

INTEGERS = frozenset({DType.I32, DType.U32, DType.I64})


def layout_name(o: Operand) -> str | None:
    """The layout of a register operand (`rows` when none is written); None for memory operands."""
    if o.kind is not Kind.REGISTERS:
        return None
    return o.layout.name if o.layout is not None else "rows"


def need_layout(op: TypedOp, o: Operand, allowed: tuple[str, ...], what: str) -> Iterator[Diagnostic]:
    """A register operand must be in one of ``allowed`` layouts."""
    got = layout_name(o)
    if got is not None and got not in allowed:
        yield codes.TYPES.at(
            o.expr.loc, f"`{op.op.name}` takes {what}; `{o.name}` is in layout `{got}`", label=f"layout `{got}`"
        )


def need_dtype(op: TypedOp, o: Operand, allowed: frozenset[DType], what: str) -> Iterator[Diagnostic]:
    if o.dtype is not None and o.dtype not in allowed:
        yield codes.TYPES.at(o.expr.loc, f"`{op.op.name}` needs {what}, `{o.name}` holds `{o.dtype}`")


def need_rank(op: TypedOp, o: Operand, ranks: tuple[int, ...], what: str) -> Iterator[Diagnostic]:
    if len(o.shape) not in ranks:
        yield codes.TYPES.at(o.expr.loc, f"`{op.op.name}` needs {what}, `{o.name}` is {shape_text(o.shape)}")


def need_scratch(op: TypedOp, scratch: Operand, need: int, what: str) -> Iterator[Diagnostic]:
    """A scratch operand must hold at least ``need`` 32-bit elements (``what`` says what they are for)."""
    ss = static_shape(scratch)
    if ss is not None and numel(ss) < need:
        yield codes.TYPES.at(
            scratch.expr.loc, f"the scratch `{scratch.name}` holds {numel(ss)} elements; `{op.op.name}` needs "
            f"{need} ({what})",
        )  # fmt: skip
    if scratch.dtype is not None and scratch.dtype.bytes != 4:
        yield codes.TYPES.at(scratch.expr.loc, "the scratch tile holds 32-bit elements")


def rows_cols(o: Operand) -> tuple[int | None, int | None]:
    """(rows, columns) of a static [R] or [R, C] tile (columns 1 for a vector), Nones when not static."""
    s = static_shape(o)
    if s is None or len(s) not in (1, 2):
        return None, None
    return s[0], (s[1] if len(s) == 2 else 1)
