"""Every built-in target has a tensor-core path: `cake run kmeans-assign --target T` compiles at least one of
its round-0 candidates to that architecture's tensor-core instructions, shown in the PTX and the SASS.

The test goes down the GPU-free stages the way `cake run` does, not through `cake compile`: round 0's
candidates are :func:`~cake_core.loop.run.seed_schedules` (the problem's committed schedules), and each one
goes through :func:`~cake_core.loop.filter.filter_candidate`, the stage-2 function the run's loop calls, with
the run's cell (the problem's default) and floor. That way a schedule the run would reject (a verifier rule,
the interpreter gate, the lowering, NVRTC, the floor) cannot count, and the specialization checked is the one
the run compiles. The run itself is not called: on a machine with a GPU it would go on to benchmark.

Only the seeds whose operations claim the target's tensor-core instruction are filtered (the run filters
every seed; the others cannot show the claim), in the run's order, until one compiles. Its PTX must hold
the instruction (no tool needed, so the test cannot pass silently); its SASS, where cuobjdump is installed,
the mnemonic. NVRTC compiles are shared through the compile cache (`h100` and `h200` are both sm_90a).
"""

from __future__ import annotations

import re

import pytest
from cake_core import pipeline, plugins
from cake_core.cost.floor import floor_ms
from cake_core.loop.benchmark import program_values
from cake_core.loop.filter import FilterJob, filter_candidate
from cake_core.loop.run import seed_schedules
from cake_core.runtime import sass

PROBLEM = "kmeans-assign"

#: the tensor-core instruction of the most specific feature a target has, first match wins:
#: (feature, PTX instruction, SASS mnemonic). tcgen05's forms are those cake-blackwell's kernel test checks.
TENSOR_CORES = (
    ("tcgen05", "tcgen05.mma", "UTCHMMA"),
    ("wgmma", "wgmma.mma_async", "HGMMA"),
    ("mma.sync", "mma.sync", "HMMA"),
)

TARGETS = ["a100", "a10", "l40s", "h100", "h200", "b200"]


def _tensor_core(target) -> tuple[str, str]:
    for feature, ptx, mnemonic in TENSOR_CORES:
        if target.has(feature):
            return ptx, mnemonic
    raise AssertionError(f"`{target.name}` has none of the tensor-core features {[f for f, _, _ in TENSOR_CORES]}")


@pytest.mark.parametrize("name", TARGETS)
def test_the_run_compiles_a_candidate_to_the_targets_tensor_cores(name: str) -> None:
    reg = plugins.registry()
    problem, target = reg.get("problems", PROBLEM), reg.get("targets", name)
    shape, dtype = problem.default_cell.shape, problem.default_cell.dtype
    ptx_op, mnemonic = _tensor_core(target)
    refused: list[str] = []
    for path in seed_schedules(problem, reg, name):  # as `cake run` seeds them, plugin schedules for the target first
        text = path.read_text()
        cand = pipeline.Candidate(pipeline.load_text(text, str(path)), target, reg)
        if mnemonic not in cand.sass_claims():
            continue
        job = FilterJob(0, text, str(path), problem.name, name, shape, dtype, floor_ms(problem, shape, dtype, target))
        outcome = filter_candidate(job, cand)
        if outcome.status == "compiled":
            break
        refused.append(f"{path.name}: {outcome.gate}: {outcome.reason}")
    else:
        pytest.fail(f"no seed of `{PROBLEM}` claiming {mnemonic} compiles for `{name}`: {refused or 'none claims it'}")
    assert all(k.spill_stores == 0 for k in outcome.compile.kernels.values()), outcome.compile
    compiled = cand.compile(cand.spec(program_values(cand.check(), problem, shape, dtype)))
    assert compiled.arch == target.nvrtc_arch
    issued = re.findall(rf"(?<![\w.]){re.escape(ptx_op)}\.", compiled.ptx)  # an instruction, with its modifiers
    assert issued, f"{path.name} for `{name}`: no `{ptx_op}` in the PTX"
    if sass.find_tool("cuobjdump") is None:
        pytest.skip("cuobjdump not installed (the `sass` extra): the PTX was checked, the SASS was not")
    ops = sass.opcode_counts(sass.disassemble(compiled.cubin))
    assert ops[mnemonic] > 0, f"{path.name} for `{name}`: no {mnemonic} in the SASS ({dict(ops)})"
