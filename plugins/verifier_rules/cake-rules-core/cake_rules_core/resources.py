"""CR102, CR103, CR104: what one CTA asks of an SM — shared memory, threads and warps, registers.

Every figure comes from the kernel model of one specialization (shared-memory layout with byte sizes
and offsets, warps, roles, register tiles with their layouts) and every limit from the target record.
Compile-time sizes are fixed by the specialization, so these checks hold over the whole shape domain
by running once per specialization.
"""

from __future__ import annotations

from collections.abc import Iterator

from cake_core.diagnostics.diagnostic import Diagnostic, Label
from cake_core.ir.model import RegInfo, RoleInfo
from cake_core.verify.rule import Rule, RuleContext


def _kib(n: int) -> str:
    return f"{n / 1024:.1f} KiB"


# ---------------------------------------------------------------------------------------------------
# CR102
# ---------------------------------------------------------------------------------------------------


class SmemOverLimit(Rule):
    name = "CR102"
    slug = "smem-over-limit"
    summary = "a kernel needs more shared memory than the target grants one block (or its promised occupancy)"
    explanation = """
## What it does
Adds up a kernel's shared memory under every specialization — each buffer's rows (with their
padding) times its stages, aligned as declared (swizzled buffers to their swizzle atom), then the
mbarriers — and compares it with the target's opt-in maximum per block
(`smem_per_block_optin`: 163 KiB on sm_80, 99 KiB on sm_86/sm_89, 227 KiB on sm_90/sm_100).
Because buffer shapes depend on finite-set sizes (`D in {64, 128, 256}`), the sum is checked for each
of them: a schedule must fit *anywhere* in its shape domain. When the kernel promises an occupancy
(`cta warps 8 occupancy 2`), that many CTAs, each with the runtime's reservation per block, must
also fit the shared memory of one SM.

## Why is this bad?
A launch asking for more dynamic shared memory than the opt-in maximum fails outright
(`cudaErrorInvalidValue`), and a promised occupancy that shared memory cannot give makes the compiler
budget registers for CTAs that will never be resident.

## Example
```
# target: a10 (99 KiB per block)
kernel k(x: global bf16[N, D], out: global i32[N])
  domain N >= 1, D in {64, 128, 256}
  smem xs: bf16[128, D] pad 8          # 66 KiB at D=256
  smem cs: bf16[4][128, 32] pad 8      # 40 KiB: 106 KiB in all at D=256
```

## Use instead
```
  smem cs: bf16[3][128, 32] pad 8      # 98 KiB at D=256; or narrow the domain to D in {64, 128}
```
"""

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        m, t = ctx.model, ctx.target
        largest = sorted(m.smem.values(), key=lambda s: -s.bytes)[:3]
        secondary = tuple(
            Label(s.decl.loc, f"`{s.decl.name}`: {s.bytes} bytes"
                  + (f" ({s.stages} stage{'s' if s.stages != 1 else ''} of {s.stage_bytes})" if s.stages else ""))
            for s in largest
        )  # fmt: skip
        barrier_bytes = sum(8 * (b.stages or 1) for b in m.barriers.values())
        notes = ["buffers are laid out in declaration order, each aligned to at least 16 bytes"
                 + (f"; mbarriers add {barrier_bytes} bytes" if barrier_bytes else "")]  # fmt: skip
        if m.smem_bytes > t.smem_per_block_optin:
            yield self.at(
                ctx.kernel.loc,
                f"kernel `{ctx.kernel.name}` needs {m.smem_bytes} bytes of shared memory, over the "
                f"{t.smem_per_block_optin}-byte maximum per block on `{t.name}` ({t.nvrtc_arch})",
                label=f"{m.smem_bytes} bytes ({_kib(m.smem_bytes)}) > {t.smem_per_block_optin} "
                f"({_kib(t.smem_per_block_optin)})",
                secondary=secondary,
                notes=notes,
                help="use fewer stages, smaller tiles or less padding, or narrow the shape domain",
            )
            return
        occupancy = m.occupancy or 0
        need = occupancy * (m.smem_bytes + t.smem_reserved_per_block)
        if occupancy > 1 and m.smem_bytes and need > t.smem_per_sm:
            yield self.at(
                ctx.kernel.cta.loc,
                f"`occupancy {occupancy}` promises {occupancy} resident CTAs of kernel `{ctx.kernel.name}` per "
                f"SM, which need {need} bytes of shared memory; an SM of `{t.name}` has {t.smem_per_sm}",
                label=f"{occupancy} x ({m.smem_bytes} + {t.smem_reserved_per_block} reserved) = {need} bytes",
                secondary=secondary,
                notes=(*notes, f"the runtime reserves {t.smem_reserved_per_block} bytes per resident CTA"),
                help=f"promise at most occupancy {t.smem_per_sm // (m.smem_bytes + t.smem_reserved_per_block)}, "
                "or use less shared memory",
            )  # fmt: skip


# ---------------------------------------------------------------------------------------------------
# CR103
# ---------------------------------------------------------------------------------------------------


class ThreadsAndWarps(Rule):
    name = "CR103"
    slug = "threads-and-warps"
    summary = "a CTA with too many threads, or warp roles that leave the CTA, overlap, or leave warps idle"
    explanation = """
## What it does
Checks the CTA's shape against the target and the roles against the CTA:
- the CTA's threads (`cta warps W`, 32 threads each) are at most the target's
  `max_threads_per_block` (1024 on every NVIDIA target);
- every role's warp range `a..b` is non-empty and inside `0..W`;
- no two roles claim the same warp;
- every warp of the CTA belongs to some role.

## Why is this bad?
A launch with more than 1024 threads per block fails. A role whose warps are outside the CTA never
runs, so whatever it produces never arrives and its consumers wait forever. Two roles on one warp
would both run on it, one after the other, and each role's barrier counts and fragment layouts assume
its warps are its own. A warp in no role is launched with nothing to do, yet every CTA-wide barrier
counts it.

## Example
```
  cta warps 8
  role producer warps 0..4:
    ...
  role consumer warps 2..8:           # warps 2 and 3 belong to both roles
    ...
```

## Use instead
```
  cta warps 8
  role producer warps 0..2:
    ...
  role consumer warps 2..8:
    ...
```
"""

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        m, t = ctx.model, ctx.target
        cta = ctx.kernel.cta
        if m.threads > t.max_threads_per_block:
            yield self.at(
                cta.warps.loc if cta.warps.loc.line else cta.loc,
                f"kernel `{ctx.kernel.name}` launches {m.warps} warps ({m.threads} threads) per CTA, over the "
                f"{t.max_threads_per_block} threads a block can have on `{t.name}`",
                label=f"{m.threads} threads",
                help=f"use at most {t.max_threads_per_block // 32} warps per CTA",
            )
        roles = sorted(m.roles, key=lambda r: r.start)
        for r in m.roles:
            if r.stop <= r.start:
                yield self.at(r.role.loc, f"role `{r.role.name}` has an empty warp range {r.start}..{r.stop}",
                              label="no warps", help="write the range half-open, first warp first: `warps 0..4`")  # fmt: skip
            elif r.start < 0 or r.stop > m.warps:
                yield self.at(
                    r.role.loc,
                    f"role `{r.role.name}` runs on warps {r.start}..{r.stop}, outside the CTA's warps 0..{m.warps}",
                    label=f"warps {r.start}..{r.stop}",
                    secondary=(Label(cta.loc, f"the CTA has {m.warps} warps"),),
                    help=f"raise `cta warps` to {r.stop}, or move the role inside 0..{m.warps}",
                )
        for i, a in enumerate(roles):
            for b in roles[i + 1 :]:
                lo, hi = max(a.start, b.start), min(a.stop, b.stop)
                if lo < hi:
                    later, earlier = (b, a) if (b.role.loc.line, b.role.loc.col) > (a.role.loc.line, a.role.loc.col) else (a, b)
                    yield self.at(
                        later.role.loc,
                        f"roles `{earlier.role.name}` and `{later.role.name}` both claim warps {lo}..{hi}",
                        label=f"warps {later.start}..{later.stop}",
                        secondary=(Label(earlier.role.loc, f"warps {earlier.start}..{earlier.stop}"),),
                        help="give each warp to one role",
                    )  # fmt: skip
        covered = [False] * m.warps
        for r in m.roles:
            for w in range(max(r.start, 0), min(r.stop, m.warps)):
                covered[w] = True
        idle = _ranges([w for w, c in enumerate(covered) if not c])
        if idle:
            words = ", ".join(f"{a}..{b}" for a, b in idle)
            yield self.at(
                cta.loc,
                f"warps {words} of kernel `{ctx.kernel.name}`'s {m.warps} belong to no role",
                label=f"{m.warps} warps",
                secondary=tuple(Label(r.role.loc, f"warps {r.start}..{r.stop}") for r in m.roles),
                help=f"lower `cta warps`, or give warps {words} to a role",
            )


def _ranges(ws: list[int]) -> list[tuple[int, int]]:
    """Consecutive runs of warp numbers as half-open ranges."""
    out: list[tuple[int, int]] = []
    for w in ws:
        if out and out[-1][1] == w:
            out[-1] = (out[-1][0], w + 1)
        else:
            out.append((w, w + 1))
    return out


# ---------------------------------------------------------------------------------------------------
# CR104
# ---------------------------------------------------------------------------------------------------

#: 32-bit registers per thread assumed beyond the register tiles: thread, warp and lane indices, tile
#: base addresses, loop counters and predicates. A deliberately small figure: the bound stays a lower
#: bound (compiled kernels use more).
OVERHEAD = 16


class RegisterBudget(Rule):
    name = "CR104"
    slug = "register-budget"
    summary = "register tiles that need more registers than a thread, a role's budget or the block can have"
    explanation = f"""
## What it does
Estimates a lower bound of the 32-bit registers each thread of a role needs: the sum over the role's
register tiles of their per-thread storage (from each tile's layout: an `mma_acc(WM, WN)` tile of
`[M, N]` f32 holds `M/WM/16 * N/WN/8 * 4` registers per thread) plus {OVERHEAD} for indices, addresses
and loop counters. A register tile lives from its declaration to the end of its role, so all of a
role's tiles are held at once. It is an error when that bound is over
- the target's registers per thread (`regs_per_thread`, 255);
- the role's own budget (`role consumers warps 4..12 regs 232`);
- the registers of one block (`regs_per_block`, 64K): every thread of the CTA is allocated the same
  count at launch, so the CTA needs `threads x max(per-thread bound)` (with role budgets, each role's
  threads times its budget);
- with `occupancy k`, `k` times that per SM (`regs_per_sm`).

## Why is this bad?
Over 255 the compiler spills to local memory, usually a large slowdown; under a role budget the same
happens after `setmaxnreg`; over the block's registers the launch fails with too many resources
requested. The estimate is a lower bound, so a finding here is certain; a kernel that passes may still
spill (the compile stage's resource report tells).

## Example
```
  cta warps 4
  role main warps 0..4:
    reg acc: f32[128, 256] layout mma_acc(2, 2)     # 256 registers per thread for this tile alone
```

## Use instead
```
  cta warps 8
  role main warps 0..8:
    reg acc: f32[128, 256] layout mma_acc(4, 2)     # 128 per thread over twice the warps
```
"""

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        m, t = ctx.model, ctx.target
        bounds: dict[str, int] = {}
        for info in m.roles:
            tiles = sorted((r for r in m.regs.values() if r.role == info.role.name),
                           key=lambda r: -r.layout.regs_per_thread)  # fmt: skip
            need = sum(r.layout.regs_per_thread for r in tiles) + OVERHEAD
            bounds[info.role.name] = need
            yield from self._per_thread(ctx, info, tiles, need)
        if not m.roles:
            return
        alloc = _allocation(m.roles, bounds)
        total = sum(info.warps * 32 * alloc[info.role.name] for info in m.roles)
        budgets = any(info.regs is not None for info in m.roles)
        how = (" + ".join(f"{info.warps * 32} x {alloc[info.role.name]}" for info in m.roles) if budgets
               else f"{m.threads} threads x {max(alloc.values())}")  # fmt: skip
        cta = ctx.kernel.cta
        if total > t.regs_per_block:
            yield self.at(
                cta.loc,
                f"kernel `{ctx.kernel.name}` needs at least {total} registers per CTA, over the "
                f"{t.regs_per_block} of one block on `{t.name}`",
                label=how,
                notes=("a lower bound: register tiles plus a small overhead; the compiler uses more",),
                help="use fewer warps or smaller register tiles, or split tiles over more warps",
            )
        elif m.occupancy and m.occupancy > 1 and m.occupancy * total > t.regs_per_sm:
            yield self.at(
                cta.loc,
                f"`occupancy {m.occupancy}` promises {m.occupancy} resident CTAs of kernel `{ctx.kernel.name}`"
                f" per SM, which need at least {m.occupancy * total} registers; an SM of `{t.name}` has "
                f"{t.regs_per_sm}",
                label=f"{m.occupancy} x ({how})",
                notes=("a lower bound: register tiles plus a small overhead; the compiler uses more",),
                help=f"promise at most occupancy {max(t.regs_per_sm // total, 1)}",
            )

    def _per_thread(self, ctx: RuleContext, info: RoleInfo, tiles: list[RegInfo], need: int) -> Iterator[Diagnostic]:
        t = ctx.target
        name = info.role.name
        labels = tuple(Label(r.decl.loc, f"`{r.decl.name}`: {r.layout.regs_per_thread} per thread") for r in tiles[:3])
        parts = f"{need - OVERHEAD} in register tiles + {OVERHEAD} overhead"
        note = "a lower bound: every register tile of a role is live until the role ends"
        if need > t.regs_per_thread:
            yield self.at(
                info.role.loc,
                f"role `{name}` needs at least {need} registers per thread ({parts}), over the "
                f"{t.regs_per_thread} a thread can have on `{t.name}`",
                label=f"at least {need} registers per thread",
                secondary=labels,
                notes=(note,),
                help="split the tiles over more warps (a wider warp grid), or make them smaller",
            )
        elif info.regs is not None and need > info.regs:
            yield self.at(
                info.role.loc,
                f"role `{name}` is budgeted {info.regs} registers per thread, but needs at least {need} "
                f"({parts})",
                label=f"`regs {info.regs}`",
                secondary=labels,
                notes=(note,),
                help=f"raise the budget to at least {-(-need // 8) * 8}, or shrink the role's tiles",
            )


def _allocation(roles: list[RoleInfo], bounds: dict[str, int]) -> dict[str, int]:
    """Registers per thread each role is allocated: its budget where it has one; otherwise the launch
    count, which must cover every role without a budget."""
    free = [bounds[r.role.name] for r in roles if r.regs is None]
    launch = max(free) if free else 0
    return {r.role.name: (r.regs if r.regs is not None else launch) for r in roles}
