"""CR131-CR134: thread-block clusters and TMA multicast used the way the hardware launches and completes them.

A kernel whose `cta` line asks for `cluster (C)` runs its CTAs in groups of C consecutive CTAs along the
grid's first variable; `crank` is a CTA's rank in its group. The rules read the kernel's cluster shape,
its grid, its operations' syntax and declared effects (``Effect.cluster``: a multicast write, an arrival
in every CTA; ``Primitive.cluster_barrier``); what depends on sizes and ranks is evaluated at sampled
sizes for every rank (:mod:`cake_rules_core.cluster_facts`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from cake_core.diagnostics.diagnostic import Diagnostic, Label
from cake_core.ir import nodes as n
from cake_core.ir.cluster import CRANK
from cake_core.ir.cluster import cluster_size as ir_cluster_size
from cake_core.ir.exprs import try_int
from cake_core.ir.printer import expr as text
from cake_core.target import Feature
from cake_core.verify.facts import facts
from cake_core.verify.rule import Rule, RuleContext
from cake_core.verify.traces import compiler
from cake_core.verify.verdicts import Status

from cake_rules_core.cluster_facts import (
    is_cluster_barrier, multicasts, reaches, slice_faults, stage_groups, tainted_names,
)  # fmt: skip
from cake_rules_core.rings import release_of

#: the largest cluster every sm_90+ part launches (larger ones need a non-portable opt-in Cake does not ask for)
PORTABLE_CLUSTER = 8
_AXES = ("x", "y", "z")


def cluster_dims(ctx: RuleContext) -> tuple[int | None, ...]:
    """The kernel's cluster extents under this specialization (None where one has no compile-time value)."""
    return tuple(ctx.const(e) for e in ctx.kernel.cta.cluster)


def cluster_size(ctx: RuleContext) -> int:
    """How many CTAs one cluster of the kernel holds (1 without a cluster)."""
    return ir_cluster_size(ctx.kernel, ctx.model.env)


class ClusterShape(Rule):
    name = "CR131"
    slug = "cluster-shape"
    summary = "a cluster shape the launch refuses: an extent below 1, more than 8 CTAs, or a grid it does not divide"
    explanation = """
## What it does
Checks the `cluster (...)` clause of a kernel's `cta` line: every extent is a compile-time integer of
at least 1, the cluster holds at most 8 CTAs (the portable limit; Cake never asks for the non-portable
sizes of 16), no extent is given for a grid dimension the kernel does not have, and every grid extent is
a multiple of the cluster's extent along it, for every size in the shape domain. The grid's extents are
proved multiples where they are affine, else searched for a witness like the other size questions
(`cake_core.verify.domain`); a finding points at the grid line and names the sizes that break it.

## Why is this bad?
A cluster is launched as a whole: the CUDA guide (*Thread Block Clusters*, and `cudaLaunchKernelEx`
with `cudaLaunchAttributeClusterDimension`) requires the grid to be a whole number of clusters along
every dimension, and a cluster of more than 8 CTAs needs `cudaFuncAttributeNonPortableClusterSizeAllowed`.
Otherwise the launch itself fails (`cudaErrorInvalidClusterSize` / an invalid configuration) — at some
shapes only, when the grid is sized from a run-time extent. The PTX ISA (*Cluster of Cooperative Thread
Arrays*, `%cluster_nctaid`) gives the same shape to every cluster of the grid.

The interpreter refuses such a launch too when it runs the kernel at a shape that breaks it; this rule
points at the grid line before any run, for every shape of the domain.

## Example
```
  grid (t, b) over (cdiv(N, BM), B)        # 3 tiles when N = 257 and BM = 128: the third CTA has no peer
  cta warps 12 occupancy 1 cluster (2)
```

## Use instead
```
  grid (t, b) over (2 * cdiv(N, 2 * BM), B)    # whole pairs; the extra CTA's rows are masked
  cta warps 12 occupancy 1 cluster (2)
```
"""

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        k = ctx.kernel
        if not k.cta.cluster or Feature.CLUSTERS not in ctx.target.features:
            return  # no cluster, or one the target cannot launch at all (CR101 says so)
        dims = cluster_dims(ctx)
        bad = False
        for e, d in zip(k.cta.cluster, dims, strict=True):
            if d is None or d < 1:
                bad = True
                what = "has no compile-time value" if d is None else f"is {d}"
                yield self.at(
                    e.loc if e.loc.line else k.cta.loc,
                    f"cluster extent `{text(e)}` of kernel `{k.name}` {what}: every extent is an integer of at least 1",
                    label="not a cluster extent",
                    help="write the cluster's extents as constants of at least 1 (`cluster (2)`)",
                )
        if bad:
            return
        size = math.prod(d for d in dims if d is not None)
        if size > PORTABLE_CLUSTER:
            yield self.at(
                k.cta.loc,
                f"kernel `{k.name}` asks for clusters of {size} CTAs; the portable limit is {PORTABLE_CLUSTER}",
                label=f"{' x '.join(str(d) for d in dims)} = {size} CTAs" if len(dims) > 1 else f"{size} CTAs",
                notes=("larger clusters need a non-portable opt-in that Cake does not make: the launch fails",),
                help=f"use a cluster of at most {PORTABLE_CLUSTER} CTAs",
            )
        grid = k.grid
        for axis, d in enumerate(dims):
            if d == 1:
                continue
            if axis >= len(grid.extents):
                yield self.at(
                    k.cta.loc,
                    f"kernel `{k.name}`'s cluster has extent {d} along {_AXES[axis]}, but its grid has "
                    f"{len(grid.extents)} dimension{'s' if len(grid.extents) != 1 else ''}",
                    label=f"extent {d} along {_AXES[axis]}",
                    secondary=(Label(grid.loc, "the grid"),),
                    help="give the grid that dimension, or drop the extent from the cluster",
                )
                continue
            extent = grid.extents[axis]
            var = grid.vars[axis]
            v = ctx.domain.multiple_of(None, extent, 1, d, f"the extent of `{var}` is")
            if v.status is not Status.VIOLATED or v.witness is None:
                continue
            yield self.at(
                grid.loc,
                f"kernel `{k.name}`'s grid is not a whole number of clusters of {d} along `{var}` "
                f"({_AXES[axis]}){v.witness.when}: {v.witness.what}",
                label=f"`{text(extent)}` must be a multiple of {d}",
                secondary=(Label(k.cta.loc, f"clusters of {d} along {_AXES[axis]}"),),
                notes=("the launch of a clustered kernel fails when its grid is not a whole number of clusters",),
                help=f"round the extent of `{var}` up to a multiple of {d} (`{d} * cdiv(..., {d})`, masking the extra "
                f"CTAs' work), or require sizes that make it one in the domain",
            )


def _elem(name: str, index: tuple[int, ...]) -> str:
    return f"`{name}[{', '.join(str(i) for i in index)}]`"


def _rows(box: tuple[tuple[int, int], ...]) -> str:
    return ", ".join(f"{lo}..{hi - 1}" if hi - lo != 1 else str(lo) for lo, hi in box)


class MulticastMask(Rule):
    name = "CR132"
    slug = "multicast-mask"
    summary = "a multicast copy without a cluster, or ranks' slices that do not tile the stage exactly"
    explanation = """
## What it does
Checks every multicast copy (`tma.load ..., multicast`, or any operation whose shared write reaches
every CTA of the cluster): the kernel must have a cluster of more than one CTA, and the slices the
ranks of the cluster write with it must tile the destination stage — pairwise disjoint, and together
covering every element of it. The slices are evaluated for every rank `crank` in `0 .. C-1` at the
sample sizes of the protocol simulation (the least sizes and sizes grown by the constants the kernel
divides by), with the loops around the copy at their first trip; a finding names the sizes, the element
no rank writes or the two ranks that write one, and each rank's slice.

## Why is this bad?
A multicast copy lands its box at the same shared offset in every CTA of the cluster and completes its
bytes on the barrier at the same offset in every CTA (PTX ISA, *Data Movement: cp.async.bulk.tensor*,
`.multicast::cluster` with a `ctaMask`; CUDA guide, *Distributed Shared Memory* and *TMA multicast*).
Every CTA expects the bytes of every rank's slice: rows no rank copies are never written, so a consumer
reads garbage (or, where the expected bytes count the whole stage, waits for bytes that never come);
rows two ranks copy are written twice and the transaction count overshoots — the phase completes
early or the next one is corrupted. Without a cluster there is no peer: the multicast is an error at
launch, or a plain copy of a slice that leaves the rest of the stage unwritten.

The interpreter sees the consequence when it runs the kernel (a read of unwritten shared memory, a
hang, or a race between ranks); this rule points at the copy for every sampled shape before any run.

## Example
```
  cta warps 12 occupancy 1 cluster (2)
  ...
      tma.load cs[s][crank * (BN / 4) : +BN / 4, :] <- c[b, kt * BN + crank * (BN / 4) : +BN / 4, :], multicast
```

## Use instead
```
      tma.load cs[s][crank * (BN / 2) : +BN / 2, :] <- c[b, kt * BN + crank * (BN / 2) : +BN / 2, :], multicast
```
"""

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        copies = multicasts(ctx.model)
        if not copies:
            return
        size = cluster_size(ctx)
        if size <= 1:
            of, _ = copies[0]
            yield self.at(
                of.typed.op.loc,
                f"`{of.typed.op.name}` multicasts to the CTAs of a cluster, but kernel `{ctx.kernel.name}` has no "
                "cluster of more than one CTA",
                label="a multicast copy",
                secondary=[Label(o.typed.op.loc, "another multicast copy") for o, _ in copies[1:4]],
                help="add `cluster (2)` (or more) to the `cta` line, or drop `multicast` and copy the whole stage",
            )
            return
        comp = compiler(ctx.model)
        for group in stage_groups(ctx.domain, copies):
            fault = slice_faults(ctx.domain, group, size, comp)
            if fault is None:
                continue
            of, e = group[0]
            buf = e.operand.name or ""
            words = fault.sample.when.removeprefix("; seen at ")
            at = f" at {words}" if words else ""
            if fault.overlap is not None:
                where, (r0, r1) = fault.overlap
                who = f"rank {r0} writes" if r0 == r1 else f"ranks {r0} and {r1} both write"
                problem = f"{who} {_elem(buf, where)}" + (" twice" if r0 == r1 else "")
            else:
                problem = f"no rank writes {_elem(buf, fault.hole or ())}"
            copies_words = f"multicast `{of.typed.op.name}`" if len(group) == 1 else f"{len(group)} multicast copies"
            yield self.at(
                e.operand.expr.loc if e.operand.expr.loc.line else of.typed.op.loc,
                f"the {size} ranks' slices of {copies_words} into `{buf}` do not tile its stage{at}: {problem}",
                label=f"the slice each rank copies ({size} ranks)",
                secondary=[Label(o.typed.op.loc, "copies into the same stage") for o, _ in group[1:3]],
                notes=("the slices (start..end per dimension) each rank copies: "
                       + "; ".join(f"rank {r} [{_rows(b)}]" for r, b in fault.boxes)
                       + f"; the stage is [{', '.join(f'0..{x - 1}' for x in ctx.model.smem[buf].shape)}]",),
                help=f"give rank `crank` the `crank`-th of {size} equal slices: start at `crank * (ROWS / {size})` "
                f"with `+ROWS / {size}` rows, in the destination and the source alike",
            )


class MulticastRelease(Rule):
    name = "CR133"
    slug = "multicast-release"
    summary = "a stage filled by multicast copies released before every receiving CTA consumed it"
    explanation = """
## What it does
Finds the stages that multicast copies fill (CR132's copies) and checks that each is handed back to
its writers only when the consumers of **every** CTA of the cluster are done with it:
- in the pipe form, the pipe whose buffers the copies fill is a cluster pipe
  (`pipe cring: producer -> consumers of cs, csq cluster`): its `pipe.release` arrives on the stage's
  empty barrier in every CTA and its empty count is every consumer thread of the cluster;
- in the explicit form, every arrival of the consumers on the ring's empty barrier (the barrier found
  as for CR116: as many stages as the ring, no copy completes on it, the readers arrive on it) carries
  `cluster` (`mbarrier.arrive cempty[s], cluster`), and the barrier's count is the cluster's size times
  the arrivals one CTA's consumers make per phase (`C x` the consumer threads).

## Why is this bad?
Rank `r`'s multicast writes its slice into the stage of every CTA of the cluster, after waiting only on
its *own* CTA's empty barrier. If a CTA's consumers release the stage only locally, a peer whose
consumers are done refills the stage while this CTA's consumers still read it: a race across CTAs that
no barrier of this CTA orders (PTX ISA, *mbarrier.arrive* with `.cluster` scope and
`.shared::cluster` addresses via `mapa`; CUDA guide, *Distributed Shared Memory*). A count of one
CTA's consumers with cluster-wide arrivals completes the phase after the first of the C CTAs is done.

The interpreter finds the race (or a hang) when it runs a cluster at a shape where the CTAs drift
apart; this rule names the pipe or the arrival from the syntax, at every shape. A count that does not
match cluster-wide arrivals is also CR111's finding.

## Example
```
  barrier cempty: mbarrier[S] count 256
  ...
      tma.load cs[s][crank * 64 : +64, :] <- c[b, kt * BN + crank * 64 : +64, :], cfull[s], multicast
  ...
      mbarrier.arrive cempty[s]
```

## Use instead
```
  barrier cempty: mbarrier[S] count 2 * 256
  ...
      mbarrier.arrive cempty[s], cluster
```
"""

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        size = cluster_size(ctx)
        copies = multicasts(ctx.model)
        if size <= 1 or not copies:
            return  # nothing multicast, or no peers (CR132)
        model, kf = ctx.model, facts(ctx.model)
        seen: set[str] = set()
        for of, e in copies:
            buf = e.operand.name or ""
            if buf in seen:
                continue
            seen.add(buf)
            pipe = next((p for p in ctx.kernel.pipes if buf in p.buffers), None)
            if pipe is not None:
                if not pipe.cluster:
                    yield self.at(
                        pipe.loc,
                        f"pipe `{pipe.name}` carries multicast copies into `{buf}` but is not a cluster pipe: a "
                        "release frees the stage in its own CTA only, and a peer's multicast may overwrite it "
                        "while this CTA's consumers still read it",
                        label="not a cluster pipe",
                        secondary=(Label(of.typed.op.loc, f"multicast into `{buf}`"),),
                        help=f"end the pipe's line with `cluster` (`... of {', '.join(pipe.buffers)} cluster`): "
                        "releases then reach every CTA and the empty count is the cluster's consumers",
                    )
                continue
            release = release_of(kf, buf)
            if release is None:
                continue  # no empty barrier to speak of: the protocol rules say what is missing
            local = [(o, a) for o, a in release.arrivals if not a.cluster]
            if local:
                o, _ = local[0]
                yield self.at(
                    o.typed.op.loc,
                    f"`{o.typed.op.name}` releases a stage of `{buf}`, which multicast copies fill, on this "
                    f"CTA's `{release.barrier}` only: a peer may refill the stage before this CTA's consumers "
                    "are done with it",
                    label="arrives in this CTA only",
                    secondary=[Label(of.typed.op.loc, f"multicast into `{buf}`")]
                    + [Label(x.typed.op.loc, "arrives in this CTA only too") for x, _ in local[1:3]],
                    help=f"arrive in every CTA of the cluster (`mbarrier.arrive {release.barrier}[...], cluster`) "
                    f"and count every CTA's consumers in `{release.barrier}`'s count",
                )
                continue
            want = size * _arrivals_per_cta(model, release)
            info = model.barriers[release.barrier]
            if want and info.count != want:
                decl = info.decl
                yield self.at(
                    decl.count.loc if decl.count.loc.line else decl.loc,
                    f"`{release.barrier}` counts {info.count} arrivals a phase, but its consumers arrive on it "
                    f"in all {size} CTAs of the cluster: {size} x {want // size} = {want}",
                    label=f"count {info.count}",
                    secondary=(Label(release.arrivals[0][0].typed.op.loc, "arrives in every CTA of the cluster"),),
                    help=f"count every CTA's consumers: `count {size} * ...` ({want})",
                )


def _arrivals_per_cta(model, release) -> int:  # type: ignore[no-untyped-def]
    """The arrivals one CTA's consumers make on the empty barrier in one phase: for each releasing role,
    its first arrival's count (``THREADS`` = its instance's threads) times its instances; 0 when unknown."""
    total = 0
    counted: set[str] = set()
    for of, e in release.arrivals:
        info = of.role
        if info.role.name in counted:
            continue
        counted.add(info.role.name)
        env = dict(model.env)
        env["THREADS"] = info.per * 32
        one = 1 if e.arrivals is None else try_int(e.arrivals, env)
        if one is None:
            return 0
        total += one * info.instances
    return total


class ClusterBarrierArrivals(Rule):
    name = "CR134"
    slug = "cluster-barrier-arrivals"
    summary = "a cluster barrier that not every thread of every CTA of the cluster reaches equally often"
    explanation = """
## What it does
Checks every `cluster.sync` (any operation whose primitive is a cluster-wide barrier):
- statically, it is not under an `if` whose condition, or in a `for` whose bounds, depend on `crank`
  or `self` (directly or through `let` names and loop variables computed from them): ranks or role
  instances would reach it a different number of times;
- at the sample sizes of the protocol simulation (`SMS` as simulated there, so persistent loops take
  several trips), in the first and in the last cluster of the grid, every role instance of every CTA
  of that cluster reaches the cluster barriers the same number of times — so a `cluster.sync` in a role that only some
  warps play, with no matching one in the other roles, or in a loop whose trip count differs between
  the CTAs of a cluster (a persistent tile loop over an odd tile count), is a finding with the sizes,
  the CTAs and the roles that differ.

Control flow in Cake IR never depends on data, so a role's data cannot steer a barrier.

## Why is this bad?
`barrier.cluster.arrive` + `barrier.cluster.wait` (PTX ISA, *Parallel Synchronization and Communication
Instructions: barrier.cluster*; CUDA guide, *Thread Block Clusters*, `cluster.sync()`) completes when
every non-exited thread of every CTA of the cluster has arrived; the `.aligned` form also requires every
thread of a warp to execute the same instruction. A thread that reaches it fewer times leaves the others
waiting forever (a hang the driver kills), or pairs its arrival with a different barrier of its peers,
so that the ordering the author relied on does not hold.

The interpreter finds the hang when it runs the cluster at a shape that shows it; this rule points at
the barrier for every sampled shape before any run.

## Example
```
  role producer warps 0..4:
    ...
    cluster.sync                 # the consumers never reach it
  role consumers warps 4..12 per 4:
    ...
```

## Use instead
```
  role producer warps 0..4:
    ...
    cluster.sync
  role consumers warps 4..12 per 4:
    ...
    cluster.sync                 # every thread of the CTA, once
```
"""

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        model = ctx.model
        syncs = [(info, s) for info in model.roles for s in n.walk_stmts(info.role.body)
                 if isinstance(s, n.Op) and is_cluster_barrier(model, s)]  # fmt: skip
        if not syncs:
            return
        reported: set[int] = set()
        for info in model.roles:
            steer = tainted_names(info.role.body, frozenset({CRANK, "self"}))
            if not steer:
                continue
            for stmt, inner in _control(info.role.body):
                why = steer.get(id(stmt))
                if why is None:
                    continue
                for s in inner:
                    if isinstance(s, n.Op) and is_cluster_barrier(model, s) and id(s) not in reported:
                        reported.add(id(s))
                        kind = ("an `if` whose condition depends" if isinstance(stmt, n.If)
                                else "a loop whose bounds depend")  # fmt: skip
                        yield self.at(
                            s.loc,
                            f"`{s.name}` in role `{info.role.name}` is under {kind} on `{why}`: "
                            f"{'the ranks of a cluster' if why == CRANK else 'role instances'} may reach it a "
                            "different number of times",
                            label=f"reached depending on `{why}`",
                            secondary=(Label(stmt.loc, f"depends on `{why}`"),),
                            help="reach the cluster barrier unconditionally, the same number of times in every "
                            "thread of every CTA (move it out of the branch or loop)",
                        )
                        break
        if reported:
            return
        size = cluster_size(ctx)
        comp = compiler(model)
        first = {info.role.name: s for info, s in reversed(syncs)}
        for run in reaches(model, size, comp):
            counts = {r.count for r in run}
            if len(counts) <= 1:
                continue
            most = max(run, key=lambda r: r.count)
            least = min(run, key=lambda r: r.count)
            where = first.get(most.role.role.name) or syncs[0][1]
            words = most.sample.when.removeprefix("; seen at ")
            at = f" at {words}" if words else ""
            yield self.at(
                where.loc,
                f"the threads of a cluster reach `{where.name}` a different number of times{at}: "
                f"{most.who} reaches the cluster barriers {_times(most.count)}, {least.who} {_times(least.count)}",
                label=f"reached {_times(most.count)} by role `{most.role.role.name}`",
                notes=("a cluster barrier completes when every thread of every CTA of the cluster arrived: the "
                       "threads that arrive more often wait forever",),
                help="put a matching `cluster.sync` in every role, on paths every CTA of the cluster takes the same "
                "number of times (an idle CTA still walks its tiles' loop)",
            )
            return


def _times(k: int) -> str:
    return "once" if k == 1 else f"{k} times"


def _control(body: tuple[n.Stmt, ...]) -> Iterator[tuple[n.Stmt, list[n.Stmt]]]:
    """Every ``if`` and ``for`` of ``body`` with the statements nested in it, outermost first."""
    for s in n.walk_stmts(body):
        if isinstance(s, n.For):
            yield s, list(n.walk_stmts(s.body))
        elif isinstance(s, n.If):
            yield s, list(n.walk_stmts(s.then)) + list(n.walk_stmts(s.orelse))
