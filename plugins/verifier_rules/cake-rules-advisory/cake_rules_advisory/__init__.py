"""cake-rules-advisory: verifier warnings — what makes a correct schedule slower than it needs to be.

========  ==========================  ===========================================================
id        slug                        warns about
========  ==========================  ===========================================================
CA101     bank-conflict               rows 128 bytes apart (or a multiple) read column-wise, unpadded
CA102     pipeline-deeper-than-loop   ring stages the loops that fill the ring can never use
CA103     occupancy-cliff             shared memory or registers a few percent over a CTA-count cliff
========  ==========================  ===========================================================

Every rule is a warning: `cake verify` reports them and still exits 0. Rule ids never change meaning
across versions of this pack; a retired id is never reused.
"""

from __future__ import annotations

from collections.abc import Callable

from cake_core.hookspecs import hookimpl
from cake_core.verify.rule import Rule

from cake_rules_advisory.banks import BankConflict
from cake_rules_advisory.occupancy import OccupancyCliff
from cake_rules_advisory.pipeline import PipelineDeeperThanLoop

__version__ = "0.1.0"

RULES: tuple[type[Rule], ...] = (BankConflict, PipelineDeeperThanLoop, OccupancyCliff)


@hookimpl
def cake_register_rules(register: Callable[[Rule], None]) -> None:
    """Register every rule of the pack."""
    for cls in RULES:
        register(cls())


__all__ = ["RULES", "cake_register_rules", "__version__"]
