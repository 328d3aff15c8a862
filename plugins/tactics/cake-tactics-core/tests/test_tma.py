"""The ``tma`` tactic on one-role cp.async kernels of two problems: kmeans-assign's ``ampere.cake`` (x rows
once, a K-chunked centroid ring filled ahead) and knn's naive schedule after the staging tactic (a ring of
points filled ahead). What it offers, that input and output pass the verifier for h200 and the interpreter
gate against the problem's oracle (the staging tests judge the staged knn input), that the kmeans output
compiles with NVRTC for h200, and where the precondition refuses (no TMA on the target, a loop that copies
without a ring filled ahead, a kernel already warp-specialized)."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from cake_core import pipeline, plugins
from cake_core.ir import nodes as n
from cake_core.ir.parser import parse
from cake_core.ir.printer import print_module
from cake_core.loop.tactic import Application
from cake_core.lower.program import select_spec
from cake_core.target import Feature

from cake_tactics_core.judge import judge

PROBLEMS = Path(plugins.__file__).parent / "problems"


def _schedule(problem: str, name: str) -> n.Module:
    path = PROBLEMS / problem.replace("-", "_") / "schedules" / f"{name}.cake"
    return parse(path.read_text(encoding="utf-8"), str(path))


def _target(name: str = "h200"):
    return plugins.registry().get("targets", name)


def _tactic(name: str = "tma"):
    return plugins.registry().get("tactics", name)


def _keys(module: n.Module, target=None) -> list[str]:
    return [a.key for a in _tactic().applications(module, target or _target())]


def _apply(module: n.Module, kernel: str) -> n.Module:
    before = print_module(module)
    out = _tactic().apply(module, _target(), Application("tma", kernel))
    assert print_module(module) == before  # the input is left as it was
    return out


def _passes(problem: str, module: n.Module) -> str:
    """The verifier for h200 and the interpreter gate with ``problem``'s oracle pass ``module``; the text of
    its last kernel."""
    text, errors = judge(problem, module)
    assert not errors, errors
    return text[text.rindex("\nkernel ") :]


def test_the_tactic_registers_through_the_entry_point() -> None:
    assert plugins.registry().registration("tactics", "tma").plugin.distribution == "cake-tactics-core"
    assert "\n" not in _tactic().precondition


def test_ampere_issues_its_copies_as_tma_through_pipes_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ampere = _schedule("kmeans-assign", "ampere")
    assert _keys(ampere) == ["tma@assign()"]
    text = _passes("kmeans-assign", _apply(ampere, "assign"))
    assert "pipe xring: main -> main of xs\n  pipe cring: main -> main of cs" in text
    assert "smem xs: T[1][BM, D] align 128" in text and "smem cs: T[S][BN, BK] align 128" in text
    # the prologue and the prefetch take a stage and fill it; the loop waits for its tile and gives it back
    assert "pipe.acquire xf <- xring\n    tma.load xs[xf] <- x[b, t * BM : +BM, :]\n" in text
    assert "      if p < NT:\n        pipe.acquire f <- cring\n        tma.load cs[f] <- c[b, p / KC * BN" in text
    assert "    for i in 0 .. NT:\n      pipe.wait s <- cring\n      let kc = i % KC" in text
    assert "mma.sync acc <- a, bt^T\n      pipe.release cring[s]\n      let j = i + S - 1" in text
    assert "ldmatrix a <- xs[xb, :, kc * BK + kk * 16 : +16]" in text and "ldmatrix bt <- cs[s, :" in text
    assert "pipe.release xring[xb]\n    argmin.reduce" in text
    assert "cp.async" not in text and "bar.sync" not in text
    # NVRTC compiles it for the H200 (sm_90a), with a private cache: one stage counter per pipe and side
    monkeypatch.setenv("CAKE_CACHE_DIR", str(tmp_path))
    checked = pipeline.check(pipeline.load_text(print_module(_apply(ampere, "assign")), "tma.cake"), _target())
    lowered = pipeline.build(checked, _target(), select_spec(checked, {"D": 128, "T": "bf16"}))
    assert "cake_cring_p = 0" in lowered.source and "cake_cring_n = 0" in lowered.source
    result = pipeline.compile_program(lowered, _target(), cache=False)
    assert all(result.kernel(k.function).registers > 0 for k in lowered.kernels)


def test_the_staged_knn_ring_is_filled_by_tma() -> None:
    staged = _tactic("staging").apply(_schedule("knn", "naive"), _target(),
                                      Application("staging", "topk:all:j:x[b, j, :]", {"stages": 2}))  # fmt: skip
    assert _keys(staged) == ["tma@topk()"]
    text = _passes("knn", _apply(staged, "topk"))
    assert "pipe xring: all -> all of x_ring" in text and "smem x_ring: T[S_x][D] align 128" in text
    assert "pipe.acquire f <- xring\n        tma.load x_ring[f] <- x[b, p, :]" in text
    assert "pipe.wait s <- xring\n      rowdot dot <- q[b, t * R : +R, :], x_ring[s], oob=zero\n" in text
    assert "      pipe.release xring[s]\n" in text and "cp.async" not in text and "bar.sync" not in text


# --- where the precondition refuses ---


def test_refused_without_tma_without_a_ring_ahead_or_with_pipes() -> None:
    ampere = _schedule("kmeans-assign", "ampere")
    plain = attrs.evolve(_target(), name="h200-without-tma", features=_target().features - {Feature.TMA})
    assert _keys(ampere, plain) == []
    # tensorize's output copies each centroid tile in the iteration that reads it: nothing to issue ahead
    naive = _schedule("kmeans-assign", "naive")
    tensorized = _tactic("tensorize").apply(naive, _target(), Application(
        "tensorize", "assign:all:k", {"BN": 64, "fold": "registers"}))  # fmt: skip
    assert "cp.async cs <- c[b, kt * BN : +BN, :]" in print_module(tensorized)
    assert _keys(tensorized) == []
    # warp-specialized already: pipes of its own
    assert _keys(_schedule("kmeans-assign", "hopper")) == []
