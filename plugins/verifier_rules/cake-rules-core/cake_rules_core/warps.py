"""CR109, CR110: warpgroups — roles that must be whole warpgroups, and per-role register budgets.

On Hopper a *warpgroup* is four consecutive warps starting at a warp index that is a multiple of four.
`wgmma` is issued by a whole warpgroup, and `setmaxnreg` (which the lowering emits for a role's
`regs` budget) must be executed by every warp of a warpgroup alike, so roles that use either are made
of whole warpgroups. The register budgets themselves are checked against what `setmaxnreg` accepts and
what the register file can give.
"""

from __future__ import annotations

from collections.abc import Iterator

from cake_core.diagnostics.diagnostic import Diagnostic, Label
from cake_core.ir.model import KernelModel, RoleInfo
from cake_core.target import Feature, Target
from cake_core.verify.facts import facts, is_warpgroup_wide
from cake_core.verify.rule import Rule, RuleContext

WARPGROUP = 4
SETMAXNREG_MIN, SETMAXNREG_MAX, SETMAXNREG_STEP = 24, 256, 8


def uses_setmaxnreg(role: RoleInfo, target: Target) -> bool:
    """Whether the lowering sets this role's register budget with `setmaxnreg` on ``target``."""
    return role.regs is not None and target.has(Feature.SETMAXNREG)


def entry_registers(model: KernelModel, target: Target) -> int:
    """Registers per thread every warp has at kernel entry under `__launch_bounds__(threads, 1)`: the
    register file split over the CTA's threads, at most 255, rounded down to the allocation unit of 8
    (what the lowering assumes when it chooses between `setmaxnreg.inc` and `.dec`)."""
    return min(target.regs_per_thread, target.regs_per_block // max(model.threads, 1)) // 8 * 8


# ---------------------------------------------------------------------------------------------------
# CR109
# ---------------------------------------------------------------------------------------------------


class WarpgroupAlignment(Rule):
    name = "CR109"
    slug = "warpgroup-alignment"
    summary = "a role that issues warpgroup-wide instructions or sets its registers, not made of whole warpgroups"
    explanation = """
## What it does
Finds the roles that must be made of whole warpgroups and checks that they are: a role is, when
- one of its operations is warpgroup-wide (its primitive needs the `wgmma` feature, or declares
  `warpgroup = True`), or
- it has a register budget (`regs`) on a target with `setmaxnreg`, which the lowering sets per role, or
- it is split into instances of four warps (`per 4`), one per warpgroup.
Such a role starts at a warp whose index is a multiple of 4 and spans a multiple of 4 warps.

## Why is this bad?
A warpgroup is fixed by the hardware: warps 4k..4k+3. `wgmma.mma_async` issued by four warps that
straddle two warpgroups is undefined behaviour, and `setmaxnreg` executed by only some warps of a
warpgroup (the rest belonging to a role with another budget) hangs or corrupts the register
allocation.

## Example
```
  cta warps 10 occupancy 1
  role producer warps 0..2 regs 40:
    ...
  role consumers warps 2..10 per 4 regs 232:        # warps 2..5 are not a warpgroup
    ...
```

## Use instead
```
  cta warps 12 occupancy 1
  role producer warps 0..4 regs 40:
    ...
  role consumers warps 4..12 per 4 regs 232:
    ...
```
"""

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        kf = facts(ctx.model)
        wide: dict[str, str] = {}
        for of in kf.ops:
            if is_warpgroup_wide(of.prim, of.features):
                wide.setdefault(of.role.role.name, of.typed.op.name)
        for info in ctx.model.roles:
            reasons = []
            if info.role.name in wide:
                reasons.append(f"issues `{wide[info.role.name]}`, a warpgroup-wide instruction")
            if uses_setmaxnreg(info, ctx.target):
                reasons.append(f"sets its budget of {info.regs} registers with `setmaxnreg` on `{ctx.target.name}`")
            if info.per == WARPGROUP and info.instances > 1:
                reasons.append("is split into warpgroup instances (`per 4`)")
            if not reasons or info.stop <= info.start:
                continue
            problems = []
            if info.start % WARPGROUP:
                problems.append(f"starts at warp {info.start}")
            if info.warps % WARPGROUP:
                problems.append(f"spans {info.warps} warps")
            if not problems:
                continue
            start = info.start // WARPGROUP * WARPGROUP
            stop = -(-info.stop // WARPGROUP) * WARPGROUP
            yield self.at(
                info.role.loc,
                f"role `{info.role.name}` {' and '.join(reasons)}, so its warps must be whole warpgroups, but it "
                f"{' and '.join(problems)}",
                label=f"warps {info.start}..{info.stop}",
                notes=("a warpgroup is four consecutive warps starting at a multiple of 4",),
                help=f"give the role whole warpgroups, e.g. warps {start}..{stop}, and the warps beside it to "
                "another role",
            )


# ---------------------------------------------------------------------------------------------------
# CR110
# ---------------------------------------------------------------------------------------------------


class SetmaxnregLimits(Rule):
    name = "CR110"
    slug = "setmaxnreg-limits"
    summary = "role register budgets `setmaxnreg` cannot apply: out of range, no register cap, or more than is released"
    explanation = """
## What it does
On a target with `setmaxnreg` (sm_90a, sm_100a) the lowering gives each role with a `regs` budget
that many registers per thread, starting from the count every warp has at entry (the register file
split over the CTA's threads under `__launch_bounds__(threads, 1)`, at most 255, rounded down to 8).
The rule checks that
- every budget is a multiple of 8 in 24..256, what `setmaxnreg` accepts;
- the kernel promises `occupancy 1`, which gives it the register cap at entry that `setmaxnreg`
  needs (and that the lowering computes the entry count from);
- the roles that raise their budget above the entry count take no more registers (budget increase
  times threads) than the roles that lower theirs release: `setmaxnreg.inc` waits until the CTA's pool
  has them. Roles without a budget keep the entry count. The same sum bounds the total over all warps
  by the 64K-register file.

## Why is this bad?
An out-of-range `setmaxnreg` does not assemble. Without a register cap at entry, ptxas ignores
`setmaxnreg` (with a warning) and the budgets are fiction. An increase the pool cannot serve blocks
the warpgroup forever.

## Example
```
  cta warps 12 occupancy 1                       # 168 registers a thread at entry
  role producer warps 0..4 regs 56:              # releases 112 x 128 = 14336
    ...
  role consumers warps 4..12 per 4 regs 232:     # takes 64 x 256 = 16384
    ...
```

## Use instead
```
  role producer warps 0..4 regs 40:              # releases 128 x 128 = 16384
```
"""

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        m, t = ctx.model, ctx.target
        budgeted = [r for r in m.roles if uses_setmaxnreg(r, t)]
        if not budgeted:
            return
        for r in budgeted:
            regs = r.regs or 0
            if regs % SETMAXNREG_STEP or not SETMAXNREG_MIN <= regs <= SETMAXNREG_MAX:
                fixed = min(max(-(-regs // SETMAXNREG_STEP) * SETMAXNREG_STEP, SETMAXNREG_MIN), SETMAXNREG_MAX)
                yield self.at(
                    r.role.regs.loc if r.role.regs is not None and r.role.regs.loc.line else r.role.loc,
                    f"role `{r.role.name}` asks for {regs} registers per thread; `setmaxnreg` takes a multiple of 8 "
                    f"from 24 to 256",
                    label=f"regs {regs}",
                    help=f"use `regs {fixed}`",
                )
        cta = ctx.kernel.cta
        if m.occupancy != 1:
            have = "promises no occupancy" if m.occupancy is None else f"promises `occupancy {m.occupancy}`"
            yield self.at(
                cta.loc,
                f"kernel `{ctx.kernel.name}` gives its roles register budgets with `setmaxnreg`, but {have}: "
                "`setmaxnreg` needs the register cap at entry that `occupancy 1` gives",
                label="no `occupancy 1`",
                secondary=tuple(Label(r.role.loc, f"`regs {r.regs}`") for r in budgeted),
                notes=("the lowering emits `__launch_bounds__(threads, occupancy)` and computes the entry count "
                       "for one CTA per SM",),  # fmt: skip
                help=f"write `cta warps {m.warps} occupancy 1`",
            )
            return
        entry = entry_registers(m, t)
        raised = [(r, ((r.regs or entry) - entry) * r.warps * 32) for r in m.roles if (r.regs or entry) > entry]
        lowered = [(r, (entry - (r.regs or entry)) * r.warps * 32) for r in m.roles if (r.regs or entry) < entry]
        take, give = sum(x for _, x in raised), sum(x for _, x in lowered)
        if take <= give:
            return
        r, _ = max(raised, key=lambda rx: rx[1])
        takes = " + ".join(f"`{x.role.name}` {(x.regs or entry) - entry} x {x.warps * 32}" for x, _ in raised)
        gives = " + ".join(f"`{x.role.name}` {entry - (x.regs or entry)} x {x.warps * 32}" for x, _ in lowered) or "none"
        yield self.at(
            r.role.loc,
            f"the roles raise their budgets by {take} registers in all ({takes}), but the other roles release only "
            f"{give} ({gives}): with {entry} registers a thread at entry, `setmaxnreg.inc` waits forever",
            label=f"`regs {r.regs}`",
            secondary=tuple(Label(x.role.loc, f"`regs {x.regs}`") for x, _ in lowered if x.regs is not None),
            notes=(f"{m.threads} threads x {entry} = {m.threads * entry} registers at entry, of the "
                   f"{t.regs_per_block} of one block",),  # fmt: skip
            help="lower the raised budgets, or lower the others' so they release as much as is taken",
        )
