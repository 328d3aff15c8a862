"""BW101, BW102: how a kernel allocates tensor memory — what fits and in what order, and that every
allocation is freed, by one warp, with the allocation permit given up.

Both follow the PTX ISA's "Tensor Memory Allocation" (9.7.16.1.2) and the instructions of "Tensor
Memory Allocation and Management" (9.7.16.7: ``tcgen05.alloc``, ``tcgen05.dealloc``,
``tcgen05.relinquish_alloc_permit``). The order of operations is each role's program order; where
two roles allocate, their regions are taken as live together (the rules do not replay barriers).
"""

from __future__ import annotations

from collections.abc import Iterator

from cake_core.diagnostics.diagnostic import Diagnostic, Label
from cake_core.ir import nodes as n
from cake_core.ir.model import KernelModel
from cake_core.verify.rule import Rule, RuleContext

from cake_blackwell.flow import Site, columns_of, is_alloc, is_dealloc, is_relinquish, region_of, sites
from cake_blackwell.tmem import COLUMNS, LANES, MIN_COLUMNS, TMEM

ISA = "the PTX ISA, 9.7.16.1.2 \"Tensor Memory Allocation\" and 9.7.16.7 (`tcgen05.alloc`)"


def allocatable(cols: int) -> bool:
    """A column count one ``tcgen05.alloc`` may ask for: a power of two from 32 to 512."""
    return MIN_COLUMNS <= cols <= COLUMNS and not cols & (cols - 1)


def declared_columns(model: KernelModel, name: str) -> tuple[int, int] | None:
    """(lanes, columns over all stages) of a tensor-memory region under the specialization."""
    info = model.mems.get(name)
    if info is None or info.tier != TMEM.value or len(info.shape) < 2:
        return None
    return info.shape[-2], (info.stages or 1) * info.shape[-1]


# ---------------------------------------------------------------------------------------------------
# BW101
# ---------------------------------------------------------------------------------------------------


class TmemCapacity(Rule):
    name = "BW101"
    slug = "tmem-capacity"
    summary = "tensor-memory regions live at once fit 512 columns, each is an allocatable count, sizes never grow"
    explanation = """
## What it does
Checks the tensor memory a kernel allocates against what one CTA has: 128 lanes by 512 columns of
32 bits. Three things, per specialization:

- **capacity**: the columns of the regions allocated and not yet freed (`tcgen05.alloc` without its
  `tcgen05.dealloc` so far) never exceed 512 at any point of a role's program order. A role with
  several instances counts each instance's allocation; regions that different roles allocate are
  counted as live together.
- **granularity**: every `tmem` region is 128 lanes by a power-of-two number of columns from 32 to
  512, all stages together. (For a region that `tcgen05.alloc` names, its type rule says so first;
  this rule covers the declarations it does not see.)
- **order**: in execution order within a CTA, no allocation asks for more columns than an earlier one.

## Why is this bad?
The PTX ISA (9.7.16.1.2 "Tensor Memory Allocation"; 9.7.16.7, `tcgen05.alloc`): "The unit of
allocation and de-allocation is 32 columns", "The number of columns must be a power of 2", nCols
"within the range [32, 512]", and "The number of columns allocated should not increase between any
two allocations in the execution order within the CTA." `tcgen05.alloc` *blocks* until the columns
it asks for are free: a CTA that asks for more than is left waits for itself forever — the kernel
hangs, it does not fail. Nothing of this shows at compile time: the column count is an operand.

## Example
```
# target: b200
  tmem acc: f32[2][128, 256]        # 512 columns
  tmem aux: f32[128, 64]
  role mma warps 0..1:
    tcgen05.alloc acc
    tcgen05.alloc aux               # error: 576 of 512 columns live
```

## Use instead
```
  tmem acc: f32[2][128, 128]        # 256 columns, then 64: 320 live, sizes not growing
```
"""

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        model = ctx.model
        all_sites = sites(model)
        allocated = {region_of(s) for s in all_sites if is_alloc(s)}
        for name, info in model.mems.items():
            shape = declared_columns(model, name)
            if shape is None or name in allocated:
                continue
            lanes, cols = shape
            if lanes != LANES or not allocatable(cols):
                yield self.at(
                    info.decl.loc, f"tensor-memory region `{name}` is {lanes} lanes by {cols} columns; an "
                    f"allocation is {LANES} lanes by a power of two from {MIN_COLUMNS} to {COLUMNS} columns",
                    label="not an allocation", notes=[f"see {ISA}"],
                    help=f"make `{name}` [{LANES}, C] with C (times its stages) one of 32, 64, 128, 256, 512",
                )  # fmt: skip
        yield from self._live(model, all_sites)

    def _live(self, model: KernelModel, all_sites: list[Site]) -> Iterator[Diagnostic]:
        peak_by_role: list[tuple[int, Site, dict[str, tuple[int, Site]]]] = []
        for info in model.roles:
            live: dict[str, tuple[int, Site]] = {}
            peak: tuple[int, Site, dict[str, tuple[int, Site]]] | None = None
            smallest: tuple[int, Site] | None = None
            reported = False
            for s in (s for s in all_sites if s.role is info):
                name, cols = region_of(s), columns_of(s)
                if name is None or cols is None:
                    continue
                if is_alloc(s):
                    if smallest is not None and cols > smallest[0]:
                        prev = smallest[1]
                        yield self.at(
                            s.loc, f"`{name}` ({cols} columns) is allocated after `{region_of(prev)}` "
                            f"({smallest[0]} columns): successive allocations of a CTA must not ask for more columns",
                            label=f"{cols} > {smallest[0]} columns",
                            secondary=[Label(prev.loc, f"{smallest[0]} columns allocated here first")],
                            notes=[f"see {ISA}: \"The number of columns allocated should not increase between any "
                                   "two allocations in the execution order within the CTA\""],
                            help=f"allocate `{name}` before `{region_of(prev)}` (the larger region first)",
                        )  # fmt: skip
                    if smallest is None or cols < smallest[0]:
                        smallest = (cols, s)
                    live[name] = (cols * info.instances, s)
                    total = sum(c for c, _ in live.values())
                    if total > COLUMNS and not reported:
                        reported = True
                        yield self._over(s, name, total, live)
                    if peak is None or total > peak[0]:
                        peak = (total, s, dict(live))
                elif is_dealloc(s):
                    live.pop(name, None)
            if peak is not None:
                peak_by_role.append(peak)
        if len(peak_by_role) > 1:
            total = sum(p[0] for p in peak_by_role)
            if total > COLUMNS and all(p[0] <= COLUMNS for p in peak_by_role):
                last = peak_by_role[-1]
                others = {k: v for p in peak_by_role for k, v in p[2].items()}
                yield self._over(last[1], region_of(last[1]) or "?", total, others, roles=True)

    def _over(self, s: Site, name: str, total: int, live: dict[str, tuple[int, Site]], roles: bool = False) -> Diagnostic:
        others = [(k, c, site) for k, (c, site) in live.items() if k != name]
        listed = ", ".join(f"`{k}` ({c})" for k, c, _ in others)
        where = "regions other roles allocate" if roles else "regions still allocated"
        return self.at(
            s.loc, f"allocating `{name}` while {listed} {'are' if len(others) > 1 else 'is'} live needs {total} of "
            f"the {COLUMNS} tensor-memory columns a CTA has",
            label=f"{total} columns live",
            secondary=[Label(site.loc, f"`{k}`: {c} columns") for k, c, site in others],
            notes=[f"tensor memory is {LANES} lanes by {COLUMNS} columns per CTA ({ISA}); `tcgen05.alloc` waits "
                   "until the columns are free, so a CTA asking for more than is left hangs",
                   f"counted: {where}; a role of several instances allocates once per instance"],
            help="deallocate a region before allocating the next, or give the regions fewer columns or stages",
        )  # fmt: skip


# ---------------------------------------------------------------------------------------------------
# BW102
# ---------------------------------------------------------------------------------------------------


class TmemLifecycle(Rule):
    name = "BW102"
    slug = "tmem-dealloc-and-relinquish"
    summary = "every tensor-memory allocation is freed by one warp before the kernel exits, and the permit relinquished"
    explanation = """
## What it does
Follows each `tmem` region through each role's program order:

- a region that is allocated (`tcgen05.alloc`) is deallocated (`tcgen05.dealloc`) by the kernel, after
  the allocation, under the same loops and conditions (so as often), and no operation of the role
  that freed it touches it afterwards;
- a region some operation uses (`tcgen05.mma`, `tcgen05.ld`, a deallocation) is allocated;
- allocation and deallocation are issued by one warp of the CTA: a role of a single instance (a role
  of several instances would allocate once per instance). Every thread of that warp executes them:
  Cake's conditions never depend on the thread, so a role's warp runs them whole;
- a kernel that allocates gives up its allocation permit (`tcgen05.relinquish`) and allocates nothing
  after giving it up (in the role that gave it up).

## Why is this bad?
The PTX ISA (9.7.16.1.2 "Tensor Memory Allocation"): "All of the Tensor Memory that was allocated in
a kernel, must be explicitly deallocated before the kernel exits"; the driver reports a leak as
`CUDA_ERROR_TENSOR_MEMORY_LEAK` once the kernel has run, an error the context does not survive.
9.7.16.7 (`tcgen05.alloc`, `tcgen05.dealloc`, `tcgen05.relinquish_alloc_permit`): with
`.cta_group::1` "one warp from the CTA must perform the allocation and de-allocation"; the
instructions are `.sync.aligned`, so every thread of that warp must execute them; and "it is illegal
for a CTA to perform tcgen05.alloc after any of its constituent threads execute
tcgen05.relinquish_alloc_permit". Relinquishing tells the hardware the CTA will allocate no more, so
another CTA's allocation on the same SM need not wait for it.

## Example
```
# target: b200
  role all warps 0..4:
    tcgen05.alloc acc               # error: `acc` is never deallocated
    tcgen05.relinquish
    ...
```

## Use instead
```
    tcgen05.fence.before
    bar.sync
    tcgen05.fence.after
    tcgen05.dealloc acc             # once every access to `acc` is done
```
"""

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        all_sites = sites(ctx.model)
        allocs = [s for s in all_sites if is_alloc(s)]
        deallocs = [s for s in all_sites if is_dealloc(s)]
        relinquishes = [s for s in all_sites if is_relinquish(s)]
        for s in allocs + deallocs + relinquishes:
            if s.role.instances > 1:
                yield self.at(
                    s.loc, f"`{s.op.name}` runs in role `{s.role.role.name}`, which has {s.role.instances} instances: "
                    "each would issue it, where one warp of the CTA must",
                    label=f"{s.role.instances} instances", notes=[f"see {ISA}: with `.cta_group::1` one warp from the "
                                                                  "CTA performs the allocation and de-allocation"],
                    help="issue it from a role of one instance (give allocation its own role, or drop `per`)",
                )  # fmt: skip
        yield from self._pairs(all_sites, allocs, deallocs)
        if allocs and not relinquishes:
            last = allocs[-1]
            yield self.at(
                last.loc, f"kernel `{ctx.kernel.name}` allocates tensor memory but never relinquishes its allocation "
                "permit", label="the last allocation",
                notes=["until a CTA relinquishes the permit, another CTA's allocation on the SM may wait for it"],
                help="write `tcgen05.relinquish` after the last `tcgen05.alloc`",
            )  # fmt: skip
        for r in relinquishes:
            for a in allocs:
                if a.role is r.role and (a.order > r.order or (r.in_loop and _shares_loop(a, r))):
                    yield self.at(
                        a.loc, f"`{region_of(a)}` is allocated after the allocation permit was relinquished",
                        label="allocates without the permit", secondary=[Label(r.loc, "permit relinquished here")],
                        notes=[f"see {ISA}: it is illegal for a CTA to allocate after relinquishing"],
                        help="move `tcgen05.relinquish` after the last `tcgen05.alloc`, outside any loop",
                    )  # fmt: skip

    def _pairs(self, all_sites: list[Site], allocs: list[Site], deallocs: list[Site]) -> Iterator[Diagnostic]:
        regions = {region_of(s) for s in allocs + deallocs} | {
            e.operand.name for s in all_sites for e in s.tmem_effects() if e.operand.name
        }
        for name in sorted(r for r in regions if r):
            mine_a = [s for s in allocs if region_of(s) == name]
            mine_d = [s for s in deallocs if region_of(s) == name]
            users = [s for s in all_sites if s not in mine_a and any(e.operand.name == name for e in s.tmem_effects())]
            if not mine_a:
                first = users[0] if users else mine_d[0]
                yield self.at(
                    first.loc, f"`{first.op.name}` uses tensor-memory region `{name}`, which is never allocated",
                    label="no `tcgen05.alloc` for it", notes=["the region's address is what `tcgen05.alloc` leaves in its handle"],
                    help=f"write `tcgen05.alloc {name}` (and `tcgen05.relinquish`) before its first use",
                )  # fmt: skip
                continue
            if not mine_d:
                yield self.at(
                    mine_a[0].loc, f"`{name}` is allocated but never deallocated: the kernel exits holding its columns",
                    label="never freed", notes=[f"see {ISA}: every allocation is deallocated before the kernel exits"],
                    help=f"write `tcgen05.dealloc {name}` once every access to it is done (after `tcgen05.fence.before`, "
                    "a CTA barrier and `tcgen05.fence.after`)",
                )  # fmt: skip
                continue
            a, d = mine_a[0], mine_d[-1]
            paired = a.same_context(d) or (not a.context and not d.context)
            if len(mine_a) != len(mine_d) or not paired:
                yield self.at(
                    d.loc, f"`{name}` is deallocated under other loops or conditions than it is allocated, so not as "
                    "often", label="not paired with its allocation", secondary=[Label(a.loc, "allocated here")],
                    help="allocate and deallocate a region once each, in the same block (or both at the top of roles)",
                )  # fmt: skip
            elif a.role is d.role and d.order < a.order:
                yield self.at(
                    d.loc, f"`{name}` is deallocated before it is allocated", label="freed first",
                    secondary=[Label(a.loc, "allocated here")], help="deallocate after the last use",
                )  # fmt: skip
            else:
                late = [s for s in users if s.role is d.role and s.order > d.order and s.same_context(d)]
                if late:
                    yield self.at(
                        late[0].loc, f"`{late[0].op.name}` touches `{name}` after it was deallocated",
                        label="use after free", secondary=[Label(d.loc, "deallocated here")],
                        help="deallocate after the last access",
                    )  # fmt: skip


def _shares_loop(a: Site, r: Site) -> bool:
    """Whether an allocation sits inside a loop that also holds the relinquish (so a later iteration
    allocates after it)."""
    loops = {id(s) for s, _ in r.context if isinstance(s, n.For)}
    return any(id(s) in loops for s, _ in a.context)
