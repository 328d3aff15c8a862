"""The warp-specialize tactic on schedules of two problems: kmeans-assign's Ampere kernel (a cp.async ring
filled ahead, with a prologue), the tensorize tactic's output (one buffer copied inside the loop) and knn's
fused top-k kernel (a ring, and a shared tile the consumer still orders with CTA barriers). Each input and
output passes the verifier for h200 and the interpreter gate against the problem's oracle; the kmeans outputs
compile with NVRTC for h200; the precondition refuses a target without TMA, a role of several instances and
a buffer something other than cp.async writes.

The rewrites are not claimed correct on the GPU: only the verifier, the interpreter and NVRTC judge them here.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from cake_core import pipeline, plugins
from cake_core.ir import nodes as n
from cake_core.ir.parser import parse
from cake_core.ir.printer import print_module
from cake_core.loop.tactic import Application, Tactic

from cake_tactics_core.judge import judge
from cake_tactics_core.warp_specialize import Refused, plan

PROBLEMS = Path(plugins.__file__).parent / "problems"

# the tensorize tactic's output for kmeans-assign (its assign kernel; centroid_norms as in ampere.cake):
# one buffer of centroids copied by cp.async at the top of every iteration, fenced by two bar.syncs
W1_ASSIGN = """\
kernel assign(x: global T[B, N, D], c: global T[B, K, D], c_sq: global f32[B, K], out: global i32[B, N])
  domain T in {bf16, f16}, B >= 1, N >= 1, K >= 1, D in {64, 128, 256}
  const BM = 128, BN = 64, WM = 4, WN = 2
  grid (t, b) over (cdiv(N, BM), B)
  cta warps WM * WN
  smem xs: T[BM, D] pad 8
  smem cs: T[BN, D] pad 8
  smem red: f32[2, BM, WN]
  role main warps 0..WM * WN:
    reg acc: f32[BM, BN] layout mma_acc(WM, WN)
    reg a: T[BM, 16] layout mma_a(WM, WN)
    reg bt: T[BN, 16] layout mma_b(WM, WN)
    reg bv: f32[BM] layout mma_rows(WM, WN)
    reg bi: i32[BM] layout mma_rows(WM, WN)
    reg rv: f32[BM] layout rows
    reg ri: i32[BM] layout rows
    fill bv, value=inf
    fill bi, value=-1
    cp.async xs <- x[b, t * BM : +BM, :], oob=zero
    for kt in 0 .. cdiv(K, BN):
      cp.async cs <- c[b, kt * BN : +BN, :], oob=zero
      cp.async.commit
      cp.async.wait pending=0
      bar.sync
      fill acc, value=0.0
      for kk in 0 .. D / 16:
        ldmatrix a <- xs[:, kk * 16 : +16]
        ldmatrix bt <- cs[:, kk * 16 : +16]
        mma.sync acc <- a, bt^T
      argmin.update bv, bi <- acc, c_sq[b, kt * BN : +BN], base=kt * BN, scale=-2.0, oob=skip
      bar.sync
    argmin.reduce rv, ri <- bv, bi, red
    store out[b, t * BM : +BM] <- ri, oob=skip
"""


def _text(problem: str, name: str) -> str:
    return (PROBLEMS / problem.replace("-", "_") / "schedules" / f"{name}.cake").read_text(encoding="utf-8")


def _w1() -> str:
    ampere = _text("kmeans-assign", "ampere")
    return ampere[: ampere.index("kernel assign(")] + W1_ASSIGN


def _tactic() -> Tactic:
    return plugins.registry().get("tactics", "warp-specialize")


def _target(name: str = "h200"):
    return plugins.registry().get("targets", name)


def _passes(problem: str, module: n.Module) -> pipeline.Candidate:
    """``module`` as a candidate for h200 that the verifier and the interpreter gate with ``problem``'s oracle
    pass."""
    text, errors = judge(problem, module)
    assert not errors, errors
    return pipeline.Candidate(pipeline.load_text(text, "rewritten.cake"), _target())


def _split(problem: str, text: str, kernel: str, params: dict) -> pipeline.Candidate:
    """Apply the one application offered on ``kernel`` (its params ``params``), check the input and the
    output, and return the output as a candidate."""
    module, t = parse(text, "input.cake"), _tactic()
    _passes(problem, module)
    offered = t.applications(module, _target())
    assert [a.key for a in offered] == [Application(t.name, kernel, params).key]
    out = t.apply(module, _target(), offered[0])
    assert print_module(module) == print_module(parse(text, "input.cake"))  # the input is left as it was
    return _passes(problem, out)


def _compiles(cand: pipeline.Candidate) -> None:
    """NVRTC compiles the candidate's program for h200 at T=bf16, D=128."""
    compiled = cand.compile(cand.spec({"T": "bf16", "D": 128}), cache=False)
    assert compiled.cubin[:4] == b"\x7fELF"


def _lines(cand: pipeline.Candidate, kernel: str) -> list[str]:
    """The lines of ``kernel`` in the candidate's text, stripped."""
    text = cand.source.text
    return [ln.strip() for ln in text[text.index(f"kernel {kernel}(") :].splitlines()]


def _between(lines: list[str], first: str, last: str) -> list[str]:
    return lines[lines.index(first) + 1 : lines.index(last)]


def test_it_registers_through_the_entry_point() -> None:
    reg = plugins.registry()
    assert reg.registration("tactics", "warp-specialize").plugin.distribution == "cake-tactics-core"
    assert isinstance(_tactic(), Tactic) and "\n" not in _tactic().precondition


def test_the_ampere_ring_becomes_a_tma_producer_and_its_consumer() -> None:
    """ampere.cake: the prologue and the copy issued S - 1 iterations ahead become one tma.load of tile i in
    iteration i; the consumer waits for the stage where it first reads it and releases it after."""
    cand = _split("kmeans-assign", _text("kmeans-assign", "ampere"), "assign", {})
    lines = _lines(cand, "assign")
    assert _between(lines, "role producer warps 0..4:", "role main warps 4..4 + WM * WN:") == [
        "let NT = cdiv(K, BN) * KC",
        "pipe.acquire xb <- xring",
        "tma.load xs[xb] <- x[b, t * BM : +BM, :]",
        "for i in 0 .. NT:",
        "pipe.acquire s <- cring",
        "tma.load cs[s] <- c[b, i / KC * BN : +BN, i % KC * BK : +BK]",
    ]
    assert {"cta warps 4 + WM * WN occupancy 1", "smem xs: T[1][BM, D] align 128", "smem cs: T[S][BN, BK] align 128",
            "pipe xring: producer -> main of xs", "pipe cring: producer -> main of cs"} <= set(lines)  # fmt: skip
    main = lines[lines.index("role main warps 4..4 + WM * WN:") :]
    assert not any(ln.startswith(("cp.async", "bar.sync")) for ln in main) and "let j = i + S - 1" not in main
    loop = main[main.index("for i in 0 .. NT:") :]
    assert loop[1:4] == ["pipe.wait s <- cring", "let kc = i % KC", "for kk in 0 .. BK / 16:"]
    assert loop[5:8] == ["ldmatrix bt <- cs[s, :, kk * 16 : +16]", "mma.sync acc <- a, bt^T", "pipe.release cring[s]"]
    assert main.index("pipe.wait xb <- xring") == main.index("for i in 0 .. NT:") - 1
    assert main[main.index("argmin.reduce rv, ri <- bv, bi, red") - 1] == "pipe.release xring[xb]"
    _compiles(cand)


def test_a_buffer_copied_in_every_iteration_becomes_a_two_stage_ring() -> None:
    """The tensorize output copies one centroid tile per iteration into an unstaged buffer: it becomes a
    ring of a new constant S = 2 (the ring-depth tactic deepens it); both bar.syncs go."""
    cand = _split("kmeans-assign", _w1(), "assign", {})
    lines = _lines(cand, "assign")
    assert {"const S = 2", "smem cs: T[S][BN, D] align 128", "smem xs: T[1][BM, D] align 128"} <= set(lines)
    loop = lines[lines.index("role producer warps 0..4:") :]
    assert loop[1:6] == ["pipe.acquire xb <- xring", "tma.load xs[xb] <- x[b, t * BM : +BM, :]",
                         "for kt in 0 .. cdiv(K, BN):", "pipe.acquire s <- cring",
                         "tma.load cs[s] <- c[b, kt * BN : +BN, :]"]  # fmt: skip
    assert "bar.sync" not in lines and not any(ln.startswith("cp.async") for ln in lines)
    deeper = plugins.registry().get("tactics", "ring-depth").applications(cand.source.module, _target())
    assert "ring-depth@assign.cs(stages=3)" in {a.key for a in deeper}
    _compiles(cand)


def test_the_staging_tactics_ring_splits_too() -> None:
    """naive.cake staged by the staging tactic (a ring of centroids filled one iteration ahead, its bound a
    let): the producer loads centroid k in iteration k; the let only the copies used goes."""
    naive = parse(_text("kmeans-assign", "naive"), "naive.cake")
    site = Application("staging", "assign:all:k:c[b, k, :]", {"stages": 2})
    staged = print_module(plugins.registry().get("tactics", "staging").apply(naive, _target(), site))
    lines = _lines(_split("kmeans-assign", staged, "assign", {}), "assign")
    assert "cta warps 8" in lines and "role all warps 4..8:" in lines
    assert lines[lines.index("role producer warps 0..4:") + 1 :][:3] == [
        "for k in 0 .. K:", "pipe.acquire s <- cring", "tma.load c_ring[s] <- c[b, k, :]"]  # fmt: skip
    assert not any(ln.startswith(("let", "cp.async", "bar.sync")) for ln in lines)


def test_knn_keeps_the_barriers_of_its_score_tile_in_both_roles() -> None:
    """fused_topk.cake: the bar.syncs that order the score tile ``sc`` stay, so the producer passes them too
    (a CTA barrier counts every thread); at K=32 the consumer's lists fill the block's registers, so the
    producer gets a setmaxnreg budget of 40."""
    lines = _lines(_split("knn", _text("knn", "fused_topk"), "topk", {"regs": 40}), "topk")
    assert _between(lines, "role producer warps 0..4 regs 40:", "role main warps 4..4 + WM * WN:") == [
        "let NT = cdiv(N, BN) * KC",
        "pipe.acquire qb <- qring",
        "tma.load qs[qb] <- q[b, t * BM : +BM, :]",
        "for i in 0 .. NT:",
        "bar.sync",
        "pipe.acquire s <- xring",
        "tma.load xs[s] <- x[b, i / KC * BN : +BN, i % KC * BK : +BK]",
        "let kc = i % KC",
        "if kc == KC - 1:",
        "bar.sync",
    ]
    assert "smem sc: f32[BM, BN] pad 4" in lines and "smem xs: T[S][BN, BK] align 128" in lines


def test_the_precondition_refuses_what_it_cannot_split() -> None:
    t, ampere = _tactic(), parse(_text("kmeans-assign", "ampere"), "ampere.cake")
    # no TMA on the A100
    assert t.applications(ampere, _target("a100")) == []
    with pytest.raises(Refused, match="no TMA"):
        plan(ampere.kernels[1], _target("a100"))
    # a role of several instances (its copies would be each instance's), and a kernel already split
    kernel = ampere.kernels[1]
    several = attrs.evolve(kernel, roles=(attrs.evolve(kernel.roles[0], per=n.Num(4)),))
    with pytest.raises(Refused, match="more than one role instance"):
        plan(several, _target())
    assert t.applications(parse(_text("kmeans-assign", "hopper"), "hopper.cake"), _target()) == []
    # a buffer cp.async fills that another operation writes too: the producer could not own it
    knn = _text("knn", "fused_topk").replace("store sc <- acc", "store qs <- acc")
    with pytest.raises(Refused, match="writes a buffer cp.async fills"):
        plan(parse(knn, "knn.cake").kernels[1], _target())
    # no cp.async at all
    assert t.applications(parse(_text("kmeans-assign", "naive"), "naive.cake"), _target()) == []
