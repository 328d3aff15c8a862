"""Cake's Blackwell (sm_100a) vocabulary as a plugin: the tensor-memory tier and the tcgen05 primitives.

It registers, through the hooks any plugin uses, the memory tier ``tmem`` (declared in a kernel as
``tmem acc: f32[128, 128]``) and the primitives of :mod:`cake_blackwell.tmem` (allocation, relinquish,
deallocation, ``tcgen05.ld`` / ``tcgen05.st`` and their waits, the fences) and
:mod:`cake_blackwell.mma` (``tcgen05.mma`` and ``tcgen05.commit``; ``tcgen05.acquire`` and
``tcgen05.commit.stage``, the producer's side of a pipe of tensor-memory accumulators). It contributes
``blackwell.cake`` to the problem ``kmeans-assign`` for ``b200`` (``cake_register_schedules``). The
features the primitives require, ``tcgen05`` and ``tmem``, are declared by ``cake-targets-nvidia``,
whose ``b200`` lists them. Beside them it registers the verifier rules that check tensor-memory
discipline (BW101-BW105, :mod:`cake_blackwell.rules_alloc` and :mod:`cake_blackwell.rules_access`)
and the mutation classes those rules catch (:mod:`cake_blackwell.mutations`). Nothing here has run
on a B200: the CPU interpreter
and NVRTC compiling for ``sm_100a`` are the evidence (``ran: false``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from cake_core.hookspecs import hookimpl
from cake_core.ir.primitive import Primitive, Tier
from cake_core.mutate.mutant import Operator
from cake_core.problems.schedule import Schedule
from cake_core.verify.rule import Rule

from cake_blackwell.mma import Tcgen05Commit, Tcgen05Mma
from cake_blackwell.mutations import MUTATIONS
from cake_blackwell.rules_access import Tcgen05Target, TmemLaneQuarter, TmemReadBeforeCommit
from cake_blackwell.rules_alloc import TmemCapacity, TmemLifecycle
from cake_blackwell.tmem import (
    TMEM, FenceAfter, FenceBefore, TmemAlloc, TmemDealloc, TmemLoad, TmemRelinquish, TmemWaitLoad,
)  # fmt: skip
from cake_blackwell.tmem import TmemStore, TmemWaitStore
from cake_blackwell.mma import Tcgen05Acquire, Tcgen05CommitStage

__all__ = [
    "MUTATIONS", "PRIMITIVES", "RULES", "SCHEDULES", "cake_register_mutations", "cake_register_primitives",
    "cake_register_rules", "cake_register_schedules", "cake_register_tiers",
]  # fmt: skip

#: the schedules this plugin contributes to problems (``cake_register_schedules``)
SCHEDULES = Path(__file__).resolve().parent / "schedules"

PRIMITIVES: tuple[type[Primitive], ...] = (
    TmemAlloc, TmemRelinquish, TmemDealloc, Tcgen05Mma, Tcgen05Commit, TmemLoad, TmemWaitLoad, FenceBefore,
    FenceAfter,
    TmemStore, TmemWaitStore,
    Tcgen05Acquire, Tcgen05CommitStage,
)  # fmt: skip

#: the verifier rules of the pack (ids BW101..; see README.md, "Verifier rules")
RULES: tuple[type[Rule], ...] = (TmemCapacity, TmemLifecycle, TmemLaneQuarter, TmemReadBeforeCommit, Tcgen05Target)


@hookimpl
def cake_register_tiers(register: Callable[[Tier], None]) -> None:
    register(Tier(TMEM, "Blackwell tensor memory: 128 lanes by 512 32-bit columns per CTA, allocated by `tcgen05.alloc`"))


@hookimpl
def cake_register_primitives(register: Callable[[Primitive], None]) -> None:
    for cls in PRIMITIVES:
        register(cls())


@hookimpl
def cake_register_schedules(register: Callable[[Schedule], None]) -> None:
    register(Schedule("kmeans-assign/blackwell", "kmeans-assign", SCHEDULES / "blackwell.cake", {"b200"},
                      "warp-specialized TMA + tcgen05.mma into a double-buffered tensor-memory accumulator"))


@hookimpl
def cake_register_rules(register: Callable[[Rule], None]) -> None:
    for cls in RULES:
        register(cls())


@hookimpl
def cake_register_mutations(register: Callable[[Operator], None]) -> None:
    for op in MUTATIONS:
        register(op)
