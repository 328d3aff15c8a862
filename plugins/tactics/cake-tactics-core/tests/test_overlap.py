"""The ``epilogue-overlap`` tactic on wgmma consumer loops of two problems (kmeans-assign, knn): what it
offers, that the rewrite keeps the kernel's meaning (input and output pass the verifier for h200 and the
interpreter gate against the problem's oracle, and the output the interpreter at one and four tiles
besides the gate's two and three: the odd and even tails; kmeans outputs compile with NVRTC for sm_90a),
that on ``hopper.cake`` it gives the hand-written ``hopper_overlap.cake``, and where its precondition
refuses.

Inputs: ``hopper.cake`` and ``tests/schedules/kmeans_assign_w3.cake`` (kmeans-assign, a fold without
barriers), ``tests/schedules/t2_knn_wgmma.cake`` (knn, a fold through shared memory between CTA barriers
the producer takes too).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from cake_core import pipeline, plugins
from cake_core.ir import nodes as n
from cake_core.ir.parser import parse
from cake_core.ir.printer import print_module
from cake_core.loop.tactic import Tactic
from cake_core.problems.problem import outputs_of
from cake_core.runtime.device import requires_gpu
from cake_core.semantics import run_program
from cake_core.verify.interp_gate import interp_checked, type_variables

from cake_tactics_core.judge import judge
from cake_tactics_core.overlap import sites

if TYPE_CHECKING:
    from cake_core.target import Target

HERE = Path(__file__).parent / "schedules"
KMEANS = Path(plugins.__file__).parent / "problems" / "kmeans_assign" / "schedules"


def _read(path: Path, **edits: str) -> n.Module:
    text = path.read_text(encoding="utf-8")
    for old, new in edits.items():
        assert old in text, old
        text = text.replace(old, new)
    return parse(text, path.name)


def _tactic(target: str = "h200") -> tuple[Tactic, Target]:
    reg = plugins.registry()
    return reg.get("tactics", "epilogue-overlap"), reg.get("targets", target)


def _passes(problem: str, module: n.Module) -> str:
    text, errors = judge(problem, module)
    assert not errors, errors
    return text


def _rewritten(problem: str, module: n.Module, key: str) -> tuple[n.Module, str]:
    """The input passes; the tactic offers ``key`` alone; the input is left as it was; the output (and
    its text) passes."""
    _passes(problem, module)
    tactic, target = _tactic()
    offered = tactic.applications(module, target)
    assert [a.key for a in offered] == [key]
    before = print_module(module)
    out = tactic.apply(module, target, offered[0])
    assert print_module(module) == before
    return out, _passes(problem, out)


def _tiles(problem: str, module: n.Module, shapes: list[dict[str, int]], dtype: str = "bf16") -> None:
    """The interpreter runs ``module`` at each of ``shapes`` (fresh random inputs, a random schedule, one
    multiprocessor) without findings, and the oracle accepts what it computes."""
    reg = plugins.registry()
    prob = reg.get("problems", problem)
    checked = interp_checked(module, reg)
    outputs = [t.name for t in outputs_of(prob)]
    for seed, shape in enumerate(shapes):
        inputs = prob.make_inputs(shape, dtype, seed + 7)
        sizes = {**shape, **type_variables(prob, module.entry, dtype)}
        result = run_program(checked, inputs, sizes, seed=seed, policy="random", sms=1)
        assert not result.findings, (shape, [f.message for f in result.findings])
        report = prob.check(inputs, {o: result.outputs[o] for o in outputs}, shape, dtype)
        assert report.passed, (shape, report.summary())


def _compiles(module: n.Module, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """NVRTC compiles the assign kernel for the H200 (sm_90a) at D=64, with a private cache."""
    monkeypatch.setenv("CAKE_CACHE_DIR", str(tmp_path))
    cand = pipeline.Candidate(pipeline.load_text(print_module(module), "overlap.cake"), _tactic()[1])
    assert cand.verify().ok
    compiled = cand.compile(cand.spec({"D": 64, "T": "bf16"}), cache=False)
    assert compiled.cubin[:4] == b"\x7fELF" and compiled.kernel("cake_assign__T_bf16__D_64").registers > 0


def _role(text: str, role: str) -> str:
    """The printed role ``role`` of the last kernel of ``text``, up to the next role."""
    body = text[text.index(f"  role {role} ") :]
    nxt = body.find("\n  role ", 1)
    return body if nxt < 0 else body[:nxt]


def test_the_tactic_registers_through_the_entry_point() -> None:
    reg = plugins.registry()
    assert reg.registration("tactics", "epilogue-overlap").plugin.distribution == "cake-tactics-core"
    assert "\n" not in _tactic()[0].precondition


def test_hopper_becomes_the_hand_written_overlap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two accumulators of 128 rows a warpgroup do not fit a thread's registers at ``BM = 256``: the
    offer cuts ``BM`` to 128 (its value at D=256) and its roles are then ``hopper_overlap.cake``'s."""
    module = _read(KMEANS / "hopper.cake")
    assert [(s.role.name, s.loop.var) for s in sites(module.kernel("assign"))] == [("consumers", "kt")]
    out, text = _rewritten("kmeans-assign", module, "epilogue-overlap@assign.consumers:kt(BM=128)")
    hand = print_module(_read(KMEANS / "hopper_overlap.cake"))
    assert text[text.index("  role producer") :] == hand[hand.index("  role producer") :]
    assert "const BM = 128\n" in text
    _compiles(out, tmp_path, monkeypatch)


def test_kmeans_w3_folds_while_the_next_tile_multiplies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = _read(HERE / "kmeans_assign_w3.cake")
    out, text = _rewritten("kmeans-assign", module, "epilogue-overlap@assign.main:kt()")
    main = _role(text, "main")
    assert "reg acc0: f32[ROWS, BN] layout wgmma_acc\n    reg acc1: f32[ROWS, BN] layout wgmma_acc" in main
    assert "for p in 0 .. (NC - 1) / 2:" in main and "let kl = (NC - 1) / 2 * 2" in main
    # the input's fold, its accumulator, stage and tile index replaced
    fold = "argmin.update bv, bi <- acc0, c_sq[b, 2 * p * BN : +BN], base=2 * p * BN"
    assert f"wgmma.wait acc0, pending=1\n      {fold}" in main
    assert "argmin.update bv, bi <- acc1, c_sq[b, (kl + 1) * BN : +BN], base=(kl + 1) * BN" in main
    assert main.count("pipe.release cring[s0]") == 3 and main.count("pipe.release cring[s1]") == 2
    assert _role(text, "producer") == _role(print_module(module), "producer")
    # one and four centroid tiles (the gate samples two and three): both tails, zero and one full trips
    _tiles("kmeans-assign", out, [{"B": 1, "N": 130, "K": k, "D": 64} for k in (5, 512)])
    _compiles(out, tmp_path, monkeypatch)


def test_knn_fold_between_barriers_shifts_the_producer() -> None:
    """The fold of tile ``i`` runs after the wait for tile ``i + 1``, so the producer takes its two CTA
    barriers of tile ``i`` after its copy of tile ``i + 1`` (else both wait forever)."""
    out, text = _rewritten("knn", _read(HERE / "t2_knn_wgmma.cake"), "epilogue-overlap@topk.main:i()")
    producer = _role(text, "producer")
    assert "    pipe.acquire s2 <- xring\n    tma.load xs[s2] <- x[b, 0 : +BN, :]\n    for i in 0 .. NC:\n" in producer
    assert "      if i + 1 < NC:\n        pipe.acquire s <- xring\n" in producer
    assert "x[b, (i + 1) * BN : +BN, :]\n      bar.sync\n      bar.sync" in producer
    main = _role(text, "main")
    assert "store sc[self * ROWS : +ROWS, :] <- acc1\n      bar.sync\n      topk.update tv, ti <- sc" in main
    _tiles("knn", out, [{"B": 1, "M": 65, "N": n_, "D": 64, "K": 4} for n_ in (7, 256)])


# --- where the precondition refuses ---


def test_refused_on_a_target_without_wgmma() -> None:
    module = _read(HERE / "kmeans_assign_w3.cake")
    assert sites(module.kernel("assign"))
    tactic, b200 = _tactic("b200")
    assert tactic.applications(module, b200) == []


def test_refused_on_a_one_stage_ring() -> None:
    """The consumer holds two stages at once: a one-stage ring would never fill the second."""
    module = _read(HERE / "kmeans_assign_w3.cake", **{"S = 2,": "S = 1,"})
    _passes("kmeans-assign", module)
    assert sites(module.kernel("assign")) and _tactic()[0].applications(module, _tactic()[1]) == []


@pytest.mark.parametrize(("old", "new"), [
    # the accumulator carries across tiles
    ("cs[s]^T, accumulate=0", "cs[s]^T, accumulate=1"),
    # the fold writes the accumulator
    ("      pipe.release cring[s]\n    pipe.release",
     "      fill acc, value=0.0\n      pipe.release cring[s]\n    pipe.release"),
    # the stage is released before the multiply is waited for, or not at the fold's top level
    ("      wgmma.commit\n      wgmma.wait pending=0\n",
     "      wgmma.commit\n      pipe.release cring[s]\n      wgmma.wait pending=0\n"),
    # a trip count the domain does not keep at 1 or more
    ("for kt in 0 .. NC:\n      pipe.wait", "for kt in 0 .. K / BN:\n      pipe.wait"),
])  # fmt: skip
def test_refused_where_the_loop_is_not_a_plain_fold(old: str, new: str) -> None:
    module = _read(HERE / "kmeans_assign_w3.cake", **{old: new})
    assert sites(module.kernel("assign")) == [] and _tactic()[0].applications(module, _tactic()[1]) == []


def test_refused_on_barriers_the_other_role_takes_elsewhere() -> None:
    """knn as the wgmma tactic leaves it (a CTA barrier before each tile's wait, the stage released before
    the fold): the producer's barriers do not all end its loop's trips, and the consumer takes one outside
    the fold; and a consumer whose fold takes one barrier where the producer takes two."""
    module = _read(HERE / "t2_knn_wgmma.cake", **{
        "    for i in 0 .. NC:\n      pipe.acquire": "    for i in 0 .. NC:\n      bar.sync\n      pipe.acquire",
        "    for i in 0 .. NC:\n      pipe.wait": "    for i in 0 .. NC:\n      bar.sync\n      pipe.wait",
    })  # fmt: skip
    _passes("knn", module)
    assert sites(module.kernel("topk")) == []
    module = _read(HERE / "t2_knn_wgmma.cake", **{"oob=skip\n      bar.sync\n": "oob=skip\n"})
    assert sites(module.kernel("topk")) == []


# --- on the GPU (the lead's H200 run; skipped cleanly without a driver) ---

GPU_CELLS = [  # one to four centroid tiles, ragged rows, every D
    ({"B": 2, "N": 300, "K": 37, "D": 64}, "bf16"),
    ({"B": 1, "N": 1000, "K": 130, "D": 128}, "f16"),
    ({"B": 1, "N": 129, "K": 300, "D": 128}, "bf16"),
    ({"B": 3, "N": 200, "K": 512, "D": 256}, "bf16"),
]


@pytest.fixture(scope="module")
def h200_runner() -> Iterator[object]:
    """A GPU worker (the tests that take it are skipped by ``requires_gpu`` without a driver)."""
    from cake_core.runtime.worker import GpuRunner

    with GpuRunner() as runner:
        if not any(part in runner.device_info().name for part in ("H200", "H100")):
            pytest.skip(f"the outputs are compiled for h200; this GPU is {runner.device_info().name}")
        yield runner


@requires_gpu
@pytest.mark.parametrize("schedule", [HERE / "kmeans_assign_w3.cake", KMEANS / "hopper.cake"], ids=["w3", "hopper"])
def test_kmeans_outputs_pass_the_oracle_on_the_gpu(schedule: Path, h200_runner: object) -> None:
    """Fresh random inputs, outputs poisoned, checked by the oracle before and after (``bench_candidate``)."""
    from cake_core.loop.benchmark import bench_candidate

    tactic, target = _tactic()
    module = _read(schedule)
    out = tactic.apply(module, target, tactic.applications(module, target)[0])
    cand = pipeline.Candidate(pipeline.load_text(print_module(out), "overlap.cake"), target)
    problem = plugins.registry().get("problems", "kmeans-assign")
    for seed, (shape, dtype) in enumerate(GPU_CELLS):
        m = bench_candidate(cand, problem, shape, dtype, h200_runner, impl="overlap", timing=None, seed=seed)
        assert m.status == "ok" and m.correct, (shape, m.status, m.error, m.oracle)
