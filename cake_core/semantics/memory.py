"""Storage the interpreter executes on, and the regions operands resolve to.

Every tile lives in a :class:`Store`: a global tensor (the host array itself), one CTA's shared
buffer, or one role instance's register tile. A store keeps its elements in host storage
(:mod:`cake_core.hostdata`: ``bf16`` as ``uint16`` bit patterns), so each write rounds values to the
element type exactly as the GPU's conversions do, and a mask of the elements ever written. Stores the
interpreter allocates (program buffers, outputs the caller did not pass, shared buffers, register
tiles) start *poisoned*: NaN for floats, the smallest integer for integers, and nothing written.

An operand resolves to a :class:`Region`: per dimension of the store (the stage first, for a staged
buffer) the requested start and extent, which dimensions remain in the operand's tile (``At``
indices and a selected stage drop out), and the part that lies inside the store. Reads return
float32 values (float64 for ``f64``, int64 for integers) of the tile's shape; elements outside the
store read as zero, and ``in_bounds`` says which they are.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import attrs
import numpy as np

from cake_core.hostdata import encode, storage_dtype
from cake_core.ir.primitive import Kind
from cake_core.ir.types import DType
from cake_core.semantics.boxes import Box, overlaps


def value_dtype(dtype: DType) -> np.dtype:
    """The numpy type primitives see for elements of ``dtype``."""
    if dtype is DType.F64:
        return np.dtype(np.float64)
    if dtype is DType.PRED:
        return np.dtype(np.bool_)
    if dtype.is_float:
        return np.dtype(np.float32)
    return np.dtype(np.int64)


def poison_value(dtype: DType) -> int | float | bool:
    """The storage value a never-written element holds."""
    if dtype is DType.BF16:
        return 0x7FC1  # a quiet NaN's bit pattern
    if dtype is DType.PRED:
        return False
    if dtype.is_float:
        return math.nan
    return int(np.iinfo(storage_dtype(dtype)).min)


def to_values(stored: np.ndarray, dtype: DType) -> np.ndarray:
    """Host storage to the values primitives compute on."""
    if dtype is DType.BF16:
        return (np.ascontiguousarray(stored, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
    return np.asarray(stored).astype(value_dtype(dtype), copy=False)


def to_storage(values: np.ndarray, dtype: DType) -> np.ndarray:
    """Values to host storage of ``dtype``, rounding (floats) or truncating (integers) as a GPU converts."""
    with np.errstate(invalid="ignore", over="ignore"):
        if dtype.is_float:
            return encode(np.asarray(values, dtype=np.float64 if dtype is DType.F64 else np.float32), dtype)
        v = np.asarray(values)
        if v.dtype.kind == "f":
            v = np.nan_to_num(v, nan=0.0, posinf=np.iinfo(np.int64).max, neginf=np.iinfo(np.int64).min)
            v = np.trunc(v)
        return v.astype(storage_dtype(dtype))


@attrs.define(eq=False)
class Store:
    """One tensor, buffer or register tile: its elements in host storage and which were written.

    ``stages`` is the ring size of a staged shared buffer (its first storage dimension), else None.
    ``tracked``: the race detector keeps access records for it (shared buffers, and global tensors
    some operation of the running kernel writes).
    """

    name: str
    kind: Kind
    dtype: DType
    data: np.ndarray
    written: np.ndarray  # bool, same shape as data
    stages: int | None = None
    tracked: bool = False
    owner: str | None = None  # the role instance a register tile belongs to

    @classmethod
    def poisoned(cls, name: str, kind: Kind, dtype: DType, shape: tuple[int, ...], stages: int | None = None,
                 owner: str | None = None) -> Store:  # fmt: skip
        full = ((stages,) if stages is not None else ()) + tuple(shape)
        data = np.full(full, poison_value(dtype), dtype=storage_dtype(dtype))
        return cls(name, kind, dtype, data, np.zeros(full, dtype=bool), stages, kind is Kind.SHARED, owner)

    @classmethod
    def of(cls, name: str, kind: Kind, dtype: DType, data: np.ndarray) -> Store:
        """A store over existing host data, every element written."""
        return cls(name, kind, dtype, data, np.ones(data.shape, dtype=bool))

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)


@attrs.define(eq=False, slots=True)
class Region:
    """What one operand of one operation execution covers in its store.

    ``lo``/``size`` are the requested start and extent per storage dimension; ``keep`` marks the
    dimensions that remain in the operand's tile. ``box`` is the part inside the store (empty
    intervals where nothing is).
    """

    store: Store
    lo: tuple[int, ...]
    size: tuple[int, ...]
    keep: tuple[bool, ...]
    box: Box = ()
    empty: bool = False
    oob: bool = False

    def __attrs_post_init__(self) -> None:
        box = []
        oob = False
        for lo, size, ext in zip(self.lo, self.size, self.store.shape, strict=True):
            a, b = max(lo, 0), min(lo + size, ext)
            if b < a:
                b = a
            box.append((a, b))
            oob = oob or a != lo or b != lo + size
        self.box = tuple(box)
        self.empty = any(a == b for a, b in box) or any(s == 0 for s in self.size)
        self.oob = oob

    # -- shapes -------------------------------------------------------------------------------------

    @property
    def shape(self) -> tuple[int, ...]:
        """The operand's tile shape."""
        return tuple(s for s, k in zip(self.size, self.keep, strict=True) if k)

    @property
    def numel(self) -> int:
        return math.prod(self.size)

    @property
    def nbytes(self) -> int:
        """Bytes of the whole requested tile, out-of-bounds elements included (what a copy transfers)."""
        return self.numel * self.store.dtype.bytes

    def _clip(self) -> tuple[slice, ...]:
        return tuple(slice(a, b) for a, b in self.box)

    def _rel(self) -> tuple[slice, ...]:
        return tuple(slice(a - lo, b - lo) for (a, b), lo in zip(self.box, self.lo, strict=True))

    # -- values -------------------------------------------------------------------------------------

    def read(self, overlays: Sequence[tuple[Region, np.ndarray]] = ()) -> np.ndarray:
        """The tile's values; elements outside the store are zero.

        ``overlays``: writes not yet landed, as (region, storage part) in the order they were issued,
        that this read sees over the store (an asynchronous unit reading what it wrote before).
        """
        out = np.zeros(self.size, dtype=value_dtype(self.store.dtype))
        if not self.empty:
            out[self._rel()] = to_values(self.store.data[self._clip()], self.store.dtype)
            for region, part in overlays:
                cut = self._cut(region)
                if cut is not None:
                    out[cut[0]] = to_values(part[cut[1]], self.store.dtype)
        return out.reshape(self.shape)

    def _cut(self, other: Region) -> tuple[tuple[slice, ...], tuple[slice, ...]] | None:
        """Where ``other``'s in-bounds part meets this region's: (slices into this region's requested
        tile, slices into ``other``'s storage part), or None."""
        if other.store is not self.store or other.empty or not overlaps(self.box, other.box):
            return None
        meet = [(max(a0, b0), min(a1, b1)) for (a0, a1), (b0, b1) in zip(self.box, other.box, strict=True)]
        mine = tuple(slice(a - lo, b - lo) for (a, b), lo in zip(meet, self.lo, strict=True))
        theirs = tuple(slice(a - o0, b - o0) for (a, b), (o0, _) in zip(meet, other.box, strict=True))
        return mine, theirs

    def in_bounds(self) -> np.ndarray:
        mask = np.zeros(self.size, dtype=bool)
        if not self.empty:
            mask[self._rel()] = True
        return mask.reshape(self.shape)

    def unwritten(self, overlays: Sequence[tuple[Region, np.ndarray]] = ()) -> tuple[int, tuple[int, ...] | None]:
        """How many in-bounds elements were never written (nor by ``overlays``), and the store index of
        the first one."""
        if self.empty:
            return 0, None
        w = self.store.written[self._clip()]
        if w.all():
            return 0, None
        if overlays:
            w = w.copy()
            rel = self._rel()
            for region, _ in overlays:
                cut = self._cut(region)
                if cut is not None:
                    # this region's requested-tile slices, shifted to its in-bounds part
                    shifted = (slice(m.start - r.start, m.stop - r.start) for m, r in zip(cut[0], rel, strict=True))
                    w[tuple(shifted)] = True
            if w.all():
                return 0, None
        missing = ~w
        first = np.argwhere(missing)[0]
        return int(missing.sum()), tuple(int(i) + a for i, (a, _) in zip(first, self.box, strict=True))

    def storage_part(self, value: np.ndarray) -> np.ndarray:
        """``value`` (the tile, or anything broadcastable to it) as storage of the in-bounds part."""
        v = np.asarray(value)
        if v.size == self.numel:
            v = v.reshape(self.size)
        else:
            v = np.broadcast_to(v, self.shape).reshape(self.size)
        return to_storage(v[self._rel()], self.store.dtype)

    def apply(self, part: np.ndarray) -> None:
        """Write storage ``part`` (from :meth:`storage_part`) into the in-bounds elements."""
        if self.empty:
            return
        clip = self._clip()
        self.store.data[clip] = part
        self.store.written[clip] = True

    # -- words --------------------------------------------------------------------------------------

    def text(self) -> str:
        """The requested region as people read it: `` `cs` stage 2 ``, `` `x[1, 128:256, 0:64]` ``."""
        return region_text(self.store, tuple((lo, lo + s) for lo, s in zip(self.lo, self.size, strict=True)))


def region_text(store: Store, box: Box) -> str:
    dims = list(box)
    stage = None
    if store.stages is not None:
        (a, b), dims = dims[0], dims[1:]
        stage = str(a) if b == a + 1 else f"{a}:{b}"
    full = all(a == 0 and b == ext for (a, b), ext in zip(dims, store.shape[-len(dims):] if dims else (),
                                                           strict=True))  # fmt: skip
    idx = ", ".join(str(a) if b == a + 1 else f"{a}:{b}" for a, b in dims)
    if stage is not None:
        return f"`{store.name}` stage {stage}" + ("" if full else f" [{idx}]")
    return f"`{store.name}`" if full else f"`{store.name}[{idx}]`"

