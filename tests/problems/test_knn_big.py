"""knn's and knn-ip's shared-list split schedules (``hopper_split_big.cake``, K in {64, 100, 128}): verified
clean for h200, run in the interpreter to the oracle's approval on ragged shapes (a wrong merge or a lost
insertion would fail it), compiled by NVRTC for h200 without spills, and picked by bench/knn.py's ``auto``
for the k=100 cells where the register-list schedule stops."""

from __future__ import annotations

from pathlib import Path

import pytest

from cake_core import pipeline, plugins
from cake_core.loop.benchmark import program_values
from cake_core.problems import knn
from cake_core.problems.knn import KNN, KNN_IP
from cake_core.semantics import run_program
from cake_core.verify.runner import verify_source

BIG = Path(knn.__file__).parent / "schedules" / "hopper_split_big.cake"
BIG_IP = Path(knn.__file__).parent / "ip" / "schedules" / "hopper_split_big.cake"


@pytest.mark.parametrize("path", [BIG, BIG_IP], ids=["l2", "ip"])
def test_verifies_clean_on_h200(path: Path) -> None:
    target = plugins.registry().get("targets", "h200")
    diags = list(verify_source(path.read_text(), path.name, target).diagnostics)
    assert diags == [], [f"{d.code}: {d.message}" for d in diags]


@pytest.mark.parametrize("path,shape,dtype", [
    # one ragged query tile; 6 point tiles over 4 splits (the last has none): lists fill, then reject
    (BIG, {"B": 1, "M": 70, "N": 333, "D": 64, "K": 100}, "f16"),
    # D=256: one warpgroup a CTA; two batches, two query tiles; every list ends full of real points
    (BIG, {"B": 2, "M": 65, "N": 700, "D": 256, "K": 128}, "bf16"),
    (BIG_IP, {"B": 1, "M": 130, "N": 290, "D": 128, "K": 64}, "bf16"),
], ids=["l2-k100", "l2-d256-k128", "ip-k64"])  # fmt: skip
def test_the_interpreter_gives_the_k_best(compile_cake, path, shape, dtype) -> None:
    problem = KNN_IP if path == BIG_IP else KNN
    checked = compile_cake(path.read_text(), path.name)
    inputs = problem.make_inputs(shape, dtype, 7)
    result = run_program(checked, inputs, {**shape, "T": dtype})
    assert result.ok and not result.stopped, [str(f) for f in result.findings]
    out = result.outputs["out"]
    report = problem.check(inputs, {"out": out}, shape, dtype)
    assert report.passed, report.summary()
    # best first: the answer is the reference's order (inputs with no ties at these sizes)
    assert (out == problem.reference(inputs, shape, dtype)["out"]).mean() > 0.99


def test_k_up_to_32_is_outside_the_domain() -> None:
    from cake_core.errors import CakeUserError
    from cake_core.lower.program import program_sizes

    cand = pipeline.Candidate.load(BIG, plugins.registry().get("targets", "h200"))
    shape = {"B": 1, "M": 8, "N": 100, "D": 128, "K": 32}
    with pytest.raises(CakeUserError):
        program_sizes(cand.check(), program_values(cand.check(), KNN, shape, "f16"))


@pytest.mark.parametrize("path,d,k", [(BIG, 128, 100), (BIG_IP, 256, 128)], ids=["l2-d128-k100", "ip-d256-k128"])
def test_compiles_for_h200_without_spills(path: Path, d: int, k: int) -> None:
    pytest.importorskip("cuda.bindings.nvrtc")
    cand = pipeline.Candidate.load(path, plugins.registry().get("targets", "h200"))
    shape = {"B": 1, "M": 1, "N": 200, "D": d, "K": k}
    kernels = cand.compile(cand.spec(program_values(cand.check(), KNN, shape, "f16"))).kernels
    assert len(kernels) == 3
    assert all(r.spill_stores == 0 and r.spill_loads == 0 and r.local_bytes == 0 for r in kernels.values()), kernels
