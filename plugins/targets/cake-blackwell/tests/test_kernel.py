"""The hand-written test kernel ``mma.cake`` end to end without a B200: it registers through the
plugin hooks, the interpreter runs it (ragged rows, fresh random inputs, checked against numpy), the
race it must have without the commit's wait is found, NVRTC compiles it for sm_100a with the tcgen05
instructions in its PTX, and the disassembly holds the tensor-memory and UTC instructions. Nothing
here ran on a GPU (``ran: false``)."""

from __future__ import annotations

import numpy as np
import pytest
from cake_core.hostdata import decode, encode
from cake_core.ir.types import DType
from cake_core.lower.program import lower_program, program_specs
from cake_core.runtime import sass
from cake_core.runtime.nvrtc import compile_cuda
from cake_core.semantics import run_program

import cake_blackwell


def test_registered_through_the_hooks(registry):
    got = registry.registered_by("blackwell")
    assert got["tiers"] == ["tmem"]
    assert set(got["primitives"]) == {cls.name for cls in cake_blackwell.PRIMITIVES}
    for cls in cake_blackwell.PRIMITIVES:
        assert cls.summary and cls.doc  # every primitive says what it does
        assert cls().features(None) >= {cake_blackwell.tmem.TCGEN05}  # type: ignore[arg-type]
    assert registry.registration("primitives", "tcgen05.mma").plugin.version == "0.2.0"


@pytest.mark.parametrize(("m", "n"), [(200, 64), (77, 128)])
def test_interpreter_matches_numpy(mma_checked, m, n):
    rng = np.random.default_rng(m + n)
    x = encode(rng.standard_normal((m, 64)).astype(np.float32), DType.BF16)
    c = encode(rng.standard_normal((n, 64)).astype(np.float32), DType.BF16)
    out = np.full((m, n), np.nan, dtype=np.float32)  # poisoned: every element must be written
    res = run_program(mma_checked, {"x": x, "c": c, "out": out}, {"M": m, "N": n})
    assert res.findings == []
    want = decode(x, DType.BF16).astype(np.float64) @ decode(c, DType.BF16).astype(np.float64).T
    np.testing.assert_allclose(res.outputs["out"], want, rtol=1e-5, atol=1e-4)


def test_reading_the_accumulator_without_a_commit_is_a_race(mma_text, checker):
    # without `tcgen05.commit` (and its wait) the mma is still in flight when tcgen05.ld reads it. (The
    # issuing instance itself is not caught skipping only the wait: the interpreter lands its mma at the
    # commit, see cake_blackwell.mma; the verifier rule of the next slice checks the wait.)
    text = mma_text.replace("    tcgen05.commit done\n    mbarrier.wait done, parity=0\n", "")
    assert text != mma_text
    checked = checker(text)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((128, 64)).astype(np.float32)
    c = rng.standard_normal((64, 64)).astype(np.float32)
    res = run_program(checked, {"x": x, "c": c}, {"M": 128, "N": 64}, policy="sequential")
    assert any(f.code.code == "CS003" and "tcgen05.ld" in f.message for f in res.findings)


def test_allocation_must_be_a_power_of_two_columns(mma_text, checker):
    checked = checker(mma_text.replace("N in {64, 128}", "N in {48}"))
    assert any("48 columns" in d.message for d in checked.diagnostics)


def test_unknown_tier_is_one_clear_error(mma_text, checker):
    checked = checker(mma_text.replace("tmem acc", "xmem acc"))
    assert any("`xmem` is not a memory tier" in d.message for d in checked.diagnostics)


def test_nvrtc_compiles_for_sm_100a_with_tcgen05_in_ptx_and_sass(mma_checked, b200):
    have_sass = sass.find_tool("cuobjdump") is not None
    for spec in program_specs(mma_checked):
        result = compile_cuda(lower_program(mma_checked, b200, spec).source, b200.nvrtc_arch)
        (fn,) = result.kernels.values() if isinstance(result.kernels, dict) else result.kernels
        assert fn.spill_stores == 0 and fn.spill_loads == 0
        for form in ("tcgen05.alloc.cta_group::1", "tcgen05.mma.cta_group::1.kind::f16",
                     "tcgen05.commit.cta_group::1.mbarrier::arrive::one", "tcgen05.ld.sync.aligned.32x32b",
                     "tcgen05.wait::ld", "tcgen05.dealloc.cta_group::1", "tcgen05.relinquish_alloc_permit"):  # fmt: skip
            assert form in result.ptx, form
        if have_sass:
            ops = sass.opcode_counts(sass.disassemble(result.cubin))
            assert ops["UTCHMMA"] == 4  # one per k step of 16 over K = 64
            assert ops["LDTM"] >= 1 and ops["UTCATOMSWS"] >= 1 and ops["UTCBAR"] >= 1
            assert not ops["HMMA"] and not ops["HGMMA"]
            used = {t.prim.name for m in mma_checked.models.values() for t in m.ops}
            for cls in cake_blackwell.PRIMITIVES:
                for claim in cls.sass_claims if cls.name in used else ():
                    assert ops[claim] >= 1, (cls.name, claim)
