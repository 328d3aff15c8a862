"""CR129-CR130: every element of a kernel's outputs written exactly once, by the grid and its role instances.

The findings come from :mod:`cake_core.verify.coverage`, which walks every CTA of the grid and every
role instance through their global stores at a few concrete sizes (ragged ones, where floor and
ceiling division differ, and ones where persistent loops take several trips), marking each element
of each output with its writer.
"""

from __future__ import annotations

from collections.abc import Iterator

from cake_core.diagnostics.diagnostic import Diagnostic, Label
from cake_core.verify.coverage import coverage
from cake_core.ir.holes import ADVICE, site
from cake_core.verify.samples import Sample
from cake_core.verify.rule import Rule, RuleContext

_HOW = """
The kernel's outputs are the global parameters it writes that its program's launches bind to program
parameters (every written global parameter for a kernel no program launches); program buffers, and
tensors the kernel also reads or updates with atomics, are not outputs. Every CTA of the grid and every
role instance is followed through its loops at concrete sizes — the least sizes, and sizes one and two
tiles plus a part of a tile past them for every size the kernel divides by a constant (`SMS` is 2
unless compiled in) — and each element a store writes is marked; a masked store (`oob=skip`) writes
only in-bounds elements. Samples past 2^20 elements of an output, 1024 CTAs or 20000 stores are skipped.
"""


def _sizes(sample: Sample) -> str:
    return ", ".join(f"{k}={v}" for k, v in sample.sizes) or "every size"


def _element(tensor: str, index: tuple[int, ...]) -> str:
    return f"`{tensor}[{', '.join(str(i) for i in index)}]`"


class OutputCoverageHole(Rule):
    name = "CR129"
    slug = "output-coverage-hole"
    summary = "output elements no CTA or role instance writes for some shape of the domain"
    explanation = f"""
## What it does
Finds elements of a kernel's outputs that no store writes, at some size in the shape domain: a grid
over `N / BM` tiles (floor division) drops the last, partial tile; a persistent loop over a tile count
computed with the wrong division, or stepping past tiles, skips some; a tile loop that stops early
leaves columns unwritten. The finding points at the loop whose variable indexes the unwritten
dimension, else the persistent loop around the stores, else the grid, and names the sizes and the
first unwritten element.
{_HOW}
## Why is this bad?
An unwritten output element holds whatever the memory held before: the result is right on shapes that
are multiples of the tile and silently wrong on the others.

## Example
```
  grid (t, b) over (N / BM, B)
  ...
    store out[b, t * BM : +BM] <- bi, oob=skip
```

## Use instead
```
  grid (t, b) over (cdiv(N, BM), B)
```
"""

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        cov = coverage(ctx.checked, ctx.model)
        for h in cov.holes:
            loc, what = site(ctx.model, h.tensor, h.dims)
            twice = any(o.tensor == h.tensor for o in cov.overlaps)
            yield self.at(
                loc,
                f"{h.missing} of the {h.total} elements of output `{h.tensor}` are never written at "
                f"{_sizes(h.sample)}: the first is {_element(h.tensor, h.index)}",
                label=f"this {what} leaves {_element(h.tensor, h.index)} unwritten",
                notes=(f"other elements of `{h.tensor}` are written twice (CR130): writers that store the same "
                       "elements leave the ones they should store unwritten",) if twice else (),
                help=ADVICE[what],
            )


class OverlappingOutputWrites(Rule):
    name = "CR130"
    slug = "overlapping-output-writes"
    summary = "output elements written by two role instances or two CTAs"
    explanation = f"""
## What it does
Finds elements of a kernel's outputs that two writers store — two role instances of one CTA, or two
CTAs — at some size in the shape domain, even where the values they write are equal: two warpgroups
storing the same rows because the row start does not depend on `self`, a grid larger than the tiles
whose extra CTAs clamp their start onto a tile another CTA writes, a persistent loop whose CTAs take
the same tile. The finding is at the second writer's store, with the first writer's as a secondary
label, both named with their CTA coordinates and role instance. Stores by one instance to the same
elements (a value rewritten) are not findings.
{_HOW}
## Why is this bad?
Two writers of one element race: which value lands depends on timing. Where the values agree the
kernel does twice the stores it needs, and a later change to one writer makes the result depend on
the schedule.

## Example
```
  role consumers warps 4..12 per 4:
    ...
    store out[b, t * BM : +ROWS] <- bi, oob=skip
```

## Use instead
```
    store out[b, t * BM + self * ROWS : +ROWS] <- bi, oob=skip
```
"""

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        cov = coverage(ctx.checked, ctx.model)
        for o in cov.overlaps:
            element = _element(o.tensor, o.index)
            yield self.at(
                o.second.loc,
                f"output element {element} is written by {o.first.words} and by {o.second.words} at "
                f"{_sizes(o.sample)}",
                label=f"{o.second.words} writes {element} again",
                secondary=(Label(o.first.loc, f"{o.first.words} writes it first"),) if o.first.loc != o.second.loc
                else (),
                help="give each CTA and role instance its own elements: offset the store's start by `self` "
                "and size the grid to the tiles",
            )
