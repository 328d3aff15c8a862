"""Codes of the CPU interpreter's findings (prefix ``CS``): what running a schedule on small shapes found.

The interpreter (:mod:`cake_core.semantics.interp`) executes a checked program with the semantics the
lowering implements and reports what a GPU would do wrong or leave undefined: an access outside a
tensor, a read of memory nothing wrote, a data race, a deadlock. Each explanation follows the shape of
the core's codes (:mod:`cake_core.diagnostics.codes`): what it checks, why, an example, and the fix.
"""

from __future__ import annotations

from cake_core.diagnostics.codes import Code
from cake_core.diagnostics.diagnostic import Severity


def _code(code: str, slug: str, summary: str, explanation: str) -> Code:
    return Code(code, slug, Severity.ERROR, summary, explanation.strip())


OUT_OF_BOUNDS = _code("CS001", "out-of-bounds", "a tile access outside its tensor, without a mask", """
## What it checks
Every tile operand an operation accesses (through its primitive's declared effects) lies inside the
tensor, buffer or register tile it indexes, under the sizes of the run. Elements outside are allowed
only where the effect is masked (`oob=zero` on a load reads them as zero, `oob=skip` on a store leaves
them alone). A stage index outside a ring is never masked.

## Why
On a GPU an unmasked access past the end of a global tensor faults (the launch dies with an illegal
address) or silently reads a neighbour's data; past the end of a shared buffer it corrupts another
buffer. The interpreter stops the launch at the first one, as the GPU would.

## Example
    cp.async xs <- x[b, t * BM : +BM, :]            # N = 130: the second tile holds rows 128..255

## Use instead
    cp.async xs <- x[b, t * BM : +BM, :], oob=zero
""")

UNINITIALIZED = _code("CS002", "uninitialized-read", "a read of elements nothing has written", """
## What it checks
A primitive reads only elements that were written before: register tiles are undefined from their
declaration until written, shared buffers at the start of each CTA, program buffers (intermediate
global tensors) and output parameters until a kernel writes them. Masked-off elements do not count.

## Why
Undefined values make a kernel's answer depend on whatever the memory held: it may pass a test and
fail on the next GPU, or the next run.

## Example
    reg acc: f32[128, 128] layout mma_acc(4, 2)
    mma.sync acc <- a, bt^T                      # acc was never filled

## Use instead
    fill acc, value=0.0
    mma.sync acc <- a, bt^T
""")

RACE = _code("CS003", "data-race", "two accesses to one memory region that nothing orders", """
## What it checks
Every read of a shared (or kernel-written global) region is ordered after the write that produced
the data, and every write after the earlier reads and writes of the same region. Order comes only
from synchronization: CTA barriers, completed mbarrier phases (arrivals and transaction bytes) and
the completion of asynchronous groups (`cp.async.wait`). The threads of one role instance are ordered
among themselves only by a CTA barrier, so data one operation of an instance writes in shared memory
is read by another operation of the same instance only after a `bar.sync`. An asynchronous copy is in
flight from its issue until its group (or barrier phase) completes: reading its destination before,
or writing its source or destination meanwhile, is a race.

## Why
A race gives a result that depends on timing: a stage of a ring read before its copy lands, or
overwritten by the producer before the consumer has finished with it, passes on one GPU and fails on
another.

## Example
    cp.async cs[j % S] <- c[...]
    cp.async.commit
    cp.async.wait pending=S - 1                  # one group too many left in flight
    bar.sync
    ldmatrix bt <- cs[i % S][...]                # reads a stage whose copy may not have landed

## Use instead
    cp.async.wait pending=S - 2
""")

DEADLOCK = _code("CS004", "deadlock", "every unfinished role instance waits for something that never comes", """
## What it checks
The run reaches a state where no role instance can make progress: each waits on an mbarrier phase
that no arrival or copy still to come can complete, or at a CTA barrier that some role never reaches
(or has already left by finishing), and no asynchronous copy is in flight that could change that.

## Why
On a GPU the kernel hangs until the watchdog kills it. The interpreter reports the roles, the
instances, and the barriers and phases they wait on instead.

## Example
    barrier full: mbarrier[2] count 2
    ...
    mbar.arrive full[s]                          # only one role instance arrives per phase

## Use instead
Make the barrier's `count` the number of arrivals each phase really receives, or add the missing
arrival.
""")

STEP_LIMIT = _code("CS005", "step-limit", "the run executed more operations than its step bound", """
## What it checks
The interpreter executes at most `max_steps` operations per program run.

## Why
The interpreter is meant for small shapes; a run this long usually means shapes too large for it, or
a loop bound that grows with the wrong size. The run stops rather than taking forever.

## Example
    for k in 0 .. K * N:                        # meant K

## Use instead
Run on smaller shapes, raise `max_steps`, or fix the loop bound.
""")

PHASE_OVERRUN = _code("CS006", "phase-overrun", "an mbarrier ran two phases ahead of a waiter", """
## What it checks
A role instance waits on an mbarrier for the phase it expects next (its own count of waits on that
barrier), and the barrier has already completed that phase and the following one.

## Why
An mbarrier wait tests only the parity of a phase: two phases ahead looks like the same phase, so
the waiter either blocks for a phase that already passed (a hang) or proceeds on data of the wrong
round. It means a producer ran a full ring ahead of its consumer: a missing `empty` wait.

## Example
    # producer: no wait for the consumer to release the slot before refilling it
    tma.load cs[s] <- c[...] via full[s]

## Use instead
Wait on the slot's `empty` barrier before refilling it.
""")

NO_SEMANTICS = _code("CS007", "no-cpu-semantics", "an operation whose primitive has no CPU semantics", """
## What it checks
Every operation the run reaches has a primitive that implements `execute`.

## Why
Without CPU semantics the interpreter cannot say what the operation computes; the launch stops.

## Example
    wgmma acc <- xs, cs[s]                       # a plugin primitive without `execute`

## Use instead
Implement `Primitive.execute` for the primitive (on logical tiles, with `ExecContext`).
""")

BAD_VALUE = _code("CS008", "bad-runtime-value", "an index, bound or attribute that cannot be evaluated at run time", """
## What it checks
Every loop bound, condition, `let`, index and attribute evaluates under the sizes of the run.

## Why
A division by zero in an index expression (a size of zero where the schedule divides by it) has no
meaning on a GPU either.

## Example
    let per = N / G                              # G = 0 in this run

## Use instead
Exclude the size from the domain (`G >= 1`) or guard the expression.
""")

WRONG_ANSWER = _code("CS009", "wrong-answer", "the problem's oracle rejects what the run computed", """
## What it checks
`cake verify --problem P` (and `cake run`'s stage 2) runs the schedule in the interpreter on a sample of
the problem's shape domain: ragged in every tiled dimension, and a shape where every persistent loop
takes more than one trip and every ring wraps. Where a run has no other finding, the problem's oracle
judges every output element against its reference, with the problem's tolerance.

## Why
A schedule can be free of races, faults and deadlocks and still compute the wrong thing: an argmin
whose padded centroids may win, a tile loop that stops one tile short, an index off by a tile. The
oracle is the problem's definition of a right answer.

## Example
    for j in 0 .. K / BN:                        # K = 289: the last, partial centroid tile is skipped

## Use instead
    for j in 0 .. cdiv(K, BN):
""")

OUTPUT_NEVER_WRITTEN = _code("CS010", "output-never-written", "elements of an output no store of the run wrote", """
## What it checks
At the end of a run, every element of each program parameter that a kernel writes and that the run
did not receive as input was written by some store. Elements no store touched are reported at the
grid, or at the loop, that should have covered them: the loop around the tensor's stores whose
variable indexes the first unwritten element's missing coordinate, else a persistent loop around them
(one whose bounds name a grid variable), else the writing kernel's grid. Program buffers are
intermediate and are not checked (their padding may stay unwritten when nothing reads it).

## Why
An output element nothing writes holds whatever the memory held: the answer is right on shapes that
are multiples of the tile and wrong on the others. The verifier's CR129 finds the same mistake
statically, at sampled sizes.

## Example
    grid (t, b) over (N / BM, B)                 # N = 300: rows 256..299 are never written

## Use instead
    grid (t, b) over (cdiv(N, BM), B)
""")

SEMANTICS_CODES: dict[str, Code] = {
    c.code: c
    for c in (
        OUT_OF_BOUNDS, UNINITIALIZED, RACE, DEADLOCK, STEP_LIMIT, PHASE_OVERRUN, NO_SEMANTICS, BAD_VALUE, WRONG_ANSWER,
        OUTPUT_NEVER_WRITTEN,
    )
}
