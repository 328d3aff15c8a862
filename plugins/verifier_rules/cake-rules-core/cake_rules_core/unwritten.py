"""CR127: reads of shared memory (a buffer, a ring stage, a region of it) that no operation of the CTA
writes, found on the protocol's traces at its sample sizes."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from cake_core.diagnostics.diagnostic import Diagnostic, Label
from cake_core.ir.model import KernelModel
from cake_core.location import Loc
from cake_core.verify.protocol import protocol
from cake_core.verify.rule import Rule, RuleContext
from cake_core.verify.traces import SampleRun, SharedAccess, Step

from cake_rules_core.findings import Finding


class ReadOfUnwrittenShared(Rule):
    name = "CR127"
    slug = "read-of-unwritten-shared"
    summary = "a read of shared memory (a buffer, a ring stage, a region) that no operation of the CTA writes"
    explanation = """
## What it does
Follows every role instance of one CTA through its loops at the sample sizes of the protocol
simulation (`cake_core.verify.protocol`: the least admissible sizes, and sizes grown until every ring
has wrapped) and collects, per shared buffer, every element that any instance writes — synchronous
stores and asynchronous copies (`cp.async`, `tma.load`) alike, before or after the read. A read of an
element that no write of the whole CTA covers, anywhere in the traces, is reported at the read's
operand with the sizes and loop indices it was seen at: a ring stage no copy fills (the consumer reads
`cs[s]` where the producer fills another buffer), a buffer declared and read but never written, or a
region of it never written (rows 0..63 written, rows 0..127 read).

Ordering is not this rule's business: a read that comes before the write that fills it is CR115's
finding. A clean result means every element read is written by someone at the sample sizes; one
CTA is simulated (every grid variable 0), and a sample the simulation skips (too many operations,
an expression without a value) is not looked at.

## Why is this bad?
Shared memory is not initialized: the read sees whatever the previous kernel on that SM left there.
The result is wrong, differently from run to run, and no synchronization can fix it.

## Example
```
  role producer warps 0..4:
    tma.load xs[s] <- x[t * 64 : +64, :], full[s]
  role consumer warps 4..8:
    mbarrier.wait full[s], parity=0
    wgmma acc <- cs[s], xs[s]^T            # `cs` is never filled
```

## Use instead
```
    tma.load cs[s] <- c[t * 64 : +64, :], full[s]
```
"""

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        seen: set[Loc] = set()
        for run in protocol(ctx.model).runs:
            if run.skipped is not None:
                continue
            for f in unwritten_reads(ctx.model, run):
                if f.loc not in seen:
                    seen.add(f.loc)
                    yield self.at(f.loc, f.message, label=f.label, secondary=f.secondary, notes=f.notes, help=f.help)


def unwritten_reads(model: KernelModel, run: SampleRun) -> Iterator[Finding]:
    """A finding for each read operand (the first of its steps) that reads an element of shared
    memory that no step of ``run`` writes."""
    written: dict[str, np.ndarray] = {}
    writers: dict[str, list[Step]] = {}
    for step in run.steps():
        for x in step.accesses:
            if x.write and x.buffer in model.smem:
                grid = _grid(model, written, x.buffer)
                box = _slices(x, grid.shape)
                if box is not None:
                    grid[box] = True
                mine = writers.setdefault(x.buffer, [])
                if all(w.op is not step.op for w in mine):
                    mine.append(step)
    done: set[Loc] = set()
    for step in run.steps():
        for x in step.accesses:
            loc = x.effect.operand.expr.loc
            if not x.read or x.buffer not in model.smem or loc in done:
                continue
            grid = _grid(model, written, x.buffer)
            box = _slices(x, grid.shape)
            if box is None:
                continue  # nothing inside the buffer (an index past it is CR108's finding)
            missing = ~grid[box]
            if missing.any():
                done.add(loc)
                yield _finding(model, run, step, x, box, missing, writers.get(x.buffer, []))


def _grid(model: KernelModel, written: dict[str, np.ndarray], buf: str) -> np.ndarray:
    """The buffer's written elements so far (the stage first for a ring)."""
    grid = written.get(buf)
    if grid is None:
        info = model.smem[buf]
        shape = ((info.stages,) if info.stages is not None else ()) + tuple(int(v) for v in info.shape)
        grid = written[buf] = np.zeros(shape, dtype=bool)
    return grid


def _slices(x: SharedAccess, shape: tuple[int, ...]) -> tuple[slice, ...] | None:
    """The access's box clipped to the buffer; None where nothing of it is inside."""
    if len(x.box) != len(shape):
        return None
    out = []
    for (lo, hi), ext in zip(x.box, shape, strict=True):
        lo, hi = max(lo, 0), min(hi, ext)
        if lo >= hi:
            return None
        out.append(slice(lo, hi))
    return tuple(out)


def _region(buf: str, staged: bool, lows: list[int], highs: list[int]) -> str:
    """``cs[1][0..127, 0..63]``: a box of a buffer in words (bounds inclusive)."""
    dims = [str(lo) if lo == hi else f"{lo}..{hi}" for lo, hi in zip(lows, highs, strict=True)]
    if staged:
        return f"`{buf}[{dims[0]}][{', '.join(dims[1:])}]`"
    return f"`{buf}[{', '.join(dims)}]`"


def _finding(model: KernelModel, run: SampleRun, step: Step, x: SharedAccess, box: tuple[slice, ...],
             missing: np.ndarray, writers: list[Step]) -> Finding:  # fmt: skip
    where = np.argwhere(missing)
    lows = [int(v) + s.start for v, s in zip(where.min(axis=0), box, strict=True)]
    highs = [int(v) + s.start for v, s in zip(where.max(axis=0), box, strict=True)]
    staged = model.smem[x.buffer].stages is not None
    region = _region(x.buffer, staged, lows, highs)
    count, total = int(missing.sum()), missing.size
    at = f" (at {step.where})" if step.where else ""
    if writers:
        what = (f"{count} of the {total} elements it reads, within {region}, are written by no operation of the "
                "CTA")  # fmt: skip
        secondary = tuple(
            Label(w.op.loc, f"`{w.op.name}` writes `{x.buffer}`, not all of what is read") for w in writers[:2]
        )  # fmt: skip
    else:
        what = f"no operation of the CTA writes `{x.buffer}` at all ({region} is read)"
        secondary = ()
    notes = [] if run.sample.note is None else [run.sample.note]
    return Finding(
        "CR127", x.effect.operand.expr.loc,
        f"`{step.op.name}` reads shared buffer `{x.buffer}`{at}, but {what}{run.sample.when}",
        label="reads shared memory nothing writes",
        secondary=secondary,
        notes=tuple(notes),
        help=f"fill {region} before it is read (a copy or a `store` into it), or read only what is written",
    )  # fmt: skip
