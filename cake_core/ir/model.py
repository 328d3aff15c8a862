"""The kernel model: the records type checking produces and every later stage reads.

A :class:`CheckedModule` holds one :class:`KernelModel` per kernel and specialization (a
:class:`Spec`): its roles, shared buffers, barriers, register tiles and typed operations, with every
compile-time value known; and one :class:`LaunchModel` per launch of the program. The verifier, the
interpreter, the cost models and the lowering read these; :mod:`cake_core.ir.sema` builds them.
"""

from __future__ import annotations

import attrs

from cake_core.diagnostics.diagnostic import Diagnostic
from cake_core.ir import nodes as n
from cake_core.ir.layouts import LayoutInfo
from cake_core.ir.primitive import Operand, Primitive
from cake_core.ir.types import DTYPE_BY_NAME, DType


@attrs.frozen
class Spec:
    """Compile-time values of one specialization: finite-set sizes and type variables."""

    values: tuple[tuple[str, int | str], ...]

    @property
    def env(self) -> dict[str, int | str]:
        return dict(self.values)

    @property
    def label(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.values) or "(single)"


@attrs.define
class SmemInfo:
    """A shared buffer under the specialization: its element type, extents, stages, bytes and offset."""

    decl: n.Smem
    dtype: DType
    stages: int | None
    shape: tuple[int, ...]
    row_stride: int  # elements from one row to the next (last extent + pad)
    stage_bytes: int
    bytes: int
    offset: int
    align: int
    swizzle: str | None


@attrs.define
class BarrierInfo:
    """An mbarrier (or a ring of them) under the specialization: stages, arrival count, offset."""

    decl: n.Barrier
    stages: int | None
    count: int
    offset: int


@attrs.define
class MemInfo:
    """A region of a plugin's memory tier under the specialization (``tmem acc: f32[2][128, 128]``):
    its element type, extents and stages, and where in shared memory its *handle* lives: a 32-bit word
    the primitive that allocates the region leaves what the hardware returns in (a tensor-memory
    address), for the tier's other primitives to read."""

    decl: n.Mem
    tier: str
    dtype: DType
    stages: int | None
    shape: tuple[int, ...]
    handle: int  # byte offset of the handle word in the kernel's shared memory


@attrs.define
class RegInfo:
    """A register tile under the specialization: element type, extents, its layout, and its role."""

    decl: n.RegDecl
    dtype: DType
    shape: tuple[int, ...]
    layout: LayoutInfo
    role: str


@attrs.define
class RoleInfo:
    """A role under the specialization: its warp range, warps per instance, instances, register budget."""

    role: n.Role
    start: int
    stop: int
    per: int  # warps per instance
    instances: int
    regs: int | None

    @property
    def warps(self) -> int:
        return self.stop - self.start


@attrs.define(eq=False)
class TypedOpImpl:
    """An operation with its primitive and operands resolved (a :class:`~cake_core.ir.primitive.TypedOp`)."""

    op: n.Op
    prim: Primitive
    outs: tuple[Operand, ...]
    ins: tuple[Operand, ...]
    role: RoleInfo
    #: attributes the compiler derives rather than the author writes (a pipe operation's stage, parity
    #: and transaction bytes: :mod:`cake_core.ir.pipes`); :meth:`attr` reads them after the written ones
    derived: dict[str, n.Expr] = attrs.field(factory=dict)

    def operand(self, slot: str) -> Operand:
        for o in self.outs + self.ins:
            if o.slot.name == slot:
                return o
        raise KeyError(slot)

    def has(self, slot: str) -> bool:
        return any(o.slot.name == slot for o in self.outs + self.ins)

    def attr(self, key: str) -> n.Expr | None:
        v = self.op.attr(key)
        if v is None and self.derived:
            return self.derived.get(key)
        return v


@attrs.define
class PipeInfo:
    """A pipe under the specialization: its stages, buffers, roles and the two barrier rings derived
    for it (:mod:`cake_core.ir.pipes` names them)."""

    decl: n.Pipe
    stages: int
    buffers: tuple[str, ...]
    producers: tuple[str, ...]
    consumers: tuple[str, ...]
    full: str  # the barrier ring the producer arms and the copies complete: one arrival a phase
    empty: str  # the barrier ring every consumer thread arrives on when it releases a stage
    stage_bytes: int  # bytes of one stage of all its buffers


@attrs.define(eq=False)
class KernelModel:
    """One kernel under one specialization, fully resolved."""

    kernel: n.Kernel
    spec: Spec
    env: dict[str, int | str]  # compile-time values: specialization + constants
    typevars: dict[str, DType]
    runtime_sizes: tuple[str, ...]
    warps: int
    occupancy: int | None
    roles: list[RoleInfo]
    smem: dict[str, SmemInfo]
    barriers: dict[str, BarrierInfo]
    smem_bytes: int
    regs: dict[str, RegInfo]
    ops: list[TypedOpImpl]
    by_op: dict[int, TypedOpImpl]
    diagnostics: list[Diagnostic]
    smem_align: int = 16  # alignment of the shared-memory base the kernel establishes at run time
    pipes: dict[str, PipeInfo] = attrs.field(factory=dict)
    mems: dict[str, MemInfo] = attrs.field(factory=dict)  # regions of plugin memory tiers

    @property
    def threads(self) -> int:
        return self.warps * 32

    def typed(self, op: n.Op) -> TypedOpImpl:
        return self.by_op[id(op)]

    def dtype(self, name: str) -> DType:
        if name in self.typevars:
            return self.typevars[name]
        return DTYPE_BY_NAME.get(name) or DType(name)

    def param_dtype(self, p: n.Param) -> DType:
        return self.dtype(p.dtype)

    def role_info(self, role: n.Role) -> RoleInfo:
        return next(r for r in self.roles if r.role is role)


@attrs.define(eq=False)
class LaunchModel:
    """One launch of the program with its kernel's sizes and type variables bound to the program's."""

    launch: n.Launch
    kernel: n.Kernel
    # kernel size/type-variable name -> program expression (sizes) or dtype/typevar name
    sizes: dict[str, n.Expr]
    types: dict[str, str]


@attrs.define(eq=False)
class CheckedModule:
    """A type-checked module: a model per (kernel, specialization), the launches, the diagnostics."""

    module: n.Module
    models: dict[tuple[str, Spec], KernelModel]
    launches: list[LaunchModel]
    diagnostics: list[Diagnostic]

    @property
    def ok(self) -> bool:
        return not any(d.is_error for d in self.diagnostics)

    def kernel_models(self, name: str) -> list[KernelModel]:
        return [m for (k, _), m in self.models.items() if k == name]
