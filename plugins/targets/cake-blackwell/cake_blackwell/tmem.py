"""Tensor memory: allocating a region, giving up the allocation permit, freeing it, moving a tile
between tensor memory and registers (``tcgen05.ld`` / ``tcgen05.st`` and their waits), and the fences
that order tcgen05 work across a thread barrier.

A region is declared at kernel level with the tier's keyword, ``tmem acc: f32[128, 128]`` (or a ring,
``f32[2][128, 128]``): 128 lanes (rows) by a number of 32-bit columns. ``tcgen05.alloc acc`` asks the
hardware for its columns and leaves the address in the region's handle word, which the core reserves
in shared memory (:class:`cake_core.ir.model.MemInfo`); every other primitive reads the address from
there. Forms follow the PTX ISA's sections on ``tcgen05.alloc`` / ``dealloc`` /
``relinquish_alloc_permit``, ``tcgen05.ld`` (the ``.32x32b`` shape: 9.7.16.2.3, "Data Movement Shape"),
``tcgen05.st`` (the same shape, ``[taddr], r`` operands), ``tcgen05.wait`` (``::ld`` and ``::st``) and
``tcgen05.fence``; ptxas (through NVRTC, for sm_100a) accepts every form emitted.
"""

from __future__ import annotations

from collections.abc import Iterable

from cake_core.diagnostics import codes
from cake_core.diagnostics.diagnostic import Diagnostic
from cake_core.ir.primitive import (
    Access, CheckContext, ExecContext, Kind, NotLowerable, Operand, Primitive, Signature, Slot, TypedOp,
    static_shape,
)  # fmt: skip
from cake_core.ir.types import DType
from cake_core.primitives.authoring import shape_text
from cake_core.target import Feature

TMEM = Kind("tmem")
TCGEN05 = Feature("tcgen05")
TMEM_FEATURE = Feature("tmem")
#: tensor memory per CTA: 128 lanes by 512 columns of 32 bits (the PTX ISA's "Tensor Memory" section)
LANES, COLUMNS = 128, 512
#: the fewest columns one allocation takes (the ``tcgen05.alloc`` section: a power of two, at least 32)
MIN_COLUMNS = 32


def region_columns(o: Operand) -> int | None:
    """Columns a whole region (all its stages) occupies: its 32-bit elements per lane."""
    shape = static_shape(o)
    if shape is None or len(shape) < 2:
        return None
    cols = 1
    for s in shape[:-2]:
        cols *= s
    return cols * shape[-1]


def column_offset(ctx, o: Operand) -> str:
    """C++ column offset of an operand within its region: its stage times the stage's columns, plus a
    column slice's start."""
    info = ctx.model.mems[o.name]
    parts = []
    if o.stage is not None:
        parts.append(f"({ctx.c(o.stage)}) * {info.shape[-1]}")
    if len(o.index) == 2:
        rows, cols = o.index
        if not _from_zero(rows):
            raise NotLowerable("a tensor-memory operand spans all 128 lanes")
        start = getattr(cols, "start", None)
        if start is not None:
            parts.append(f"({ctx.c(start)})")
    elif o.index:
        raise NotLowerable("index a tensor-memory region as `acc[s]` or `acc[s][:, c : +n]`")
    return " + ".join(parts) or "0"


def _from_zero(item) -> bool:
    from cake_core.ir import nodes as n

    return isinstance(item, n.All) or (isinstance(item, n.Span) and isinstance(item.start, n.Num) and item.start.value == 0)


def _single_instance(ctx, what: str) -> None:
    if ctx.role.instances != 1:
        raise NotLowerable(f"`{what}` runs in a role of one instance (each instance would allocate again)")


class _RegionOp(Primitive):
    """An operation on a whole tensor-memory region by warp 0 of a one-instance role: no effect on the
    region's elements, nothing on the CPU."""

    requires = frozenset({TCGEN05, TMEM_FEATURE})
    signature = Signature(ins=[Slot("region", {TMEM}, Access.NONE, doc="the region allocated or freed")])
    instruction = ""  # the PTX, given the handle address (%0) or address and the column count (%1)

    def check(self, op: TypedOp, ctx: CheckContext) -> Iterable[Diagnostic]:
        yield from check_region(op, op.ins[0])

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        pass

    def operand(self, ctx, o: Operand) -> str:
        raise NotImplementedError

    def lower(self, op: TypedOp, ctx) -> None:
        _single_instance(ctx, self.name)
        o = op.ins[0]
        ctx.line(f'if ({ctx.iwarp} == 0) asm volatile("{self.instruction}" :: "r"({self.operand(ctx, o)}), '
                 f'"r"({region_columns(o)}) : "memory");')  # fmt: skip


class TmemAlloc(_RegionOp):
    name = "tcgen05.alloc"
    sass_claims = ("UTCATOMSWS",)
    summary = "allocate a tensor-memory region's columns; warp 0 of the role instance leaves the address in its handle"
    doc = (
        "`tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32` is executed by one whole warp; the "
        "column count is the region's 32-bit columns over all its stages, a power of two from 32 to 512. "
        "Other warps read the address only after `tcgen05.fence.before`, a thread barrier and "
        "`tcgen05.fence.after`. On the CPU it does nothing: the region exists from the CTA's start, poisoned."
    )
    instruction = "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;"

    def operand(self, ctx, o: Operand) -> str:
        return ctx.handle_addr(o)


class TmemDealloc(_RegionOp):
    name = "tcgen05.dealloc"
    summary = "free a tensor-memory region's columns (warp 0 of the role instance) before the kernel exits"
    doc = (
        "`tcgen05.dealloc.cta_group::1.sync.aligned.b32` with the address the allocation left and the same "
        "column count. Every tcgen05 access to the region must be ordered before it (`tcgen05.fence.before`, "
        "a thread barrier, `tcgen05.fence.after`)."
    )
    instruction = "tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;"

    def operand(self, ctx, o: Operand) -> str:
        return ctx.handle(o)


class TmemRelinquish(Primitive):
    name = "tcgen05.relinquish"
    summary = "give up this CTA's right to allocate tensor memory, so a co-resident CTA's allocation need not wait"
    doc = "`tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned`, by warp 0 of the role instance."
    requires = frozenset({TCGEN05, TMEM_FEATURE})
    signature = Signature()

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        pass

    def lower(self, op: TypedOp, ctx) -> None:
        _single_instance(ctx, self.name)
        ctx.line(f'if ({ctx.iwarp} == 0) asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;" ::: "memory");')


def check_region(op: TypedOp, o: Operand) -> Iterable[Diagnostic]:
    """A whole region of 128 lanes of 32-bit elements whose columns are an allocatable count."""
    if o.stage is not None or o.index:
        yield codes.OPERANDS.at(o.expr.loc, f"`{op.op.name}` takes a whole region, `{o.name}`")
        return
    if o.dtype is None or o.dtype.bytes != 4:
        yield codes.TYPES.at(o.expr.loc, f"a tensor-memory region holds 32-bit elements, not `{o.dtype}`")
    shape = static_shape(o)
    cols = region_columns(o)
    if shape is None or cols is None or shape[-2] != LANES:
        yield codes.TYPES.at(o.expr.loc, f"a tensor-memory region is [{LANES}, columns], not {shape_text(o.shape)}")
        return
    if cols < MIN_COLUMNS or cols > COLUMNS or cols & (cols - 1):
        yield codes.TYPES.at(
            o.expr.loc, f"`{o.name}` takes {cols} columns; an allocation is a power of two from {MIN_COLUMNS} "
            f"to {COLUMNS}", label="not allocatable",
        )  # fmt: skip


class _Move(Primitive):
    """A copy between a [128, C] f32 tensor-memory tile and a `rows` register tile of the same shape, in
    pieces of at most 32 columns (:func:`move_chunks`); a subclass gives the instruction (``asm``)."""

    requires = frozenset({TCGEN05, TMEM_FEATURE})

    def sides(self, op: TypedOp) -> tuple[Operand, Operand]:
        """(the register tile, the tensor-memory operand)"""
        dst, src = op.outs[0], op.ins[0]
        return (dst, src) if dst.kind is Kind.REGISTERS else (src, dst)

    def asm(self, reg: str, word: str, c0: int, num: int) -> str:
        """The instruction moving columns ``c0 .. c0 + num`` at tensor-memory address ``word``."""
        raise NotImplementedError

    def check(self, op: TypedOp, ctx: CheckContext) -> Iterable[Diagnostic]:
        yield from check_move(op, ctx, *self.sides(op))

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        x.write("dst", x.read("src"))

    def lower(self, op: TypedOp, ctx) -> None:
        reg, mem = self.sides(op)
        for word, (c0, num) in move_chunks(ctx, op, reg=reg, mem=mem):
            ctx.line(self.asm(ctx.rview(reg).name, word, c0, num))


class TmemLoad(_Move):
    name = "tcgen05.ld"
    sass_claims = ("LDTM",)
    summary = "copy a [128, C] f32 tensor-memory tile into a `rows` register tile: lane r to thread r"
    doc = (
        "`tcgen05.ld.sync.aligned.32x32b.xN.b32`: warp w of the role instance reads lanes 32w..32w+31, so "
        "the instance is one warpgroup starting at a warp index that is a multiple of 4. The registers are "
        "valid only after `tcgen05.wait.ld` (an asynchronous group of its own on the CPU: reading the tile "
        "before the wait is a race). Cost: no global or shared bytes."
    )
    group = "tcgen05.ld"
    group_commit = "tcgen05.ld"
    signature = Signature(
        outs=[Slot("dst", {Kind.REGISTERS}, Access.WRITE, asynchronous=True)],
        ins=[Slot("src", {TMEM}, Access.READ)],
    )

    def asm(self, reg: str, word: str, c0: int, num: int) -> str:
        outs = ", ".join(f"%{i}" for i in range(num))
        regs = ", ".join(f'"=f"({reg}[{c0 + i}])' for i in range(num))
        return (f'asm volatile("tcgen05.ld.sync.aligned.32x32b.x{num}.b32 {{{outs}}}, [%{num}];" : {regs} : '
                f'"r"({word}) : "memory");')  # fmt: skip


def check_move(op: TypedOp, ctx: CheckContext, reg: Operand, mem: Operand) -> Iterable[Diagnostic]:
    """The type rule of ``tcgen05.ld`` / ``tcgen05.st``: a [128, C] f32 region slice and a `rows` register
    tile of the same shape, in role instances of 4 warps (warp w reaches lanes 32w..32w+31)."""
    what = op.op.name
    if reg.layout is None or reg.layout.name != "rows":
        yield codes.TYPES.at(reg.expr.loc, f"`{what}` moves a `rows` register tile (thread r holds lane r)")
    if reg.dtype is not DType.F32 or mem.dtype is not DType.F32:
        yield codes.TYPES.at(op.op.loc, f"`{what}` here moves f32 elements")
    sr, sm = static_shape(reg), static_shape(mem)
    if sr is None or sm is None or sr != sm or len(sr) != 2 or sr[0] != LANES:
        yield codes.TYPES.at(op.op.loc, f"`{what}` moves [{LANES}, C] between tensor memory and registers of the "
                             f"same shape, not {shape_text(mem.shape)} and {shape_text(reg.shape)}",
                             label="shape mismatch")  # fmt: skip
    if ctx.role_warps() != 4:
        yield codes.TYPES.at(op.op.loc, f"`{what}` of {LANES} lanes runs in role instances of 4 warps, "
                             f"not {ctx.role_warps()}")  # fmt: skip


def move_chunks(ctx, op: TypedOp, reg: Operand, mem: Operand) -> Iterable[tuple[str, tuple[int, int]]]:
    """The tensor-memory address and the (first column, column count) of each ``.32x32b.xN`` instruction
    moving ``reg`` to or from ``mem``: this warp's 32 lanes (lane field, bits 16-31, ``32 * warp``) and
    the region's column (bits 0-15), in pieces of at most 32 columns."""
    if ctx.role.start % 4 or ctx.role.per != 4:
        raise NotLowerable(f"`{op.op.name}` 32x32b needs role instances that are whole warpgroups")
    cols = static_shape(reg)[1]  # type: ignore[index]
    base = ctx.fresh("ta")
    ctx.line(f"const unsigned {base} = {ctx.handle(mem)} + (({ctx.iwarp} * 32) << 16) + {column_offset(ctx, mem)};")
    c0 = 0
    while c0 < cols:
        num = next(k for k in (32, 16, 8, 4, 2, 1) if cols - c0 >= k)
        yield f"{base} + {c0}", (c0, num)
        c0 += num


class TmemStore(_Move):
    name = "tcgen05.st"
    sass_claims = ("STTM",)
    summary = "copy a `rows` register tile into a [128, C] f32 tensor-memory tile: thread r to lane r"
    doc = (
        "`tcgen05.st.sync.aligned.32x32b.xN.b32 [taddr], {r...}` (PTX ISA, `tcgen05.st`: shapes `.32x32b` "
        "and others, `.num` `.x1` to `.x128`): warp w of the role instance writes lanes 32w..32w+31. The "
        "tensor memory holds the values only after `tcgen05.wait.st` (an asynchronous group of its own on the "
        "CPU: an `tcgen05.mma` or `tcgen05.ld` of the region before the wait, and the fences and barrier "
        "that hand it on, is a race). Cost: no global or shared bytes."
    )
    group = "tcgen05.st"
    group_commit = "tcgen05.st"
    signature = Signature(
        outs=[Slot("dst", {TMEM}, Access.WRITE, asynchronous=True)],
        ins=[Slot("src", {Kind.REGISTERS}, Access.READ)],
    )

    def asm(self, reg: str, word: str, c0: int, num: int) -> str:
        ins = ", ".join(f"%{i + 1}" for i in range(num))
        regs = ", ".join(f'"f"({reg}[{c0 + i}])' for i in range(num))
        return (f'asm volatile("tcgen05.st.sync.aligned.32x32b.x{num}.b32 [%0], {{{ins}}};" :: "r"({word}), '
                f'{regs} : "memory");')  # fmt: skip


class TmemWaitStore(Primitive):
    name = "tcgen05.wait.st"
    summary = "wait until every `tcgen05.st` this thread issued has written tensor memory"
    doc = "`tcgen05.wait::st.sync.aligned` (PTX ISA, `tcgen05.wait`): the stores are visible to this thread's " \
          "later tcgen05 operations; another thread (the `tcgen05.mma` issuer) sees them after " \
          "`tcgen05.fence.before`, a barrier and `tcgen05.fence.after`."
    requires = frozenset({TCGEN05, TMEM_FEATURE})
    group_wait = "tcgen05.st"
    signature = Signature()

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        pass

    def lower(self, op: TypedOp, ctx) -> None:
        ctx.line('asm volatile("tcgen05.wait::st.sync.aligned;" ::: "memory");')


class TmemWaitLoad(Primitive):
    name = "tcgen05.wait.ld"
    summary = "wait until every `tcgen05.ld` this thread issued has delivered its registers"
    doc = (
        "`tcgen05.wait::ld.sync.aligned`. The register tiles named as operands are the ones this wait makes "
        "final: the compiler is kept from reading them earlier."
    )
    requires = frozenset({TCGEN05, TMEM_FEATURE})
    group_wait = "tcgen05.ld"
    signature = Signature(ins=[Slot("done", {Kind.REGISTERS}, Access.NONE, optional=True)])

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        pass

    def lower(self, op: TypedOp, ctx) -> None:
        ctx.line('asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");')
        for o in op.ins:
            reg = ctx.rview(o)
            _, count = _words(ctx, o)
            i = ctx.fresh("f")
            ctx.line(f'#pragma unroll\nfor (int {i} = 0; {i} < {count}; ++{i}) asm volatile("" : "+f"({reg.name}[{i}]) :: "memory");')


def _words(ctx, o: Operand) -> tuple[str, int]:
    from cake_core.lower.cuda import fragment_words

    return fragment_words(ctx.rview(o))


class FenceBefore(Primitive):
    name = "tcgen05.fence.before"
    summary = "order this thread's earlier tcgen05 operations before its next thread barrier"
    doc = "`tcgen05.fence::before_thread_sync`, before a barrier that hands tensor memory (or its address) on."
    requires = frozenset({TCGEN05})
    signature = Signature()

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        pass

    def lower(self, op: TypedOp, ctx) -> None:
        ctx.line('asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");')


class FenceAfter(Primitive):
    name = "tcgen05.fence.after"
    summary = "order this thread's later tcgen05 operations after its last thread barrier"
    doc = "`tcgen05.fence::after_thread_sync`, after a barrier (or mbarrier wait) that handed tensor memory on."
    requires = frozenset({TCGEN05})
    signature = Signature()

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        pass

    def lower(self, op: TypedOp, ctx) -> None:
        ctx.line('asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");')
