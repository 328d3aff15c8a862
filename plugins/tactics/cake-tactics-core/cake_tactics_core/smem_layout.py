"""The ``smem-layout`` tactic: change the row padding of a shared buffer.

Padding adds elements at the end of every row of a shared buffer (``smem xs: T[BM, D] pad 8``); it moves
rows across banks and never changes a value (the interpreter's tiles are logical), so it keeps the
kernel's meaning. The offered pads keep every row start 16-byte aligned, which ``cp.async`` and
``ldmatrix`` need: 0, 1 and 2 times 16 bytes of the buffer's element type, the current one left out.
Only unswizzled buffers that no ``tma.*`` or ``wgmma`` operation touches and no pipe names are offered:
a TMA box and a wgmma descriptor read dense, swizzled rows. Swizzles are not offered: ``cp.async`` and
``ldmatrix`` do not lower swizzled buffers yet, and wgmma operands take 128B only (see the README).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from cake_core.ir import nodes as n
from cake_core.loop.tactic import Application

from cake_tactics_core.fit import checked, offered, with_kernel

if TYPE_CHECKING:
    from cake_core.target import Target

#: operations that need a dense (unpadded) shared buffer, by name prefix
DENSE_OPS = ("tma.", "wgmma")


def paddable(kernel: n.Kernel) -> list[str]:
    """The kernel's shared buffers that may be padded (see the module docstring), in declaration order."""
    dense = {b for p in kernel.pipes for b in p.buffers}
    for _role, op in n.walk_ops(kernel):
        if op.name.startswith(DENSE_OPS):
            for e in (*op.outs, *op.ins):
                dense |= {r.name for r in n.walk_expr(e) if isinstance(r, n.Ref)}
    return [s.name for s in kernel.smem if s.swizzle is None and s.name not in dense]


class SmemLayout:
    """Set the row padding of one shared buffer: the site is ``kernel.buffer``, the params ``{"pad": n}``."""

    name = "smem-layout"
    precondition = (
        "an unswizzled shared buffer no TMA or wgmma operation reads or writes; the rewrite to a pad of 0, 16 or "
        "32 bytes of its element type type-checks, fits shared memory, keeps compile-time divisions exact and "
        "verifies for the target"
    )

    def applications(self, module: n.Module, target: Target) -> Sequence[Application]:
        typed = checked(module, target)
        if typed is None:
            return []
        candidates = []
        for kernel in module.kernels:
            models = [m for (name, _), m in typed.models.items() if name == kernel.name]
            for buffer in paddable(kernel):
                elem = {m.smem[buffer].dtype.bytes for m in models}
                if len(elem) != 1:
                    continue  # the element size differs across specializations: one pad cannot fit them all
                step = 16 // elem.pop()
                current = {m.smem[buffer].row_stride - m.smem[buffer].shape[-1] for m in models}
                candidates += [
                    Application(self.name, f"{kernel.name}.{buffer}", {"pad": pad})
                    for pad in (0, step, 2 * step)
                    if current != {pad}
                ]
        return offered(self, module, target, candidates)

    def apply(self, module: n.Module, target: Target, application: Application) -> n.Module:
        kernel_name, buffer = application.site.split(".", 1)
        pad = int(application.params["pad"])

        def padded(k: n.Kernel) -> n.Kernel:
            smem = tuple(
                attrs.evolve(s, pad=n.Num(pad, loc=s.loc) if pad else None) if s.name == buffer else s for s in k.smem
            )
            return attrs.evolve(k, smem=smem)

        return with_kernel(module, kernel_name, padded)
