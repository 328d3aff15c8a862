"""``blackwell.cake``, the kmeans-assign schedule this plugin contributes for ``b200``
(``cake_register_schedules``), checked without a B200: the interpreter runs it on small ragged shapes
and the problem's oracle accepts the answer (and a broken variant is caught); NVRTC compiles it for
sm_100a without spills and within the shared-memory and register limits, with the tcgen05 mma, commit
and ld inside the PTX's loops; its SASS (where cuobjdump is installed) holds the UTC*/tensor-memory
instructions and no HMMA or HGMMA. Nothing here ran on a GPU (``ran: false``). One compile, of the
D=128 bf16 specialization, is shared by the module's tests."""

from __future__ import annotations

import re

import numpy as np
import pytest
from cake_core.ir.parser import parse
from cake_core.lower.program import lower_program, select_spec
from cake_core.loop.run import seed_schedules
from cake_core.runtime import sass
from cake_core.runtime.nvrtc import compile_cuda
from cake_core.semantics import run_program
from cake_core.verify.interp_gate import interp_checked, run_gate, type_variables

from cake_blackwell import SCHEDULES

from .conftest import checked_file

BLACKWELL = SCHEDULES / "blackwell.cake"


@pytest.fixture(scope="module")
def problem(registry):
    return registry.get("problems", "kmeans-assign")


@pytest.fixture(scope="module")
def text() -> str:
    return BLACKWELL.read_text()


@pytest.fixture(scope="module")
def compiled(registry, b200):
    """The checked module for b200 and the NVRTC compile of its D=128 bf16 specialization."""
    checked = checked_file(registry, b200, BLACKWELL)
    spec = select_spec(checked, {"D": 128, "T": "bf16"})
    return checked, compile_cuda(lower_program(checked, b200, spec).source, b200.nvrtc_arch)


def test_the_plugin_contributes_it_to_kmeans_assign_on_b200(registry, problem):
    r = registry.registration("schedules", "kmeans-assign/blackwell")
    assert r.plugin.distribution == "cake-blackwell" and r.obj.targets == {"b200"}
    assert BLACKWELL in seed_schedules(problem, registry, "b200")
    assert BLACKWELL not in seed_schedules(problem, registry, "h200")


def test_the_interpreter_passes_the_oracle_on_ragged_shapes(registry, problem, text):
    module = parse(text, str(BLACKWELL))
    report = run_gate(problem, module, registry)  # two tiles with a partial one; one CTA wrapping every ring
    assert report.diagnostics == () and len(report.runs) == 2
    # and rows, centroids and a batch none of the tiles divide, f16, three CTAs, random schedule
    checked = interp_checked(module, registry)
    shape = {"B": 2, "N": 77, "K": 131, "D": 128}
    inputs = problem.make_inputs(shape, "f16", seed=5)
    res = run_program(checked, inputs, {**shape, **type_variables(problem, module.entry, "f16")}, seed=5,
                      policy="random", sms=3)  # fmt: skip
    assert res.findings == []
    assert problem.check(inputs, {"out": res.outputs["out"]}, shape, "f16").passed


def test_reading_the_accumulator_before_its_load_completes_is_caught(registry, problem, text):
    broken = text.replace("        tcgen05.wait.ld d\n", "")
    assert broken != text
    report = run_gate(problem, parse(broken, "broken.cake"), registry)
    assert any(d.code == "CS003" and "tcgen05.ld" in d.message for d in report.diagnostics)


def test_nvrtc_compiles_it_for_sm_100a_within_the_limits(compiled, b200):
    checked, result = compiled
    assign = next(f for name, f in result.kernels.items() if "assign" in name)
    assert assign.spill_stores == 0 and assign.spill_loads == 0 and assign.stack_frame == 0
    model = next(m for (k, _), m in checked.models.items() if k == "assign")
    assert assign.registers is not None and assign.registers * model.threads <= b200.regs_per_block
    assert assign.registers <= b200.regs_per_thread
    assert max(m.smem_bytes for m in checked.models.values()) <= b200.smem_per_block_optin


def _loops(ptx: str) -> list[tuple[int, int]]:
    """(first, last) line of every backward branch's range in ``ptx``: a loop's body."""
    lines = ptx.splitlines()
    labels = {m[1]: i for i, line in enumerate(lines) if (m := re.match(r"^(\$L__\w+):", line))}
    return [(labels[m[1]], i) for i, line in enumerate(lines)
            if (m := re.search(r"\bbra(?:\.uni)?\s+(\$L__\w+);", line)) and labels.get(m[1], i + 1) < i]  # fmt: skip


def test_the_ptx_issues_tcgen05_inside_the_main_loop(compiled):
    _, result = compiled
    entry = result.ptx[result.ptx.index(".entry cake_assign") :]
    lines = entry.splitlines()
    loops = _loops(entry)
    assert loops
    assert any("tcgen05.alloc.cta_group::1" in line for line in lines)  # once, before the loops
    assert any("tcgen05.dealloc.cta_group::1" in line for line in lines)
    for form in ("tcgen05.mma.cta_group::1.kind::f16", "tcgen05.commit.cta_group::1.mbarrier::arrive::one",
                 "tcgen05.ld.sync.aligned.32x32b", "tcgen05.wait::ld"):  # fmt: skip
        at = [i for i, line in enumerate(lines) if form in line]
        assert at and all(any(a <= i <= b for a, b in loops) for i in at), form
    # one mma instruction per K step of 16 over D = 128
    assert sum("tcgen05.mma.cta_group::1" in line for line in lines) == 128 // 16


def test_the_sass_holds_tensor_memory_instructions_and_no_hmma(compiled):
    if sass.find_tool("cuobjdump") is None:
        pytest.skip("cuobjdump is not installed (the `sass` extra)")
    _, result = compiled
    ops = sass.opcode_counts(sass.disassemble(result.cubin))
    assert ops["UTCHMMA"] == 128 // 16 and ops["LDTM"] >= 1 and ops["UTCBAR"] >= 1 and ops["UTCATOMSWS"] >= 1
    assert ops["UTMALDG"] >= 1  # TMA
    assert not ops["HMMA"] and not ops["HGMMA"]
