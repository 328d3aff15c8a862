"""The two descriptors a ``tcgen05.mma`` reads, derived by the compiler and never written by hand.

Both layouts are the PTX ISA's (section 9.7.16.4):

* the **shared-memory descriptor** (9.7.16.4.1, Table 40 "Shared memory descriptor layout"), 64 bits:
  start address (bits 0-13), leading-dimension byte offset (16-29), stride-dimension byte offset
  (32-45), each ``matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4``; the fixed value 0b001 (46-48);
  the matrix base offset (49-51); the leading-dimension stride mode (52); zeros (53-60); the swizzling
  mode (61-63: 0 none, 1 128-byte with 32-byte atoms, 2 128-byte, 4 64-byte, 6 32-byte). Its codes
  and its version field differ from wgmma's descriptor (9.7.15.5.1.2.2), which is why it has its own
  encoder here;
* the **instruction descriptor** (9.7.16.4.2, Table 42 "Instruction descriptor format for .kind::tf32,
  .kind::f16, .kind::f8f6f4 and .kind::i8"), 32 bits: sparsity (0-2), saturate (3), D type (4-5: F16
  0, F32 1), A type (7-9) and B type (10-12) (F16 0, BF16 1 for ``.kind::f16``), negate A/B (13, 14),
  transpose A/B (15, 16), N >> 3 (17-22), M >> 4 (24-28), the ``.ws`` shift (30-31).

The start address is known only at run time: the lowering ORs it in (:data:`SDESC_HELPER`) to the
fields fixed at compile time (:func:`smem_fields`). :func:`decode_smem` and :func:`decode_instr` read
every field back; the plugin's tests decode every descriptor the lowering emits.
"""

from __future__ import annotations

from cake_core.ir.types import DType

#: swizzling-mode codes of the shared-memory descriptor (Table 40, bits 61-63), by Cake's swizzle name
SWIZZLE_CODES = {None: 0, "128B": 2, "64B": 4, "32B": 6}
#: the code of 128-byte swizzling with 32-byte atoms, which no Cake buffer declares
SWIZZLE_128B_BASE32B = 1
#: D, A and B type codes for ``.kind::f16`` (Table 42)
D_TYPES = {DType.F16: 0, DType.F32: 1}
AB_TYPES_F16 = {DType.F16: 0, DType.BF16: 1}

#: the device function that ORs a run-time shared address into a descriptor's compile-time fields
SDESC_HELPER = r"""
// tcgen05 shared-memory descriptor: the start address (bits 0-13, (addr & 0x3FFFF) >> 4) ORed into
// the fields the compiler derived (PTX ISA 9.7.16.4.1)
__device__ __forceinline__ unsigned long long cake_tc_desc(unsigned addr, unsigned long long fields) {
  return fields | (unsigned long long)((addr & 0x3FFFFu) >> 4);
}
"""


def encode14(x: int) -> int:
    """``matrix-descriptor-encode``: a byte address or offset, 16-byte granular, in 14 bits."""
    if x % 16:
        raise ValueError(f"{x} is not 16-byte aligned (a descriptor field counts 16-byte units)")
    return (x & 0x3FFFF) >> 4


def smem_fields(swizzle: str | None, lbo_bytes: int, sbo_bytes: int, base_offset: int = 0) -> int:
    """Every field of a shared-memory descriptor but the start address (which is left 0)."""
    if swizzle not in SWIZZLE_CODES:
        raise ValueError(f"no tcgen05 descriptor code for swizzle `{swizzle}`")
    if not 0 <= base_offset < 8:
        raise ValueError("the matrix base offset has 3 bits")
    return (
        (encode14(lbo_bytes) << 16)
        | (encode14(sbo_bytes) << 32)
        | (0b001 << 46)
        | (base_offset << 49)
        | (0 << 52)  # leading-dimension stride: a relative byte offset
        | (SWIZZLE_CODES[swizzle] << 61)
    )


def smem_desc(address: int, fields: int) -> int:
    """The descriptor :data:`SDESC_HELPER` computes for ``address`` (the same expression, in Python)."""
    return fields | ((address & 0x3FFFF) >> 4)


def decode_smem(d: int) -> dict[str, int]:
    """Every field of a 64-bit shared-memory descriptor, reserved bits included."""
    return {
        "start_address": (d & 0x3FFF) << 4,
        "reserved_14_15": (d >> 14) & 0x3,
        "leading_byte_offset": ((d >> 16) & 0x3FFF) << 4,
        "reserved_30_31": (d >> 30) & 0x3,
        "stride_byte_offset": ((d >> 32) & 0x3FFF) << 4,
        "fixed_46_48": (d >> 46) & 0x7,
        "base_offset": (d >> 49) & 0x7,
        "lbo_mode": (d >> 52) & 0x1,
        "fixed_53_60": (d >> 53) & 0xFF,
        "swizzle": (d >> 61) & 0x7,
    }


def instr_desc(m: int, n: int, ab: DType, d: DType = DType.F32, *, transpose_a: bool = False,
               transpose_b: bool = False) -> int:  # fmt: skip
    """The instruction descriptor of a dense ``.kind::f16`` MMA of shape ``m`` x ``n`` (K-major operands
    are not transposed)."""
    if ab not in AB_TYPES_F16 or d not in D_TYPES:
        raise ValueError(f"`.kind::f16` multiplies f16 or bf16 into f16 or f32, not {ab} into {d}")
    if m % 16 or not 0 < m >> 4 < 32 or n % 8 or not 0 < n >> 3 < 64:
        raise ValueError(f"M={m}, N={n} do not fit the descriptor's fields (M >> 4 in 5 bits, N >> 3 in 6)")
    t = AB_TYPES_F16[ab]
    return (
        (D_TYPES[d] << 4) | (t << 7) | (t << 10) | (int(transpose_a) << 15) | (int(transpose_b) << 16)
        | ((n >> 3) << 17) | ((m >> 4) << 24)
    )  # fmt: skip


def decode_instr(i: int) -> dict[str, int]:
    """Every field of a 32-bit instruction descriptor (``.kind::f16``), reserved bits included."""
    return {
        "sparsity_selector": i & 0x3,
        "sparse": (i >> 2) & 0x1,
        "saturate": (i >> 3) & 0x1,
        "d_type": (i >> 4) & 0x3,
        "reserved_6": (i >> 6) & 0x1,
        "a_type": (i >> 7) & 0x7,
        "b_type": (i >> 10) & 0x7,
        "negate_a": (i >> 13) & 0x1,
        "negate_b": (i >> 14) & 0x1,
        "transpose_a": (i >> 15) & 0x1,
        "transpose_b": (i >> 16) & 0x1,
        "n": ((i >> 17) & 0x3F) << 3,
        "reserved_23": (i >> 23) & 0x1,
        "m": ((i >> 24) & 0x1F) << 4,
        "reserved_29": (i >> 29) & 0x1,
        "max_shift": (i >> 30) & 0x3,
    }
