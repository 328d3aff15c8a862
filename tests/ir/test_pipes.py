"""The pipe construct in the IR: its text round-trips, and the type checker derives its barriers, stages,
parities and bytes (``cake_core.ir.pipes``) or refuses what the derivation cannot follow (CK011)."""

from __future__ import annotations

import pytest

from cake_core.convert import converter
from cake_core.ir import nodes as n
from cake_core.ir.hashing import structural_hash
from cake_core.ir.parser import parse
from cake_core.ir.pipes import PRODUCER, counter, holders
from cake_core.ir.printer import expr, print_module

KERNEL = """\
kernel k(x: global bf16[N, 64], c: global bf16[K, 64], q: global f32[K], out: global f32[N, 64])
  domain N >= 1, N % 64 == 0, K >= 1
  const S = 3, BN = 64
  grid (t) over (N / 64)
  cta warps 12
  smem xs: bf16[1][64, 64] swizzle 128B
  smem cs: bf16[S][BN, 64] swizzle 128B
  smem cq: f32[S][BN]
  pipe xring: producer -> consumers of xs
  pipe cring: producer -> consumers of cs, cq
  role producer warps 0..4:
    pipe.acquire xb <- xring
    tma.load xs[xb] <- x[t * 64 : +64, :]
    for kt in 0 .. cdiv(K, BN):
      pipe.acquire s <- cring
      tma.load cs[s] <- c[kt * BN : +BN, :]
      tma.load cq[s] <- q[kt * BN : +BN]
  role consumers warps 4..12 per 4:
    reg acc: f32[64, BN] layout wgmma_acc
    pipe.wait xb <- xring
    for kt in 0 .. cdiv(K, BN):
      pipe.wait s <- cring
      wgmma acc <- xs[xb], cs[s]^T, accumulate=0
      wgmma.commit
      wgmma.wait pending=0
      pipe.release cring[s]
    pipe.release xring[xb]
    store out[t * 64 : +64, :] <- acc
"""


def test_the_text_round_trips_through_the_printer_and_json() -> None:
    module = parse(KERNEL, "k.cake")
    (k,) = module.kernels
    assert [(p.name, p.producers, p.consumers, p.buffers) for p in k.pipes] == [
        ("xring", ("producer",), ("consumers",), ("xs",)), ("cring", ("producer",), ("consumers",), ("cs", "cq")),
    ]  # fmt: skip
    again = parse(print_module(module), "k.cake")
    assert again == module
    c = converter()
    assert c.structure(c.unstructure(module), n.Module) == module


def test_names_do_not_change_the_structural_hash() -> None:
    renamed = KERNEL.replace("cring", "ring_c").replace(" s <-", " st <-").replace("[s]", "[st]").replace(
        "consumers", "math")
    assert structural_hash(parse(renamed, "r.cake")) == structural_hash(parse(KERNEL, "k.cake"))
    other = KERNEL.replace("of cs, cq", "of cq, cs")
    assert structural_hash(parse(other, "o.cake")) != structural_hash(parse(KERNEL, "k.cake"))


def test_the_checker_derives_barriers_stages_parities_and_bytes(check) -> None:
    checked = check(KERNEL, "k.cake")
    assert checked.ok, [str(d) for d in checked.diagnostics]
    (model,) = checked.models.values()
    assert model.pipes["cring"].stages == 3 and model.pipes["cring"].stage_bytes == 64 * 64 * 2 + 64 * 4
    full, empty = model.barriers["cring.full"], model.barriers["cring.empty"]
    assert (full.stages, full.count, empty.stages, empty.count) == (3, 1, 3, 256)  # every consumer thread
    acquire = next(t for t in model.ops if t.op.name == "pipe.acquire" and t.ins[0].name == "cring")
    assert acquire.attr("bytes") == n.Num(64 * 64 * 2 + 64 * 4)  # the two copies into the stage
    text = {k: expr(v) for k, v in acquire.derived.items() if k != "bytes"}
    mine = counter("cring", PRODUCER)  # the producer counts its acquires (a role on both sides counts apart)
    assert text == {"stage": f"{mine} % S", "parity": f"({mine} / S + 1) % 2"}
    wait = next(t for t in model.ops if t.op.name == "pipe.wait" and t.ins[0].name == "cring")
    assert expr(wait.attr("parity")) == f"{counter('cring')} / S % 2"
    binds = [(b.name, b.counter) for b in wait.prim.binds(wait)]
    assert binds == [("s", False), (counter("cring"), True)]
    copy = next(t for t in model.ops if t.op.name == "tma.load" and t.outs[0].name == "cs")
    bar = copy.operand("bar")
    assert (bar.name, bar.stage) == ("cring.full", n.Name("s"))  # derived, at the copy's line
    assert bar.expr.loc == copy.op.loc


def test_stage_names_in_scope_say_which_pipe_and_side() -> None:
    (k,) = parse(KERNEL, "k.cake").kernels
    held = holders(k, frozenset({"pipe.acquire", "pipe.wait"}))
    wgmma = next(op for _, op in n.walk_ops(k) if op.name == "wgmma")
    assert {name: (h.pipe, h.side) for name, h in held[id(wgmma)].items()} == {
        "xb": ("xring", "consumer"), "s": ("cring", "consumer"),
    }  # fmt: skip


BAD = {
    "unknown role": (KERNEL.replace("pipe xring: producer -> consumers", "pipe xring: producer -> readers"),
                     "names `readers`, which is not a role"),
    "stage counts": (KERNEL.replace("smem cq: f32[S][BN]", "smem cq: f32[2][BN]"), "different stage counts"),
    "unstaged": (KERNEL.replace("smem xs: bf16[1][64, 64]", "smem xs: bf16[64, 64]"), "must be rings of stages"),
    "two producer instances": (KERNEL.replace("role producer warps 0..4:", "role producer warps 0..4 per 2:"),
                               "one producer role of one instance"),
    "buffer in two pipes": (KERNEL.replace("of cs, cq", "of cs, cq, xs"), "belongs to pipe `xring` already"),
    "explicit barrier on a pipe copy": (
        KERNEL.replace("barrier", "").replace("  pipe xring", "  barrier b: mbarrier count 1\n  pipe xring")
        .replace("tma.load xs[xb] <- x[t * 64 : +64, :]", "tma.load xs[xb] <- x[t * 64 : +64, :], b"),
        "completes on the pipe's own barrier"),
    "copy in a nested block": (
        KERNEL.replace("      tma.load cq[s] <- q[kt * BN : +BN]",
                       "      if kt > 0:\n        tma.load cq[s] <- q[kt * BN : +BN]"),
        "inside a nested block"),
    "acquire on the consumer side": (KERNEL.replace("pipe.wait s <- cring", "pipe.acquire s <- cring"),
                                     "runs on the producer side of pipe `cring`"),
    "release without a stage": (KERNEL.replace("pipe.release cring[s]", "pipe.release cring"), "name it"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_what_the_derivation_cannot_follow_is_refused(check, case: str) -> None:
    text, words = BAD[case]
    checked = check(text, "bad.cake")
    errors = [d for d in checked.diagnostics if d.is_error]
    assert any(d.code == "CK011" and words in d.message for d in errors), [str(d) for d in errors]


def test_a_copy_outside_a_pipe_still_needs_its_barrier(check) -> None:
    text = """\
kernel k(x: global bf16[64, 64])
  grid (t) over (1)
  cta warps 4
  smem xs: bf16[64, 64] swizzle 128B
  role all warps 0..4:
    tma.load xs <- x[0 : +64, :]
"""
    errors = [d for d in check(text).diagnostics if d.is_error]
    assert [d.code for d in errors] == ["CK005"] and "needs a barrier" in errors[0].message
