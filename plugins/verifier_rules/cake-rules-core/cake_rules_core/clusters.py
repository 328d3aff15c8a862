"""CR131-CR134: thread-block clusters and TMA multicast used the way the hardware launches and completes them.

A kernel whose `cta` line asks for `cluster (C)` runs its CTAs in groups of C consecutive CTAs along the
grid's first variable; `crank` is a CTA's rank in its group. The rules here read the kernel's cluster
shape, its grid and its operations' syntax and declared effects; the multicast slices are evaluated at
sampled sizes and every rank (:mod:`cake_rules_core.cluster_slices`).
"""

from __future__ import annotations

from collections.abc import Iterator

from cake_core.diagnostics.diagnostic import Diagnostic, Label
from cake_core.ir.printer import expr as text
from cake_core.target import Feature
from cake_core.verify.rule import Rule, RuleContext
from cake_core.verify.verdicts import Status

#: the largest cluster every sm_90+ part launches (larger ones need a non-portable opt-in Cake does not ask for)
PORTABLE_CLUSTER = 8
_AXES = ("x", "y", "z")


def cluster_dims(ctx: RuleContext) -> tuple[int | None, ...]:
    """The kernel's cluster extents under this specialization (None where one has no compile-time value)."""
    return tuple(ctx.const(e) for e in ctx.kernel.cta.cluster)


def cluster_size(ctx: RuleContext) -> int:
    """How many CTAs one cluster holds (1 without a cluster, or where an extent is not known)."""
    size = 1
    for d in cluster_dims(ctx):
        if d is None or d < 1:
            return 1
        size *= d
    return size


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
        size = cluster_size(ctx)
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
