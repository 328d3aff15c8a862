"""The ``registers`` tactic: rebalance a warp-specialized kernel's register file with ``setmaxnreg``.

In a kernel whose producer roles only issue copies (they produce into a pipe and declare no register
tile) beside consumer roles that compute, every warp starts with the same registers per thread
(the *entry* count: the register file split over the CTA's threads under ``occupancy 1``, at most 255,
rounded down to 8). The rewrite gives the producers ``regs p`` (a low budget: 24, 40 or 56) and every
consumer role ``regs c``, the most registers per thread the producers' release pays for::

    c = min(256, entry + (entry - p) * producer threads / consumer threads), rounded down to 8

(``role producer warps 0..4 regs 40`` / ``role consumers warps 4..12 per 4 regs 232`` at 384 threads:
168 at entry, the producers release 128 x 128 registers, the consumers take 256 x 64). The lowering
emits ``setmaxnreg.dec`` / ``.inc`` at each role's start; what the kernel computes does not change.
Where the CTA's threads differ among specializations the smallest ``c`` is taken. ``occupancy 1`` is
written where the kernel promised none (``setmaxnreg`` needs the register cap it gives).

Precondition: the target has ``setmaxnreg``; the kernel has a producer role and a consumer role as
above and promises no occupancy other than 1; the split is not the kernel's current one and lowers the
producers below the entry count; and the rewrite fits (:func:`cake_tactics_core.fit.fits`: the
verifier's CR109 wants whole-warpgroup roles, CR110 budgets of 24..256 by 8 that the release pays for,
CR104 budgets that hold each role's register tiles).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from cake_core.ir import nodes as n
from cake_core.loop.tactic import Application

from cake_tactics_core.fit import checked, offered, with_kernel

if TYPE_CHECKING:
    from cake_core.ir.model import CheckedModule
    from cake_core.target import Target

#: the producers' budgets offered (setmaxnreg's least is 24; CUTLASS's producers take 40)
PRODUCER_REGS = (24, 40, 56)
REGS_STEP, REGS_MAX = 8, 256


def producers(kernel: n.Kernel) -> tuple[str, ...]:
    """The roles that only issue copies: each produces into a pipe and declares no register tile."""
    producing = {r for p in kernel.pipes for r in p.producers}
    return tuple(
        role.name
        for role in kernel.roles
        if role.name in producing and not any(isinstance(st, n.RegDecl) for st in n.walk_stmts(role.body))
    )


def splits(kernel: n.Kernel, result: CheckedModule | None, target: Target) -> list[dict[str, int]]:
    """The budgets offered for ``kernel`` (of the checked module ``result``): one per producer budget
    below the entry count."""
    prod = set(producers(kernel))
    if result is None or not prod or len(prod) == len(kernel.roles):
        return []
    models = [m for (name, _spec), m in result.models.items() if name == kernel.name]
    if not models:
        return []
    current = {r.name: r.regs for r in kernel.roles}
    out = []
    for p in PRODUCER_REGS:
        consumer = REGS_MAX
        for m in models:
            entry = min(target.regs_per_thread, target.regs_per_block // max(m.threads, 1)) // REGS_STEP * REGS_STEP
            given = sum(r.warps * 32 for r in m.roles if r.role.name in prod)
            taken = sum(r.warps * 32 for r in m.roles if r.role.name not in prod)
            if p >= entry or not taken:
                consumer = 0
                break
            consumer = min(consumer, (entry + (entry - p) * given // taken) // REGS_STEP * REGS_STEP)
        if consumer <= p:
            continue
        split = {r.name: (p if r.name in prod else consumer) for r in kernel.roles}
        if split != {k: (v.value if isinstance(v, n.Num) else v) for k, v in current.items()}:
            out.append(split)
    return out


def rebalanced(kernel: n.Kernel, split: dict[str, int]) -> n.Kernel:
    """``kernel`` with each role's budget set from ``split`` and ``occupancy 1`` where none was promised."""
    roles = tuple(attrs.evolve(r, regs=n.Num(int(split[r.name]))) for r in kernel.roles)
    cta = kernel.cta if kernel.cta.occupancy is not None else attrs.evolve(kernel.cta, occupancy=n.Num(1))
    return attrs.evolve(kernel, roles=roles, cta=cta)


class Registers:
    """Give a warp-specialized kernel's roles register budgets: the site is the kernel, the params each
    role's ``regs``."""

    name = "registers"
    precondition = (
        "the target has setmaxnreg; a kernel with occupancy 1 (or none promised) has producer roles that only issue "
        "copies into pipes and consumer roles; the producers get 24, 40 or 56 registers below the entry count and "
        "the consumers what that releases (at most 256, by 8), not the current split; the rewrite fits"
    )

    def applications(self, module: n.Module, target: Target) -> Sequence[Application]:
        kernels = [k for k in module.kernels if k.cta.occupancy in (None, n.Num(1)) and producers(k)]
        if not target.has("setmaxnreg") or not kernels:
            return []
        result = checked(module, target)
        candidates = [
            Application(self.name, k.name, split) for k in kernels for split in splits(k, result, target)
        ]
        return offered(self, module, target, candidates)

    def apply(self, module: n.Module, target: Target, application: Application) -> n.Module:
        split = {k: int(v) for k, v in application.params.items()}
        return with_kernel(module, application.site, lambda k: rebalanced(k, split))
