"""The ``ring-depth`` tactic: change the number of stages of a shared-memory ring.

A ring is a shared buffer declared with stages (``smem cs: T[S][BN, BK]``) whose stage count is a kernel
constant: the kernel's code is written in that constant (``cp.async.wait pending=S - 2``, ``i % S``) and
the compiler derives a pipe's barriers from the buffer, so setting the constant changes the ring, every
buffer and barrier ring declared with the same constant, and the pipe over them together, and keeps the
kernel's meaning. A ring whose stage count is a literal is not offered: code written against that literal
would not follow. The offered depths are 2 and up, as long as the rewritten module still fits
(:func:`cake_tactics_core.fit.fits`: shared memory per block above all), at most :data:`MAX_STAGES`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from cake_core.ir import nodes as n
from cake_core.ir.transform import set_consts
from cake_core.loop.tactic import Application

from cake_tactics_core.fit import offered

if TYPE_CHECKING:
    from cake_core.target import Target

#: the deepest ring offered
MAX_STAGES = 8


def rings(kernel: n.Kernel) -> dict[str, str]:
    """The kernel's rings by buffer, each with the constant that counts its stages; a constant shared by
    several buffers is listed once, under its first buffer."""
    consts = {c.name for c in kernel.consts}
    out: dict[str, str] = {}
    for s in kernel.smem:
        if isinstance(s.stages, n.Name) and s.stages.id in consts and s.stages.id not in out.values():
            out[s.name] = s.stages.id
    return out


class RingDepth:
    """Set the stage count of one ring: the site is ``kernel.buffer``, the params ``{"stages": n}``."""

    name = "ring-depth"
    precondition = (
        "a shared buffer with stages counted by a kernel constant; the rewrite to a depth of 2 and up "
        "type-checks, fits shared memory, keeps compile-time divisions exact and verifies for the target"
    )

    def applications(self, module: n.Module, target: Target) -> Sequence[Application]:
        out = []
        for kernel in module.kernels:
            current = {c.name: c.value for c in kernel.consts}
            for buffer, const in rings(kernel).items():
                depths = [d for d in range(2, MAX_STAGES + 1) if current[const] != n.Num(d)]
                ladder = [Application(self.name, f"{kernel.name}.{buffer}", {"stages": d}) for d in depths]
                # deeper rings only need more shared memory: stop at the first that does not fit
                out += offered(self, module, target, ladder, until_refused=True)
        return out

    def apply(self, module: n.Module, target: Target, application: Application) -> n.Module:
        kernel_name, buffer = application.site.split(".", 1)
        kernel = next(k for k in module.kernels if k.name == kernel_name)
        const = rings(kernel)[buffer]
        return set_consts(module, {const: int(application.params["stages"])}, kernel=kernel_name)
