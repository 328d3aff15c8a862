"""CR115-CR117: shared-memory hazards of multi-stage pipelines, and missing async-proxy fences.

The findings come from :mod:`cake_rules_core.protocol_findings`: CR115 and CR116 from the replay of
every role instance's trace against the others with the mbarrier semantics, CR117 from each
instance's trace alone.
"""

from __future__ import annotations

from cake_rules_core.protocol_findings import ProtocolRule

_REPLAY = """
The roles of one CTA are replayed against each other at two size assignments
(`cake_core.verify.protocol`): the lowest-numbered role instance that can run goes first, asynchronous
copies land as late as possible, and happens-before is tracked with vector clocks through barrier
phases, CTA barriers and asynchronous groups, as the interpreter does — without computing values.
A finding names the sizes, the loop indices and the other side of the conflict.
"""


class ReadBeforeFull(ProtocolRule):
    name = "CR115"
    slug = "read-before-full"
    summary = "a read of a shared buffer (a ring stage) that no wait orders after the write that fills it"
    explanation = f"""
## What it does
Every read of shared memory must be ordered after the write that produced the data: for a stage that
an asynchronous copy fills, by a wait on the barrier stage the copy completes, for the phase it
completes; for data another role wrote with ordinary stores, by a barrier phase or CTA barrier the
writer completes afterwards. The rule reports a read with no such order — no wait at all, a wait on
another stage of the ring (a stage index off by one), or a wait from an earlier iteration.
{_REPLAY}
## Why is this bad?
The read sees whatever the stage held before: the previous round's tile, or a half-written one. The
result is wrong only sometimes, depending on timing, and differs between GPUs.

## Example
```
      mbarrier.wait cfull[g % S], parity=(g / S) % 2
      wgmma acc <- xs, cs[(g + 1) % S]^T                 # the next stage: not waited for
```

## Use instead
```
      mbarrier.wait cfull[g % S], parity=(g / S) % 2
      wgmma acc <- xs, cs[g % S]^T
```
"""


class OverwriteBeforeEmpty(ProtocolRule):
    name = "CR116"
    slug = "overwrite-before-empty"
    summary = "a write to a shared buffer (a ring stage) before every reader of its previous contents released it"
    explanation = f"""
## What it does
Every write to shared memory must be ordered after the earlier reads and writes of the same bytes by
other role instances (and after the asynchronous operations that still read or write them): a
producer refilling a ring stage waits on the stage's empty barrier for the phase its consumers
complete after their last read. The rule reports a write with no such order — a missing empty wait, a
wait on the wrong stage, or consumers that release a stage before the asynchronous operation reading
it (a `wgmma` in flight) has finished.

The finding blames the cause. A refill of a ring stage with no wait on the ring's empty barrier since
the writer last filled that stage is reported at the refill, with the readers' read and their
release as secondary labels and the wait it needs spelled out; the empty barrier of a ring is the
ring of barriers as deep as the buffer that no copy completes and that the buffer's readers arrive
on (where two qualify, the one they arrive on at the stage index they read: `xs[xb]`, `xempty[xb]`).
Where the writer did wait, and a reader arrived on the empty barrier before its read, the early
arrival is named as the cause.
{_REPLAY}
## Why is this bad?
The producer's copy lands in a stage a consumer is still reading: the consumer mixes two tiles. Like
every race it passes most runs and fails some.

## Example
```
      for kt in 0 .. NC:
        mbarrier.arrive.expect_tx cfull[s], bytes=BN * D * 2
        tma.load cs[s] <- c[b, kt * BN : +BN, :], cfull[s]      # no wait for the slot to empty
```

## Use instead
```
      for kt in 0 .. NC:
        mbarrier.wait cempty[s], parity=(g / S + 1) % 2
        mbarrier.arrive.expect_tx cfull[s], bytes=BN * D * 2
        tma.load cs[s] <- c[b, kt * BN : +BN, :], cfull[s]
```
"""


class MissingProxyFence(ProtocolRule):
    name = "CR117"
    slug = "missing-proxy-fence"
    summary = "a generic-proxy write to shared memory that the async proxy reads, published without a proxy fence"
    explanation = """
## What it does
Finds shared buffers that some operation reads through the async proxy (a declared effect with
`async_proxy`: TMA stores, `wgmma` operands) and that some operation writes through the generic proxy
(ordinary stores, `cp.async`, any effect without `async_proxy`). In the writing role instance, between
such a write and the first point that publishes it — an arrival on a barrier, a CTA barrier, or the
instance's own async-proxy read of the buffer — there must be an async-proxy fence: an operation whose
primitive has no operands and declares `proxy_fence = True` (the core's `fence.proxy_async`). The
instance's loops are followed at concrete sizes, so a fence skipped on some iterations is found.
Writes through `cp.async` are taken at issue; a fence must also follow their `cp.async.wait`, which
this rule does not check.

## Why is this bad?
The generic and the async proxies are separate paths to shared memory. Without
`fence.proxy.async.shared::cta` in the writing thread, a `wgmma` or TMA store that is otherwise ordered
after the write (by a barrier) may still read the old bytes.

## Example
```
    store xs <- v
    bar.sync
    wgmma acc <- xs, cs^T
```

## Use instead
```
    store xs <- v
    fence.proxy_async
    bar.sync
    wgmma acc <- xs, cs^T
```
"""
