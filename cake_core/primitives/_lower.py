"""CUDA C++ building blocks the core primitives' lowerings share."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import attrs

from cake_core.ir.primitive import NotLowerable
from cake_core.ir.types import DType
from cake_core.lower.tiles import GlobalView, RegView, SharedView


def unravel(flat: str, sizes: Sequence[int]) -> list[str]:
    """C++ indices of element ``flat`` of a row-major tile of static ``sizes``."""
    out = []
    rest = 1
    for s in sizes[1:]:
        rest *= s
    for d, s in enumerate(sizes):
        if d == len(sizes) - 1:
            out.append(f"({flat}) % {s}" if d else f"({flat})")
        else:
            out.append(f"(({flat}) / {rest}) % {s}" if d else f"({flat}) / {rest}")
            rest //= sizes[d + 1]
    return out


def static_sizes(view: GlobalView | SharedView) -> list[int]:
    if not all(isinstance(s, int) for s in view.sizes):
        raise NotLowerable("the tile's shape must be known at compile time")
    return [int(s) for s in view.sizes]  # type: ignore[arg-type]


def const_attr(op, ctx, key: str, default: int) -> int:
    """The compile-time value of attribute ``key`` of ``op`` (``default`` when not given)."""
    from cake_core.ir.exprs import try_int

    e = op.attr(key)
    if e is None:
        return default
    v = try_int(e, ctx.model.env)
    if v is None:
        raise NotLowerable(f"attribute `{key}` must be known at compile time")
    return v


def to_f32(expr: str, dtype: DType | None) -> str:
    if dtype in (DType.BF16, DType.F16):
        return f"cake_to_f32({expr}, {1 if dtype is DType.F16 else 0})"
    return f"(float)({expr})"


def from_f32(expr: str, dtype: DType | None) -> str:
    if dtype in (DType.BF16, DType.F16):
        return f"cake_from_f32({expr}, {1 if dtype is DType.F16 else 0})"
    if dtype is DType.I32:
        return f"(int)({expr})"
    return f"({expr})"


def rows_layout(view: RegView) -> tuple[int, int, int]:
    """(rows per thread J, columns C, rows R) of a `rows` register tile."""
    info = view.layout
    if info.name != "rows":
        raise NotLowerable(f"expects a `rows` tile, `{view.name}` is `{info.name}`")
    rows = info.shape[0]
    cols = info.shape[1] if len(info.shape) == 2 else 1
    return -(-rows // info.threads), cols, rows


@attrs.frozen
class RowsElement:
    """C++ names of one element a thread holds of a `rows` register tile, inside :func:`rows_elements`."""

    row: str  # the element's row in the tile
    col: str  # its column (``0`` for a vector)
    slot: str  # its index in the thread's register array
    row_slot: str  # the row's index among the thread's rows (its slot in a vector [R] tile)
    flat: str  # its row-major index in the tile
    exists: str | None  # C++ condition that the row exists (None: every thread's rows do)


@contextmanager
def rows_elements(ctx, view: RegView, per_row: Callable[[str, str], str] | None = None) -> Iterator[RowsElement]:
    """Open unrolled loops over the elements this thread holds of the `rows` tile ``view`` (row
    ``itid + threads * j``, every column); lines the caller emits inside go in the inner loop (indent
    them by four spaces). ``per_row(row, row_slot)`` gives C++ lines that go before each row's columns."""
    per_thread, cols, rows = rows_layout(view)
    j, r, c = ctx.fresh("j"), ctx.fresh("r"), ctx.fresh("c")
    ctx.line("#pragma unroll")
    ctx.line(f"for (int {j} = 0; {j} < {per_thread}; ++{j}) {{")
    ctx.line(f"  [[maybe_unused]] const int {r} = {ctx.itid} + {ctx.threads} * {j};")
    if per_row is not None:
        ctx.line("\n".join("  " + ln for ln in per_row(r, j).split("\n")))
    ctx.line("  #pragma unroll")
    ctx.line(f"  for (int {c} = 0; {c} < {cols}; ++{c}) {{")
    exists = f"{r} < {rows}" if rows % ctx.threads else None
    yield RowsElement(r, c, f"{j} * {cols} + {c}", j, f"{r} * {cols} + {c}", exists)
    ctx.line("  }")
    ctx.line("}")


def mma_acc_elements(ctx, view: RegView) -> list[tuple[int, str, str]]:
    """(register slot, C++ row, C++ column) of every element a thread holds of an `mma_acc` tile."""
    info = view.layout
    _, wn_n = info.warp_grid
    tm, tn = info.warp_tile
    row0 = f"({ctx.iwarp} / {wn_n}) * {tm} + ({ctx.lane} >> 2)"
    col0 = f"({ctx.iwarp} % {wn_n}) * {tn} + (({ctx.lane} & 3) << 1)"
    out = []
    ni_n = tn // 8
    for mi in range(tm // 16):
        for ni in range(ni_n):
            for e in range(4):
                out.append(((mi * ni_n + ni) * 4 + e, f"{row0} + {mi * 16 + 8 * (e >> 1)}", f"{col0} + {ni * 8 + (e & 1)}"))
    return out


def convert(expr: str, src: DType | None, dst: DType | None) -> str:
    """C++ of register element type ``dst`` (16-bit floats are held as float) from ``expr`` of ``src``."""
    if src == dst or dst is None:
        return to_f32(expr, src) if src in (DType.BF16, DType.F16) else expr
    if dst in (DType.BF16, DType.F16):
        raise NotLowerable(f"narrowing `{src}` into a `{dst}` register tile is not lowered")
    if src in (DType.BF16, DType.F16):
        return to_f32(expr, src) if dst is DType.F32 else f"(double){to_f32(expr, src)}"
    from cake_core.lower.cuda import storage

    return f"({storage(dst)})({expr})"


#: (v, x) beats (bv, bx): a smaller value, or an equal one with a smaller index read as unsigned (the
#: empty slot (inf, -1) loses to every candidate); the order of argmin's and top-k's (value, index) pairs
PAIR_BETTER = r"""
// (v, x) beats (bv, bx): a smaller value, or an equal one with a smaller valid index
__device__ __forceinline__ bool cake_argmin_better(float v, int x, float bv, int bx) {
  return v < bv || (v == bv && (unsigned)x < (unsigned)bx);
}
"""


DOT8 = r"""
// 8 packed 16-bit values (one 16-byte load) to floats
__device__ __forceinline__ void cake_unpack8(uint4 v, float* f, int is_f16) {
  const unsigned w[4] = {v.x, v.y, v.z, v.w};
  #pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = cake_to_f32((cake_bf16)(w[i] & 0xffffu), is_f16);
    f[2 * i + 1] = cake_to_f32((cake_bf16)(w[i] >> 16), is_f16);
  }
}
"""
