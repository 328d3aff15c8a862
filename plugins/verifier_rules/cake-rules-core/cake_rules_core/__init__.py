"""cake-rules-core: the verifier hard gates every Cake schedule must pass.

========  ========================  ===============================================================
id        slug                      checks
========  ========================  ===============================================================
CR101     missing-feature           hardware features the target lacks (``prim.features(op)``, clusters)
CR102     smem-over-limit           shared memory per block (and per SM for a promised occupancy)
CR103     threads-and-warps         threads per CTA; role warp ranges inside the CTA, disjoint, covering
CR104     register-budget           a lower bound of registers per thread, per role budget, per block
CR105     cp-async-size-alignment   cp.async sizes, tile rows, row pitches and starts aligned to them
CR106     vector-access-alignment   other vectorized accesses (``bytes``, ``vector_bytes``, ldmatrix)
CR107     mma-shape-dtype           mma.sync per-warp m16n8 tiles, k16 slices, bf16/f16 into f32
CR108     unmasked-out-of-bounds    unmasked tile accesses in bounds for every size in the domain
========  ========================  ===============================================================

Rule ids never change meaning across versions of this pack; a retired id is never reused.
"""

from __future__ import annotations

from collections.abc import Callable

from cake_core.hookspecs import hookimpl
from cake_core.verify.rule import Rule

from cake_rules_core.alignment import CpAsyncSizeAlignment, VectorAccessAlignment
from cake_rules_core.bounds import UnmaskedOutOfBounds
from cake_rules_core.features import MissingFeature
from cake_rules_core.mma import MmaShapeDtype
from cake_rules_core.resources import RegisterBudget, SmemOverLimit, ThreadsAndWarps

__version__ = "0.1.0"

RULES: tuple[type[Rule], ...] = (
    MissingFeature,
    SmemOverLimit,
    ThreadsAndWarps,
    RegisterBudget,
    CpAsyncSizeAlignment,
    VectorAccessAlignment,
    MmaShapeDtype,
    UnmaskedOutOfBounds,
)


@hookimpl
def cake_register_rules(register: Callable[[Rule], None]) -> None:
    """Register every rule of the pack."""
    for cls in RULES:
        register(cls())


__all__ = ["RULES", "cake_register_rules", "__version__"]
