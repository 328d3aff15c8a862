"""``tcgen05.st`` and its wait, through the test kernel ``st.cake`` (an accumulator seeded from
registers, then accumulated onto by ``tcgen05.mma``): the interpreter matches numpy on ragged rows,
reading the region before the store's wait is a race, the type rule refuses a mismatched tile, and
NVRTC compiles it for sm_100a with the PTX form of the PTX ISA's ``tcgen05.st`` section
(``tcgen05.st.sync.aligned.32x32b.xN.b32 [taddr], r``) and ``tcgen05.wait::st.sync.aligned``, and the
SASS (where cuobjdump is installed) the tensor-memory store. Nothing ran on a GPU."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from cake_core.hostdata import decode, encode
from cake_core.ir.types import DType
from cake_core.lower.program import lower_program, program_specs
from cake_core.runtime import sass
from cake_core.runtime.nvrtc import compile_cuda
from cake_core.semantics import run_program

from .conftest import checked_file

ST = Path(__file__).parent / "st.cake"


@pytest.fixture(scope="module")
def st_text() -> str:
    return ST.read_text()


@pytest.fixture(scope="module")
def st_checked(registry, b200):
    return checked_file(registry, b200, ST)


def _inputs(m: int, n: int, seed: int):
    rng = np.random.default_rng(seed)
    x = encode(rng.standard_normal((m, 64)).astype(np.float32), DType.BF16)
    c = encode(rng.standard_normal((n, 64)).astype(np.float32), DType.BF16)
    y = rng.standard_normal((m, n)).astype(np.float32)
    return x, c, y


@pytest.mark.parametrize("m", [77, 200])
def test_interpreter_seeds_the_accumulator_from_registers(st_checked, m):
    x, c, y = _inputs(m, 64, m)
    out = np.full((m, 64), np.nan, dtype=np.float32)
    res = run_program(st_checked, {"x": x, "c": c, "y": y, "out": out}, {"M": m, "N": 64})
    assert res.findings == []
    want = y + decode(x, DType.BF16).astype(np.float64) @ decode(c, DType.BF16).astype(np.float64).T
    np.testing.assert_allclose(res.outputs["out"], want, rtol=1e-5, atol=1e-4)


def test_using_the_region_before_the_store_wait_is_a_race(checker, st_text):
    text = st_text.replace("    tcgen05.wait.st\n", "")
    assert text != st_text
    x, c, y = _inputs(128, 64, 3)
    res = run_program(checker(text), {"x": x, "c": c, "y": y}, {"M": 128, "N": 64}, policy="sequential")
    assert any(f.code.code == "CS003" and "tcgen05.st" in f.message for f in res.findings), \
        [f.message for f in res.findings]


def test_the_register_tile_must_match_the_region(checker, st_text):
    text = st_text.replace("reg d: f32[128, N] layout rows", "reg d: f32[128, 32] layout rows")
    got = [d.message for d in checker(text).diagnostics]
    assert any("`tcgen05.st` moves [128, C]" in m for m in got), got


def test_nvrtc_compiles_the_store_for_sm_100a(st_checked, b200):
    (spec,) = program_specs(st_checked)
    result = compile_cuda(lower_program(st_checked, b200, spec).source, b200.nvrtc_arch)
    assert "tcgen05.st.sync.aligned.32x32b.x32.b32" in result.ptx
    assert "tcgen05.wait::st.sync.aligned" in result.ptx
    if sass.find_tool("cuobjdump") is not None:
        ops = sass.opcode_counts(sass.disassemble(result.cubin))
        assert ops["STTM"] >= 1 and ops["UTCHMMA"] == 4, {k: v for k, v in ops.items() if k.startswith(("ST", "UT"))}
