"""CR101: hardware features a kernel needs and its target lacks."""

from __future__ import annotations

from collections.abc import Iterator

from cake_core.diagnostics.diagnostic import Diagnostic, Label
from cake_core.location import Loc
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
    Feature("tcgen05"): "use `wgmma` (sm_90a) or `mma.sync`, or choose an sm_100a target",
    Feature("tmem"): "keep accumulators in registers, or choose an sm_100a target",
    Feature.FP8: "convert to bf16 or f16 first, or choose an sm_89+ target",
}


#: how many operations after the first a finding shows as labelled spans (the rest it lists in a note)
SHOWN = 3


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

A kernel gets one error per missing feature, at the first operation that needs it, saying how many
operations need it in all; the next few are labelled, the rest listed by line. Features that exactly
the same operations need (a TMA copy needs `tma` and `mbarrier.tx`) share one error.

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
        have = t.features
        # what needs each missing feature, in source order: (where, what)
        needs: dict[Feature, list[tuple[Loc, str]]] = {}
        cta = ctx.kernel.cta
        if cta.cluster and Feature.CLUSTERS not in have:
            dims = [ctx.const(e) for e in cta.cluster]
            if any(d is None or d > 1 for d in dims):
                shape = " x ".join("?" if d is None else str(d) for d in dims)
                needs[Feature.CLUSTERS] = [(cta.loc, f"kernel `{ctx.kernel.name}`'s cluster of {shape} CTAs")]
        for of in facts(ctx.model).ops:  # each operation's features, asked of its primitive once per model
            if of.features <= have:
                continue
            for f in sorted(of.features - have):
                needs.setdefault(f, []).append((of.typed.op.loc, f"`{of.typed.op.name}`"))
        # one finding per missing feature; features needed by exactly the same operations share one
        by_places: dict[tuple[tuple[Loc, str], ...], list[Feature]] = {}
        for f, places in needs.items():
            by_places.setdefault(tuple(places), []).append(f)
        for places, missing in by_places.items():
            yield self._missing(ctx, places, sorted(missing))

    def _missing(self, ctx: RuleContext, places: tuple[tuple[Loc, str], ...], missing: list[Feature]) -> Diagnostic:
        """One finding at the first of ``places`` that need ``missing``, counting and showing the others."""
        t = ctx.target
        names = ", ".join(f"`{f.value}`" for f in missing)
        plural = "features" if len(missing) > 1 else "feature"
        has = ", ".join(sorted(f.value for f in t.features)) or "none"
        (loc, what), rest = places[0], places[1:]
        notes = [f"`{t.name}` ({t.nvrtc_arch}) has: {has}"]
        if rest:
            more = f"{len(rest)} more operation{'s' if len(rest) > 1 else ''}"
            subject = f"{what} and {more} in kernel `{ctx.kernel.name}` need"
            label = f"the first of {len(places)} needing {names}"
            unshown = rest[SHOWN:]
            if unshown:
                lines: dict[str, list[str]] = {}
                for where, name in unshown:
                    lines.setdefault(name, []).append(str(where.line))
                notes.append(f"{len(unshown)} more not shown: " + ", ".join(
                    f"{name} (line{'s' if len(ls) > 1 else ''} {', '.join(ls)})" for name, ls in lines.items()
                ))  # fmt: skip
        else:
            subject, label = f"{what} needs", f"needs {names}"
        return self.at(
            loc,
            f"{subject} the {plural} {names}, which target `{t.name}` ({t.nvrtc_arch}, {t.architecture}) "
            f"does not have",
            label=label,
            secondary=[Label(where, f"also needs {names}") for where, _ in rest[:SHOWN]],
            notes=notes,
            help="; ".join(ALTERNATIVES.get(f, f"choose a target with `{f.value}`") for f in missing),
        )
