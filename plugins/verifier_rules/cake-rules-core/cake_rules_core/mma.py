"""CR107: warp-level tensor-core MMA (``mma.sync``) shapes and element types."""

from __future__ import annotations

from collections.abc import Iterator

from cake_core.diagnostics.diagnostic import Diagnostic, Label
from cake_core.ir import nodes as n
from cake_core.ir.primitive import Operand
from cake_core.ir.printer import expr as text
from cake_core.ir.model import TypedOpImpl
from cake_core.ir.types import DType
from cake_core.verify.rule import Rule, RuleContext

M, N, K = 16, 8, 16  # the m16n8k16 instruction shape for bf16 and f16
#: Input element types of mma.sync m16n8k16 and the names targets list their throughput under.
INPUT_DTYPES = {DType.BF16: "bf16", DType.F16: "fp16"}


class MmaShapeDtype(Rule):
    name = "CR107"
    slug = "mma-shape-dtype"
    summary = "an mma.sync whose per-warp tiles are not whole m16n8k16 instructions, or whose types the target lacks"
    explanation = """
## What it does
Checks every `mma.sync acc <- a, b^T` as the warps will execute it, including when its operands are
slices of larger fragments (`acc[0 : +32, :]`, `a[:, 0 : +16]`):
- each warp's share of the accumulator (the slice divided by the layout's warp grid `mma_acc(WM, WN)`)
  is a whole number of m16n8 tiles, and every slice starts on a fragment boundary;
- the k extent of `a` and `b` is exactly 16 (one k16 step per instruction);
- `a` and `b` hold bf16 or f16, one type for both, and `acc` accumulates in f32;
- the target has tensor-core throughput for that input type.

## Why is this bad?
`mma.sync.aligned.m16n8k16` exists only in that shape: a per-warp tile that is not whole m16n8 tiles,
or a k slice of 8, has no instruction to lower to. The type checker checks the declared fragments;
this rule checks what each instruction receives once fragments are sliced.

## Example
```
    reg acc: f32[64, 64] layout mma_acc(2, 2)
    reg a: bf16[64, 32] layout mma_a(2, 2)
    ...
    mma.sync acc <- a[:, 0 : +8], bt[:, 0 : +8]^T      # a k slice of 8
```

## Use instead
```
    mma.sync acc <- a[:, 0 : +16], bt[:, 0 : +16]^T    # one k16 step; loop over k for more
```
"""

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        for typed in ctx.ops():
            if typed.prim.name != "mma.sync" or not (typed.has("acc") and typed.has("a") and typed.has("b")):
                continue
            acc, a, b = typed.operand("acc"), typed.operand("a"), typed.operand("b")
            yield from self._shape(ctx, typed, acc)
            for o in (a, b):
                if len(o.shape) == 2 and isinstance(o.shape[1], int) and o.shape[1] != K:
                    yield self.at(
                        o.expr.loc,
                        f"`mma.sync` multiplies k16 slices, but `{text(o.expr)}` is {o.shape[1]} wide in k",
                        label=f"k = {o.shape[1]}",
                        help="slice k in steps of 16 (`[:, kk * 16 : +16]`) and issue one `mma.sync` per step",
                    )
                yield from self._starts(ctx, o, (M if o is a else N, K), "fragment")
            yield from self._types(ctx, typed, acc, a, b)

    def _shape(self, ctx: RuleContext, typed: TypedOpImpl, acc: Operand) -> Iterator[Diagnostic]:
        info = ctx.model.regs.get(acc.name or "")
        if info is None or len(acc.shape) != 2 or not all(isinstance(s, int) for s in acc.shape):
            return
        wm, wn = info.layout.warp_grid
        rows, cols = acc.shape  # type: ignore[misc]
        per_warp = (rows / wm, cols / wn)
        if rows % (M * wm) or cols % (N * wn):
            shown = " x ".join(str(int(x)) if x == int(x) else f"{x:g}" for x in per_warp)
            yield self.at(
                acc.expr.loc,
                f"`mma.sync` gives each of the {wm} x {wn} warps a {shown} share of `{text(acc.expr)}`, not a "
                f"whole number of m16n8 tiles",
                label=f"[{rows}, {cols}] over a {wm} x {wn} warp grid",
                secondary=(Label(info.decl.loc, f"`{info.decl.name}` is laid out over {wm} x {wn} warps"),),
                help=f"slice the accumulator in multiples of [{M * wm}, {N * wn}]",
            )
        yield from self._starts(ctx, acc, (M * wm, N * wn), "accumulator")

    def _starts(self, ctx: RuleContext, o: Operand, steps: tuple[int, int], what: str) -> Iterator[Diagnostic]:
        """Slices of a fragment start on fragment boundaries (compile-time starts only)."""
        info = ctx.model.regs.get(o.name or "")
        if info is None:
            return
        wm, wn = info.layout.warp_grid
        if info.layout.name == "mma_a":
            steps = (M * wm, K)
        elif info.layout.name == "mma_b":
            steps = (N * wn, K)
        for d, item in enumerate(o.index[:2]):
            if isinstance(item, n.Span):
                start = ctx.const(item.start)
                if start is not None and start % steps[d]:
                    yield self.at(
                        item.loc,
                        f"the {what} slice `{text(o.expr)}` starts at {start}, inside a fragment (slices start at "
                        f"multiples of {steps[d]} here)",
                        label=f"starts at {start}",
                        help=f"start the slice at a multiple of {steps[d]}",
                    )

    def _types(self, ctx: RuleContext, typed: TypedOpImpl, acc: Operand, a: Operand, b: Operand) -> Iterator[Diagnostic]:
        t = ctx.target
        if a.dtype not in INPUT_DTYPES or a.dtype != b.dtype:
            yield self.at(typed.op.loc, f"`mma.sync` m16n8k16 multiplies bf16 or f16 fragments of one type, not "
                          f"`{a.dtype}` and `{b.dtype}`", label="input types")  # fmt: skip
        elif INPUT_DTYPES[a.dtype] not in t.tensor_tflops:
            yield self.at(
                typed.op.loc,
                f"`mma.sync` on `{a.dtype}` needs tensor-core support for it, which target `{t.name}` "
                f"({t.nvrtc_arch}) does not list",
                label=f"{a.dtype} inputs",
                notes=(f"`{t.name}` has tensor cores for: {', '.join(sorted(t.tensor_tflops)) or 'nothing'}",),
            )
        if acc.dtype is not DType.F32:
            yield self.at(acc.expr.loc, f"`mma.sync` accumulates in f32, not `{acc.dtype}`", label="accumulator type")
