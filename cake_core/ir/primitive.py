"""The primitive contract: everything one IR operation brings with it.

A primitive is registered through ``cake_register_primitives`` (the core's own ones too) and owns
one operation name of the generic form ``name outs <- ins, key=value``. It declares:

* its **signature**: operand slots (which memory tiers each may live in) and attributes;
* its **effects**: per slot, whether it is read or written, through the async proxy or not, whether
  a bounds mask covers the access, and what it does to barrier operands (arrive, wait, expect-tx,
  complete-tx). Verifier rules read effects, so they check primitives they have never seen;
* its **type rule** (:meth:`Primitive.check`), beyond the signature;
* its **CPU semantics** (:meth:`Primitive.execute`), which the interpreter runs;
* its **lowering** per architecture (:meth:`Primitive.lower`), emitting CUDA C++;
* its **cost terms** (:meth:`Primitive.cost`) for the cost models;
* the target **features** it needs.

Subclass :class:`Primitive` (an attrs base) and override what applies.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import attrs
import numpy as np

from cake_core.names import OpenName
from cake_core.target import Feature

if TYPE_CHECKING:
    from cake_core.diagnostics.diagnostic import Diagnostic
    from cake_core.lower.tiles import GlobalView, RegView, SharedView
    from cake_core.ir import nodes as n
    from cake_core.ir.types import DType
    from cake_core.target import Target


class Kind(OpenName):
    """What an operand is: where it lives (a memory tier), or a barrier, or a value.

    An open set of names: the core declares the kinds its IR declarations make (global tensors,
    shared buffers, register tiles, barriers, values) as :data:`CORE_TIERS`; a plugin declares more
    through ``cake_register_tiers`` and names them in its primitives' slots. One object per name, so
    ``Kind("shared") is Kind.SHARED``.
    """

    __slots__ = ()

    GLOBAL: ClassVar[Kind]
    SHARED: ClassVar[Kind]
    REGISTERS: ClassVar[Kind]
    BARRIER: ClassVar[Kind]
    PIPE: ClassVar[Kind]
    VALUE: ClassVar[Kind]


Kind.GLOBAL = Kind("global")  # a (slice of a) global tensor parameter or program buffer
Kind.SHARED = Kind("shared")  # a (stage or slice of a) shared-memory buffer
Kind.REGISTERS = Kind("registers")  # a register tile
Kind.BARRIER = Kind("barrier")  # an mbarrier (or one stage of a ring); mbarriers live in shared memory
Kind.PIPE = Kind("pipe")  # a producer -> consumer ring of shared stages (or one stage of it)
Kind.VALUE = Kind("value")  # an integer or float expression, held in no memory


@attrs.frozen
class Tier:
    """A declaration of one operand kind: its name and a sentence on what it is. Registered through
    ``cake_register_tiers``; a primitive's slots may name only declared kinds."""

    name: Kind = attrs.field(converter=Kind)
    doc: str


#: the kinds the core's IR declarations make (a parameter, ``smem``, ``reg``, ``barrier``, an expression)
CORE_TIERS: tuple[Tier, ...] = (
    Tier(Kind.GLOBAL, "device memory: a kernel's tensor parameters and a program's buffers"),
    Tier(Kind.SHARED, "a CTA's shared memory: `smem` buffers, staged or not"),
    Tier(Kind.REGISTERS, "a role instance's registers: `reg` tiles spread by a layout"),
    Tier(Kind.BARRIER, "an mbarrier (or a ring of them) in shared memory, tracked on its own"),
    Tier(Kind.PIPE, "a `pipe`: a producer -> consumer ring of shared stages and the mbarriers that gate it"),
    Tier(Kind.VALUE, "an integer or float expression, held in no memory"),
)


TILES = frozenset({Kind.GLOBAL, Kind.SHARED, Kind.REGISTERS})


class Access(enum.StrEnum):
    READ = "read"
    WRITE = "write"
    READWRITE = "readwrite"
    NONE = "none"


class BarrierAction(enum.StrEnum):
    INIT = "init"
    ARRIVE = "arrive"  # counts one arrival toward the current phase
    EXPECT_TX = "expect_tx"  # adds expected transaction bytes to the current phase
    ARRIVE_EXPECT_TX = "arrive_expect_tx"
    COMPLETE_TX = "complete_tx"  # an async copy signals its bytes on completion
    WAIT = "wait"  # blocks until the phase of the given parity completes


@attrs.frozen
class Slot:
    """One operand position of a signature."""

    name: str
    kinds: frozenset[Kind] = attrs.field(converter=lambda ks: frozenset(Kind(k) for k in ks))
    access: Access = Access.READ
    async_proxy: bool = False  # accessed by the async proxy (TMA, wgmma operands in shared memory)
    asynchronous: bool = False  # the access completes after the op issues (cp.async, TMA)
    barrier: BarrierAction | None = None
    mask_attr: str | None = None  # out-of-bounds elements are masked when this attribute is given
    masked_always: bool = False  # the hardware masks out-of-bounds elements itself (TMA zero-fills)
    optional: bool = False
    doc: str = ""
    # an atomic read-modify-write (``atomic.add``): accesses that are all atomic do not race with
    # each other; they still race with plain reads and writes of the same region
    atomic: bool = False
    # an output that binds a new name for the rest of its block (``pipe.wait s <- cring`` binds the
    # stage ``s``); the operation says what it holds through :meth:`Primitive.binds`
    binds: bool = False
    # filled in by the compiler from the pipe the operation names, never written: the barrier a copy
    # into a pipe's stage completes on, the barriers a pipe operation waits on and arrives at
    derived: bool = False


@attrs.frozen
class AttrSpec:
    """An attribute ``key=value``.

    ``kind``: ``int`` (an integer expression, may depend on run-time values), ``const`` (an integer
    known when the kernel is compiled), ``float`` (a number, ``inf`` allowed), ``word`` (one of
    ``choices``).
    """

    name: str
    kind: str
    required: bool = False
    choices: tuple[str, ...] = ()
    default: Any = None
    doc: str = ""


@attrs.frozen
class Signature:
    outs: tuple[Slot, ...] = attrs.field(default=(), converter=tuple)
    ins: tuple[Slot, ...] = attrs.field(default=(), converter=tuple)
    attrs: tuple[AttrSpec, ...] = attrs.field(default=(), converter=tuple)

    @property
    def arrow(self) -> bool:
        """Whether the operation is written with ``<-`` (it has output slots)."""
        return bool(self.outs)

    def attr(self, key: str) -> AttrSpec | None:
        for a in self.attrs:
            if a.name == key:
                return a
        return None


@attrs.frozen
class Operand:
    """An operand resolved against its kernel under one specialization."""

    expr: n.Expr
    slot: Slot
    kind: Kind
    name: str | None = None  # the tensor, buffer, tile or barrier it refers to
    dtype: DType | None = None
    shape: tuple[int | n.Expr, ...] = ()  # after indexing; ints where known at compile time
    decl: Any = None  # the Param, Buffer, Smem, Barrier or RegDecl
    stage: n.Expr | None = None  # the stage index of a staged buffer or barrier ring
    index: tuple[n.Idx, ...] = ()  # indices after the stage
    transpose: bool = False
    layout: n.Layout | None = None


@attrs.frozen
class Effect:
    """One declared effect of one operation instance, for verifier rules and the interpreter.

    For barrier operands, ``arrivals`` is how many arrivals the action counts toward the current
    phase (an expression; ``None`` for none) and ``amount`` is the parity a WAIT waits for, or the
    transaction bytes of EXPECT_TX / ARRIVE_EXPECT_TX / COMPLETE_TX. Both are evaluated where the
    operation runs (they may use loop variables). ``cluster``: the action reaches the same shared offset
    (the buffer, the barrier) in every CTA of the thread-block cluster — a multicast copy's write and
    its ``complete_tx``, an arrival on the peers' barriers.
    """

    operand: Operand
    access: Access
    tier: Kind
    async_proxy: bool
    asynchronous: bool
    barrier: BarrierAction | None
    masked: bool
    arrivals: n.Expr | None = None
    amount: n.Expr | None = None
    cluster: bool = False

    @property
    def atomic(self) -> bool:
        """Whether the access is an atomic read-modify-write (declared by the operand's slot)."""
        return self.operand.slot.atomic


@attrs.frozen
class Bind:
    """A value an operation assigns once it has run: a name it binds (``pipe.wait s <- cring`` gives
    ``s`` the stage it waited for) or a ``counter`` it advances. A counter is role-instance state that
    starts at 0 (the number of stages a role has taken from a pipe); it is named so that no kernel can
    write it. The interpreter, the protocol replay and the lowering assign binds in order, after the
    operation's effects."""

    name: str
    value: n.Expr
    counter: bool = False


@attrs.frozen
class CostTerms:
    """Work of one execution of an operation by one role instance."""

    flops: float = 0.0  # floating-point operations
    tensor_flops: float = 0.0  # of which on tensor cores
    global_bytes: float = 0.0
    shared_bytes: float = 0.0
    dtype: str | None = None  # tensor-core input dtype, for the right ceiling
    # Reductions into global memory (``red.global`` / ``atom.global``) run in the L2's atomic units, as
    # requests: one per 32-byte sector one warp instruction updates (a lane adding to a row of its own is
    # a request per lane and vector; the four lanes of a quad adding 8 consecutive f32 share one).
    global_atomics: float = 0.0  # those requests
    shared_atomics: float = 0.0  # atomic operations on shared memory, one per element (no vector form)


class TypedOp(Protocol):
    """What checkers, the interpreter and the lowering know about one operation."""

    op: n.Op
    prim: Primitive
    outs: tuple[Operand, ...]
    ins: tuple[Operand, ...]

    def operand(self, slot: str) -> Operand: ...

    def attr(self, key: str) -> n.Expr | None: ...


class CheckContext(Protocol):
    """Given to :meth:`Primitive.check`."""

    target: Target | None
    spec: Mapping[str, int | str]  # compile-time values of this specialization

    def const(self, e: n.Expr) -> int | None: ...  # the compile-time value of ``e``, if it has one

    def role_warps(self) -> int: ...  # warps per instance of the enclosing role

    def cluster_size(self) -> int: ...  # CTAs in the kernel's thread-block cluster (1 without one)

    def error(self, code: str, loc: Any, message: str, **kw: Any) -> Diagnostic: ...


class ExecContext(Protocol):
    """Given to :meth:`Primitive.execute`: the interpreter's view of one operation's operands."""

    def read(self, slot: str) -> np.ndarray: ...  # float32 (or int) values of a tile operand

    def write(self, slot: str, value: np.ndarray) -> None: ...

    def value(self, e: n.Expr) -> int | float: ...

    def attr(self, key: str, default: Any = None) -> Any: ...  # evaluated attribute value

    def masked(self, slot: str) -> bool: ...  # whether the operand's access is bounds-masked

    def in_bounds(self, slot: str) -> np.ndarray: ...  # which elements of a tile operand exist


class LowerContext(Protocol):
    """Given to :meth:`Primitive.lower`: emits CUDA C++ for one role instance's operation.

    Addresses, masks and fragment indices come from the operand views, never from hand arithmetic:
    a global view knows its tensor's extents (so ``in_bounds`` derives the mask), a shared view its
    stage, row pitch and swizzle, a register view its fragment layout.
    """

    target: Target
    model: Any  # the KernelModel being lowered (compile-time values in ``model.env``)
    itid: str  # C++ name of the thread index within the role instance
    iwarp: str  # C++ name of the warp index within the role instance
    lane: str  # C++ name of the lane index

    @property
    def threads(self) -> int: ...  # threads of the role instance

    @property
    def cluster(self) -> int: ...  # CTAs in the kernel's thread-block cluster (1 without one)

    def line(self, code: str) -> None: ...

    def c(self, e: n.Expr) -> str: ...  # C++ text of an IR expression

    def helper(self, key: str, code: str) -> None: ...  # a device function, emitted once per file

    def fresh(self, prefix: str) -> str: ...

    def gview(self, o: Operand) -> GlobalView: ...

    def sview(self, o: Operand) -> SharedView: ...

    def rview(self, o: Operand) -> RegView: ...

    def barrier_addr(self, o: Operand) -> str: ...  # shared address (u32) of a barrier stage

    def handle_addr(self, o: Operand) -> str: ...  # shared address (u32) of a plugin tier region's handle

    def handle(self, o: Operand) -> str: ...  # the value of that handle (what its allocation left)

    def sync_instance(self) -> str: ...  # C++ that synchronizes the role instance's threads


class NotLowerable(Exception):
    """A primitive has no lowering for this target or operand placement."""


class ExecFault(Exception):
    """Raised by :meth:`Primitive.execute` for a fault that depends on data, not on the operands'
    regions: a scatter or gather index outside the tile it selects rows of. The interpreter reports
    it as an out-of-bounds access (CS001) and stops the run, as the GPU would fault."""


@attrs.define(frozen=True, eq=False)
class Primitive:
    """Base class of primitives. Subclasses set ``name``, ``signature`` and ``summary``."""

    name: ClassVar[str]
    signature: ClassVar[Signature]
    summary: ClassVar[str]
    requires: ClassVar[frozenset[Feature]] = frozenset()
    # a CTA-wide synchronization point: every thread of the CTA must reach it
    cta_barrier: ClassVar[bool] = False
    # a cluster-wide synchronization point: every thread of every CTA of the thread-block cluster
    cluster_barrier: ClassVar[bool] = False
    # Asynchronous groups (cp.async, wgmma): an operation whose ``asynchronous`` accesses join the
    # issuing thread's open group named ``group``; one that closes the open group (``group_commit``);
    # one that waits until at most ``pending`` (an attribute) committed groups remain (``group_wait``).
    group: ClassVar[str | None] = None
    group_commit: ClassVar[str | None] = None
    group_wait: ClassVar[str | None] = None
    # SASS mnemonics an operation of this primitive must leave in the cubin (``HMMA`` for mma.sync):
    # benchmarks check every claim of the schedule against the disassembly
    sass_claims: ClassVar[tuple[str, ...]] = ()
    # attributes the compiler derives for each operation instead of the author writing them (a pipe
    # operation's ``stage``, ``parity`` and ``bytes``: :mod:`cake_core.ir.pipes`); read through
    # ``TypedOp.attr`` like written ones
    derives: ClassVar[tuple[str, ...]] = ()
    doc: ClassVar[str] = ""
    # Declared traits verifier rules and the interpreter read (never guessed from a name or a feature):
    # every execution is issued by one whole warpgroup (four consecutive warps from a multiple of four)
    warpgroup: ClassVar[bool] = False
    # one asynchronous unit performs each execution for the whole role instance (a warpgroup's wgmma, an
    # MMA one thread issues): its asynchronous accesses keep their own epoch, which the issuer acquires
    # at its group wait (warpgroup-wide primitives are collective too)
    collective: ClassVar[bool] = False
    # an operand-less fence ordering the thread's generic-proxy shared writes before its async-proxy accesses
    proxy_fence: ClassVar[bool] = False
    # its generic-proxy shared-memory accesses compute a swizzled buffer's addresses themselves
    swizzle_aware: ClassVar[bool] = False

    def features(self, op: TypedOp) -> frozenset[Feature]:
        """Target features this operation needs (may depend on operand types)."""
        return self.requires

    def effects(self, op: TypedOp) -> tuple[Effect, ...]:
        """Declared effects, one per operand, derived from the signature."""
        out = []
        for operand in op.outs + op.ins:
            slot = operand.slot
            mask = slot.masked_always or (slot.mask_attr is not None and _mask_given(op.attr(slot.mask_attr)))
            out.append(
                Effect(operand, slot.access, operand.kind, slot.async_proxy, slot.asynchronous,
                        slot.barrier, mask, None, None)
            )  # fmt: skip
        return tuple(out)

    def check(self, op: TypedOp, ctx: CheckContext) -> Iterable[Diagnostic]:
        """Type rule beyond the signature: shapes and dtypes that must agree."""
        return ()

    def prepare(self, op: TypedOp, ctx: LowerContext) -> None:
        """Before the kernel is emitted: create what the operation needs from outside the kernel body
        (a TMA tensor map, which becomes a kernel parameter). Nothing by default."""

    def binds(self, op: TypedOp) -> tuple[Bind, ...]:
        """What the operation assigns after it has run (see :class:`Bind`); none by default."""
        return ()

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        """CPU semantics on the logical tiles of one role instance."""
        raise NotImplementedError(f"primitive `{self.name}` has no CPU semantics")

    def lower(self, op: TypedOp, ctx: LowerContext) -> None:
        """Emit CUDA C++ for one role instance's execution of this operation."""
        raise NotLowerable(f"primitive `{self.name}` has no lowering")

    def cost(self, op: TypedOp, ctx: CheckContext) -> CostTerms:
        return CostTerms()


def is_warpgroup_wide(prim: Primitive, features: frozenset[Feature] = frozenset()) -> bool:
    """Whether one execution of the operation is issued by a whole warpgroup: its primitive declares
    ``warpgroup = True`` (``features`` is not consulted; kept so callers need not change)."""
    return prim.warpgroup is True


def masked(op: TypedOp, key: str = "oob") -> bool:
    """Whether ``op`` gives its bounds-mask attribute ``key`` (and not as ``none``)."""
    return _mask_given(op.attr(key))


def _mask_given(value: n.Expr | None) -> bool:
    from cake_core.ir import nodes as n

    if value is None:
        return False
    return not (isinstance(value, n.Name) and value.id == "none")


def static_shape(operand: Operand) -> tuple[int, ...] | None:
    """The operand's tile shape if every extent is known at compile time."""
    shape = operand.shape
    for s in shape:
        if not isinstance(s, int):
            return None
    return tuple(shape)  # type: ignore[arg-type]


def numel(shape: Sequence[int]) -> int:
    out = 1
    for s in shape:
        out *= s
    return out
