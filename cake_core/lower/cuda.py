"""Kernel structure -> CUDA C++.

This module lowers what the grammar owns: the kernel signature and launch bounds, compile-time
constants, the shared-memory carve-up, grid variables, role dispatch by warp range, loops, lets and
conditionals. Each operation is lowered by its primitive (``Primitive.lower``) through the
:class:`KernelLowering` context, which hands out operand views (:mod:`cake_core.lower.tiles`) so
that addresses, masks and fragment indices are derived, not written.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

import attrs

from cake_core.errors import NotLoweredError
from cake_core.ir import nodes as n
from cake_core.ir.cluster import CRANK, cluster_size
from cake_core.ir.exprs import to_c, try_int
from cake_core.ir.primitive import Kind, NotLowerable, Operand
from cake_core.ir.model import KernelModel, RoleInfo, TypedOpImpl
from cake_core.ir.sema import TARGET_CONSTANTS
from cake_core.ir.swizzle import SWIZZLE_BYTES
from cake_core.ir.types import DType
from cake_core.lower.tiles import GlobalView, RegView, SharedView
from cake_core.lower.prelude import CLUSTER_SYNC
from cake_core.target import Target

CXX_KEYWORDS = frozenset(
    "alignas alignof and asm auto bool break case catch char class const constexpr continue default "
    "delete do double else enum explicit extern false float for friend goto if inline int long mutable "
    "namespace new not nullptr operator or private protected public register return short signed sizeof "
    "static struct switch template this throw true try typedef typename union unsigned using virtual "
    "void volatile while xor threadIdx blockIdx blockDim gridDim warpSize min max".split()
)

STORAGE = {
    DType.BF16: "cake_bf16", DType.F16: "cake_f16", DType.F32: "float", DType.F64: "double",
    DType.I32: "int", DType.U32: "unsigned", DType.I64: "long long", DType.I8: "signed char",
    DType.U8: "unsigned char", DType.PRED: "bool",
}  # fmt: skip


def storage(dtype: DType) -> str:
    if dtype not in STORAGE:
        raise NotLowerable(f"no storage type for `{dtype}` yet")
    return STORAGE[dtype]


def c_name(name: str) -> str:
    if name == "self":
        return "cake_self"
    if "#" in name:  # a counter the compiler keeps (a pipe's stages taken): no kernel can name it
        return "cake_" + name.replace("#", "_")
    if name in CXX_KEYWORDS or name.startswith("cake_"):
        return f"{name}_"
    return name


def fragment_words(view: RegView) -> tuple[str, int]:
    """C++ element type and count of a register tile's per-thread storage."""
    info = view.layout
    if info.name in ("mma_a", "mma_b"):
        return "unsigned", info.regs_per_thread
    ctype = storage(view.dtype) if view.dtype not in (DType.BF16, DType.F16) else "float"
    if info.name == "rows":
        per_row = info.shape[1] if len(info.shape) == 2 else 1
        return ctype, -(-info.shape[0] // info.threads) * per_row
    if info.name == "mma_acc":
        return ctype, info.regs_per_thread
    if info.name == "mma_rows":
        return ctype, info.regs_per_thread
    if info.name in ("wgmma_acc", "wgmma_rows"):
        return ctype, info.regs_per_thread
    raise NotLowerable(f"no storage for layout `{info.name}`")


@attrs.frozen
class TensorMap:
    """A TMA tensor map a kernel takes as a ``__grid_constant__`` parameter: derived, never written."""

    name: str  # the kernel parameter
    param: str  # the kernel's global tensor parameter it describes
    dtype: DType
    box: tuple[int, ...]  # elements, innermost first
    swizzle: str  # "none", "32B", "64B", "128B"
    panels: int  # copies along the innermost dimension per tile (swizzle panels)
    row_boxes: int  # copies along the second dimension per tile (box rows are at most 256)
    panel_bytes: int  # shared bytes between panels
    box_row_bytes: int  # shared bytes of one box row


class FileEmitter:
    """One generated source file: shared helpers first, then kernels."""

    def __init__(self) -> None:
        self.helpers: dict[str, str] = {}
        self.kernels: list[str] = []

    def helper(self, key: str, code: str) -> None:
        self.helpers.setdefault(key, code.strip("\n"))

    def source(self, header: str) -> str:
        from cake_core.lower.prelude import PRELUDE

        parts = [header.rstrip(), PRELUDE.strip("\n")] + list(self.helpers.values()) + self.kernels
        return "\n\n".join(parts) + "\n"


def _stage_rows(info) -> int:
    """Rows of one stage of a shared buffer (every dimension but the innermost): the height of a swizzle
    panel, the panels of a stage lying one after the other."""
    rows = 1
    for d in info.shape[:-1]:
        rows *= d
    return rows


class KernelLowering:
    """Lowers one kernel specialization; the :class:`~cake_core.ir.primitive.LowerContext` of its ops."""

    def __init__(self, model: KernelModel, target: Target, fn_name: str, file: FileEmitter) -> None:
        self.model, self.target, self.fn_name, self.file = model, target, fn_name, file
        self.lines: list[str] = []
        self.depth = 1
        self.role: RoleInfo | None = None
        self._fresh = itertools.count()
        self.writes = {
            o.name for t in model.ops for o in t.outs + t.ins if o.kind is Kind.GLOBAL and o.slot.access.value != "read"
        }
        self.tensor_maps: dict[tuple, TensorMap] = {}
        self.instance_ids: dict[tuple[str, int], int] = {}
        next_id = itertools.count(1)
        for r in model.roles:
            for i in range(r.instances):
                self.instance_ids[(r.role.name, i)] = next(next_id)

    # -- the LowerContext protocol -------------------------------------------------------------------

    def line(self, code: str) -> None:
        for ln in code.split("\n"):
            self.lines.append("  " * self.depth + ln if ln else "")

    def c(self, e: n.Expr) -> str:
        v = try_int(e, self.model.env)
        if v is not None and not any(isinstance(s, n.Name) and s.id == "self" for s in n.walk_expr(e)):
            return str(v)
        return to_c(e, c_name)

    def helper(self, key: str, code: str) -> None:
        self.file.helper(key, code)

    def fresh(self, prefix: str) -> str:
        return f"cake_{prefix}{next(self._fresh)}"

    # -- what primitive lowerings ask for ------------------------------------------------------------

    @property
    def threads(self) -> int:
        """Threads of the current role instance."""
        assert self.role is not None
        return self.role.per * 32

    @property
    def cluster(self) -> int:
        """CTAs in the kernel's thread-block cluster (1 without one)."""
        return cluster_size(self.model.kernel, self.model.env)

    itid = "cake_itid"  # thread index within the role instance
    iwarp = "cake_iwarp"  # warp index within the role instance
    lane = "cake_lane"

    def is_f16(self, dtype: DType | None) -> int:
        return 1 if dtype is DType.F16 else 0

    def sync_instance(self) -> str:
        """C++ that synchronizes the threads of the current role instance (and nothing else)."""
        assert self.role is not None
        if self.role.per * 32 == self.model.threads:
            return "__syncthreads();"
        ids = [self.instance_ids[(self.role.role.name, i)] for i in range(self.role.instances)]
        if self.role.instances == 1:
            return f'asm volatile("bar.sync {ids[0]}, {self.threads};" ::: "memory");'
        return f'asm volatile("bar.sync %0, {self.threads};" :: "r"({ids[0]} + cake_self) : "memory");'

    def gview(self, o: Operand) -> GlobalView:
        p = o.decl
        assert isinstance(p, n.Param)
        rank = len(p.shape)
        extents = tuple(self.c(e) for e in p.shape)
        strides = tuple(f"cake_{c_name(p.name)}_s{d}" if d < rank - 1 else "1" for d in range(rank))
        starts, tile_dims, sizes, whole = [], [], [], []
        index = list(o.index) + [n.All()] * (rank - len(o.index))
        for d, item in enumerate(index):
            if isinstance(item, n.At):
                starts.append(self.c(item.expr))
                whole.append(False)
            elif isinstance(item, n.Span):
                starts.append(self.c(item.start))
                tile_dims.append(d)
                v = try_int(item.size, self.model.env)
                sizes.append(v if v is not None else self.c(item.size))
                whole.append(False)
            else:
                starts.append("0")
                tile_dims.append(d)
                v = try_int(p.shape[d], self.model.env)
                sizes.append(v if v is not None else extents[d])
                whole.append(True)
        return GlobalView(c_name(p.name), self.model.param_dtype(p), extents, strides, tuple(starts),
                          tuple(tile_dims), tuple(sizes), tuple(whole))  # fmt: skip

    def sview(self, o: Operand) -> SharedView:
        info = self.model.smem[o.name]  # type: ignore[index]
        shape = info.shape
        strides = [1] * len(shape)
        acc = info.row_stride
        for d in range(len(shape) - 2, -1, -1):
            strides[d] = acc
            acc *= shape[d]
        base = c_name(info.decl.name)
        if info.stages is not None:
            stage = self.c(o.stage) if o.stage is not None else "0"
            stage_elems = info.stage_bytes // info.dtype.bytes
            base = f"({base} + ({stage}) * {stage_elems})"
        starts, tile_dims, sizes = [], [], []
        index = list(o.index) + [n.All()] * (len(shape) - len(o.index))
        for d, item in enumerate(index):
            if isinstance(item, n.At):
                starts.append(self.c(item.expr))
            elif isinstance(item, n.Span):
                starts.append(self.c(item.start))
                tile_dims.append(d)
                v = try_int(item.size, self.model.env)
                sizes.append(v if v is not None else self.c(item.size))
            else:
                starts.append("0")
                tile_dims.append(d)
                sizes.append(shape[d])
        return SharedView(base, info.dtype, tuple(strides), tuple(starts), tuple(tile_dims), tuple(sizes),
                          info.swizzle, info.row_stride * info.dtype.bytes, _stage_rows(info))  # fmt: skip

    def rview(self, o: Operand) -> RegView:
        info = self.model.regs[o.name]  # type: ignore[index]
        return RegView(c_name(o.name), info.dtype, info.layout)  # type: ignore[arg-type]

    def barrier_addr(self, o: Operand) -> str:
        """Shared address (u32) of a barrier operand (one stage of a ring)."""
        info = self.model.barriers[o.name]  # type: ignore[index]
        stage = f" + ({self.c(o.stage)}) * 8" if o.stage is not None else ""
        return f"(cake_smem_base + {info.offset}u{stage})"

    def handle_addr(self, o: Operand) -> str:
        """Shared address (u32) of the handle word of a plugin tier's region (:class:`~cake_core.ir.model.MemInfo`)."""
        info = self.model.mems[o.name]  # type: ignore[index]
        return f"(cake_smem_base + {info.handle}u)"

    def handle(self, o: Operand) -> str:
        """C++ that reads the handle word of a plugin tier's region (what its allocation left there)."""
        info = self.model.mems[o.name]  # type: ignore[index]
        return f"(*(volatile unsigned*)(cake_smem + {info.handle}))"

    def panel_bytes(self, o: Operand) -> int:
        """Bytes between the 128-byte swizzle panels of a K-major shared buffer."""
        return _stage_rows(self.model.smem[o.name]) * 128  # type: ignore[index]

    def tensor_map_for(self, g: Operand, s: Operand) -> TensorMap:
        """The tensor map that copies global tile ``g`` into shared tile ``s`` (created on first use)."""
        p = g.decl
        assert isinstance(p, n.Param)
        info = self.model.smem[s.name]  # type: ignore[index]
        dtype = self.model.param_dtype(p)
        shape = [int(x) for x in s.shape]  # type: ignore[arg-type]
        rank = len(p.shape)
        swz = info.swizzle or "none"
        inner = shape[-1]
        if swz != "none":
            width = SWIZZLE_BYTES[swz] // dtype.bytes
            if inner % width:
                raise NotLowerable(f"a {swz}-swizzled tile's rows ({inner} elements) must be whole panels of {width}")
            panels, box0 = inner // width, width
        else:
            if inner > 256:
                raise NotLowerable("a tensor map box is at most 256 elements per dimension")
            panels, box0 = 1, inner
        rows = shape[-2] if len(shape) > 1 else 1
        box_rows = min(rows, 256)
        if rows % box_rows:
            raise NotLowerable("tile rows must split into boxes of at most 256")
        box = [box0] + ([box_rows] if rank > 1 else []) + [1] * max(0, rank - 2)
        if len(shape) > 2:
            raise NotLowerable("tensor-map tiles have rank 1 or 2 here")
        # panels lie a stage's rows apart (also for a copy of some of its rows)
        panel_bytes = _stage_rows(info) * box0 * dtype.bytes
        key = (p.name, tuple(box), swz, panel_bytes)
        if key not in self.tensor_maps:
            name = f"cake_tmap_{c_name(p.name)}_{len(self.tensor_maps)}"
            row_bytes = box0 * dtype.bytes
            self.tensor_maps[key] = TensorMap(
                name, p.name, dtype, tuple(box), swz, panels, rows // box_rows, panel_bytes, row_bytes
            )
        return self.tensor_maps[key]

    def fence_registers(self, op: TypedOpImpl, only: list[str] | None = None) -> str:
        """Empty asm that ties wgmma accumulators (``only``, or all of the role's) to this point, so no
        read of them moves above an asynchronous wait."""
        names = [
            (name, info) for name, info in self.model.regs.items()
            if info.role == op.role.role.name and info.layout.name == "wgmma_acc" and (only is None or name in only)
        ]  # fmt: skip
        out = []
        for name, info in names:
            i = self.fresh("f")
            out.append(f'for (int {i} = 0; {i} < {info.layout.regs_per_thread}; ++{i}) '
                       f'asm volatile("" : "+f"({c_name(name)}[{i}]) :: "memory");')  # fmt: skip
        return "\n".join(["#pragma unroll\n" + o for o in out]) if out else ""

    # -- structure -----------------------------------------------------------------------------------

    def emit(self) -> str:
        m = self.model
        k = m.kernel
        params = []
        for p in k.params:
            if p.tier == "scalar":
                params.append(f"{storage(m.param_dtype(p))} {c_name(p.name)}")
                continue
            const = "" if p.name in self.writes else "const "
            params.append(f"{const}{storage(m.param_dtype(p))}* __restrict__ {c_name(p.name)}")
        params += [f"int {c_name(s)}" for s in m.runtime_sizes]
        for typed in m.ops:
            typed.prim.prepare(typed, self)
        if self.tensor_maps:
            self.helper("tmap", "struct alignas(64) cake_tmap { unsigned long long v[16]; };")
        params += [f"const __grid_constant__ cake_tmap {t.name}" for t in self.tensor_maps.values()]
        bounds = f"__launch_bounds__({m.threads}" + (f", {m.occupancy})" if m.occupancy else ")")
        if self.cluster > 1:  # the cluster shape is compiled in: an ordinary launch runs it
            bounds += f" __cluster_dims__({self.cluster}, 1, 1)"
        out = [f'extern "C" __global__ void {bounds} {self.fn_name}({", ".join(params)}) {{']
        self.lines = []
        self.depth = 1
        for name, v in m.spec.values:
            if isinstance(v, str):
                self.line(f"typedef {storage(DType(v))} {c_name(name)};")
            else:
                self.line(f"[[maybe_unused]] constexpr int {c_name(name)} = {v};")
        for name in TARGET_CONSTANTS:
            if name in m.env:
                self.line(f"[[maybe_unused]] constexpr int {name} = {m.env[name]};  // from target {self.target.name}")
        for cst in k.consts:
            self.line(f"[[maybe_unused]] constexpr int {c_name(cst.name)} = {m.env[cst.name]};")
        for p in k.params:
            if p.tier != "global":
                continue
            for d in range(len(p.shape) - 1):
                stride = " * ".join(f"(long long)({self.c(e)})" for e in p.shape[d + 1 :])
                self.line(f"[[maybe_unused]] const long long cake_{c_name(p.name)}_s{d} = {stride};")
        if m.smem or m.barriers or m.mems:
            self.line("extern __shared__ __align__(16) unsigned char cake_smem_raw[];")
            if m.smem_align > 16:
                # offset the __shared__ array itself, so the compiler keeps every buffer in shared space
                a = m.smem_align - 1
                self.line(f"unsigned char* cake_smem = cake_smem_raw + (({m.smem_align}u - "
                          f"(cake_smem_addr(cake_smem_raw) & {a}u)) & {a}u);")  # fmt: skip
            else:
                self.line("unsigned char* cake_smem = cake_smem_raw;")
        for name, info in m.smem.items():
            self.line(f"{storage(info.dtype)}* {c_name(name)} = ({storage(info.dtype)}*)(cake_smem + {info.offset});")
        self.line("const int cake_tid = threadIdx.x;")
        if m.barriers or m.mems:
            self.line("const unsigned cake_smem_base = cake_smem_addr(cake_smem);")
        if m.barriers:
            # barrier addresses and initial counts are derived from the declarations
            self.line("if (cake_tid == 0) {")
            for name, b in m.barriers.items():
                for st in range(b.stages or 1):
                    self.line(f'  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(cake_smem_base + '
                              f'{b.offset + 8 * st}u), "r"({b.count}) : "memory");  // {name}[{st}]')  # fmt: skip
            self.line('  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");')
            self.line("}")
            # in a cluster, the peers' barriers must be initialized before a remote arrival or multicast lands
            self.line(CLUSTER_SYNC if self.cluster > 1 else "__syncthreads();")
        self.line("const int cake_warp = cake_tid >> 5;")
        self.line("const int cake_lane = cake_tid & 31;")
        for axis, v in zip("xyz", k.grid.vars, strict=False):
            self.line(f"const int {c_name(v)} = blockIdx.{axis};")
        rank = f"(int)(blockIdx.x % {self.cluster}u)" if self.cluster > 1 else "0"  # consecutive along the first
        self.line(f"[[maybe_unused]] const int {CRANK} = {rank};")
        self.line("(void)cake_lane; (void)cake_warp;")
        for r in m.roles:
            self.role = r
            self.line(f"if (cake_warp >= {r.start} && cake_warp < {r.stop}) {{  // role {r.role.name}")
            self.depth += 1
            self.line(f"const int cake_self = (cake_warp - {r.start}) / {r.per};")
            self.line(f"const int cake_iwarp = (cake_warp - {r.start}) % {r.per};")
            self.line(f"const int cake_itid = cake_tid - ({r.start} + cake_self * {r.per}) * 32;")
            self.line("(void)cake_self; (void)cake_iwarp; (void)cake_itid;")
            if r.regs is not None and self.target.has("setmaxnreg"):
                entry = min(255, 65536 // m.threads) // 8 * 8
                verb = "inc" if r.regs > entry else "dec"
                if r.regs != entry:
                    self.line(f'asm volatile("setmaxnreg.{verb}.sync.aligned.u32 {r.regs};");')
            self.declare_binds(r)
            self.block(r.role.body)
            self.depth -= 1
            self.line("}")
        self.role = None
        if self.cluster > 1:  # no CTA leaves while a peer may still write its shared memory or arrive on its barriers
            self.line(CLUSTER_SYNC)
        out += self.lines
        out.append("}")
        return "\n".join(out)

    def block(self, body: Iterable[n.Stmt]) -> None:
        for s in body:
            if isinstance(s, n.Let):
                self.line(f"const int {c_name(s.name)} = {self.c(s.value)};")
            elif isinstance(s, n.RegDecl):
                view = self.rview_decl(s)
                ctype, count = fragment_words(view)
                self.line(f"[[maybe_unused]] {ctype} {view.name}[{count}];")
            elif isinstance(s, n.For):
                trips = None
                lo, hi = try_int(s.start, self.model.env), try_int(s.stop, self.model.env)
                step = self.c(s.step) if s.step is not None else "1"
                if lo is not None and hi is not None:
                    trips = hi - lo
                pragma = "#pragma unroll" if trips is not None and trips <= 16 else "#pragma unroll 1"
                v = c_name(s.var)
                self.line(pragma)
                self.line(f"for (int {v} = {self.c(s.start)}; {v} < {self.c(s.stop)}; {v} += {step}) {{")
                self.depth += 1
                self.block(s.body)
                self.depth -= 1
                self.line("}")
            elif isinstance(s, n.If):
                self.line(f"if ({self.c(s.cond)}) {{")
                self.depth += 1
                self.block(s.then)
                self.depth -= 1
                if s.orelse:
                    self.line("} else {")
                    self.depth += 1
                    self.block(s.orelse)
                    self.depth -= 1
                self.line("}")
            elif isinstance(s, n.Op):
                self.op(self.model.typed(s))

    def declare_binds(self, r: RoleInfo) -> None:
        """The role's stage names and counters (:meth:`~cake_core.ir.primitive.Primitive.binds`), declared
        once at the role's start (a stage name a loop takes again carries over its iterations);
        counters start at 0."""
        names: dict[str, None] = {}
        for t in self.model.ops:
            if t.role is r:
                for b in t.prim.binds(t):
                    names[c_name(b.name)] = None
        if names:
            # signed, as loop variables are: ptxas then keeps a producer's barrier addresses in uniform
            # registers (measured in the SASS of hopper.cake; unsigned counters lose that)
            self.line(f"[[maybe_unused]] int {', '.join(f'{x} = 0' for x in names)};")

    def rview_decl(self, s: n.RegDecl) -> RegView:
        info = self.model.regs[s.name]
        return RegView(c_name(s.name), info.dtype, info.layout)

    def op(self, typed: TypedOpImpl) -> None:
        from cake_core.ir.printer import expr as expr_text
        from cake_core.ir.printer import op as op_text

        derived = "".join(f", {k}={expr_text(v)}" for k, v in typed.derived.items())
        derived = f"  [derived{derived[1:]}]" if derived else ""
        self.line(f"// {typed.op.loc.file.rsplit('/', 1)[-1]}:{typed.op.loc.line}: {op_text(typed.op)}{derived}")
        try:
            typed.prim.lower(typed, self)
            for b in typed.prim.binds(typed):
                self.line(f"{c_name(b.name)} = {self.c(b.value)};")
        except NotLowerable as exc:
            raise NotLoweredError(
                f"{typed.op.loc}: `{typed.op.name}` cannot be lowered for {self.target.name} "
                f"({self.target.nvrtc_arch}): {exc}"
            ) from None
