"""CUDA C++ building blocks the core primitives' lowerings share."""

from __future__ import annotations

from collections.abc import Sequence

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
