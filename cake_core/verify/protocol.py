"""A kernel's synchronization protocol, simulated on one CTA at concrete sizes, for verifier rules:
which samples, and their traces and replays, per kernel model.

Barrier counts, expect-tx bytes, parities and the stages of a ring are mechanical consequences of the
loop structure: whether they agree is decided by following each role instance through its loops.
Control flow in Cake IR never depends on data — loop bounds, ``let`` values and ``if`` conditions are
functions of sizes, grid variables, ``self`` and loop variables — so one walk per role instance gives
the exact sequence of its synchronizing operations, its **trace**. Rules compare traces (arrivals per
phase, expect-tx against the copies of the same iteration, the parity of successive waits on one
stage), and a **replay** interleaves them with the mbarrier semantics of the interpreter to find the
reads and writes of shared memory that no synchronization orders, and waits that never complete.

Samples (:mod:`cake_core.verify.samples`)
-----------------------------------------
Each kernel model is simulated at every run-time size's least admissible value, and at a *grown*
assignment: sizes the kernel divides by a constant grow by the factors in :data:`GROWTH` until every
barrier stage an instance waits on inside a loop is waited on twice by it (every ring has wrapped,
parities have alternated, stages have been refilled), or until the next factor would exceed
:data:`WIDE_STEPS` operations.

* **Traces** (:mod:`cake_core.verify.traces`): one CTA, every grid variable 0, every role instance of
  it, walked through its loops; only what synchronizes or touches shared memory.
* **Replay** (:mod:`cake_core.verify.replay`): the traces interleaved on the interpreter's model.
* **Budget.** A sample whose traces exceed :data:`MAX_STEPS` operations in all (:data:`WIDE_STEPS` for a
  grown one), whose expressions cannot be evaluated (a division by zero at that size), or whose barrier
  stage indices leave their rings (CR108's finding) is skipped: rules see why in
  :attr:`~cake_core.verify.traces.SampleRun.skipped` and say nothing about it.
* **Sharing.** Specializations that differ only in element types of one size (``T in {bf16, f16}``)
  have the same protocol: within one checked module they share one simulation, kept in the module's
  analysis table (:mod:`cake_core.verify.analyses`).

What this proves
----------------
Nothing beyond the samples: a finding is a concrete run (sizes named) that goes wrong; a clean result
means the protocol held at those sizes. The samples are chosen to exercise every stage of every ring
more than once and the first and later iterations of every loop, which is where protocol mistakes
show (a parity that does not alternate, a count off by an instance, a stage index off by one).
"""

from __future__ import annotations

import attrs

from cake_core.ir.model import KernelModel
from cake_core.verify import samples
from cake_core.verify.analyses import for_model
from cake_core.verify.facts import KernelFacts, facts
from cake_core.verify.samples import Sample
from cake_core.verify.traces import SampleRun, compiler, covered, plan, program, simulate

MAX_STEPS = 4000  # operations of the least sizes' traces, all instances together
WIDE_STEPS = 800  # operations of a grown sample's traces
GROWTH = (4, 8, 16)  # factors the sizes are grown by until every ring has wrapped


@attrs.define(eq=False)
class Protocol:
    """Every sample's traces for one kernel model."""

    model: KernelModel
    facts: KernelFacts
    runs: list[SampleRun]
    #: whether the kernel has anything a protocol rule looks at (barriers, async-proxy readers); a kernel
    #: with shared memory and neither is simulated too (its runs show what it reads and writes)
    active: bool


def protocol_key(model: KernelModel) -> tuple:
    """What a protocol depends on: integer compile-time values and element sizes (not the dtype names)."""
    ints = tuple(sorted((k, v) for k, v in model.env.items() if isinstance(v, int) and not isinstance(v, bool)))
    sizes = tuple(sorted((k, t.bytes) for k, t in model.typevars.items()))
    return (model.kernel.name, ints, sizes)


def protocol(model: KernelModel) -> Protocol:
    """The simulated protocol of ``model``. Within a checked module whose analyses are attached
    (:func:`~cake_core.verify.analyses.attach`, as every rule context does), it is simulated once per
    :func:`protocol_key` and kept in the module's analysis table: specializations that differ only in
    element types of equal size share one simulation (its steps refer to the first model's operations,
    which have the same source locations; rules report by location). A model with no table is
    simulated on every call."""
    table = for_model(model)
    if table is None:
        return _simulate(model)
    return table.get("protocol", protocol_key(model), lambda: _simulate(model))


def _simulate(model: KernelModel) -> Protocol:
    kf = facts(model)
    active = bool(model.barriers) or bool(kf.async_proxy_readers())
    runs: list[SampleRun] = []
    if active or model.smem:
        comp = compiler(model)
        plans = {id(of.typed.op): plan(of, model, comp) for of in kf.ops}
        programs = {info.role.name: program(info.role.body, plans, comp) for info in model.roles}
        sizes = samples.sizes(model)
        if sizes is not None:
            small = Sample(sizes.small, sizes.sms)
            runs.append(simulate(model, small, programs, MAX_STEPS))
            wide: SampleRun | None = None
            for k in GROWTH:
                sample = sizes.at(k)
                if sample == small or (wide is not None and sample == wide.sample):
                    continue
                run = simulate(model, sample, programs, WIDE_STEPS)
                if run.skipped is not None:
                    break
                wide = run
                # doubling the sizes of two nested loops quadruples the operations: stop before the budget
                if covered(run) or 4 * sum(len(t) for t in run.traces) > WIDE_STEPS:
                    break
            if wide is not None:
                runs.append(wide)
    return Protocol(model, kf, runs, active)
