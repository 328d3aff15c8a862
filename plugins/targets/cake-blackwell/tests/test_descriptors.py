"""Every descriptor the lowering of ``tcgen05.mma`` emits, decoded field by field and checked against
the PTX ISA's tables: 9.7.16.4.1 "Shared Memory Descriptor" (Table 40, and Table 41 for the base
offset) and 9.7.16.4.2 "Instruction Descriptor" (Table 42, ``.kind::f16`` column). Wrong bits still
compile, so these numbers are the only check the encodings get before a B200 runs them."""

from __future__ import annotations

import re

import pytest
from cake_core.ir.types import DType
from cake_core.lower.program import lower_program, program_specs

from cake_blackwell import descriptors as dsc

MMA_LINE = re.compile(r'tcgen05\.mma\.cta_group::1\.kind::f16.*')
SDESC = re.compile(r'cake_tc_desc\(cake_smem_addr\((\w+)\) \+ (\d+), (0x[0-9a-f]+)ull\)')
IDESC = re.compile(r'"r"\((0x[0-9a-f]+)u\)')


def emitted(mma_checked, b200):
    """(spec N, [(buffer, byte offset, fields, idesc)]) of every tcgen05.mma instruction lowered."""
    out = []
    for spec in program_specs(mma_checked):
        source = lower_program(mma_checked, b200, spec).source
        rows = []
        for line in MMA_LINE.findall(source):
            (ia,) = IDESC.findall(line)
            rows += [(buf, int(off), int(f, 16), int(ia, 16)) for buf, off, f in SDESC.findall(line)]
        out.append((spec.env["N"], rows))
    return out


def test_every_shared_memory_descriptor_field(mma_checked, b200):
    # K = 64 bf16 per row (one 128-byte swizzled row): 4 instructions of K = 16, each reading A and B
    for n, rows in emitted(mma_checked, b200):
        assert len(rows) == 2 * 4, n
        model = next(iter(mma_checked.models.values()))
        for buf, offset, fields, _ in rows:
            f = dsc.decode_smem(fields)
            assert f["start_address"] == 0  # the run-time address is ORed in by cake_tc_desc
            assert f["reserved_14_15"] == 0 and f["reserved_30_31"] == 0
            assert f["leading_byte_offset"] == 16  # K-major swizzled: "not used, assumed to be 1" (9.7.16.3.1.1)
            assert f["stride_byte_offset"] == 1024  # 8 rows of 128 bytes between core-matrix groups
            assert f["fixed_46_48"] == 0b001  # "Fixed constant value of 0b001"
            assert f["base_offset"] == 0  # the buffer starts on the 1024-byte pattern boundary (Table 41)
            assert model.smem[buf].offset % 1024 == 0 and model.smem[buf].align == 1024
            assert f["lbo_mode"] == 0  # relative byte offset
            assert f["fixed_53_60"] == 0
            assert f["swizzle"] == 2  # "2 = 128-Byte swizzling"
        # the k steps advance the start address 32 bytes (16 bf16) inside the 128-byte row
        assert sorted({o for b, o, _, _ in rows if b == "xs"}) == [0, 32, 64, 96]
        assert sorted({o for b, o, _, _ in rows if b == "cs"}) == [0, 32, 64, 96]


def test_every_instruction_descriptor_field(mma_checked, b200):
    seen = set()
    for n, rows in emitted(mma_checked, b200):
        for *_, idesc in rows:
            f = dsc.decode_instr(idesc)
            assert f["sparsity_selector"] == 0 and f["sparse"] == 0 and f["saturate"] == 0
            assert f["d_type"] == 1  # F32
            assert f["a_type"] == 1 and f["b_type"] == 1  # BF16 (.kind::f16)
            assert f["negate_a"] == 0 and f["negate_b"] == 0
            assert f["transpose_a"] == 0 and f["transpose_b"] == 0  # both K-major
            assert f["n"] == n and f["m"] == 128
            assert f["reserved_6"] == 0 and f["reserved_23"] == 0 and f["reserved_29"] == 0
            assert f["max_shift"] == 0
            seen.add(n)
    assert seen == {64, 128}


def test_the_address_field_and_encoders():
    fields = dsc.smem_fields("128B", 16, 1024)
    for addr in (0, 1024, 0x3FFF0, 0x12340 + 96):
        assert dsc.decode_smem(dsc.smem_desc(addr, fields))["start_address"] == addr & 0x3FFF0
        assert dsc.decode_smem(dsc.smem_desc(addr, fields))["stride_byte_offset"] == 1024
    assert "(addr & 0x3FFFFu) >> 4" in dsc.SDESC_HELPER  # the C helper computes what smem_desc does
    # Table 40's swizzle codes: 3, 5 and 7 are invalid; 1 is 128-byte with 32-byte atoms
    assert dsc.SWIZZLE_CODES == {None: 0, "128B": 2, "64B": 4, "32B": 6}
    with pytest.raises(ValueError, match="16-byte"):
        dsc.smem_fields("128B", 8, 1024)
    assert dsc.decode_instr(dsc.instr_desc(128, 256, DType.F16, DType.F16))["a_type"] == 0
    assert dsc.decode_instr(dsc.instr_desc(64, 8, DType.BF16))["m"] == 64
    with pytest.raises(ValueError):
        dsc.instr_desc(128, 12, DType.BF16)
