"""CPU reference semantics of Cake IR: an interpreter for small shapes, with the lowering's semantics.

:func:`run_program` executes a checked module's program on host arrays: every CTA of every launch,
every role instance of a CTA on logical tiles, asynchronous copies held in flight until
their group or barrier completes them, mbarrier phases and CTA barriers with a seeded scheduler.
What it finds (faults, reads of undefined memory, data races by happens-before, deadlocks, the step
bound) comes back as :class:`Finding` records with ``CS`` codes (:mod:`cake_core.semantics.codes`),
each convertible to a :class:`~cake_core.diagnostics.diagnostic.Diagnostic`.
"""

from cake_core.semantics.codes import SEMANTICS_CODES
from cake_core.semantics.findings import Finding
from cake_core.semantics.interp import DEFAULT_MAX_STEPS, DEFAULT_SMS, InterpResult, run_program
from cake_core.semantics.operands import ExecContext
from cake_core.semantics.scheduler import POLICIES

__all__ = [
    "DEFAULT_MAX_STEPS", "DEFAULT_SMS", "POLICIES", "SEMANTICS_CODES", "ExecContext", "Finding", "InterpResult",
    "run_program",
]
