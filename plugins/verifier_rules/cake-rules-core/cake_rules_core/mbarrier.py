"""CR111-CR114: the mbarrier protocol — arrival counts, expect-tx bytes, parities, waits that never complete.

The findings come from :mod:`cake_rules_core.protocol_findings`, which reads the simulated traces of
every role instance (:mod:`cake_core.verify.protocol`); each rule here is its documentation and id.
"""

from __future__ import annotations

from cake_rules_core.protocol_findings import ProtocolRule

_HOW = """
The kernel's roles are followed through their loops on one CTA at two size assignments (every size at
its least value, and sizes that make every ring wrap more than once; `cake_core.verify.protocol`
documents how they are chosen), with every barrier action evaluated. A finding names the sizes.
"""


class MbarrierArrivalCount(ProtocolRule):
    name = "CR111"
    slug = "mbarrier-arrival-count"
    summary = "an mbarrier whose declared count differs from the arrivals one of its phases receives"
    explanation = f"""
## What it does
Checks that every mbarrier's `count` is one `mbarrier.init` takes (1 to 2^20 - 1).
Counts, for every stage of every mbarrier, the arrivals each phase receives, read from the operations'
declared barrier effects: a per-thread `mbarrier.arrive` counts the threads of its role instance
(`THREADS`), `per=instance` and `mbarrier.arrive.expect_tx` count one. When one role instance arrives
on a stage, its arrivals fill the phases in program order and each phase must get exactly `count`;
when several do, each arrives once per phase, and the arrivals of the instances that arrive for a
phase must add up to `count`. A stage whose last phase is left short is a finding too.
{_HOW}
## Why is this bad?
A phase completes when its pending count reaches zero. With a count larger than what arrives, the
waiters hang; with a smaller one, the phase completes before the last role is done with the slot (the
producer overwrites data still being read), and the surplus arrivals leak into the next phase.

## Example
```
  barrier cempty: mbarrier[S] count 128 * WG + 1   # two consumer warpgroups give 256 arrivals
  ...
  role consumers warps 4..12 per 4:
    ...
      mbarrier.arrive cempty[s]                    # 128 threads arrive, per instance
```

## Use instead
```
  barrier cempty: mbarrier[S] count 128 * WG
```
"""

    def check(self, ctx):  # type: ignore[no-untyped-def]
        for name, info in ctx.model.barriers.items():
            if not 1 <= info.count <= MAX_MBARRIER_COUNT:
                count = info.decl.count
                yield self.at(
                    count.loc if count.loc.line else info.decl.loc,
                    f"mbarrier `{name}` has count {info.count}; `mbarrier.init` takes 1 to {MAX_MBARRIER_COUNT}",
                    label=f"count {info.count}",
                    help="a phase needs at least one arrival: count the arrivals one phase receives",
                )
                return
        yield from super().check(ctx)


MAX_MBARRIER_COUNT = (1 << 20) - 1  # PTX: the count `mbarrier.init` takes is 1 to 2^20 - 1


class ExpectTxBytes(ProtocolRule):
    name = "CR112"
    slug = "expect-tx-bytes"
    summary = "an expect-tx whose bytes differ from the full box bytes of the copies that complete on that stage"
    explanation = f"""
## What it does
For every `expect_tx` (an `mbarrier.arrive.expect_tx`, or any primitive declaring an expect-tx effect),
adds up the bytes of the asynchronous copies (operations with a `complete_tx` effect on the same
barrier stage) that the same role instance issues in the same iteration — the copies nested in the
same iterations of the loops around the expect-tx, before or after it — and compares. A copy counts
its **full box** bytes (a TMA copy's tile, also where it is partly out of bounds). A copy on a stage no
expect-tx of its role instance announces in that iteration is a finding, as is an expect-tx no copy
answers.
{_HOW}
## Why is this bad?
A phase completes when its arrivals are in **and** its transaction count is back at zero. Expecting
fewer bytes than land lets the phase complete before the last copy does: consumers read a half-filled
stage. Expecting more hangs them forever. TMA always counts the full box, so an expect-tx sized to the
in-bounds part of an edge tile hangs on the edge tile only.

## Example
```
        mbarrier.arrive.expect_tx cfull[s], bytes=BN * D * 2      # forgets the c_sq tile
        tma.load cs[s] <- c[b, kt * BN : +BN, :], cfull[s]
        tma.load csq[s] <- c_sq[b, kt * BN : +BN], cfull[s]
```

## Use instead
```
        mbarrier.arrive.expect_tx cfull[s], bytes=BN * D * 2 + BN * 4
```
"""


class MbarrierParity(ProtocolRule):
    name = "CR113"
    slug = "mbarrier-parity"
    summary = "waits on one barrier stage whose parities do not follow the phases (the use index of the ring)"
    explanation = f"""
## What it does
Checks the parity of every mbarrier wait against the ring it waits on: a parity is 0 or 1; successive
waits of one role instance on one stage wait for successive phases, so their parities alternate —
they are `(u / stages) % 2` for the use index `u` the stage `u % stages` is computed from, plus one
for a producer's wait on an empty slot (its first wait passes at once). The replay of the roles against
each other (see CR115) also catches a wait on the right stage whose parity is one phase behind: it
passes on the previous round and the read after it sees a stage that is not full yet.
{_HOW}
## Why is this bad?
A wait tests only the parity of the barrier's phase. A parity computed from another index than the
stage (or divided by another ring depth) waits for a phase that already passed, and goes on with stale
data, or for one that never comes.

## Example
```
      let s = g % S
      mbarrier.wait cfull[s], parity=(g / 2) % 2     # S = 4 stages: use u of stage s is g / 4
```

## Use instead
```
      mbarrier.wait cfull[s], parity=(g / S) % 2
```
"""


class WaitNeverCompletes(ProtocolRule):
    name = "CR114"
    slug = "wait-never-completes"
    summary = "an mbarrier wait that can never complete: nobody arrives, its phase never comes, or the roles deadlock"
    explanation = f"""
## What it does
Finds waits that block forever:
- a wait on a barrier no operation arrives on (decided from the declared effects, for every size);
- a wait for a phase its stage never completes: the arrivals the kernel makes on the stage (CR111's
  counting) complete fewer phases than the wait's position and parity ask for;
- a deadlock of the replay: the roles, interleaved with the mbarrier semantics, reach a state where
  every unfinished role instance waits for a phase nobody can complete any more (a producer waiting on
  an empty slot with the consumer's parity is the usual one).
{_HOW}
## Why is this bad?
The kernel hangs until the driver's watchdog kills it, and the context is lost with it.

## Example
```
      mbarrier.wait cempty[s], parity=(g / S) % 2      # the first wait on an empty slot blocks
```

## Use instead
```
      mbarrier.wait cempty[s], parity=(g / S + 1) % 2  # passes at once: the slot starts empty
```
"""
