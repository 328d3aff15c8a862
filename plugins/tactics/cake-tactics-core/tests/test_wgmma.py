"""The ``wgmma`` tactic on warp-specialized kernels of two problems (kmeans-assign, knn): what it offers,
that the rewrite keeps the kernel's meaning (input and output pass the verifier for h200 and the
interpreter gate against the problem's oracle; the kmeans output compiles with NVRTC for sm_90a), and
where its precondition refuses (no wgmma on the target, K-chunked operands, operands written by
cp.async, fewer than 64 rows a warpgroup).

The inputs are the output form of the warp-specialize tactic with whole-K operand rings (a producer
issuing TMA through pipes, a consumer multiplying with ldmatrix + mma.sync); each kernel below is
spliced after the problem's own program and norms kernel (its stored schedule, up to its second kernel).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cake_core import pipeline, plugins
from cake_core.ir import nodes as n
from cake_core.ir.parser import parse
from cake_core.ir.printer import print_module
from cake_core.loop.tactic import Application, Tactic
from cake_core.verify.runner import verify_source

from cake_tactics_core.judge import judge
from cake_tactics_core.wgmma import sites

PROBLEMS = Path(plugins.__file__).parent / "problems"

# kmeans-assign, whole-D operands: x rows once, centroid tiles [BN, D] through a ring
KMEANS = """
kernel assign(x: global T[B, N, D], c: global T[B, K, D], c_sq: global f32[B, K], out: global i32[B, N])
  domain T in {bf16, f16}, B >= 1, N >= 1, K >= 1, D in {64, 128, 256}
  const BM = 128, BN = 128, S = 2, WM = 4, WN = 2
  grid (t, b) over (cdiv(N, BM), B)
  cta warps 4 + WM * WN occupancy 1
  smem xs: T[1][BM, D] align 128
  smem cs: T[S][BN, D] align 128
  smem red: f32[2, BM, WN]
  pipe xring: producer -> main of xs
  pipe cring: producer -> main of cs
  role producer warps 0..4:
    let NC = cdiv(K, BN)
    pipe.acquire xb <- xring
    tma.load xs[xb] <- x[b, t * BM : +BM, :]
    for kt in 0 .. NC:
      pipe.acquire s <- cring
      tma.load cs[s] <- c[b, kt * BN : +BN, :]
  role main warps 4..4 + WM * WN:
    reg acc: f32[BM, BN] layout mma_acc(WM, WN)
    reg a: T[BM, 16] layout mma_a(WM, WN)
    reg bt: T[BN, 16] layout mma_b(WM, WN)
    reg bv: f32[BM] layout mma_rows(WM, WN)
    reg bi: i32[BM] layout mma_rows(WM, WN)
    reg rv: f32[BM] layout rows
    reg ri: i32[BM] layout rows
    fill bv, value=inf
    fill bi, value=-1
    let NC = cdiv(K, BN)
    pipe.wait xb <- xring
    for kt in 0 .. NC:
      fill acc, value=0.0
      pipe.wait s <- cring
      for kk in 0 .. D / 16:
        ldmatrix a <- xs[xb][:, kk * 16 : +16]
        ldmatrix bt <- cs[s][:, kk * 16 : +16]
        mma.sync acc <- a, bt^T
      argmin.update bv, bi <- acc, c_sq[b, kt * BN : +BN], base=kt * BN, scale=-2.0, oob=skip
      pipe.release cring[s]
    pipe.release xring[xb]
    argmin.reduce rv, ri <- bv, bi, red
    store out[b, t * BM : +BM] <- ri, oob=skip
"""

# knn, the same form: the scores go through shared memory to the top-k lists, between CTA barriers the
# producer takes part in (a role cannot wait on a CTA barrier another role never reaches)
KNN = """
kernel topk(q: global T[B, M, D], x: global T[B, N, D], x_sq: global f32[B, N], out: global i32[B, M, K])
  domain T in {bf16, f16}, B >= 1, M >= 1, N >= 1, D in {64, 128, 256}, K in {1, 2, 4, 8, 10, 16, 32}
  const BM = 128, BN = 64, S = 2, WM = 4, WN = 2, P = 2
  grid (t, b) over (cdiv(M, BM), B)
  cta warps 4 + WM * WN occupancy 1
  smem qs: T[1][BM, D] align 128
  smem xs: T[S][BN, D] align 128
  smem sc: f32[BM, BN] pad 4
  pipe qring: producer -> main of qs
  pipe xring: producer -> main of xs
  role producer warps 0..4 regs 40:
    let NC = cdiv(N, BN)
    pipe.acquire qb <- qring
    tma.load qs[qb] <- q[b, t * BM : +BM, :]
    for i in 0 .. NC:
      pipe.acquire s <- xring
      tma.load xs[s] <- x[b, i * BN : +BN, :]
      bar.sync
      bar.sync
  role main warps 4..4 + WM * WN regs 208:
    reg acc: f32[BM, BN] layout mma_acc(WM, WN)
    reg a: T[BM, 16] layout mma_a(WM, WN)
    reg bt: T[BN, 16] layout mma_b(WM, WN)
    reg tv: f32[BM * P, K] layout rows
    reg ti: i32[BM * P, K] layout rows
    reg fv: f32[BM, K] layout rows
    reg fi: i32[BM, K] layout rows
    fill tv, value=inf
    fill ti, value=-1
    let NC = cdiv(N, BN)
    pipe.wait qb <- qring
    for i in 0 .. NC:
      pipe.wait s <- xring
      fill acc, value=0.0
      for kk in 0 .. D / 16:
        ldmatrix a <- qs[qb][:, kk * 16 : +16]
        ldmatrix bt <- xs[s][:, kk * 16 : +16]
        mma.sync acc <- a, bt^T
      pipe.release xring[s]
      store sc <- acc
      bar.sync
      topk.update tv, ti <- sc, x_sq[b, i * BN : +BN], base=i * BN, k=K, scale=-2.0, split=P, oob=skip
      bar.sync
    pipe.release qring[qb]
    topk.reduce fv, fi <- tv, ti, k=K
    store out[b, t * BM : +BM, :] <- fi, oob=skip
"""


def _module(problem: str, schedule: str, kernel: str) -> n.Module:
    """``kernel`` after the program and first kernel of ``problem``'s stored ``schedule``."""
    text = (PROBLEMS / problem.replace("-", "_") / "schedules" / f"{schedule}.cake").read_text(encoding="utf-8")
    first = text.index("\nkernel ")
    head = text[: text.index("\nkernel ", first + 1)]
    return parse(head + "\n" + kernel, f"{problem}.cake")


def _kmeans(**edits: str) -> n.Module:
    text = KMEANS
    for old, new in edits.items():
        assert old in text
        text = text.replace(old, new)
    return _module("kmeans-assign", "ampere", text)


def _target(name: str = "h200"):
    return plugins.registry().get("targets", name)


def _tactic() -> Tactic:
    return plugins.registry().get("tactics", "wgmma")


def _passes(problem: str, module: n.Module) -> str:
    """The verifier for h200 and the interpreter gate with ``problem``'s oracle pass ``module``."""
    text, errors = judge(problem, module)
    assert not errors, errors
    return text


def _rewritten(module: n.Module, site: str) -> n.Module:
    offered = _tactic().applications(module, _target())
    assert [a.key for a in offered] == [f"wgmma@{site}()"]
    before = print_module(module)
    out = _tactic().apply(module, _target(), offered[0])
    assert print_module(module) == before  # the input is left as it was
    return out


def _body(module: n.Module, kernel: str) -> str:
    return print_module(module).split(f"kernel {kernel}(")[1]


def test_the_tactic_registers_through_the_entry_point() -> None:
    reg = plugins.registry()
    assert reg.registration("tactics", "wgmma").plugin.distribution == "cake-tactics-core"
    assert "\n" not in _tactic().precondition


def test_kmeans_consumer_becomes_wgmma_warpgroups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = _kmeans()
    _passes("kmeans-assign", module)
    out = _rewritten(module, "assign.main")
    _passes("kmeans-assign", out)
    text = _body(out, "assign")
    assert "const WG = WM * WN / 4" in text and "const ROWS = BM / WG" in text
    assert "role main warps 4..4 + WM * WN per 4:" in text
    assert "smem xs: T[1][BM, D] swizzle 128B" in text and "smem cs: T[S][BN, D] swizzle 128B" in text
    assert "reg acc: f32[ROWS, BN] layout wgmma_acc" in text and "reg bi: i32[ROWS] layout wgmma_rows" in text
    # the zero fill before the k-loop (a pipe.wait between, as warp-specialize leaves it) is the wgmma's
    # accumulate=0; one wgmma over the whole k extent
    assert "wgmma acc <- xs[xb, self * ROWS : +ROWS, :], cs[s]^T, accumulate=0" in text
    assert "fill acc" not in text and "ldmatrix" not in text and "mma.sync" not in text
    # the reduction across warps through `red` is per warpgroup now; each warpgroup stores its rows
    assert "argmin.reduce bv, bi <- bv, bi\n" in text and "smem red" not in text and "reg rv" not in text
    assert "store out[b, t * BM + self * ROWS : +ROWS] <- bi, oob=skip" in text
    # NVRTC compiles the rewrite for the H200 (sm_90a), with a private cache
    monkeypatch.setenv("CAKE_CACHE_DIR", str(tmp_path))
    cand = pipeline.Candidate(pipeline.load_text(print_module(out), "w3.cake"), _target())
    assert cand.verify().ok
    compiled = cand.compile(cand.spec({"D": 128, "T": "bf16"}), cache=False)
    assert compiled.cubin[:4] == b"\x7fELF" and compiled.kernel("cake_assign__T_bf16__D_128").registers > 0


def test_a_fill_away_from_the_loop_stays_and_the_wgmma_accumulates() -> None:
    """The accumulator zeroed at the start and after each fold, not right before the k-loop: the fills
    stay (on the warpgroup's tile) and the wgmma adds to them."""
    module = _kmeans(**{
        "    fill bi, value=-1\n": "    fill bi, value=-1\n    fill acc, value=0.0\n",
        "      fill acc, value=0.0\n      pipe.wait s <- cring": "      pipe.wait s <- cring",
        "oob=skip\n      pipe.release cring": "oob=skip\n      fill acc, value=0.0\n      pipe.release cring",
    })  # fmt: skip
    _passes("kmeans-assign", module)
    out = _rewritten(module, "assign.main")
    text = _body(out, "assign")
    assert "cs[s]^T, accumulate=1" in text and text.count("fill acc, value=0.0") == 2
    _passes("kmeans-assign", out)


def test_knn_topk_consumer_becomes_wgmma_warpgroups() -> None:
    """``store sc <- acc`` takes a wgmma accumulator (the interpreter runs it; stores to shared memory
    and ``topk.*`` are not lowered yet, so knn is checked by the verifier and the interpreter only):
    each warpgroup stores and folds its own rows of ``sc``."""
    module = _module("knn", "fused_topk", KNN)
    _passes("knn", module)
    out = _rewritten(module, "topk.main")
    _passes("knn", out)
    text = _body(out, "topk")
    assert "wgmma acc <- qs[qb, self * ROWS : +ROWS, :], xs[s]^T, accumulate=0" in text
    assert "store sc[self * ROWS : +ROWS, :] <- acc" in text
    assert "topk.update tv, ti <- sc[self * ROWS : +ROWS, :], x_sq[b, i * BN : +BN]" in text
    assert "reg tv: f32[ROWS * P, K] layout rows" in text and "reg fi: i32[ROWS, K] layout rows" in text
    assert "store out[b, t * BM + self * ROWS : +ROWS, :] <- fi, oob=skip" in text
    assert "smem sc: f32[BM, BN] pad 4" in text  # a buffer the multiply does not read keeps its layout


@pytest.mark.parametrize(("problem", "kernel"), [("kmeans-assign", "assign"), ("knn", "topk")])
def test_the_chain_from_the_naive_schedule_reaches_wgmma(problem: str, kernel: str) -> None:
    """naive --tensorize--> one role with mma.sync --warp-specialize--> TMA producer + consumer --wgmma-->
    consumer warpgroups: each step's first application, the last one checked against the oracle."""
    path = PROBLEMS / problem.replace("-", "_") / "schedules" / "naive.cake"
    module = parse(path.read_text(encoding="utf-8"), str(path))
    reg = plugins.registry()
    for name in ("tensorize", "warp-specialize"):
        module = reg.get("tactics", name).apply(module, _target(), reg.get("tactics", name).applications(
            module, _target())[0])  # fmt: skip
    role = next(r.name for r in module.kernel(kernel).roles if r.name != "producer")
    out = _rewritten(module, f"{kernel}.{role}")
    _passes(problem, out)
    text = _body(out, kernel)
    assert "accumulate=0" in text and "fill acc" not in text and f"role {role} warps" in text and "per 4" in text


# --- where the precondition refuses ---


def test_refused_on_a_target_without_wgmma() -> None:
    """b200 has TMA and mbarriers (the input verifies there) but no wgmma."""
    module = _kmeans()
    assert verify_source(print_module(module), "w2.cake", _target("b200"), plugins.registry()).ok
    assert [s.role.name for s in sites(module.kernel("assign"))] == ["main"]
    assert _tactic().applications(module, _target("b200")) == []


def test_refused_on_k_chunked_operands() -> None:
    """Centroids in [BN, BK] chunks: the x rows are read from column ``kc * BK + kk * 16``, which one
    wgmma over the buffer's whole k extent cannot express (CR119)."""
    module = _kmeans(**{
        "const BM = 128, BN = 128, S = 2, WM = 4, WN = 2": "const BM = 128, BN = 128, BK = 32, S = 2, WM = 4, WN = 2\n"
                                                            "  const KC = D / BK",
        "smem cs: T[S][BN, D]": "smem cs: T[S][BN, BK]",
        "    let NC = cdiv(K, BN)\n    pipe.acquire": "    let NC = cdiv(K, BN) * KC\n    pipe.acquire",
        "tma.load cs[s] <- c[b, kt * BN : +BN, :]": "tma.load cs[s] <- c[b, kt / KC * BN : +BN, kt % KC * BK : +BK]",
        "    let NC = cdiv(K, BN)\n    pipe.wait": "    let NC = cdiv(K, BN) * KC\n    pipe.wait",
        "      fill acc, value=0.0\n      pipe.wait s <- cring": "      pipe.wait s <- cring",
        "for kk in 0 .. D / 16:": "for kk in 0 .. BK / 16:",
        "xs[xb][:, kk * 16 : +16]": "xs[xb][:, kt % KC * BK + kk * 16 : +16]",
        "      argmin.update": "      if kt % KC == KC - 1:\n        argmin.update",
        "oob=skip\n      pipe.release cring": "oob=skip\n        fill acc, value=0.0\n      pipe.release cring",
        "    fill bi, value=-1\n": "    fill bi, value=-1\n    fill acc, value=0.0\n",
        "base=kt * BN": "base=kt / KC * BN",
        "c_sq[b, kt * BN : +BN]": "c_sq[b, kt / KC * BN : +BN]",
    })  # fmt: skip
    _passes("kmeans-assign", module)
    assert sites(module.kernel("assign")) == []
    assert _tactic().applications(module, _target()) == []


def test_refused_on_operands_written_by_cp_async() -> None:
    """The single-role whole-D form (ldmatrix from buffers cp.async fills: the tensorize tactic's output
    from naive.cake), and the stored Ampere schedules of both problems: cp.async does not write swizzled
    rows."""
    path = PROBLEMS / "kmeans_assign" / "schedules" / "naive.cake"
    naive = parse(path.read_text(encoding="utf-8"), str(path))
    tensorize = plugins.registry().get("tactics", "tensorize")
    module = tensorize.apply(naive, _target(), tensorize.applications(naive, _target())[0])
    _passes("kmeans-assign", module)
    assert "cp.async" in _body(module, "assign") and "mma.sync" in _body(module, "assign")
    assert sites(module.kernel("assign")) == []
    for problem, schedule in (("kmeans-assign", "ampere"), ("knn", "fused_topk"), ("kmeans-assign", "hopper")):
        path = PROBLEMS / problem.replace("-", "_") / "schedules" / f"{schedule}.cake"
        assert _tactic().applications(parse(path.read_text(encoding="utf-8"), str(path)), _target()) == []


def test_refused_below_64_rows_a_warpgroup() -> None:
    """64 rows over two warpgroups leave 32 each: no m64 instruction covers them (not offered, though
    the site is well-formed)."""
    module = _kmeans(**{"const BM = 128,": "const BM = 64,"})
    _passes("kmeans-assign", module)
    assert [s.role.name for s in sites(module.kernel("assign"))] == ["main"]
    assert _tactic().applications(module, _target()) == []
    out = _tactic().apply(module, _target(), Application("wgmma", "assign.main"))
    assert not verify_source(print_module(out), "refused.cake", _target(), plugins.registry()).ok
