"""The ``smem-layout`` tactic: change the row padding or the swizzle of a shared buffer.

Padding adds elements at the end of every row of a shared buffer (``smem xs: T[BM, D] pad 8``); a swizzle
(``swizzle 64B``) permutes the 16-byte chunks of every row by the row's position. Both move rows across banks and
never change a value (the interpreter's tiles are logical), so they keep the kernel's meaning. The offered pads
keep every row start 16-byte aligned, which ``cp.async`` and ``ldmatrix`` need: 0, 1 and 2 times 16 bytes of the
buffer's element type. The offered swizzles are 32B, 64B and 128B where a row is whole panels of that width;
a swizzled buffer has no padding, and every operation touching it must address the swizzle (``cp.async`` and
``ldmatrix`` do; CR120 refuses the rest, so such offers are not made). The current layout is left out. Only
buffers that no ``tma.*`` or ``wgmma`` operation touches and no pipe names are offered: a TMA box and a wgmma
descriptor fix their layout (wgmma operands take 128B only).
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
    """The kernel's shared buffers whose layout may change (see the module docstring), in declaration order."""
    dense = {b for p in kernel.pipes for b in p.buffers}
    for _role, op in n.walk_ops(kernel):
        if op.name.startswith(DENSE_OPS):
            for e in (*op.outs, *op.ins):
                dense |= {r.name for r in n.walk_expr(e) if isinstance(r, n.Ref)}
    return [s.name for s in kernel.smem if s.name not in dense]


#: bytes of a row of each swizzle's panel
SWIZZLES = {"32B": 32, "64B": 64, "128B": 128}


class SmemLayout:
    """Set the row padding or the swizzle of one shared buffer: the site is ``kernel.buffer``, the params
    ``{"pad": n}`` or ``{"swizzle": "64B"}``."""

    name = "smem-layout"
    precondition = (
        "a shared buffer no TMA or wgmma operation reads or writes and no pipe names; the rewrite to a pad of 0, "
        "16 or 32 bytes of its element type, or to a 32B, 64B or 128B swizzle its rows are whole panels of (every "
        "access to it then swizzle-aware), type-checks, fits shared memory, keeps compile-time divisions exact and "
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
                size = elem.pop()
                swizzle = {m.smem[buffer].swizzle for m in models}
                current = {m.smem[buffer].row_stride - m.smem[buffer].shape[-1] for m in models}
                site = f"{kernel.name}.{buffer}"
                candidates += [Application(self.name, site, {"pad": pad}) for pad in (0, 16 // size, 32 // size)
                               if swizzle != {None} or current != {pad}]  # fmt: skip
                row_bytes = {m.smem[buffer].shape[-1] * size for m in models}
                candidates += [Application(self.name, site, {"swizzle": name}) for name, width in SWIZZLES.items()
                               if swizzle != {name} and all(b % width == 0 for b in row_bytes)]  # fmt: skip
        return offered(self, module, target, candidates)

    def apply(self, module: n.Module, target: Target, application: Application) -> n.Module:
        kernel_name, buffer = application.site.split(".", 1)
        pad = int(application.params.get("pad", 0))
        swizzle = application.params.get("swizzle")

        def laid_out(k: n.Kernel) -> n.Kernel:
            smem = tuple(
                attrs.evolve(s, pad=n.Num(pad, loc=s.loc) if pad else None, swizzle=swizzle) if s.name == buffer else s
                for s in k.smem
            )
            return attrs.evolve(k, smem=smem)

        return with_kernel(module, kernel_name, laid_out)
