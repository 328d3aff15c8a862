"""Cake IR nodes.

Every node is frozen and carries a source location that takes no part in equality: two kernels that
differ only in where their text sat compare equal. Sequence fields are tuples. Passes build new nodes
with :func:`attrs.evolve`.

A module holds kernels and, optionally, a program that allocates intermediate buffers and launches
its kernels in order. Inside a kernel, everything that decides speed is written out: the grid, the
warps of the CTA and the named roles they play, shared-memory buffers with their stages and swizzle,
mbarriers, register tiles with their fragment layouts, and the operations. Operations use one generic
form, ``name outs <- ins, key=value, ...``, so a primitive contributed by a plugin needs no grammar.
"""

from __future__ import annotations

from collections.abc import Iterator

import attrs

from cake_core.location import UNKNOWN, Loc


def _loc() -> Loc:
    return attrs.field(default=UNKNOWN, eq=False, kw_only=True, repr=False)


def _tup() -> tuple:
    return attrs.field(converter=tuple, default=())


# ---------------------------------------------------------------------------------------------------
# Expressions
# ---------------------------------------------------------------------------------------------------


@attrs.frozen
class Expr:
    """Base of expressions: integer and float arithmetic, names, calls and tensor references."""

    loc: Loc = _loc()


@attrs.frozen
class Num(Expr):
    value: int | float


@attrs.frozen
class Name(Expr):
    id: str


@attrs.frozen
class Unary(Expr):
    op: str  # "-", "not"
    operand: Expr


@attrs.frozen
class Bin(Expr):
    op: str  # + - * / % < <= > >= == != and or   ("/" is integer floor division on sizes)
    left: Expr
    right: Expr


@attrs.frozen
class Call(Expr):
    fn: str  # cdiv, min, max
    args: tuple[Expr, ...] = _tup()


@attrs.frozen
class Idx:
    """One index position of a reference."""

    loc: Loc = _loc()


@attrs.frozen
class At(Idx):
    """A single position: ``b``."""

    expr: Expr


@attrs.frozen
class Span(Idx):
    """A slice of ``size`` elements from ``start``: ``t*BM : +BM``."""

    start: Expr
    size: Expr


@attrs.frozen
class All(Idx):
    """The whole extent: ``:``."""


@attrs.frozen
class Ref(Expr):
    """A tensor, buffer, register tile or barrier, optionally indexed: ``cs[s][:, k*16 : +16]``.

    For a staged shared buffer or a barrier array, the first index selects the stage.
    ``transpose`` is written ``^T`` after the reference.
    """

    name: str
    index: tuple[Idx, ...] = _tup()
    transpose: bool = False


# ---------------------------------------------------------------------------------------------------
# Types and declarations
# ---------------------------------------------------------------------------------------------------


@attrs.frozen
class Param:
    """A kernel or program parameter: ``x: global bf16[B, N, D]`` or ``alpha: scalar f32``."""

    name: str
    tier: str  # "global" or "scalar"
    dtype: str  # a dtype name or a type variable of the domain (``T``)
    shape: tuple[Expr, ...] = _tup()
    loc: Loc = _loc()


@attrs.frozen
class Constraint:
    """One clause of a shape domain.

    ``op`` is one of ``>=``, ``<=`` (``values`` holds one bound), ``in`` (a finite set of sizes or
    dtypes, which makes the name a compile-time constant of each specialization) and ``%`` (the size is
    a multiple of ``values[0]``).
    """

    var: str
    op: str
    values: tuple[Expr, ...] = _tup()
    loc: Loc = _loc()


@attrs.frozen
class Const:
    """A compile-time constant of the schedule: ``const BM = 128``."""

    name: str
    value: Expr
    loc: Loc = _loc()


@attrs.frozen
class Grid:
    """CTAs over output tiles: ``grid (b, t) over (B, cdiv(N, BM))``; the first name varies fastest."""

    vars: tuple[str, ...] = _tup()
    extents: tuple[Expr, ...] = _tup()
    loc: Loc = _loc()


@attrs.frozen
class Cta:
    """``cta warps 12 [occupancy 1] [cluster (2, 1)]``."""

    warps: Expr
    occupancy: Expr | None = None  # minimum resident CTAs per SM promised to the compiler
    cluster: tuple[Expr, ...] = _tup()
    loc: Loc = _loc()


@attrs.frozen
class Smem:
    """A shared-memory buffer: ``smem cs: bf16[3][128, D] swizzle 128B pad 0 align 1024``."""

    name: str
    dtype: str
    shape: tuple[Expr, ...]
    stages: Expr | None = None
    swizzle: str | None = None  # "32B", "64B", "128B"; None is no swizzle
    pad: Expr | None = None  # elements added to the end of each row
    align: Expr | None = None  # byte alignment of the buffer's start
    loc: Loc = _loc()


@attrs.frozen
class Mem:
    """A region of a memory tier a plugin declares: ``tmem acc: f32[2][128, 128]``.

    The keyword is the tier's name (:class:`cake_core.ir.primitive.Tier`, registered through
    ``cake_register_tiers``): the grammar parses every such declaration alike, and the tier's
    primitives give it meaning. ``stages`` makes a ring of regions, as for a shared buffer."""

    tier: str
    name: str
    dtype: str
    shape: tuple[Expr, ...]
    stages: Expr | None = None
    loc: Loc = _loc()


@attrs.frozen
class Barrier:
    """An mbarrier, or a ring of them: ``barrier full: mbarrier[4] count 1``."""

    name: str
    kind: str  # "mbarrier"
    count: Expr  # arrivals that complete one phase
    stages: Expr | None = None
    loc: Loc = _loc()


@attrs.frozen
class Pipe:
    """A producer -> consumer ring of shared-memory stages: ``pipe cring: producer -> consumers of cs, csq``.

    Its stages are its buffers' (each a ring of the same stage count). The compiler derives the two
    mbarrier rings that gate it (a *full* barrier per stage, armed by the producer's ``pipe.acquire``
    with the bytes of the copies issued into the stage, and an *empty* barrier per stage, which every
    thread of every consumer instance arrives on with ``pipe.release``), the stage each ``pipe.acquire``
    and ``pipe.wait`` takes, and the phase parity each waits for. ``cluster`` (``... of cs, csq cluster``):
    the stages are shared by every CTA of the thread-block cluster (multicast into them), so a release
    reaches the empty barrier of every CTA and the empty count is every consumer thread of the cluster.
    """

    name: str
    producers: tuple[str, ...]
    consumers: tuple[str, ...]
    buffers: tuple[str, ...]
    cluster: bool = False
    loc: Loc = _loc()


@attrs.frozen
class Layout:
    """A register tile's distribution over the role's threads: ``mma_acc(4, 2)``, ``rows``."""

    name: str
    args: tuple[Expr, ...] = _tup()
    loc: Loc = _loc()


# ---------------------------------------------------------------------------------------------------
# Statements
# ---------------------------------------------------------------------------------------------------


@attrs.frozen
class Stmt:
    loc: Loc = _loc()


@attrs.frozen
class Attr:
    key: str
    value: Expr
    loc: Loc = _loc()


@attrs.frozen
class Op(Stmt):
    """An operation in the generic form ``name outs <- ins, key=value``.

    Without ``<-`` every operand is in ``ins``; what an operation reads and writes is told by its
    primitive's declared effects, not by where its operands were written.
    """

    name: str = ""
    outs: tuple[Expr, ...] = _tup()
    ins: tuple[Expr, ...] = _tup()
    attrs: tuple[Attr, ...] = _tup()

    def attr(self, key: str) -> Expr | None:
        for a in self.attrs:
            if a.key == key:
                return a.value
        return None

    @property
    def operands(self) -> tuple[Expr, ...]:
        return self.outs + self.ins


@attrs.frozen
class Let(Stmt):
    name: str = ""
    value: Expr = attrs.field(factory=lambda: Num(0))


@attrs.frozen
class RegDecl(Stmt):
    """A register tile: ``reg acc: f32[BM, BN] layout mma_acc(4, 2)``."""

    name: str = ""
    dtype: str = "f32"
    shape: tuple[Expr, ...] = _tup()
    layout: Layout | None = None


@attrs.frozen
class For(Stmt):
    """``for i in start .. stop [step s]:`` (half-open)."""

    var: str = ""
    start: Expr = attrs.field(factory=lambda: Num(0))
    stop: Expr = attrs.field(factory=lambda: Num(0))
    step: Expr | None = None
    body: tuple[Stmt, ...] = _tup()


@attrs.frozen
class If(Stmt):
    cond: Expr = attrs.field(factory=lambda: Num(1))
    then: tuple[Stmt, ...] = _tup()
    orelse: tuple[Stmt, ...] = _tup()


# ---------------------------------------------------------------------------------------------------
# Kernels, programs, modules
# ---------------------------------------------------------------------------------------------------


@attrs.frozen
class Role:
    """Named warps and what they run: ``role consumers warps 4..12 per 4 regs 232:``.

    ``per`` splits the warp range into instances of that many warps (4: one per warpgroup); inside the
    body, ``self`` is the instance index. Without ``per`` the role is one instance of all its warps.
    """

    name: str
    warp_start: Expr
    warp_stop: Expr
    per: Expr | None = None
    regs: Expr | None = None
    body: tuple[Stmt, ...] = _tup()
    loc: Loc = _loc()


@attrs.frozen
class Kernel:
    name: str
    params: tuple[Param, ...] = _tup()
    domain: tuple[Constraint, ...] = _tup()
    consts: tuple[Const, ...] = _tup()
    grid: Grid = attrs.field(factory=Grid)
    cta: Cta = attrs.field(factory=lambda: Cta(Num(4)))
    smem: tuple[Smem, ...] = _tup()
    barriers: tuple[Barrier, ...] = _tup()
    roles: tuple[Role, ...] = _tup()
    loc: Loc = _loc()
    pipes: tuple[Pipe, ...] = _tup()
    mems: tuple[Mem, ...] = _tup()  # regions of plugin memory tiers (``tmem acc: f32[128, 128]``)

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)

    def buffer(self, name: str) -> Smem | None:
        return next((s for s in self.smem if s.name == name), None)

    def barrier(self, name: str) -> Barrier | None:
        return next((s for s in self.barriers if s.name == name), None)

    def pipe(self, name: str) -> Pipe | None:
        return next((p for p in self.pipes if p.name == name), None)


@attrs.frozen
class Buffer:
    """An intermediate global tensor a program allocates: ``buffer c_sq: global f32[B, K]``."""

    name: str
    dtype: str
    shape: tuple[Expr, ...] = _tup()
    loc: Loc = _loc()


@attrs.frozen
class Launch:
    """``launch assign(x, c, c_sq, out)``: arguments are program parameters or buffers, by position."""

    kernel: str
    args: tuple[str, ...] = _tup()
    loc: Loc = _loc()


@attrs.frozen
class Program:
    name: str
    params: tuple[Param, ...] = _tup()
    domain: tuple[Constraint, ...] = _tup()
    buffers: tuple[Buffer, ...] = _tup()
    launches: tuple[Launch, ...] = _tup()
    loc: Loc = _loc()


@attrs.frozen
class Module:
    """One ``.cake`` file: kernels and at most one program. Without a program, the module's only
    kernel is its program."""

    kernels: tuple[Kernel, ...] = _tup()
    program: Program | None = None
    path: str = attrs.field(default="<memory>", eq=False)

    def kernel(self, name: str) -> Kernel | None:
        return next((k for k in self.kernels if k.name == name), None)

    @property
    def entry(self) -> Program:
        """The program to run: the declared one, or one that launches the only kernel."""
        if self.program is not None:
            return self.program
        k = self.kernels[0]
        return Program(
            k.name, k.params, k.domain, (), (Launch(k.name, tuple(p.name for p in k.params), loc=k.loc),),
            loc=k.loc,
        )


# ---------------------------------------------------------------------------------------------------
# Walking
# ---------------------------------------------------------------------------------------------------


def walk_stmts(body: tuple[Stmt, ...]) -> Iterator[Stmt]:
    """Every statement of ``body``, depth first, in source order."""
    for s in body:
        yield s
        if isinstance(s, For):
            yield from walk_stmts(s.body)
        elif isinstance(s, If):
            yield from walk_stmts(s.then)
            yield from walk_stmts(s.orelse)


def walk_ops(kernel: Kernel) -> Iterator[tuple[Role, Op]]:
    for role in kernel.roles:
        for s in walk_stmts(role.body):
            if isinstance(s, Op):
                yield role, s


def children(e: Expr) -> tuple[Expr, ...]:
    """The sub-expressions of ``e``, in source order (an index's start before its size)."""
    t = type(e)
    if t is Name or t is Num:  # the leaves, most expressions
        return ()
    if isinstance(e, Bin):
        return (e.left, e.right)
    if isinstance(e, Unary):
        return (e.operand,)
    if isinstance(e, Call):
        return e.args
    if isinstance(e, Ref):
        out: list[Expr] = []
        for i in e.index:
            if isinstance(i, At):
                out.append(i.expr)
            elif isinstance(i, Span):
                out += (i.start, i.size)
        return tuple(out)
    return ()


def walk_expr(e: Expr) -> Iterator[Expr]:
    """``e`` and every expression inside it, depth first in source order."""
    yield e
    for c in children(e):
        yield from walk_expr(c)
