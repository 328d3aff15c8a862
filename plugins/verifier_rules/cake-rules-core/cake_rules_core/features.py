"""CR101: hardware features a kernel needs and its target lacks."""

from __future__ import annotations

from collections.abc import Iterator

from cake_core.diagnostics.diagnostic import Diagnostic
from cake_core.target import Feature
from cake_core.verify.facts import facts
from cake_core.verify.rule import Rule, RuleContext

#: What to do instead, per feature (the help line of a finding).
ALTERNATIVES: dict[Feature, str] = {
    Feature.CP_ASYNC: "copy through registers with ordinary loads and `store`, or choose an sm_80+ target",
    Feature.LDMATRIX: "read fragments with ordinary shared loads, or choose an sm_75+ target",
    Feature.MMA_SYNC: "compute on CUDA cores, or choose an sm_80+ target",
    Feature.STMATRIX: "write fragments with ordinary shared stores, or choose an sm_90+ target",
    Feature.TMA: "copy tiles with `cp.async` (sm_80+), or choose an sm_90+ target",
    Feature.MBARRIER_TX: "signal completion with plain mbarrier arrivals, or choose an sm_90+ target",
    Feature.CLUSTERS: "drop the `cluster` clause, or choose an sm_90+ target",
    Feature.WGMMA: "use `mma.sync`, or choose an sm_90a target (on sm_100a the warpgroup MMA is `tcgen05`)",
    Feature.SETMAXNREG: "give every role the same register budget, or choose an sm_90a/sm_100a target",
    Feature.TCGEN05: "use `wgmma` (sm_90a) or `mma.sync`, or choose an sm_100a target",
    Feature.TMEM: "keep accumulators in registers, or choose an sm_100a target",
    Feature.FP8: "convert to bf16 or f16 first, or choose an sm_89+ target",
}


class MissingFeature(Rule):
    name = "CR101"
    slug = "missing-feature"
    summary = "an operation or kernel needs a hardware feature the target does not have"
    explanation = """
## What it does
Checks that every hardware feature a kernel relies on is one its target has. Each operation asks its
primitive which features it needs — `prim.features(op)`, which may depend on the operand types (an
fp8 conversion needs `fp8`, a bf16 one nothing) — so primitives from plugins are covered. The kernel
itself needs `clusters` when its `cta` line asks for a cluster of more than one CTA. A target's
features follow its architecture string exactly (`cake targets` lists them).

## Why is this bad?
The instruction does not exist on that architecture: NVRTC rejects the kernel (`wgmma` compiles only
for `sm_90a`; `sm_100a` has `tcgen05` instead), or the launch fails. Finding it here costs nothing;
finding it at compile time costs a compile, and a schedule written for the wrong target is never a
candidate for it.

## Example
```
# target: a100 (sm_80)
kernel k(x: global bf16[N, 64], out: global f32[N])
  domain N >= 1
  grid (t) over (cdiv(N, 128))
  cta warps 4 cluster (2, 1)          # error: `a100` (sm_80) has no thread-block clusters
  ...
```

## Use instead
```
  cta warps 4                         # or verify for `h100`/`h200`, which have clusters
```
"""

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        t = ctx.target
        cta = ctx.kernel.cta
        if cta.cluster:
            dims = [ctx.const(e) for e in cta.cluster]
            if any(d is None or d > 1 for d in dims) and not t.has(Feature.CLUSTERS):
                shape = " x ".join("?" if d is None else str(d) for d in dims)
                yield self._missing(ctx, cta.loc, f"kernel `{ctx.kernel.name}` asks for a cluster of {shape} "
                                    f"CTAs", [Feature.CLUSTERS])  # fmt: skip
        have = t.features
        for of in facts(ctx.model).ops:  # each operation's features, asked of its primitive once per model
            if of.features <= have:
                continue
            missing = sorted(of.features - have)
            yield self._missing(ctx, of.typed.op.loc, f"`{of.typed.op.name}`", missing)

    def _missing(self, ctx: RuleContext, loc, what: str, missing: list[Feature]) -> Diagnostic:  # noqa: ANN001
        t = ctx.target
        names = ", ".join(f"`{f.value}`" for f in missing)
        plural = "features" if len(missing) > 1 else "feature"
        has = ", ".join(sorted(f.value for f in t.features)) or "none"
        return self.at(
            loc,
            f"{what} needs the {plural} {names}, which target `{t.name}` ({t.nvrtc_arch}, {t.architecture}) "
            f"does not have",
            label=f"needs {names}",
            notes=(f"`{t.name}` ({t.nvrtc_arch}) has: {has}",),
            help="; ".join(ALTERNATIVES.get(f, f"choose a target with `{f.value}`") for f in missing),
        )
