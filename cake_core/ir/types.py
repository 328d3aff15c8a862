"""Element types of Cake IR: their names, sizes and CUDA spellings."""

from __future__ import annotations

import enum


class DType(enum.StrEnum):
    BF16 = "bf16"
    F16 = "f16"
    F32 = "f32"
    F64 = "f64"
    TF32 = "tf32"
    FP8E4M3 = "fp8e4m3"
    FP8E5M2 = "fp8e5m2"
    I8 = "i8"
    U8 = "u8"
    I32 = "i32"
    U32 = "u32"
    I64 = "i64"
    PRED = "pred"

    @property
    def bytes(self) -> int:
        return _BYTES[self]

    @property
    def is_float(self) -> bool:
        return self in _FLOATS

    @property
    def cuda(self) -> str:
        """The CUDA C++ type that holds one element."""
        return _CUDA[self]


_BYTES = {
    DType.BF16: 2, DType.F16: 2, DType.F32: 4, DType.F64: 8, DType.TF32: 4, DType.FP8E4M3: 1,
    DType.FP8E5M2: 1, DType.I8: 1, DType.U8: 1, DType.I32: 4, DType.U32: 4, DType.I64: 8, DType.PRED: 1,
}  # fmt: skip
_FLOATS = {DType.BF16, DType.F16, DType.F32, DType.F64, DType.TF32, DType.FP8E4M3, DType.FP8E5M2}
_CUDA = {
    DType.BF16: "__nv_bfloat16", DType.F16: "__half", DType.F32: "float", DType.F64: "double",
    DType.TF32: "float", DType.FP8E4M3: "__nv_fp8_e4m3", DType.FP8E5M2: "__nv_fp8_e5m2",
    DType.I8: "int8_t", DType.U8: "uint8_t", DType.I32: "int", DType.U32: "unsigned",
    DType.I64: "long long", DType.PRED: "bool",
}  # fmt: skip

DTYPE_NAMES = frozenset(d.value for d in DType)
#: each element type by name: ``DType(name)`` without the enum machinery's call
DTYPE_BY_NAME: dict[str, DType] = {d.value: d for d in DType}

