"""CA103: a CTA a few percent over the shared memory or registers that would let more CTAs share an SM."""

from __future__ import annotations

from collections.abc import Iterator

from cake_core.diagnostics.diagnostic import Diagnostic, Label, Severity
from cake_core.target import Target
from cake_core.verify.rule import Rule, RuleContext

CLIFF = 0.05  # a resource this close above a threshold is reported
REGISTER_UNIT = 256  # registers are allocated to warps in units of 256


def resident(per_cta: int, per_sm: int, target: Target) -> int:
    """CTAs one SM holds when each needs ``per_cta`` of a resource the SM has ``per_sm`` of."""
    if per_cta <= 0:
        return target.max_ctas_per_sm
    return min(per_sm // per_cta, target.max_ctas_per_sm)


def _kib(b: int) -> str:
    return f"{b / 1024:.1f} KiB"


class OccupancyCliff(Rule):
    name = "CA103"
    slug = "occupancy-cliff"
    severity = Severity.WARNING
    summary = "shared memory or registers a few percent over a threshold that halves the CTAs resident per SM"
    explanation = f"""
## What it does
Counts the CTAs one SM can hold by each resource a CTA needs, per specialization: shared memory (the
kernel's bytes plus the runtime's reservation per CTA, against `smem_per_sm`) and registers (when
every role has a `regs` budget, which is then what the CTA is given: threads times budget, in units
of {REGISTER_UNIT} a warp, against `regs_per_sm`). When {CLIFF:.0%} less of a resource would hold at
least twice as many CTAs, the kernel sits just past a cliff, and the warning says how much to give up.
Kernels that promise an occupancy (`cta warps 8 occupancy 1`) have chosen their CTAs per SM and are
left alone.

## Why is this bad?
Resident CTAs are what hides memory latency between barriers. One stage or a few padding bytes too
many halve them — a large loss for a small saving elsewhere, invisible in the source.

## Example
```
# target: h200 (228 KiB per SM, 1 KiB reserved per CTA)
  smem xs: bf16[2][128, 232]                # 116 KiB: one CTA per SM
```

## Use instead
```
  smem xs: bf16[2][128, 224]                # 112 KiB: two CTAs per SM
```
"""

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        m, t = ctx.model, ctx.target
        if m.occupancy is not None:
            return
        cta = ctx.kernel.cta
        if m.smem_bytes:
            need = m.smem_bytes + t.smem_reserved_per_block
            now = resident(need, t.smem_per_sm, t)
            fits = t.smem_per_sm // (2 * now) if now else 0  # bytes a CTA may need for twice as many
            if now >= 1 and fits >= need * (1 - CLIFF) and resident(fits, t.smem_per_sm, t) >= 2 * now:
                less = need - fits
                largest = max(m.smem.values(), key=lambda s: s.bytes, default=None)
                yield self.at(
                    ctx.kernel.loc,
                    f"kernel `{ctx.kernel.name}` needs {need} bytes of shared memory a CTA ({_kib(need)} with the "
                    f"runtime's reservation): {now} CTA(s) fit an SM of `{t.name}`; {less} bytes ({less / need:.1%}) "
                    f"less would fit {2 * now}",
                    label=f"{_kib(need)} a CTA",
                    secondary=(Label(largest.decl.loc, f"`{largest.decl.name}`: {largest.bytes} bytes"),) if largest
                    else (),
                    help=f"shave {less} bytes: a stage, padding, or a narrower tile",
                )  # fmt: skip
        if m.roles and all(r.regs is not None for r in m.roles):
            per_cta = sum(-(-(r.regs or 0) * 32 // REGISTER_UNIT) * REGISTER_UNIT * r.warps for r in m.roles)
            now = resident(per_cta, t.regs_per_sm, t)
            fits = t.regs_per_sm // (2 * now) if now else 0
            if now >= 1 and fits >= per_cta * (1 - CLIFF) and resident(fits, t.regs_per_sm, t) >= 2 * now:
                yield self.at(
                    cta.loc,
                    f"kernel `{ctx.kernel.name}`'s roles are budgeted {per_cta} registers a CTA: {now} CTA(s) fit "
                    f"an SM of `{t.name}`; {per_cta - fits} registers ({(per_cta - fits) / per_cta:.1%}) less would "
                    f"fit {2 * now}",
                    label=f"{per_cta} registers a CTA",
                    secondary=tuple(Label(r.role.loc, f"`regs {r.regs}` x {r.warps * 32} threads") for r in m.roles),
                    help="lower a role's budget by a few registers a thread",
                )
