"""SASS checks with cuobjdump (from PATH or the nvidia-cuda-cuobjdump wheel), no GPU needed."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from cake_core.runtime import sass
from cake_core.runtime.nvrtc import compile_cuda

needs_cuobjdump = pytest.mark.skipif(
    sass.find_tool("cuobjdump") is None, reason="cuobjdump not installed (pip install nvidia-cuda-cuobjdump)"
)


@pytest.fixture(autouse=True)
def _private_cache(cache_dir: Path) -> Path:
    return cache_dir


LISTING = """
\tcode for sm_80
\t\tFunction : k
        /*0000*/                   MOV R1, c[0x0][0x28] ;                      /* 0x00000a0000017a02 */
        /*0010*/              @!P0 LDG.E.128 R4, [R2.64] ;                     /* 0x0000000402048981 */
        /*0020*/               @P1 HMMA.16816.F32.BF16 R8, R8, R12, RZ ;       /* 0x0000000c0808723c */
        /*0030*/             @!UPT UIADD3 URZ, URZ, URZ, URZ ;                 /* 0x0000003f3f3f7290 */
        /*0040*/                   LDGSTS.E.BYPASS.LTC128B.128 [R3], [R4.64] ; /* 0x0000000004037fae */
        /*0050*/                   HMMA.16816.F32.BF16 R16, R8, R14, R16 ;    /* 0x0000000e0810723c */
        /*0060*/                   EXIT ;                                      /* 0x000000000000794d */
        /*0070*/                   BRA 0x70;                                   /* 0xfffffff000007947 */
\t\t..........
\t\tFunction : other
        /*0000*/                   NOP;                                        /* 0x0000000000007918 */
"""


def test_opcode_counts_strip_modifiers_and_predicates() -> None:
    counts = sass.opcode_counts(LISTING)
    assert counts == {"MOV": 1, "LDG": 1, "HMMA": 2, "UIADD3": 1, "LDGSTS": 1, "EXIT": 1, "BRA": 1, "NOP": 1}
    full = sass.full_opcode_counts(LISTING)
    assert full["LDG.E.128"] == 1 and full["HMMA.16816.F32.BF16"] == 2
    pieces = sass.split_functions(LISTING)
    assert set(pieces) == {"k", "other"}
    assert sass.opcode_counts(pieces["other"]) == {"NOP": 1}


@needs_cuobjdump
def test_mma_sync_kernel_has_hmma_and_ffma(kernels: ModuleType) -> None:
    cubin = compile_cuda(kernels.MMA_SYNC, "sm_80").cubin
    listing = sass.disassemble(cubin)
    assert "Function : mma16816" in listing
    finding = sass.check_claims(cubin, ["HMMA", "FFMA", "HGMMA", "hmma", "HMMA.16816"])
    assert finding.available and finding.error is None
    assert finding.claims == ("HMMA", "FFMA", "HGMMA", "HMMA.16816")
    assert finding.present == ("HMMA", "FFMA", "HMMA.16816")
    assert finding.missing == ("HGMMA",)
    assert finding.counts["HMMA"] >= 1 and finding.counts["HGMMA"] == 0
    assert not finding.ok
    assert finding.tool_version and "release" in finding.tool_version
    assert finding.opcodes["HMMA"] == finding.counts["HMMA"]


@needs_cuobjdump
def test_hopper_kernels_have_hgmma_tma_and_mbarrier_ops(kernels: ModuleType) -> None:
    wg = sass.check_claims(compile_cuda(kernels.WGMMA, "sm_90a").cubin, ["HGMMA", "WARPGROUP"])
    assert wg.ok, wg
    tma = compile_cuda(kernels.TMA, "sm_90a").cubin
    finding = sass.check_claims(tma, ["UTMALDG", "SYNCS"], function="tma_box")
    assert finding.ok and finding.function == "tma_box"
    missing_fn = sass.check_claims(tma, ["UTMALDG"], function="nope")
    assert not missing_fn.available and "tma_box" in (missing_fn.error or "")


@needs_cuobjdump
def test_bad_cubin_is_reported_not_raised() -> None:
    finding = sass.check_claims(b"not a cubin", ["HMMA"])
    assert not finding.available and not finding.ok
    assert "cuobjdump failed" in (finding.error or "")
    with pytest.raises(sass.SassToolError):
        sass.disassemble(b"not a cubin")


def test_missing_tool_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sass, "find_tool", lambda name: None)
    finding = sass.check_claims(b"\x7fELF whatever", ["HMMA"])
    assert not finding.available and finding.tool is None
    assert "cuobjdump not found" in (finding.error or "")
    with pytest.raises(sass.SassToolError, match="cuobjdump not found"):
        sass.disassemble(b"\x7fELF")
