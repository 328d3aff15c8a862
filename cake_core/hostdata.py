"""Host-side arrays for Cake's element types.

numpy has no bfloat16: bf16 tensors are held as ``uint16`` bit patterns. ``f16`` uses numpy's
``float16``. These helpers convert between storage and float32/float64 values for references,
oracles and the CPU interpreter, and take a caller's array as storage of a parameter.
"""

from __future__ import annotations

import numpy as np

from cake_core.errors import CakeUserError
from cake_core.ir.types import DType

_STORAGE = {
    DType.BF16: np.uint16, DType.F16: np.float16, DType.F32: np.float32, DType.F64: np.float64,
    DType.I32: np.int32, DType.U32: np.uint32, DType.I64: np.int64, DType.I8: np.int8,
    DType.U8: np.uint8, DType.PRED: np.bool_,
}  # fmt: skip
#: the element type an array's storage stands for (``uint16``: bf16 bit patterns); booleans are not
#: taken for predicates
_ELEMENT = {np.dtype(t): d for d, t in _STORAGE.items() if d is not DType.PRED}


def storage_dtype(dtype: DType | str) -> np.dtype:
    """The numpy dtype that stores elements of ``dtype`` (bf16 -> uint16 bit patterns)."""
    return np.dtype(_STORAGE[DType(dtype)])


def to_bf16_bits(values: np.ndarray) -> np.ndarray:
    """Round float values to bf16 (round to nearest even), returning the uint16 bit patterns."""
    f = np.ascontiguousarray(values, dtype=np.float32)
    bits = f.view(np.uint32).astype(np.uint64)
    rounding = ((bits >> 16) & 1) + 0x7FFF
    out = ((bits + rounding) >> 16).astype(np.uint16)
    nan = np.isnan(f)
    if nan.any():
        out[nan] = 0x7FC0
    return out


def from_bf16_bits(bits: np.ndarray) -> np.ndarray:
    """bf16 bit patterns to float32 (exact)."""
    b = np.ascontiguousarray(bits, dtype=np.uint16)
    return (b.astype(np.uint32) << 16).view(np.float32)


def encode(values: np.ndarray, dtype: DType | str) -> np.ndarray:
    """Float or integer values to storage of ``dtype`` (rounding as the GPU's conversions do)."""
    dtype = DType(dtype)
    if dtype is DType.BF16:
        return to_bf16_bits(values)
    return np.asarray(values).astype(storage_dtype(dtype))


def decode(stored: np.ndarray, dtype: DType | str, as_dtype=np.float32) -> np.ndarray:
    """Storage of ``dtype`` to values (float32 by default; pass ``np.float64`` for oracles)."""
    dtype = DType(dtype)
    if dtype is DType.BF16:
        return from_bf16_bits(stored).astype(as_dtype, copy=False)
    return np.asarray(stored).astype(as_dtype, copy=False)


def random_values(rng: np.random.Generator, shape: tuple[int, ...], dtype: DType | str) -> np.ndarray:
    """Fresh random data in storage of ``dtype``: standard normal for floats, never all zeros."""
    dtype = DType(dtype)
    if dtype.is_float:
        return encode(rng.standard_normal(shape, dtype=np.float32), dtype)
    return rng.integers(-1000, 1000, size=shape).astype(storage_dtype(dtype))


def element_dtype(storage: np.dtype) -> DType | None:
    """The element type an array of ``storage`` holds (``uint16``: bf16), or None when none does."""
    return _ELEMENT.get(np.dtype(storage))


def host_array(name: str, arr: np.ndarray, dtype: DType, shape: tuple[int, ...]) -> np.ndarray:
    """A copy of the caller's array ``arr`` for parameter ``name`` as storage of ``dtype``: floats are
    rounded to a float ``dtype``, integers converted to an integer one; another shape or kind of
    element is a :class:`~cake_core.errors.CakeUserError`."""
    a = np.asarray(arr)
    if tuple(a.shape) != shape:
        raise CakeUserError(f"input `{name}` has shape {list(a.shape)}, the program expects {list(shape)}")
    want = storage_dtype(dtype)
    if a.dtype == want:
        return a.copy()
    if a.dtype.kind == "f" and dtype.is_float:
        return encode(a, dtype)
    if a.dtype.kind in "iu" and not dtype.is_float:
        return a.astype(want)
    raise CakeUserError(f"input `{name}` holds {a.dtype}, the program expects `{dtype}` ({want} storage)")
