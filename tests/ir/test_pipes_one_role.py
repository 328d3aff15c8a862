"""A pipe whose producer and consumer are one role: a one-role kernel filling its own shared ring with TMA
ahead of its reads (``ampere.cake`` with its cp.async copies issued through pipes, as the ``tma`` tactic
writes it).

The construct counts the role's acquires and its waits apart (``cring#p``, ``cring#n``); a stage name holds
the side of the operation that bound it; the pipe rules take an access's side from the access (a copy is
the producer's); the interpreter orders the instance's threads by an arrival of all of them followed by
their wait, and by nothing less: a read after the release still races with the refill. On the H200
(``gpu``), the one-role form computes the oracle's answer on ragged shapes in both element types.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cake_core import pipeline, plugins
from cake_core.ir import nodes as n
from cake_core.ir.parser import parse
from cake_core.ir.pipes import CONSUMER, PRODUCER, counter, holders
from cake_core.ir.printer import expr
from cake_core.loop.benchmark import bench_candidate
from cake_core.runtime.plan import Timing
from cake_core.verify.interp_gate import run_gate
from cake_core.verify.runner import check_registered, verify_source

AMPERE = Path(plugins.__file__).parent / "problems" / "kmeans_assign" / "schedules" / "ampere.cake"

# ampere.cake's copies as the role's own TMA pipes (old -> new)
EDITS = {
    "  smem xs: T[BM, D] pad 8\n  smem cs: T[S][BN, BK] pad 8\n":
        "  smem xs: T[1][BM, D] align 128\n  smem cs: T[S][BN, BK] align 128\n",
    "  role main": "  pipe xring: main -> main of xs\n  pipe cring: main -> main of cs\n  role main",
    "    cp.async xs <- x[b, t * BM : +BM, :], oob=zero\n":
        "    pipe.acquire xf <- xring\n    tma.load xs[xf] <- x[b, t * BM : +BM, :]\n",
    "        cp.async cs[p] <- c[b, p / KC * BN : +BN, p % KC * BK : +BK], oob=zero\n      cp.async.commit\n":
        "        pipe.acquire f <- cring\n        tma.load cs[f] <- c[b, p / KC * BN : +BN, p % KC * BK : +BK]\n"
        "    pipe.wait xb <- xring\n",
    "      cp.async.wait pending=S - 2\n      bar.sync\n": "      pipe.wait s <- cring\n",
    "xs[:, kc * BK": "xs[xb][:, kc * BK",
    "cs[i % S][:, kk * 16 : +16]\n        mma.sync acc <- a, bt^T\n":
        "cs[s][:, kk * 16 : +16]\n        mma.sync acc <- a, bt^T\n      pipe.release cring[s]\n",
    "        cp.async cs[j % S] <- c[b, j / KC * BN : +BN, j % KC * BK : +BK], oob=zero\n      cp.async.commit\n":
        "        pipe.acquire f <- cring\n        tma.load cs[f] <- c[b, j / KC * BN : +BN, j % KC * BK : +BK]\n",
    "    argmin.reduce": "    pipe.release xring[xb]\n    argmin.reduce",
}  # fmt: skip


def _text(**more: str) -> str:
    text = AMPERE.read_text(encoding="utf-8")
    for old, new in {**EDITS, **more}.items():
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    assert "    cp.async" not in text
    return text


def _h200():
    return plugins.registry().get("targets", "h200")


def _errors(text: str) -> set[str]:
    report = verify_source(text, "one_role.cake", _h200(), plugins.registry())
    return {d.code for d in report.diagnostics if d.is_error}


def _gate(text: str):
    reg = plugins.registry()
    return run_gate(reg.get("problems", "kmeans-assign"), parse(text, "one_role.cake"), reg)


def test_one_role_counts_its_acquires_and_its_waits_apart() -> None:
    module = parse(_text(), "one_role.cake")
    checked = check_registered(module, _h200(), plugins.registry())
    assert not [d for d in checked.diagnostics if d.is_error]
    model = next(m for (name, _), m in checked.models.items() if name == "assign")
    assert model.barriers["cring.empty"].count == 256  # every thread of the one role releases
    derived = {(t.op.name, t.ins[0].name): expr(t.attr("stage")) for t in model.ops if t.op.name.startswith("pipe.")
               and t.op.name != "pipe.release"}  # fmt: skip
    assert derived[("pipe.acquire", "cring")] == f"{counter('cring', PRODUCER)} % S"
    assert derived[("pipe.wait", "cring")] == f"{counter('cring', CONSUMER)} % S"
    # a stage name holds the side of the operation that bound it
    kernel = module.kernel("assign")
    held = holders(kernel, frozenset({"pipe.acquire", "pipe.wait"}), frozenset({"pipe.acquire"}))
    load = next(op for _, op in n.walk_ops(kernel) if op.name == "tma.load" and "cs" in expr(op.outs[0]))
    mma = next(op for _, op in n.walk_ops(kernel) if op.name == "mma.sync")
    assert held[id(load)]["f"].side == PRODUCER and held[id(mma)]["s"].side == CONSUMER


def test_one_role_verifies_and_the_interpreter_gate_passes_it() -> None:
    text = _text()
    assert _errors(text) == set()
    gate = _gate(text)
    assert gate.ok, [str(d) for d in gate.diagnostics]


def test_the_pipe_rules_take_the_side_from_the_access() -> None:
    # a copy into the stage the role waited for, not one it acquired
    wrong_copy = _text(**{"        tma.load cs[f] <- c[b, j / KC": "        tma.load cs[s] <- c[b, j / KC"})
    assert "CR123" in _errors(wrong_copy)
    # a read of the stage the role acquired, not one it waited for
    wrong_read = _text(**{"tma.load cs[f] <- c[b, j / KC * BN : +BN, j % KC * BK : +BK]\n":
                          "tma.load cs[f] <- c[b, j / KC * BN : +BN, j % KC * BK : +BK]\n"
                          "        ldmatrix bt <- cs[f][:, 0 : +16]\n"})  # fmt: skip
    assert "CR124" in _errors(wrong_read)


def test_a_read_after_the_release_still_races_with_the_refill() -> None:
    """The arrival orders what every thread did before it, nothing after: run without the verifier (whose
    CR125 refuses it first), the interpreter finds the reads the refill may overwrite."""
    late = _text(**{
        "      pipe.wait s <- cring\n": "      pipe.wait s <- cring\n      pipe.release cring[s]\n",
        "mma.sync acc <- a, bt^T\n      pipe.release cring[s]\n": "mma.sync acc <- a, bt^T\n",
    })  # fmt: skip
    assert "CR125" in _errors(late)  # the acquire's one-thread arrival follows every thread's reads
    gate = _gate(late)
    assert "CS003" in {d.code for d in gate.diagnostics}, [str(d) for d in gate.diagnostics]


@pytest.mark.gpu
@pytest.mark.parametrize(("shape", "dtype"), [({"B": 2, "N": 300, "K": 37, "D": 64}, "bf16"),
                                              ({"B": 3, "N": 1000, "K": 300, "D": 128}, "f16"),
                                              ({"B": 1, "N": 129, "K": 1031, "D": 256}, "bf16")])  # fmt: skip
def test_one_role_is_right_on_the_gpu(gpu_runner: object, shape: dict[str, int], dtype: str) -> None:
    """Fresh random inputs, outputs poisoned before the run, the problem's oracle (``bench_candidate``)."""
    reg = plugins.registry()
    cand = pipeline.Candidate(pipeline.load_text(_text(), "one_role.cake"), _h200())
    m = bench_candidate(cand, reg.get("problems", "kmeans-assign"), shape, dtype, gpu_runner, impl="cake:one_role",
                        commit="test", timing=Timing(warmup=1, reps=3))  # fmt: skip
    assert (m.status, m.correct) == ("ok", True), (m.error, m.oracle)
