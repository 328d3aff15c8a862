"""C++ views of operands that primitive lowerings build their code from.

A primitive never computes an address by hand: it asks for the view of its operand and indexes it
with local (tile) coordinates. Global views carry the tensor's extents so masks are derived, never
written; shared views carry the buffer's stage, row pitch and swizzle; register views carry the
fragment layout.
:func:`vector_elems` decides, at compile time, how wide an aligned vector access to a tile may be.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import attrs

from cake_core.ir import nodes as n
from cake_core.ir.exprs import try_int
from cake_core.ir.layouts import LayoutInfo
from cake_core.ir.swizzle import SWIZZLE_BYTES
from cake_core.ir.types import DType

if TYPE_CHECKING:
    from cake_core.ir.model import SmemInfo
    from cake_core.ir.primitive import Operand


@attrs.frozen
class GlobalView:
    """A tile of a row-major global tensor."""

    ptr: str  # the tensor's base pointer
    dtype: DType
    extents: tuple[str, ...]  # C++ extent of every dimension
    strides: tuple[str, ...]  # C++ (long long) stride of every dimension, in elements
    starts: tuple[str, ...]  # C++ index of the tile's origin in every dimension
    tile_dims: tuple[int, ...]  # the dimensions the tile spans (Span or All), in order
    sizes: tuple[int | str, ...]  # the tile's extent in each tile dimension
    whole: tuple[bool, ...]  # per dimension: the tile covers it entirely (never out of bounds)

    def offset(self, local: Sequence[str]) -> str:
        """Element offset (long long) of the tile element at ``local`` (one index per tile dim)."""
        idx = list(self.starts)
        for d, li in zip(self.tile_dims, local, strict=True):
            idx[d] = f"({idx[d]} + {li})" if idx[d] != "0" else li
        terms = [f"(long long)({i}) * {s}" if s != "1" else f"(long long)({i})" for i, s in zip(idx, self.strides, strict=True)]
        return " + ".join(terms)

    def addr(self, local: Sequence[str]) -> str:
        return f"({self.ptr} + {self.offset(local)})"

    def read_addr(self, local: Sequence[str], cond: str) -> str:
        """The address of the element at ``local`` where ``cond`` holds, else the tensor's first element:
        a load from it never faults, so a masked read needs no branch (select what it returns)."""
        return f"(({cond}) ? {self.addr(local)} : {self.ptr})"

    def in_bounds(self, local: Sequence[str]) -> str:
        """C++ condition: the element at ``local`` exists in the tensor."""
        conds = []
        local_of = dict(zip(self.tile_dims, local, strict=True))
        for d, (start, extent) in enumerate(zip(self.starts, self.extents, strict=True)):
            if self.whole[d]:
                continue
            pos = f"{start} + {local_of[d]}" if d in local_of else start
            conds.append(f"({pos}) < {extent}")
        return " && ".join(conds) if conds else "true"


@attrs.frozen
class SharedView:
    """A tile of a (stage of a) shared buffer."""

    base: str  # pointer to the stage's first element
    dtype: DType
    strides: tuple[int, ...]  # elements, per buffer dimension (row pitch includes padding)
    starts: tuple[str, ...]
    tile_dims: tuple[int, ...]
    sizes: tuple[int | str, ...]
    swizzle: str | None
    row_bytes: int  # bytes from one row to the next
    rows: int  # rows of a stage (every dimension but the innermost): a swizzled buffer's panel height

    def index(self, local: Sequence[str]) -> list[str]:
        """The buffer index of the tile's element at ``local`` (one index per tile dimension)."""
        idx = list(self.starts)
        for d, li in zip(self.tile_dims, local, strict=True):
            idx[d] = f"({idx[d]} + {li})" if idx[d] != "0" else li
        return idx

    def offset(self, local: Sequence[str]) -> str:
        idx = self.index(local)
        return " + ".join(f"({i}) * {s}" if s != 1 else f"({i})" for i, s in zip(idx, self.strides, strict=True))

    def addr(self, local: Sequence[str]) -> str:
        return f"({self.base} + {self.offset(local)})"

    def smem_addr(self, local: Sequence[str]) -> str:
        """The shared-space address (u32) of the element at ``local``, 16-byte chunks where the buffer's swizzle
        puts them: a swizzled stage is laid out as TMA writes it, panels of the swizzle width one after the
        other (each ``rows`` rows of ``W`` bytes), and each 16-byte chunk of an address moves by the XOR of
        its chunk bits (4..) with the address bits from 7 up (one bit for 32B, two for 64B, three for 128B)."""
        if not self.swizzle:
            return f"cake_smem_addr({self.addr(local)})"
        width = SWIZZLE_BYTES[self.swizzle]
        elem = self.dtype.bytes
        per_row = width // elem
        idx = self.index(local)
        col = idx[-1]
        inner = self.strides[-2] if len(self.strides) > 1 else per_row
        row = " + ".join(f"({i}) * {s // inner}" if s != inner else f"({i})"
                         for i, s in zip(idx[:-1], self.strides[:-1], strict=True)) or "0"  # fmt: skip
        byte = f"(({col}) / {per_row}) * {self.rows * width} + ({row}) * {width} + (({col}) % {per_row}) * {elem}"
        mask = width // 16 - 1
        return f"cake_swizzled(cake_smem_addr({self.base}) + ({byte}), {mask}u)"


@attrs.frozen
class RegView:
    name: str  # the C++ array
    dtype: DType
    layout: LayoutInfo

    def flat(self, index: str) -> str:
        return f"{self.name}[{index}]"


def multiple_of(e: n.Expr, k: int, env: Mapping[str, object]) -> bool:
    """Whether the size expression ``e`` is a multiple of ``k`` whatever its unbound names hold: a
    sufficient test (a bound value divisible by ``k``, a sum or difference of multiples, a product
    with a multiple as one factor); ``False`` where it cannot tell."""
    v = try_int(e, env)  # type: ignore[arg-type]
    if v is not None:
        return v % k == 0
    if isinstance(e, n.Bin) and e.op in ("+", "-"):
        return multiple_of(e.left, k, env) and multiple_of(e.right, k, env)
    if isinstance(e, n.Bin) and e.op == "*":
        return multiple_of(e.left, k, env) or multiple_of(e.right, k, env)
    return False


def vector_elems(o: Operand, view: GlobalView | SharedView, env: Mapping[str, object], run: int,
                 max_bytes: int = 16, smem: SmemInfo | None = None) -> int:  # fmt: skip
    """How many consecutive elements of the tile ``o`` (viewed as ``view``) one aligned vector access may
    move, decided at compile time: the largest power of two ``w`` with ``w * element bytes <= max_bytes``
    such that the tile's last dimension is the tensor's (or buffer's) contiguous one, ``run`` (the
    elements a thread holds in a row) is a multiple of ``w``, the tile's column start is one, and every
    row of the tensor starts ``w``-aligned (a global tensor's innermost extent known and a multiple of
    ``w``; a shared buffer unswizzled, with its offset, stage and row pitch ``w * element``-aligned).
    A global tensor's base pointer is taken to be 16-byte aligned (as TMA already requires). ``1``: no
    vector access."""
    elem = view.dtype.bytes
    rank = len(view.strides)
    if not view.tile_dims or view.tile_dims[-1] != rank - 1:
        return 1
    index = list(o.index) + [n.All()] * (rank - len(o.index))
    last = index[-1]
    w = max(1, max_bytes // elem)
    while w > 1:
        vbytes = w * elem
        ok = run % w == 0 and (isinstance(last, n.All) or (isinstance(last, n.Span) and multiple_of(last.start, w, env)))
        if ok and isinstance(view, GlobalView):
            inner = try_int(o.decl.shape[-1], env)  # type: ignore[union-attr, arg-type]
            ok = inner is not None and inner % w == 0
        elif ok:
            ok = (smem is not None and not view.swizzle and smem.offset % vbytes == 0 and smem.align % vbytes == 0
                  and smem.stage_bytes % vbytes == 0 and all(s % w == 0 for s in view.strides[:-1]))  # fmt: skip
        if ok:
            return w
        w //= 2
    return 1
