"""BW103, BW104, BW105: who may touch tensor memory, and when — the lane quarter of each warp, the
accumulator read only once the commit covering its `tcgen05.mma` was waited on, and tcgen05 only on
a target that has it."""

from __future__ import annotations

from collections.abc import Iterator

from cake_core.diagnostics.diagnostic import Diagnostic, Label
from cake_core.ir import nodes as n
from cake_core.ir.primitive import Effect
from cake_core.verify.rule import Rule, RuleContext

from cake_blackwell.flow import Site, async_writes, completes, lane_moves, reads_tmem, sites, waits_on
from cake_blackwell.tmem import LANES, TCGEN05, TMEM_FEATURE

WARP_LANES = 32
QUARTERS = LANES // WARP_LANES


# ---------------------------------------------------------------------------------------------------
# BW103
# ---------------------------------------------------------------------------------------------------


class TmemLaneQuarter(Rule):
    name = "BW103"
    slug = "tmem-lane-quarter"
    summary = "a warp moves tensor memory only in the 32 lanes of its quarter: warp w reaches lanes 32*(w % 4)"
    explanation = """
## What it does
Checks every warp-level move between tensor memory and registers (`tcgen05.ld`, and any primitive
that reads or writes a `tmem` operand without being the tensor core's own collective operation)
against the lanes its warp may reach. With the `.32x32b` shape the lowering uses, warp `i` of a role
instance moves lanes `row0 + 32*i .. row0 + 32*i + 31` of the operand (`row0` its first row). The
warp's index in the CTA, `w`, allows only lanes `32*(w % 4) .. 32*(w % 4) + 31`. So a role whose
instances do not start at a multiple of four warps, or have more than four warps, reaches lanes it
may not.

## Why is this bad?
The PTX ISA (9.7.16.8.1 "Access restrictions"): "The Tensor Memory of a CTA is divided into 4 equal
chunks such that each warp of a warpgroup in the CTA can access a chunk of the Tensor Memory" —
warp 0 of a warpgroup lanes 0-31, warp 1 lanes 32-63, warp 2 lanes 64-95, warp 3 lanes 96-127; the
`.32x32b` shape moves 32 lanes per warp (9.7.16.2.3 "Data Movement Shape"). A warp outside its
quarter reads another warp's rows or faults; it compiles either way, and the CPU interpreter, which
has no lanes, cannot see it.

## Example
```
# target: b200
  cta warps 5
  role mma warps 0..1:
    ...
  role epi warps 1..5:              # warps 1, 2, 3, 4: quarters 1, 2, 3, 0
    tcgen05.ld d <- acc             # error: warp 1 would read lanes 0..31
```

## Use instead
```
  role epi warps 0..4:              # a whole warpgroup: warp i reads lanes 32*i..
    ...
  role mma warps 4..5:
```
"""

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        for s in sites(ctx.model):
            for e in lane_moves(s):
                bad = self._first_bad(ctx, s, e)
                if bad is not None:
                    yield bad
                    break

    def _first_bad(self, ctx: RuleContext, s: Site, e: Effect) -> Diagnostic | None:
        role = s.role
        row0 = _row_start(ctx, e)
        if row0 is None:
            return None
        for k in range(role.instances):
            for i in range(role.per):
                w = role.start + k * role.per + i
                lo = row0 + WARP_LANES * i
                allowed = WARP_LANES * (w % QUARTERS)
                if lo == allowed and lo + WARP_LANES <= LANES:
                    continue
                verb = "reads" if e.access.value == "read" else "writes"
                nth = f"warp {i} of its instance" if role.per > 1 else "its warp"
                return self.at(
                    s.loc, f"`{s.op.name}` in role `{role.role.name}` {verb} lanes {lo}..{lo + WARP_LANES - 1} of "
                    f"`{e.operand.name}` from warp {w} ({nth}), which reaches only lanes {allowed}..{allowed + WARP_LANES - 1}",
                    label=f"warp {w}: lanes {lo}..{lo + WARP_LANES - 1}",
                    secondary=[Label(role.role.loc, f"warps {role.start}..{role.stop}" + (f" per {role.per}" if role.instances > 1 else ""))],
                    notes=["warp w of a CTA moves only tensor-memory lanes 32*(w % 4)..32*(w % 4)+31 "
                           "(PTX ISA 9.7.16.8.1 \"Access restrictions\")"],
                    help=f"start role `{role.role.name}` at a warp index that is a multiple of 4, with instances of "
                    "at most 4 warps (whole warpgroups): warp i then moves lanes 32*i..",
                )  # fmt: skip
        return None


def _row_start(ctx: RuleContext, e: Effect) -> int | None:
    """The first lane a tensor-memory operand covers (its row slice's start; 0 for all rows)."""
    index = e.operand.index
    if not index:
        return 0
    rows = index[0]
    if isinstance(rows, n.All):
        return 0
    if isinstance(rows, n.Span):
        return ctx.const(rows.start)
    return None


# ---------------------------------------------------------------------------------------------------
# BW104
# ---------------------------------------------------------------------------------------------------


class TmemReadBeforeCommit(Rule):
    name = "BW104"
    slug = "accumulator-read-before-commit"
    summary = "an accumulator is read from tensor memory only after waiting on the commit that covers its mma"
    explanation = """
## What it does
For every read of a tensor-memory region by a warp (`tcgen05.ld`), finds the tensor core's
asynchronous writes of that region (`tcgen05.mma`: a collective primitive whose tensor-memory write
belongs to an asynchronous group; a warp's own `tcgen05.st` is completed by its `tcgen05.wait.st`,
which the interpreter checks), the completions that cover each (every `tcgen05.commit` of the
issuing role after it: a primitive that completes the write's group with a barrier arrival; a commit
covers all the work issued before it, so one releasing a shared-memory stage inside the loop and one
after the loop both do), and checks that the reading role waits on one of their barriers before the read: after the first such
commit in program order when one role does both, before the read in the reader's program order
otherwise. A write that no commit follows is reported too.

## Why is this bad?
`tcgen05.mma` is asynchronous: the instruction returns before the product is in tensor memory, and
only `tcgen05.commit` makes an mbarrier track its completion (the PTX ISA's sections on
`tcgen05.mma` and `tcgen05.commit`, and its tcgen05 memory-consistency rules). A `tcgen05.ld` before the wait reads a partial or stale accumulator: wrong answers,
differently each run, with no error anywhere. The CPU interpreter sees the race when another role
reads; within the issuing role it lands the work at the commit, so only this rule catches a missing
wait there.

## Example
```
# target: b200
    tcgen05.mma acc <- xs, cs^T, accumulate=0
    tcgen05.commit done
    tcgen05.fence.after
    tcgen05.ld d <- acc             # error: `done` was not waited on
```

## Use instead
```
    tcgen05.commit done
    mbarrier.wait done, parity=0
    tcgen05.fence.after
    tcgen05.ld d <- acc
```
"""

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        every = sites(ctx.model)
        writers = [(s, e) for s in every for e in async_writes(s)]
        if not writers:
            return
        for r in every:
            for e in reads_tmem(r):
                found = self._unwaited(every, writers, r, e.operand.name)
                if found is not None:
                    yield found
                    break

    def _unwaited(self, every: list[Site], writers: list[tuple[Site, Effect]], r: Site, region: str | None) -> Diagnostic | None:
        for w, _ in (x for x in writers if x[1].operand.name == region):
            group = w.typed.prim.group or ""
            # every later completion of the group in the issuing role covers the write: a wait on any of them
            commits = [c for c in every if c.role is w.role and c.order > w.order and completes(c, group)]
            if not commits:
                return self.at(
                    r.loc, f"`{r.op.name}` reads `{region}`, which the `{w.op.name}` at line {w.loc.line} writes "
                    "asynchronously with no `tcgen05.commit` after it", label="no completion to wait for",
                    secondary=[Label(w.loc, "written asynchronously here")],
                    help=f"after the `{w.op.name}`, `tcgen05.commit` to an mbarrier; wait on it before this read",
                )  # fmt: skip
            commit = commits[0]
            bars = sorted({b for c in commits for b in completes(c, group)})
            after = commit.order if r.role is w.role else -1
            waited = any(
                s.role is r.role and after < s.order < r.order and set(waits_on(s)) & set(bars) for s in every
            )  # fmt: skip
            if not waited:
                names = " or ".join(f"`{b}`" for b in bars)
                where = "after the commit and " if r.role is w.role else ""
                return self.at(
                    r.loc, f"`{r.op.name}` reads the accumulator `{region}` without waiting on {names}, "
                    f"{'the barrier' if len(bars) == 1 else 'a barrier'} a `tcgen05.commit` covering its `{w.op.name}` "
                    "arrives on", label="may read a partial product",
                    secondary=[Label(w.loc, "the asynchronous write"), Label(commit.loc, f"completes on {names}")],
                    notes=[f"role `{r.role.role.name}` has no wait on {names} {where}before this read"],
                    help=f"wait on {names} (`mbarrier.wait`, or the pipe's wait) and `tcgen05.fence.after` before "
                    f"the `{r.op.name}`",
                )  # fmt: skip
        return None


# ---------------------------------------------------------------------------------------------------
# BW105
# ---------------------------------------------------------------------------------------------------


class Tcgen05Target(Rule):
    name = "BW105"
    slug = "tcgen05-without-target"
    summary = "a role uses tcgen05 or tensor memory on a target that has neither (everything but sm_100a)"
    explanation = """
## What it does
Reports, once per role, a role that issues tcgen05 operations (any operation needing the `tcgen05`
or `tmem` feature) for a target that lacks the feature, and once per region a `tmem` region no role
uses on such a target. The finding sits on the role: the role as written is a Blackwell role (its
accumulator lives in tensor memory, one thread issues the MMA), not one operation to swap. Where
cake-rules-core is installed, CR101 also names each operation's missing feature.

## Why is this bad?
tcgen05 and tensor memory exist only on the arch-specific Blackwell targets (the PTX ISA's target
notes for `tcgen05.*` list `sm_100a` and later `a`/`f` variants, none before); Hopper's `sm_90a` has `wgmma` with the accumulator in registers instead. NVRTC
refuses the kernel for any other target, after Cake has spent a compile on it, and a schedule
written for Blackwell is never a candidate on Hopper.

## Example
```
# target: h200
  role mma warps 4..5:              # error: role `mma` uses tcgen05, which `h200` lacks
    tcgen05.mma acc <- xs, cs^T, accumulate=0
```

## Use instead
```
# target: b200                      # or, for h200: `reg acc: f32[64, N] layout wgmma_acc`, `wgmma`
```
"""

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        t = ctx.target
        missing = {TCGEN05, TMEM_FEATURE} - set(t.features)
        if not missing:
            return
        used: set[str] = set()
        by_role: dict[int, list[Site]] = {}
        for s in sites(ctx.model):
            if set(s.typed.prim.features(s.typed)) & missing:
                by_role.setdefault(id(s.role), []).append(s)
            used.update(e.operand.name for e in s.tmem_effects() if e.operand.name)
        has = ", ".join(sorted(f.value for f in t.features)) or "none"
        for group in by_role.values():
            role = group[0].role
            needs = sorted({f.value for s in group for f in s.typed.prim.features(s.typed)} & {f.value for f in missing})
            names = ", ".join(f"`{x}`" for x in needs)
            ops = sorted({s.op.name for s in group})
            yield self.at(
                role.role.loc, f"role `{role.role.name}` uses {names} ({len(group)} operation"
                f"{'s' if len(group) > 1 else ''}: {', '.join(f'`{o}`' for o in ops)}), which target `{t.name}` "
                f"({t.nvrtc_arch}, {t.architecture}) does not have", label=f"a tcgen05 role on {t.nvrtc_arch}",
                secondary=[Label(s.loc, "needs " + names) for s in group[:3]],
                notes=[f"`{t.name}` ({t.nvrtc_arch}) has: {has}"],
                help="verify it for an sm_100a target (`b200`); on sm_90a accumulate in registers with `wgmma` "
                "(`reg acc: f32[64, N] layout wgmma_acc`) and drop the `tmem` regions",
            )  # fmt: skip
        if TMEM_FEATURE in missing:
            for name, info in ctx.model.mems.items():
                if info.tier == "tmem" and name not in used:
                    yield self.at(
                        info.decl.loc, f"tensor-memory region `{name}` is declared for target `{t.name}` "
                        f"({t.nvrtc_arch}), which has no tensor memory", label="no tensor memory here",
                        notes=[f"`{t.name}` ({t.nvrtc_arch}) has: {has}"], help=f"drop `{name}`, or choose an sm_100a target",
                    )  # fmt: skip
