"""The ``ring-depth`` tactic: change the number of stages of a shared-memory ring.

A ring is a shared buffer declared with stages (``smem cs: T[S][BN, BK]``) whose stage count is a kernel
constant: the kernel's code is written in that constant (``cp.async.wait pending=S - 2``, ``i % S``) and
the compiler derives a pipe's barriers from the buffer, so setting the constant changes the ring, every
buffer and barrier ring declared with the same constant, and the pipe over them together, and keeps the
kernel's meaning. A ring whose stage count is a literal is offered only where it is a pipe's (a pipe's code
never spells its depth: the compiler derives stage indices and parities), all the pipe's buffers together;
elsewhere code written against that literal would not follow. The offered depths are 2 and up, as long as
the rewritten module still fits (:func:`cake_tactics_core.fit.fits`: shared memory per block above all), at
most :data:`MAX_STAGES`; the first depth that does not fit every listed size of the domain is offered once
more written in the size (``XS = min(2, 256 / D)``, :mod:`cake_tactics_core.adaptive`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from cake_core.ir import nodes as n
from cake_core.ir.printer import expr as print_expr
from cake_core.ir.transform import set_consts
from cake_core.loop.tactic import Application

from cake_tactics_core.adaptive import scalings, value
from cake_tactics_core.fit import offered, with_kernel

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


def pipe_rings(kernel: n.Kernel) -> dict[str, tuple[str, ...]]:
    """The pipes' rings whose stage count is a literal, by first buffer, each with all the pipe's buffers."""
    out: dict[str, tuple[str, ...]] = {}
    for pipe in kernel.pipes:
        buffers = [kernel.buffer(b) for b in pipe.buffers]
        if buffers and all(b is not None and isinstance(b.stages, n.Num) for b in buffers):
            out[pipe.buffers[0]] = pipe.buffers
    return out


def _stages(kernel: n.Kernel, buffer: str) -> str:
    """The buffer's stage count as written, through the constant that names it: ``3``, ``min(2, 256 / D)``."""
    smem = kernel.buffer(buffer)
    stages = smem.stages if smem is not None else None
    if isinstance(stages, n.Name):
        stages = next((c.value for c in kernel.consts if c.name == stages.id), stages)
    return print_expr(stages) if stages is not None else ""


class RingDepth:
    """Set the stage count of one ring: the site is ``kernel.buffer``, the params ``{"stages": n}`` (with
    ``size`` and ``upto`` where the depth is written in a size of the domain)."""

    name = "ring-depth"
    precondition = (
        "a shared buffer with stages counted by a kernel constant, or a pipe's buffers with a literal stage count; "
        "the rewrite to a depth of 2 and up (deeper only up to a listed size of the domain where it does not fit "
        "them all) type-checks, fits shared memory, keeps compile-time divisions exact and verifies for the target"
    )

    def applications(self, module: n.Module, target: Target) -> Sequence[Application]:
        out: list[Application] = []
        for kernel in module.kernels:
            for buffer in [*rings(kernel), *pipe_rings(kernel)]:
                site = f"{kernel.name}.{buffer}"
                current = _stages(kernel, buffer)

                def changes(app: Application) -> bool:
                    p = app.params
                    return print_expr(value(int(p["stages"]), p.get("size"), p.get("upto"))) != current  # noqa: B023

                ladder = [Application(self.name, site, {"stages": d}) for d in range(2, MAX_STAGES + 1)]
                # deeper rings only need more shared memory: stop at the first that does not fit
                fitting = offered(self, module, target, [a for a in ladder if changes(a)], until_refused=True)
                out += fitting
                deeper = [a for a in ladder if changes(a) and a not in fitting]
                if deeper:  # the first depth that does not fit: once more, written in a listed size
                    scaled = [Application(self.name, site, {**deeper[0].params, **s}) for s in scalings(kernel)]
                    out += offered(self, module, target, [a for a in scaled if changes(a)])
        return out

    def apply(self, module: n.Module, target: Target, application: Application) -> n.Module:
        kernel_name, buffer = application.site.split(".", 1)
        kernel = next(k for k in module.kernels if k.name == kernel_name)
        params = application.params
        depth = value(int(params["stages"]), params.get("size"), params.get("upto"))
        named = rings(kernel)
        if buffer in named:
            return set_consts(module, {named[buffer]: depth}, kernel=kernel_name)
        together = pipe_rings(kernel)[buffer]
        smem = tuple(attrs.evolve(s, stages=depth) if s.name in together else s for s in kernel.smem)
        return with_kernel(module, kernel_name, lambda k: attrs.evolve(k, smem=smem))
