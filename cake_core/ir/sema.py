"""Name resolution and type checking: from parsed nodes to kernel models the rest of Cake reads.

A kernel is checked once per **specialization**: each combination of the finite sets in its shape
domain (``D in {64, 128}``, ``T in {bf16, f16}``). Under a specialization every constant, buffer
shape, stage count, warp count and register tile is a known integer, so shared-memory offsets,
register estimates and fragment layouts are computed here, once, for the verifier, the interpreter,
the cost models and the lowering alike. Sizes not in a finite set (``N``, ``K``) stay symbolic and
are passed to the kernel at launch.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Iterable, Iterator, Mapping, Set
from typing import Any

import attrs

from cake_core.diagnostics import codes
from cake_core.diagnostics.diagnostic import Diagnostic, DiagnosticError, Label
from cake_core.ir import nodes as n
from cake_core.ir.exprs import WORDS, EvalError, evaluate, try_int
from cake_core.ir.layouts import LayoutError, LayoutInfo, resolve
from cake_core.ir.location import Loc
from cake_core.ir.primitive import Kind, Operand, Primitive, Slot
from cake_core.ir.types import DTYPE_BY_NAME, DTYPE_NAMES, DType

SWIZZLE_ALIGN = {None: 16, "32B": 256, "64B": 512, "128B": 1024}
# names a kernel may use whose values come from the target: SMS is its multiprocessor count
TARGET_CONSTANTS = ("SMS",)


# ---------------------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------------------


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
    decl: n.Barrier
    stages: int | None
    count: int
    offset: int


@attrs.define
class RegInfo:
    decl: n.RegDecl
    dtype: DType
    shape: tuple[int, ...]
    layout: LayoutInfo
    role: str


@attrs.define
class RoleInfo:
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
    op: n.Op
    prim: Primitive
    outs: tuple[Operand, ...]
    ins: tuple[Operand, ...]
    role: RoleInfo

    def operand(self, slot: str) -> Operand:
        for o in self.outs + self.ins:
            if o.slot.name == slot:
                return o
        raise KeyError(slot)

    def has(self, slot: str) -> bool:
        return any(o.slot.name == slot for o in self.outs + self.ins)

    def attr(self, key: str) -> n.Expr | None:
        return self.op.attr(key)


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
    #: analyses may memoize here what holds for every specialization of the kernel: one dict shared by
    #: the models of one kernel made by one :func:`check_module` call (never across calls)
    shared: dict[object, object] = attrs.field(factory=dict, repr=False)

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


# ---------------------------------------------------------------------------------------------------
# Checking
# ---------------------------------------------------------------------------------------------------


class _Ctx:
    """What :meth:`Primitive.check` sees."""

    def __init__(self, model: KernelModel, role: RoleInfo, target: Any) -> None:
        self.model, self.role, self.target = model, role, target
        self.spec = model.env

    def const(self, e: n.Expr) -> int | None:
        return try_int(e, self.model.env)

    def role_warps(self) -> int:
        return self.role.per

    def error(self, code: str, loc: Loc, message: str, **kw: Any) -> Diagnostic:
        return codes.CORE_CODES[code].at(loc, message, **kw)


def specs(domain: Iterable[n.Constraint]) -> list[Spec]:
    """Every combination of the finite sets in ``domain`` (one empty spec when there are none)."""
    sets: list[tuple[str, list[int | str]]] = []
    for c in domain:
        if c.op != "in":
            continue
        values: list[int | str] = []
        for v in c.values:
            if isinstance(v, n.Name) and v.id in DTYPE_NAMES:
                values.append(v.id)
            else:
                iv = try_int(v, {})
                if iv is not None:
                    values.append(iv)
        sets.append((c.var, values))
    out = []
    for combo in itertools.product(*[vals for _, vals in sets]):
        out.append(Spec(tuple(zip([k for k, _ in sets], combo, strict=True))))
    return out


class KernelChecker:
    """Checks one kernel under one specialization. ``resolved`` memoizes the name resolution of the
    kernel's role bodies across its specializations (one dict per kernel and :func:`check_module` call)."""

    def __init__(
        self, kernel: n.Kernel, spec: Spec, primitives: Mapping[str, Primitive], target: Any = None,
        resolved: dict[object, list[list[_Step]]] | None = None,
    ) -> None:  # fmt: skip
        self.k, self.spec, self.prims, self.target = kernel, spec, primitives, target
        self.resolved = {} if resolved is None else resolved
        self.diags: list[Diagnostic] = []
        self.env: dict[str, int | str] = dict(spec.env)
        self.typevars: dict[str, DType] = {}
        self.sizes: set[str] = set()

    # -- reporting -----------------------------------------------------------------------------------

    def err(self, code: codes.Code, loc: Loc, message: str, *, spec: bool = False, **kw: Any) -> None:
        """Record a diagnostic; ``spec`` appends the specialization it was found under."""
        if spec and self.spec.values:
            message += f" (with {self.spec.label})"
        self.diags.append(code.at(loc, message, **kw))

    def const(self, e: n.Expr, what: str, loc: Loc | None = None) -> int | None:
        v = _int_value(e, self.env)
        if v is not None:
            return v
        # not an integer: evaluate again for the reason
        try:
            v = evaluate(e, self.env)
        except EvalError as exc:
            self.err(
                codes.DOMAIN, exc.expr.loc if exc.expr.loc.line else (loc or e.loc),
                f"{what} must be known when the kernel is compiled: {exc}",
                help="use constants and sizes the domain fixes to a finite set (`D in {64, 128}`)",
            )  # fmt: skip
            return None
        if not isinstance(v, int) or isinstance(v, bool):
            self.err(codes.DOMAIN, e.loc, f"{what} must be an integer, not `{v}`")
            return None
        return v

    # -- declarations --------------------------------------------------------------------------------

    def run(self) -> KernelModel:
        k = self.k
        seen: dict[str, Loc] = {}

        def declare(name: str, loc: Loc, what: str) -> None:
            if name in WORDS:
                self.err(codes.DUPLICATE_NAME, loc, _reserved(name, what), label=f"this {what}")
            elif name in seen:
                self.err(
                    codes.DUPLICATE_NAME, loc, f"`{name}` is declared twice in kernel `{k.name}`",
                    label=f"second {what}", secondary=(Label(seen[name], "first declared here"),),
                )  # fmt: skip
            else:
                seen[name] = loc

        spec_vars = {name for name, _ in self.spec.values}
        # target constants: known when a target is given (lowering always has one)
        if self.target is not None:
            self.env["SMS"] = self.target.sm_count
        for p in k.params:
            declare(p.name, p.loc, "parameter")
            if p.dtype not in DTYPE_NAMES:
                if p.dtype in spec_vars:
                    self.typevars[p.dtype] = DType(self.env[p.dtype])
                else:
                    self.err(
                        codes.UNKNOWN_NAME, p.loc,
                        f"`{p.dtype}` is neither an element type nor a type variable of the domain",
                        help=f"declare it, e.g. `domain {p.dtype} in {{bf16, f16}}`",
                    )  # fmt: skip
            for e in p.shape:
                self.sizes.update(_names(e) - spec_vars)
        for c in k.domain:
            used = c.var in self.sizes or c.var in spec_vars and (
                c.var in self.typevars or any(c.var in _names(e) for p in k.params for e in p.shape)
            )
            if not used:
                self.err(codes.DOMAIN, c.loc, f"domain clause names `{c.var}`, which no parameter uses")
            if c.op == "in" and not c.values:
                self.err(codes.DOMAIN, c.loc, f"`{c.var} in {{}}` leaves nothing to compile")
        for c in k.consts:
            declare(c.name, c.loc, "constant")
            v = self.const(c.value, f"constant `{c.name}`")
            if v is not None:
                self.env[c.name] = v
        self.scalars = {p.name for p in k.params if p.tier == "scalar"}
        runtime = set(self.sizes) | self.scalars | set(TARGET_CONSTANTS)
        for v in k.grid.vars:
            declare(v, k.grid.loc, "grid variable")
        if len(k.grid.vars) != len(k.grid.extents) or not 1 <= len(k.grid.vars) <= 3:
            self.err(codes.SYNTAX, k.grid.loc, "a grid maps one to three variables over as many extents")
        if k.grid.extents:
            scope = set(self.env) | runtime
            for e in k.grid.extents:
                if not _clean(e, scope):
                    self.diags += _name_errors(e, scope, "grid extent")
        warps_v = self.const(k.cta.warps, "the CTA's warp count")
        warps = 1 if warps_v is None else warps_v
        occupancy = self.const(k.cta.occupancy, "the occupancy") if k.cta.occupancy is not None else None

        # shared memory, in declaration order
        smem: dict[str, SmemInfo] = {}
        offset = 0
        for s in k.smem:
            declare(s.name, s.loc, "buffer")
            dtype = self.dtype_of(s.dtype, s.loc)
            shape = tuple([self.const(e, f"the shape of `{s.name}`", s.loc) or 1 for e in s.shape])
            stages = self.const(s.stages, f"the stage count of `{s.name}`") if s.stages is not None else None
            pad = self.const(s.pad, f"the padding of `{s.name}`") if s.pad is not None else 0
            align = self.const(s.align, f"the alignment of `{s.name}`") if s.align is not None else None
            align = max(align or 0, SWIZZLE_ALIGN[s.swizzle])
            if dtype is None:
                continue
            row = (shape[-1] if shape else 1) + (pad or 0)
            stage_elems = row
            for d in shape[:-1]:
                stage_elems *= d
            stage_bytes = stage_elems * dtype.bytes
            total = stage_bytes * (stages or 1)
            offset = -(-offset // align) * align
            smem[s.name] = SmemInfo(s, dtype, stages, shape, row, stage_bytes, total, offset, align, s.swizzle)
            offset += total
        barriers: dict[str, BarrierInfo] = {}
        offset = -(-offset // 8) * 8
        # the dynamic shared window is only known to be 16-byte aligned: the kernel aligns its base at
        # run time to the strictest buffer alignment, and asks for that much more
        base_align = max([16] + [i.align for i in smem.values()])
        for b in k.barriers:
            declare(b.name, b.loc, "barrier")
            stages = self.const(b.stages, f"the stage count of `{b.name}`") if b.stages is not None else None
            count = self.const(b.count, f"the arrival count of `{b.name}`")
            barriers[b.name] = BarrierInfo(b, stages, 1 if count is None else count, offset)
            offset += 8 * (stages or 1)
        slack = base_align - 16 if offset else 0

        roles = []
        for r in k.roles:
            declare(r.name, r.loc, "role")
            start = self.const(r.warp_start, f"the first warp of role `{r.name}`") or 0
            stop_v = self.const(r.warp_stop, f"the warp range of role `{r.name}`")
            stop = start + 1 if stop_v is None else stop_v
            per = self.const(r.per, f"the warps per instance of `{r.name}`") if r.per is not None else None
            regs = self.const(r.regs, f"the register budget of `{r.name}`") if r.regs is not None else None
            width = max(stop - start, 1)
            per = per or width
            if width % per:
                self.err(
                    codes.DOMAIN, r.loc,
                    f"role `{r.name}` has {width} warps, which do not split into instances of {per}",
                )  # fmt: skip
            roles.append(RoleInfo(r, start, stop, per, max(width // per, 1), regs))

        self.model = KernelModel(
            k, self.spec, self.env, self.typevars, tuple(sorted(self.sizes)), warps, occupancy, roles,
            smem, barriers, offset + slack, {}, [], {}, self.diags, base_align,
        )  # fmt: skip
        # the role bodies' name resolution reads only names of the specialization, never its values:
        # specializations that agree on these share one resolution (see :class:`_Resolver`)
        scope = frozenset(self.env) | runtime | set(k.grid.vars)
        rings = tuple((name, info.stages is not None) for name, info in smem.items())
        key = (scope, rings, tuple(self.typevars))
        steps = self.resolved.get(key)
        if steps is None:
            resolver = _Resolver(k, self.prims, dict(rings), self.typevars)
            steps = self.resolved[key] = resolver.roles(scope, seen)
        for info, role_steps in zip(roles, steps, strict=True):
            self.role = info
            self.ctx = _Ctx(self.model, info, self.target)  # what the role's primitives' checks see
            for step, arg in role_steps:
                step(self, arg)
        return self.model

    def dtype_of(self, name: str, loc: Loc) -> DType | None:
        if name in DTYPE_NAMES:
            return DTYPE_BY_NAME[name]
        if name in self.typevars:
            return self.typevars[name]
        self.err(codes.UNKNOWN_NAME, loc, f"`{name}` is neither an element type nor a type variable")
        return None

    # -- bodies, under this specialization's values ---------------------------------------------------

    def report(self, d: Diagnostic) -> None:
        self.diags.append(d)

    def let(self, s: n.Let) -> None:
        v = try_int(s.value, self.env)
        if v is not None:
            self.env[s.name] = v

    def reg(self, s: n.RegDecl) -> None:
        dtype = self.dtype_of(s.dtype, s.loc)
        shape = tuple([self.const(e, f"the shape of register tile `{s.name}`", s.loc) or 1 for e in s.shape])
        if dtype is None:
            return
        lay = s.layout or n.Layout("rows")
        args = tuple([self.const(a, f"an argument of layout `{lay.name}`") or 0 for a in lay.args])
        try:
            info = resolve(lay.name, args, shape, dtype, self.role.per)
        except LayoutError as exc:
            self.err(codes.LAYOUT, (s.layout.loc if s.layout else s.loc), f"{exc}", spec=True)
            info = LayoutInfo(lay.name, args, shape, dtype, self.role.per * 32, 0)
        self.model.regs[s.name] = RegInfo(s, dtype, shape, info, self.role.role.name)

    def attribute(self, value_what: tuple[n.Expr, str]) -> None:
        """An attribute that must be known when the kernel is compiled."""
        self.const(*value_what)

    def op(self, resolved: tuple[n.Op, Primitive, tuple[_OperandPlan, ...], tuple[_OperandPlan, ...]]) -> None:
        """Type a resolved operation (its primitive, output and input operands; its attributes are
        steps of their own, just before it): the operands' dtypes and shapes, its primitive's rule."""
        op, prim, outs, ins = resolved
        operand = self.operand
        typed = TypedOpImpl(op, prim, tuple(map(operand, outs)), tuple(map(operand, ins)), self.role)
        model = self.model
        model.ops.append(typed)
        model.by_op[id(op)] = typed
        self.diags += prim.check(typed, self.ctx)

    def operand(self, p: _OperandPlan) -> Operand:
        kind = p.kind
        if kind is Kind.SHARED:
            info = self.model.smem[p.name]
            dtype, extents = info.dtype, info.shape
        elif kind is Kind.REGISTERS:
            info_r = self.model.regs[p.name]
            dtype, extents = info_r.dtype, info_r.shape
        elif kind is Kind.GLOBAL:
            dtype, extents = self.model.dtype(p.decl.dtype), p.decl.shape
        else:
            dtype, extents = None, ()
        dims = p.dims
        if dims:
            env = self.env
            shape: list[int | n.Expr] = []
            for dim in dims:
                size = extents[dim] if type(dim) is int else dim
                if type(size) is not int:
                    v = _int_value(size, env)
                    if v is not None:
                        size = v
                shape.append(size)
            if p.ring:
                shape.insert(0, info.stages or 1)
            shape_t = tuple(shape)
        else:
            shape_t = (info.stages or 1,) if p.ring else ()
        return Operand(p.expr, p.slot, kind, p.name, dtype, shape_t, p.decl, p.stage, p.index, p.transpose,
                        p.layout)  # fmt: skip


# Operand(expr, slot, kind, name, dtype, shape, decl, stage, index, transpose, layout), every field given,
# built without attrs' frozen __init__ (one per operand of every operation of every specialization)


def _int_value(e: n.Expr, env: Mapping[str, int | str]) -> int | None:
    """:func:`try_int`, without raising and catching for the common leaves: a literal, a bound or a
    free name (run-time sizes such as ``N`` are free in every specialization)."""
    t = type(e)
    if t is n.Name:
        v = env.get(e.id)  # type: ignore[attr-defined]
        return v if type(v) is int else None
    if t is n.Num:
        v = e.value  # type: ignore[attr-defined]
        return v if type(v) is int else None
    return try_int(e, env)


@attrs.define(eq=False)
class _OperandPlan:
    """An operand resolved to its declaration; its dtype and shape come with each specialization.

    ``dims`` gives the shape after indexing, one entry per remaining dimension: an int picks that
    extent of the declaration under the specialization, an expression is a slice's size. ``ring``:
    the operand is a whole ring of stages (the stage count leads its shape)."""

    expr: n.Expr
    slot: Slot
    kind: Kind
    name: str | None = None
    decl: Any = None
    stage: n.Expr | None = None
    index: tuple[n.Idx, ...] = ()
    transpose: bool = False
    layout: n.Layout | None = None
    dims: tuple[int | n.Expr, ...] = ()
    ring: bool = False


# _OperandPlan and TypedOpImpl with every field given, built by slot stores (one per operand, one per
# operation, of every kernel checked)

#: one step of a resolved role body: a :class:`KernelChecker` method and its argument
_Step = tuple[Any, Any]


class _Resolver:
    """Name resolution and scoping of a kernel's role bodies: everything that depends on which names a
    specialization defines, never on their values.

    Specializations of a kernel define the same names, except where a constant fails to evaluate
    under one of them, or a buffer's stage count does; :meth:`KernelChecker.run` keys a resolution by
    exactly what it reads, so each :func:`check_module` call resolves a kernel once (twice in such
    corner cases) instead of once per specialization. A resolved body is a list of steps each
    specialization replays in source order: the diagnostics found here, and the ``let`` values,
    register tiles and operations it types under its own values. Diagnostics therefore come out in
    the order of a single walk."""

    def __init__(
        self, kernel: n.Kernel, prims: Mapping[str, Primitive], rings: dict[str, bool], typevars: Mapping[str, DType]
    ) -> None:
        self.k, self.prims, self.typevars = kernel, prims, typevars
        self.rings = rings  # shared buffers with a model, and whether each is a ring of stages
        self.tensors: dict[str, Any] = {p.name: p for p in kernel.params if p.tier == "global"}
        self.tensors.update({s.name: s for s in kernel.smem})
        self.tensors.update({b.name: b for b in kernel.barriers})
        self.reg_names: dict[str, Loc] = {}
        self.steps: list[_Step] = []
        self.role_regs: set[str] = set()

    def roles(self, scope: frozenset[str], seen: dict[str, Loc]) -> list[list[_Step]]:
        """The steps of each role's body; ``seen`` holds the kernel-level declarations."""
        out = []
        for r in self.k.roles:
            self.steps, self.role_regs = [], set()
            # each role is its own scope: roles may reuse local names, never kernel-level ones
            self.block(r.body, scope | {"self"}, seen)
            out.append(self.steps)
        return out

    def err(self, code: codes.Code, loc: Loc, message: str, **kw: Any) -> None:
        self.steps.append((KernelChecker.report, code.at(loc, message, **kw)))

    def names_ok(self, e: n.Expr, scope: Set[str], what: str) -> bool:
        if _clean(e, scope):
            return True  # the common case, decided without walking twice
        errors = _name_errors(e, scope, what)
        self.steps += [(KernelChecker.report, d) for d in errors]
        return not errors

    def block(self, body: tuple[n.Stmt, ...], scope: Set[str], seen: dict[str, Loc]) -> None:
        """Resolve a block. ``seen`` holds the declarations visible here; sibling blocks may reuse
        names, a nested one may not shadow."""
        scope = set(scope)
        seen = dict(seen)
        steps = self.steps
        for s in body:
            if type(s) is n.Op or isinstance(s, n.Op):
                self.op(s, scope)
            elif isinstance(s, n.Let):
                self.names_ok(s.value, scope, "a `let`")
                self.decl_local(s.name, s.loc, seen, "let")
                scope.add(s.name)
                steps.append((KernelChecker.let, s))
            elif isinstance(s, n.RegDecl):
                self.decl_local(s.name, s.loc, seen, "register tile")
                prior = self.reg_names.get(s.name)
                if prior is not None and prior != s.loc:
                    self.err(
                        codes.DUPLICATE_NAME, s.loc, f"register tile `{s.name}` is declared twice in kernel "
                        f"`{self.k.name}` (tiles are named kernel-wide)",
                        secondary=(Label(prior, "first declared here"),),
                    )  # fmt: skip
                self.reg_names[s.name] = s.loc
                steps.append((KernelChecker.reg, s))
                if s.dtype in DTYPE_NAMES or s.dtype in self.typevars:  # KernelChecker.reg models it
                    self.role_regs.add(s.name)
                    self.tensors[s.name] = s
            elif isinstance(s, n.For):
                for e in (s.start, s.stop) + ((s.step,) if s.step is not None else ()):
                    self.names_ok(e, scope, "the loop range")
                self.decl_local(s.var, s.loc, seen, "loop variable")
                self.block(s.body, scope | {s.var}, seen)
            elif isinstance(s, n.If):
                self.names_ok(s.cond, scope, "the condition")
                self.block(s.then, scope, seen)
                self.block(s.orelse, scope, seen)

    def decl_local(self, name: str, loc: Loc, seen: dict[str, Loc], what: str) -> None:
        if name in WORDS:
            self.err(codes.DUPLICATE_NAME, loc, _reserved(name, what), label=f"this {what}")
        elif name in seen:
            self.err(
                codes.DUPLICATE_NAME, loc, f"`{name}` is declared twice in kernel `{self.k.name}`",
                label=f"second declaration ({what})", secondary=(Label(seen[name], "first declared here"),),
            )  # fmt: skip
        else:
            seen[name] = loc

    def op(self, op: n.Op, scope: Set[str]) -> None:
        prim = self.prims.get(op.name)
        if prim is None:
            close = _closest(op.name, list(self.prims))
            self.err(
                codes.UNKNOWN_PRIMITIVE, op.loc, f"no loaded plugin provides the operation `{op.name}`",
                label="unknown operation", help=(f"did you mean `{close}`?" if close else None),
            )  # fmt: skip
            return
        sig = prim.signature
        if op.outs and not sig.outs:
            self.err(codes.OPERANDS, op.loc, f"`{op.name}` has no outputs: write it without `<-`")
            return
        if sig.outs and not op.outs:
            # the arrow form is required when a primitive has outputs
            self.err(
                codes.OPERANDS, op.loc, f"`{op.name}` writes {len(sig.outs)} output(s): write `{op.name} "
                f"{', '.join(s.name for s in sig.outs)} <- {', '.join(s.name for s in sig.ins)}`",
            )  # fmt: skip
            return
        outs = self.operands(op, op.outs, sig.outs, scope, "output")
        ins = self.operands(op, op.ins, sig.ins, scope, "input")
        if outs is None or ins is None:
            return
        self.attributes(op, prim, scope)
        self.steps.append((KernelChecker.op, (op, prim, outs, ins)))

    def operands(
        self, op: n.Op, exprs: tuple[n.Expr, ...], slots: tuple[Slot, ...], scope: Set[str], what: str
    ) -> tuple[_OperandPlan, ...] | None:
        # as many operands as slots always fit; otherwise count the required slots
        required = slots if len(exprs) == len(slots) else [s for s in slots if not s.optional]
        if not len(required) <= len(exprs) <= len(slots):
            names = ", ".join(s.name + ("?" if s.optional else "") for s in slots) or "none"
            self.err(
                codes.OPERANDS, op.loc,
                f"`{op.name}` takes {len(required)}{'' if len(required) == len(slots) else f'..{len(slots)}'} "
                f"{what} operand(s) ({names}), got {len(exprs)}",
            )  # fmt: skip
            return None
        out = []
        operand = self.operand
        for e, slot in zip(exprs, slots):
            o = operand(e, slot, scope, op)
            if o is None:
                return None
            out.append(o)
        return tuple(out)

    def operand(self, e: n.Expr, slot: Slot, scope: Set[str], op: n.Op) -> _OperandPlan | None:
        t = type(e)
        if t is n.Ref or (t is not n.Name and isinstance(e, n.Ref)):
            name, index, transpose = e.name, e.index, e.transpose  # type: ignore[attr-defined]
        elif t is n.Name or isinstance(e, n.Name):
            name, index, transpose = e.id, (), False  # a bare name is the whole tensor  # type: ignore[attr-defined]
        else:
            name = None
        decl = self.tensors.get(name)  # type: ignore[arg-type]
        if decl is None:
            if isinstance(e, n.Ref):
                self.err(codes.UNKNOWN_NAME, e.loc, f"`{e.name}` is not a tensor, buffer, tile or barrier")
                return None
            if Kind.VALUE not in slot.kinds:
                self.err(
                    codes.OPERANDS, e.loc,
                    f"operand `{slot.name}` of `{op.name}` must be a {_kinds(slot)}, not a value",
                )  # fmt: skip
                return None
            if not self.names_ok(e, scope, f"operand `{slot.name}`"):
                return None
            return _OperandPlan(e, slot, Kind.VALUE)
        dt = type(decl)
        if dt is n.RegDecl and name not in self.role_regs:
            self.err(codes.UNKNOWN_NAME, e.loc, f"register tile `{name}` belongs to another role")
            return None
        for item in index:
            it = type(item)
            if it is n.At:
                if not self.names_ok(item.expr, scope, "an index"):
                    return None
            elif it is n.Span:
                if not (self.names_ok(item.start, scope, "an index") and self.names_ok(item.size, scope, "an index")):
                    return None
        if dt is n.Smem:
            if decl.name not in self.rings:
                return None  # its declaration is in error
            kind, staged, rank = Kind.SHARED, self.rings[decl.name], len(decl.shape)
        elif dt is n.Param:
            kind, staged, rank = Kind.GLOBAL, False, len(decl.shape)
        elif dt is n.Barrier:
            kind, staged, rank = Kind.BARRIER, decl.stages is not None, 0
        else:
            kind, staged, rank = Kind.REGISTERS, False, len(decl.shape)
        if kind not in slot.kinds:
            self.err(
                codes.OPERANDS, e.loc,
                f"operand `{slot.name}` of `{op.name}` must be a {_kinds(slot)}, but `{name}` is a "
                f"{_kind_word(kind)}",
            )  # fmt: skip
            return None
        stage = None
        if staged:
            if index and type(index[0]) is n.At:
                stage, index = index[0].expr, index[1:]
            elif kind is Kind.BARRIER or index:
                self.err(codes.OPERANDS, e.loc, f"`{name}` is a ring: select a stage first, `{name}[s]`")
                return None
        nindex = len(index)
        if nindex > rank:
            self.err(codes.OPERANDS, e.loc, f"`{name}` has {rank} dimension(s), indexed with {nindex}")
            return None
        # a position drops its dimension, a slice has its size, `:` and dimensions not indexed keep theirs
        if nindex:
            dims: list[int | n.Expr] = []
            for d, item in enumerate(index):
                it = type(item)
                if it is not n.At:
                    dims.append(item.size if it is n.Span else d)
            dims += range(nindex, rank)
            dims_t = tuple(dims)
        else:
            dims_t = _RANGES[rank] if rank < len(_RANGES) else tuple(range(rank))
        layout = decl.layout if kind is Kind.REGISTERS else None
        ring = staged and stage is None and kind is not Kind.BARRIER
        return _OperandPlan(e, slot, kind, name, decl, stage, index, transpose, layout, dims_t, ring)

    def attributes(self, op: n.Op, prim: Primitive, scope: Set[str]) -> None:
        sig = prim.signature
        seen: set[str] = set()
        for a in op.attrs:
            spec = sig.attr(a.key)
            if a.key in seen:
                self.err(codes.ATTRIBUTES, a.loc, f"attribute `{a.key}` given twice")
            seen.add(a.key)
            if spec is None:
                known = ", ".join(x.name for x in sig.attrs) or "none"
                close = _closest(a.key, [x.name for x in sig.attrs])
                self.err(
                    codes.ATTRIBUTES, a.loc, f"`{op.name}` takes no attribute `{a.key}` (it takes: {known})",
                    help=f"did you mean `{close}`?" if close else None,
                )  # fmt: skip
                continue
            v = a.value
            if spec.kind == "word":
                if not (isinstance(v, n.Name) and v.id in spec.choices):
                    self.err(
                        codes.ATTRIBUTES, v.loc,
                        f"`{a.key}` of `{op.name}` is one of {', '.join(spec.choices)}",
                    )  # fmt: skip
            elif spec.kind == "const":
                self.steps.append((KernelChecker.attribute, (v, f"attribute `{a.key}` of `{op.name}`")))
            elif spec.kind == "float":
                if not all(isinstance(s, (n.Num, n.Unary)) or (isinstance(s, n.Name) and s.id == "inf")
                           for s in n.walk_expr(v)):  # fmt: skip
                    self.err(codes.ATTRIBUTES, v.loc, f"`{a.key}` of `{op.name}` is a number")
            else:
                self.names_ok(v, scope, f"attribute `{a.key}`")
        for spec in sig.attrs:
            if spec.required and spec.name not in seen:
                self.err(codes.ATTRIBUTES, op.loc, f"`{op.name}` needs the attribute `{spec.name}=...`")


_RANGES = tuple(tuple(range(k)) for k in range(8))  # the dims of an operand not indexed, by rank


def _name_errors(e: n.Expr, scope: Set[str], what: str) -> list[Diagnostic]:
    """What is wrong with the names in ``e``: names not in ``scope``, tiles, unknown functions (callers
    first ask :func:`_clean`, which decides the common case without walking twice)."""
    out = []
    for sub in n.walk_expr(e):
        if isinstance(sub, n.Name) and sub.id not in scope and sub.id != "inf":
            out.append(codes.UNKNOWN_NAME.at(sub.loc, f"`{sub.id}` is not declared", label=f"in {what}"))
        elif isinstance(sub, n.Ref):
            out.append(codes.OPERANDS.at(sub.loc, f"`{sub.name}[...]` is a tile, not a number", label=what))
        elif isinstance(sub, n.Call) and sub.fn not in ("cdiv", "min", "max"):
            out.append(codes.UNKNOWN_NAME.at(sub.loc, f"unknown function `{sub.fn}` (known: cdiv, min, max)"))
    return out

def _reserved(name: str, what: str) -> str:
    """The message for a declaration of a built-in word (``inf``): every evaluator of Cake (the
    interpreter, the protocol replay, the lowering to CUDA) reads the word as its built-in value, so a
    kernel may not give it another."""
    return f"`{name}` is a built-in constant ({WORDS[name]}); it cannot name a {what}"


def _names(e: n.Expr) -> set[str]:
    if type(e) is n.Name:
        return {e.id}  # type: ignore[attr-defined]
    return {s.id for s in n.walk_expr(e) if isinstance(s, n.Name)}


def _clean(e: n.Expr, scope: Set[str]) -> bool:
    """Whether :func:`_name_errors` finds nothing wrong in ``e`` (False also where it must look:
    references, unknown functions and expression classes it does not dispatch on here)."""
    t = type(e)
    if t is n.Name:
        return e.id in scope or e.id == "inf"  # type: ignore[attr-defined]
    if t is n.Num:
        return True
    if t is n.Bin:
        return _clean(e.left, scope) and _clean(e.right, scope)  # type: ignore[attr-defined]
    if t is n.Unary:
        return _clean(e.operand, scope)  # type: ignore[attr-defined]
    if t is n.Call:
        return e.fn in _FUNCTIONS and all(_clean(a, scope) for a in e.args)  # type: ignore[attr-defined]
    return False


_FUNCTIONS = frozenset(("cdiv", "min", "max"))


def _kind_word(k: Kind) -> str:
    return {
        Kind.GLOBAL: "global tensor", Kind.SHARED: "shared buffer", Kind.REGISTERS: "register tile",
        Kind.BARRIER: "barrier", Kind.VALUE: "value",
    }[k]  # fmt: skip


def _kinds(slot: Slot) -> str:
    return " or ".join(sorted(_kind_word(k) for k in slot.kinds))


def _closest(word: str, options: list[str]) -> str | None:
    import difflib

    m = difflib.get_close_matches(word, options, n=1, cutoff=0.7)
    return m[0] if m else None


# ---------------------------------------------------------------------------------------------------
# Programs
# ---------------------------------------------------------------------------------------------------


@attrs.define(eq=False)
class LaunchModel:
    launch: n.Launch
    kernel: n.Kernel
    # kernel size/type-variable name -> program expression (sizes) or dtype/typevar name
    sizes: dict[str, n.Expr]
    types: dict[str, str]


def bind_program(module: n.Module) -> tuple[list[LaunchModel], list[Diagnostic]]:
    """Match each launch's arguments to its kernel's parameters, binding the kernel's sizes."""
    prog = module.entry
    diags: list[Diagnostic] = []
    tensors: dict[str, tuple[str, tuple[n.Expr, ...], Loc]] = {}
    scalars = {p.name for p in prog.params if p.tier == "scalar"}
    for p in prog.params:
        tensors[p.name] = (p.dtype, p.shape, p.loc)
    names = {k.name for k in module.kernels}
    if len(names) != len(module.kernels):
        diags.append(codes.DUPLICATE_NAME.at(prog.loc, "two kernels of the module share a name"))
    for b in prog.buffers:
        if b.name in tensors:
            diags.append(codes.DUPLICATE_NAME.at(b.loc, f"`{b.name}` is declared twice in the program"))
        tensors[b.name] = (b.dtype, b.shape, b.loc)
    out = []
    for launch in prog.launches:
        k = module.kernel(launch.kernel)
        if k is None:
            diags.append(codes.LAUNCH.at(launch.loc, f"no kernel `{launch.kernel}` in this module"))
            continue
        if len(launch.args) != len(k.params):
            diags.append(
                codes.LAUNCH.at(
                    launch.loc, f"`{k.name}` takes {len(k.params)} argument(s), the launch passes {len(launch.args)}",
                    secondary=(Label(k.loc, "kernel declared here"),),
                )
            )  # fmt: skip
            continue
        sizes: dict[str, n.Expr] = {}
        types: dict[str, str] = {}
        for arg, p in zip(launch.args, k.params):  # as many: checked above
            if arg not in tensors:
                diags.append(codes.LAUNCH.at(launch.loc, f"`{arg}` is not a parameter or buffer of the program"))
                continue
            dtype, shape, _ = tensors[arg]
            if (p.tier == "scalar") != (arg in scalars):
                diags.append(
                    codes.LAUNCH.at(launch.loc, f"`{arg}` is {'a scalar' if arg in scalars else 'a tensor'}, "
                                    f"parameter `{p.name}` of `{k.name}` takes "
                                    f"{'a scalar' if p.tier == 'scalar' else 'a tensor'}",
                                    secondary=(Label(p.loc, "parameter"),))
                )  # fmt: skip
                continue
            if len(shape) != len(p.shape):
                diags.append(
                    codes.LAUNCH.at(launch.loc, f"`{arg}` has rank {len(shape)}, parameter `{p.name}` of "
                                    f"`{k.name}` rank {len(p.shape)}", secondary=(Label(p.loc, "parameter"),))
                )  # fmt: skip
                continue
            if p.dtype in DTYPE_NAMES:
                if p.dtype != dtype:
                    diags.append(
                        codes.LAUNCH.at(launch.loc, f"`{arg}` holds `{dtype}`, parameter `{p.name}` of "
                                        f"`{k.name}` takes `{p.dtype}`", secondary=(Label(p.loc, "parameter"),))
                    )  # fmt: skip
            elif types.setdefault(p.dtype, dtype) != dtype:
                diags.append(codes.LAUNCH.at(launch.loc, f"type variable `{p.dtype}` bound to two element types"))
            for dim, pe in zip(shape, p.shape):  # as many: checked above
                if isinstance(pe, n.Name):
                    prior = sizes.setdefault(pe.id, dim)
                    if prior is not dim and prior != dim:
                        diags.append(
                            codes.LAUNCH.at(launch.loc, f"size `{pe.id}` of `{k.name}` is bound to two "
                                            f"different program sizes")
                        )  # fmt: skip
        out.append(LaunchModel(launch, k, sizes, types))
    return out, diags


def kernel_spec(lm: LaunchModel, program_spec: Mapping[str, int | str]) -> Spec | None:
    """The kernel specialization a program specialization selects, or None if the kernel has none."""
    values = []
    for c in lm.kernel.domain:
        if c.op != "in":
            continue
        if c.var in lm.types:
            v: int | str | None = lm.types[c.var]
            v = program_spec.get(v, v) if isinstance(v, str) else v
        elif c.var in lm.sizes:
            v = try_int(lm.sizes[c.var], program_spec)
        else:
            v = None
        if v is None:
            return None
        values.append((c.var, v))
    return Spec(tuple(values))


# ---------------------------------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------------------------------


@attrs.define(eq=False)
class CheckedModule:
    module: n.Module
    models: dict[tuple[str, Spec], KernelModel]
    launches: list[LaunchModel]
    diagnostics: list[Diagnostic]

    @property
    def ok(self) -> bool:
        return not any(d.is_error for d in self.diagnostics)

    def kernel_models(self, name: str) -> list[KernelModel]:
        return [m for (k, _), m in self.models.items() if k == name]


def check_module(module: n.Module, primitives: Mapping[str, Primitive], target: Any = None) -> CheckedModule:
    """Resolve and type-check every kernel under every specialization, and bind the program."""
    diags: list[Diagnostic] = []
    models: dict[tuple[str, Spec], KernelModel] = {}
    for k in module.kernels:
        kernel_specs = specs(k.domain)
        per_spec: list[Diagnostic] = []
        # what analyses may memoize across the kernel's specializations (cake_core.verify.domain reads
        # how many share it under "specializations")
        shared: dict[object, object] = {"specializations": len(kernel_specs)}
        resolved: dict[object, list[list[_Step]]] = {}
        for spec in kernel_specs:
            model = KernelChecker(k, spec, primitives, target, resolved).run()
            model.shared = shared
            models[(k.name, spec)] = model
            per_spec += model.diagnostics
        if per_spec:
            diags += _merge_specs(per_spec, len(kernel_specs))
    launches, ldiags = bind_program(module)
    diags += ldiags
    return CheckedModule(module, models, launches, _dedupe(diags) if diags else diags)


def _merge_specs(diags: list[Diagnostic], nspecs: int) -> list[Diagnostic]:
    """A finding made under every specialization does not name one."""
    counts = collections.Counter((d.code, d.primary, d.message.split(" (with ")[0]) for d in diags)
    out = []
    for d in diags:
        base = d.message.split(" (with ")[0]
        if base != d.message and counts[(d.code, d.primary, base)] >= nspecs:
            d = attrs.evolve(d, message=base)
        out.append(d)
    return out


def _dedupe(diags: Iterable[Diagnostic]) -> list[Diagnostic]:
    """One diagnostic per (code, span): specializations repeat the same finding."""
    seen: set[tuple] = set()
    out = []
    for d in diags:
        key = (d.code, d.primary, d.message.split(" (with ")[0])
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


def check_or_raise(module: n.Module, primitives: Mapping[str, Primitive], target: Any = None) -> CheckedModule:
    checked = check_module(module, primitives, target)
    if not checked.ok:
        raise DiagnosticError([d for d in checked.diagnostics if d.is_error])
    return checked


def iter_models(checked: CheckedModule) -> Iterator[KernelModel]:
    yield from checked.models.values()
