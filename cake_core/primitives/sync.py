"""Synchronization: CTA-wide barriers."""

from __future__ import annotations

from cake_core.ir.primitive import ExecContext, Primitive, Signature, TypedOp


class BarSync(Primitive):
    name = "bar.sync"
    summary = "CTA-wide barrier: every thread waits for all, and shared-memory writes become visible"
    cta_barrier = True
    signature = Signature()

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        pass  # the interpreter synchronizes role instances itself

    def lower(self, op: TypedOp, ctx) -> None:
        ctx.line("__syncthreads();")


PRIMITIVES: tuple[type[Primitive], ...] = (BarSync,)
