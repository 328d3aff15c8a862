"""CR121-CR124: pipes used the way their derived barriers assume.

A `pipe` leaves the compiler to derive its barriers, stage indices, phase parities, arrival counts and
expect-tx bytes (`cake_core.ir.pipes`), so none of those can be written wrong. What remains is how the
roles use it; the findings come from :mod:`cake_rules_core.pipe_findings` (static stage names, and
the simulated traces of `cake_core.verify.protocol`), and each rule here is its documentation and id.
"""

from __future__ import annotations

from cake_rules_core.protocol_findings import ProtocolRule

_HOW = """
The pipe operations are recognised by their effects on the pipe's derived barriers: a wait on its
`full` ring is a consumer's take (`pipe.wait`), a wait on its `empty` ring the producer's acquire
(`pipe.acquire`), an arrival on `empty` a release. Run-time checks follow the roles through their
loops on one CTA at the sizes the barrier rules use (`cake_core.verify.protocol`), and name them.
When a pipe rule finds something, the barrier rules CR111-CR116 say nothing more about the kernel:
their deadlocks and races would be its consequences.
"""


class PipeTripCounts(ProtocolRule):
    name = "CR121"
    slug = "pipe-trip-counts"
    summary = "a pipe's consumers take a different number of stages than its producer fills"
    explanation = f"""
## What it does
Counts, at each simulated size, the stages the producer of every pipe acquires in one CTA and the
stages each instance of each consumer role takes with `pipe.wait`, and reports a pipe where any
consumer instance's count differs from the producer's, with the sizes.
{_HOW}
## Why is this bad?
Every consumer instance takes every stage. A producer that fills more stages than a consumer takes
waits forever for a release that never comes, or leaves copies in flight when the CTA ends; a consumer
that takes more waits forever for a copy that is never issued. Trip counts that agree at one size and
differ at another (a `cdiv` on one side, a floor division on the other) hang only on ragged shapes.

## Example
```
  pipe cring: producer -> consumers of cs
  role producer warps 0..4:
    for kt in 0 .. cdiv(K, BN):          # the last, partial tile too
      pipe.acquire s <- cring
      tma.load cs[s] <- c[kt * BN : +BN, :]
  role consumers warps 4..12 per 4:
    for kt in 0 .. K / BN:               # drops the partial tile
      pipe.wait s <- cring
```

## Use instead
```
    for kt in 0 .. cdiv(K, BN):
      pipe.wait s <- cring
```
"""


class PipeRelease(ProtocolRule):
    name = "CR122"
    slug = "pipe-release"
    summary = "a pipe stage released twice, never released, or released under a name no take bound"
    explanation = f"""
## What it does
Follows each consumer instance through its trace: every stage it takes with `pipe.wait` must be
given back with one `pipe.release` before the instance takes the same stage again (on its next pass
over the ring) or finishes. A release of a stage the instance does not hold (a second release), a
stage taken twice without a release in between, and a stage still held at the end are findings.
Statically, `pipe.release p[s]` must name a stage `s` that a `pipe.wait s <- p` of the same role bound.
{_HOW}
## Why is this bad?
A stage's `empty` barrier completes when every consumer thread has arrived once. A second release
completes the phase early — the producer overwrites a stage another consumer is still reading — or
counts toward the next phase; a missing release leaves the producer waiting forever.

## Example
```
    for kt in 0 .. NC:
      pipe.wait s <- cring
      wgmma acc <- xs[xb][rows, :], cs[s]^T, accumulate=0
      wgmma.wait pending=0
      pipe.release cring[s]
      argmin.update bv, bi <- acc, csq[s], base=kt * BN
      pipe.release cring[s]
```

## Use instead
```
      argmin.update bv, bi <- acc, csq[s], base=kt * BN
      pipe.release cring[s]
```
"""


class PipeCopyUnacquired(ProtocolRule):
    name = "CR123"
    slug = "pipe-copy-unacquired"
    summary = "a copy into a pipe's stage the producer has not acquired"
    explanation = f"""
## What it does
Checks every asynchronous copy into a buffer of a pipe: its stage index must be a name the
producer's `pipe.acquire` bound, in scope where the copy is issued. A fixed stage (`cs[0]`), an index
computed by hand (`cs[kt % S]`) or a stage name of another pipe is a finding.
{_HOW}
## Why is this bad?
`pipe.acquire` waits until the consumers released the stage, and arms its `full` barrier with the
bytes of the copies issued into it; the copies complete on that barrier. A copy into a stage that was
not acquired overwrites data the consumers may still be reading, and its bytes land on a barrier
phase that did not expect them.

## Example
```
    for kt in 0 .. NC:
      pipe.acquire s <- cring
      tma.load cs[kt % S] <- c[b, kt * BN : +BN, :]
```

## Use instead
```
      tma.load cs[s] <- c[b, kt * BN : +BN, :]
```
"""


class PipeStageOutside(ProtocolRule):
    name = "CR124"
    slug = "pipe-stage-outside"
    summary = "a pipe's buffer touched outside a stage the role holds"
    explanation = f"""
## What it does
Checks every other access to a buffer of a pipe. Statically, its stage index must be a name the
role's own take bound — `pipe.wait` for a consumer — not a fixed stage, an index computed by hand,
the whole ring, or a name from another pipe; and only the pipe's producer and consumer roles touch
its buffers. At run time, a consumer instance must hold the stage when it touches it: after the
`pipe.wait` that took it and before the `pipe.release` that gave it back.
{_HOW}
## Why is this bad?
Outside the stages a role holds, nothing orders its access against the producer's copies: a read may
see the stage before its copy landed or after the next copy overwrote it, and a write races with both.

## Example
```
      pipe.wait s <- cring
      wgmma acc <- xs[xb][rows, :], cs[s]^T, accumulate=0
      wgmma.wait pending=0
      pipe.release cring[s]
      argmin.update bv, bi <- acc, csq[s], base=kt * BN    # the stage was released
```

## Use instead
```
      argmin.update bv, bi <- acc, csq[s], base=kt * BN
      pipe.release cring[s]
```
"""


