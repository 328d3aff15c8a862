"""Movement between memory tiers: stores, cp.async rings, ldmatrix."""

from __future__ import annotations

from collections.abc import Iterable

from cake_core.diagnostics import codes
from cake_core.diagnostics.diagnostic import Diagnostic
from cake_core.ir.primitive import (
    Access, AttrSpec, CheckContext, CostTerms, ExecContext, Kind, Primitive, Signature, Slot, TypedOp,
    numel, static_shape,
)  # fmt: skip
from cake_core.primitives._common import need_static, same_dtype, same_numel, shape_text
from cake_core.target import Feature

OOB_LOAD = AttrSpec("oob", "word", choices=("zero", "none"), doc="out-of-bounds elements read as zero")
OOB_STORE = AttrSpec("oob", "word", choices=("skip", "none"), doc="out-of-bounds elements are not written")


class Store(Primitive):
    name = "store"
    summary = "write a register tile to global or shared memory"
    signature = Signature(
        outs=[Slot("dst", {Kind.GLOBAL, Kind.SHARED}, Access.WRITE, mask_attr="oob")],
        ins=[Slot("src", {Kind.REGISTERS})],
        attrs=[OOB_STORE],
    )

    def check(self, op: TypedOp, ctx: CheckContext) -> Iterable[Diagnostic]:
        dst, src = op.outs[0], op.ins[0]
        yield from need_static(op, dst)
        yield from same_numel(op, dst, src)
        if dst.dtype is not None and src.dtype is not None and dst.dtype != src.dtype:
            if not (dst.dtype.is_float and src.dtype.is_float):
                yield codes.TYPES.at(
                    op.op.loc, f"`store` converts only between float types, not `{src.dtype}` to `{dst.dtype}`"
                )

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        dst = op.outs[0]
        x.write("dst", x.read("src").reshape(static_shape(dst)))

    def cost(self, op: TypedOp, ctx: CheckContext) -> CostTerms:
        dst = op.outs[0]
        shape = static_shape(dst) or (0,)
        nbytes = numel(shape) * (dst.dtype.bytes if dst.dtype else 4)
        return CostTerms(global_bytes=nbytes if dst.kind is Kind.GLOBAL else 0,
                         shared_bytes=nbytes if dst.kind is Kind.SHARED else 0)  # fmt: skip


class CpAsync(Primitive):
    name = "cp.async"
    summary = "asynchronous copy of a global tile into a shared buffer, 16 bytes per thread per step"
    requires = frozenset({Feature.CP_ASYNC})
    signature = Signature(
        outs=[Slot("dst", {Kind.SHARED}, Access.WRITE, asynchronous=True)],
        ins=[Slot("src", {Kind.GLOBAL}, Access.READ, asynchronous=True, mask_attr="oob")],
        attrs=[OOB_LOAD, AttrSpec("bytes", "const", default=16, doc="bytes per thread per copy: 4, 8 or 16")],
    )

    def check(self, op: TypedOp, ctx: CheckContext) -> Iterable[Diagnostic]:
        dst, src = op.outs[0], op.ins[0]
        yield from need_static(op, dst)
        yield from same_numel(op, dst, src)
        yield from same_dtype(op, dst, src)
        if static_shape(dst) is not None and static_shape(src) is not None and static_shape(dst) != static_shape(src):
            yield codes.TYPES.at(
                op.op.loc, f"`cp.async` copies {shape_text(src.shape)} into {shape_text(dst.shape)}: "
                "tile shapes must match", label="shape mismatch",
            )  # fmt: skip

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        # the interpreter defers the write until the group completes (cp.async.wait)
        x.write("dst", x.read("src"))

    def cost(self, op: TypedOp, ctx: CheckContext) -> CostTerms:
        dst = op.outs[0]
        nbytes = numel(static_shape(dst) or (0,)) * (dst.dtype.bytes if dst.dtype else 2)
        return CostTerms(global_bytes=nbytes, shared_bytes=nbytes)


class CpAsyncCommit(Primitive):
    name = "cp.async.commit"
    summary = "close this thread's open group of cp.async copies"
    requires = frozenset({Feature.CP_ASYNC})
    signature = Signature()

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        pass  # the interpreter tracks groups itself


class CpAsyncWait(Primitive):
    name = "cp.async.wait"
    summary = "wait until at most `pending` committed cp.async groups are still in flight"
    requires = frozenset({Feature.CP_ASYNC})
    signature = Signature(attrs=[AttrSpec("pending", "const", required=True, doc="groups left in flight")])

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        pass  # the interpreter completes groups itself


class LdMatrix(Primitive):
    name = "ldmatrix"
    summary = "warp-cooperative load of mma.sync operand fragments from shared memory"
    requires = frozenset({Feature.LDMATRIX})
    signature = Signature(
        outs=[Slot("dst", {Kind.REGISTERS}, Access.WRITE)],
        ins=[Slot("src", {Kind.SHARED})],
    )

    def check(self, op: TypedOp, ctx: CheckContext) -> Iterable[Diagnostic]:
        dst, src = op.outs[0], op.ins[0]
        yield from need_static(op, src)
        yield from same_dtype(op, dst, src)
        if dst.layout is None or dst.layout.name not in ("mma_a", "mma_b"):
            yield codes.TYPES.at(
                dst.expr.loc, "`ldmatrix` fills an `mma_a` or `mma_b` fragment",
                help="declare the tile with `layout mma_a(WM, WN)` or `layout mma_b(WM, WN)`",
            )  # fmt: skip
        if static_shape(src) is not None and static_shape(src) != static_shape(dst):
            yield codes.TYPES.at(
                op.op.loc, f"`ldmatrix` loads {shape_text(src.shape)} into a {shape_text(dst.shape)} fragment",
                label="shape mismatch",
            )  # fmt: skip
        if src.dtype is not None and src.dtype.bytes != 2:
            yield codes.TYPES.at(op.op.loc, f"`ldmatrix` moves 16-bit elements, not `{src.dtype}`")

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        x.write("dst", x.read("src"))

    def cost(self, op: TypedOp, ctx: CheckContext) -> CostTerms:
        src = op.ins[0]
        return CostTerms(shared_bytes=numel(static_shape(src) or (0,)) * 2)


PRIMITIVES: tuple[type[Primitive], ...] = (Store, CpAsync, CpAsyncCommit, CpAsyncWait, LdMatrix)
