"""Type checking: from parsed nodes to the kernel models (:mod:`cake_core.ir.model`) Cake reads.

A kernel is checked once per **specialization**: each combination of the finite sets in its shape
domain (``D in {64, 128}``, ``T in {bf16, f16}``). Under a specialization every constant, buffer
shape, stage count, warp count and register tile is a known integer, so shared-memory offsets,
register estimates and fragment layouts are computed here, once, for the verifier, the interpreter,
the cost models and the lowering alike. Sizes not in a finite set (``N``, ``K``) stay symbolic and
are passed to the kernel at launch. Name resolution of the role bodies, which does not depend on
the values, is :mod:`cake_core.ir.resolve`'s; program binding is :mod:`cake_core.ir.program`'s.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from cake_core.diagnostics import codes
from cake_core.diagnostics.diagnostic import Diagnostic, Label
from cake_core.ir import nodes as n
from cake_core.ir import pipes
from cake_core.ir.cluster import CRANK, cluster_size, extra_dims
from cake_core.ir.exprs import EvalError, evaluate, try_int
from cake_core.ir.layouts import CORE_LAYOUTS, LayoutError, LayoutInfo, TileLayout, fitting_per, resolve
from cake_core.ir.model import (
    BarrierInfo, CheckedModule, KernelModel, MemInfo, PipeInfo, RegInfo, RoleInfo, SmemInfo, Spec, TypedOpImpl,
)  # fmt: skip
from cake_core.ir.primitive import Kind, Operand, Primitive
from cake_core.ir.program import bind_program
from cake_core.ir.resolve import OperandPlan, Resolver, check_declaration, name_errors, names_clean, names_in
from cake_core.ir.swizzle import SWIZZLES
from cake_core.ir.types import DTYPE_BY_NAME, DTYPE_NAMES, DType
from cake_core.location import Loc

SWIZZLE_ALIGN = {None: 16, **{k: s.pattern_bytes for k, s in SWIZZLES.items()}}
# names a kernel may use whose values come from the target: SMS is its multiprocessor count
TARGET_CONSTANTS = ("SMS",)
#: a resolved step (:data:`cake_core.ir.resolve.Step`) with its method looked up: ``(KernelChecker.op, arg)``
BoundStep = tuple[Callable[..., None], Any]


class CheckCtx:
    """What :meth:`Primitive.check` sees."""

    def __init__(self, model: KernelModel, role: RoleInfo, target: Any) -> None:
        self.model, self.role, self.target = model, role, target
        self.spec = model.env

    def const(self, e: n.Expr) -> int | None:
        return try_int(e, self.model.env)

    def role_warps(self) -> int:
        return self.role.per

    def cluster_size(self) -> int:
        return cluster_size(self.model.kernel, self.model.env)

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
        resolved: dict[object, list[list[BoundStep]]] | None = None, layouts: Mapping[str, TileLayout] = CORE_LAYOUTS,
    ) -> None:  # fmt: skip
        self.k, self.spec, self.prims, self.target, self.layouts = kernel, spec, primitives, target, layouts
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
        v = try_int(e, self.env)
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
            d = check_declaration(name, loc, seen, k.name, what, f"second {what}")
            if d is not None:
                self.diags.append(d)

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
                self.sizes.update(names_in(e) - spec_vars)
        for c in k.domain:
            used = c.var in self.sizes or c.var in spec_vars and (
                c.var in self.typevars or any(c.var in names_in(e) for p in k.params for e in p.shape)
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
        runtime = set(self.sizes) | self.scalars | set(TARGET_CONSTANTS) | {CRANK}
        for v in k.grid.vars:
            declare(v, k.grid.loc, "grid variable")
        if len(k.grid.vars) != len(k.grid.extents) or not 1 <= len(k.grid.vars) <= 3:
            self.err(codes.SYNTAX, k.grid.loc, "a grid maps one to three variables over as many extents")
        if k.grid.extents:
            scope = set(self.env) | runtime
            for e in k.grid.extents:
                if not names_clean(e, scope):
                    self.diags += name_errors(e, scope, "grid extent")
        warps_v = self.const(k.cta.warps, "the CTA's warp count")
        warps = 1 if warps_v is None else warps_v
        occupancy = self.const(k.cta.occupancy, "the occupancy") if k.cta.occupancy is not None else None
        for e in k.cta.cluster:
            self.const(e, "the cluster shape")
        if extra_dims(k, self.env):
            self.err(codes.DOMAIN, k.cta.loc, "clusters are one-dimensional here: write `cluster (C)` "
                     "(the CTAs of a cluster are consecutive along the grid's first variable)")  # fmt: skip

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
        for p in k.pipes:
            declare(p.name, p.loc, "pipe")
        for b in k.barriers + pipes.barrier_decls(k):
            declare(b.name, b.loc, "barrier")
            stages = self.const(b.stages, f"the stage count of `{b.name}`") if b.stages is not None else None
            count = self.const(b.count, f"the arrival count of `{b.name}`")
            barriers[b.name] = BarrierInfo(b, stages, 1 if count is None else count, offset)
            offset += 8 * (stages or 1)
        mems = self.mems(k, declare, offset)
        offset += 4 * len(mems)
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
        pipe_infos = self.pipes(smem, roles, mems)

        self.model = KernelModel(
            k, self.spec, self.env, self.typevars, tuple(sorted(self.sizes)), warps, occupancy, roles,
            smem, barriers, offset + slack, {}, [], {}, self.diags, base_align, pipe_infos, mems,
        )  # fmt: skip
        # the role bodies' name resolution reads only names of the specialization, never its values:
        # specializations that agree on these share one resolution (see :class:`~cake_core.ir.resolve.Resolver`)
        scope = frozenset(self.env) | runtime | set(k.grid.vars)
        rings = tuple((name, info.stages is not None) for name, info in smem.items())
        key = (scope, rings, tuple(self.typevars))
        steps = self.resolved.get(key)
        if steps is None:
            resolver = Resolver(k, self.prims, dict(rings), self.typevars)
            # each step's method name bound once per resolution, not once per specialization
            steps = self.resolved[key] = [
                [(getattr(KernelChecker, name), arg) for name, arg in role] for role in resolver.roles(scope, seen)
            ]
        for info, role_steps in zip(roles, steps, strict=True):
            self.role = info
            self.ctx = CheckCtx(self.model, info, self.target)  # what the role's primitives' checks see
            for step, arg in role_steps:
                step(self, arg)
            if k.pipes:
                self.diags += pipes.derive_bytes(info.role.body, self.model.by_op, cluster_size(k, self.env))
        return self.model

    def mems(self, k: n.Kernel, declare: Callable[[str, Loc, str], None], offset: int) -> dict[str, MemInfo]:
        """The regions of plugin memory tiers, each with a handle word in shared memory from ``offset``.
        A tier is known when a loaded primitive's slot takes it."""
        tiers = {kind for p in self.prims.values() for sl in p.signature.outs + p.signature.ins for kind in sl.kinds}
        out: dict[str, MemInfo] = {}
        for m in k.mems:
            declare(m.name, m.loc, "region")
            if Kind(m.tier) not in tiers:
                self.err(codes.UNKNOWN_NAME, m.loc, f"`{m.tier}` is not a memory tier any loaded primitive takes",
                         help="install the plugin that declares it (`cake plugins` lists the loaded ones)")
                continue
            dtype = self.dtype_of(m.dtype, m.loc)
            shape = tuple([self.const(e, f"the shape of `{m.name}`", m.loc) or 1 for e in m.shape])
            stages = self.const(m.stages, f"the stage count of `{m.name}`") if m.stages is not None else None
            if dtype is not None:
                out[m.name] = MemInfo(m, m.tier, dtype, stages, shape, offset + 4 * len(out))
        return out

    def pipes(self, smem: dict[str, SmemInfo], roles: list[RoleInfo], mems: dict[str, MemInfo]) -> dict[str, PipeInfo]:
        """Each pipe under this specialization, after checking what its derivation assumes. Its buffers are
        shared buffers or rings of a plugin tier's regions (``tmem acc: f32[2][128, 128]``), which take no
        shared bytes."""
        out: dict[str, PipeInfo] = {}
        by_role = {r.role.name: r for r in roles}
        owners: dict[str, n.Pipe] = {}
        for p in self.k.pipes:
            ok = True
            for name in p.producers + p.consumers:
                if name not in by_role:
                    self.err(codes.PIPE, p.loc, f"pipe `{p.name}` names `{name}`, which is not a role of kernel "
                             f"`{self.k.name}`", label="unknown role")  # fmt: skip
                    ok = False
            producers = [by_role[r] for r in p.producers if r in by_role]
            if len(p.producers) != 1 or any(r.instances != 1 for r in producers):
                self.err(
                    codes.PIPE, p.loc, f"pipe `{p.name}` needs one producer role of one instance (it arms each "
                    "stage's barrier once a phase)", spec=True,
                    help="give the producer role no `per`, or one pipe per producer instance",
                )  # fmt: skip
                ok = False
            stages: set[int | None] = set()
            nbytes = 0
            for b in p.buffers:
                info = smem.get(b) or mems.get(b)
                if info is None:
                    if self.k.buffer(b) is None and b not in {m.name for m in self.k.mems}:
                        self.err(codes.PIPE, p.loc, f"pipe `{p.name}` names `{b}`, which is not a shared buffer",
                                 label="unknown buffer")  # fmt: skip
                    ok = False
                    continue
                if b in owners:
                    self.err(codes.PIPE, p.loc, f"buffer `{b}` belongs to pipe `{owners[b].name}` already",
                             secondary=(Label(owners[b].loc, "first pipe"),))  # fmt: skip
                    ok = False
                owners[b] = p
                stages.add(info.stages)
                nbytes += getattr(info, "stage_bytes", 0)
            if None in stages:
                self.err(codes.PIPE, p.loc, f"the buffers of pipe `{p.name}` must be rings of stages "
                         f"(`smem b: bf16[S][...]`)", spec=True)  # fmt: skip
                ok = False
            elif len(stages) > 1:
                self.err(codes.PIPE, p.loc, f"the buffers of pipe `{p.name}` have different stage counts "
                         f"({', '.join(map(str, sorted(stages)))})", spec=True,  # type: ignore[arg-type]
                         help="a pipe's stages hold one stage of each of its buffers: give them one count")
                ok = False
            if ok and stages:
                (count,) = stages
                out[p.name] = PipeInfo(p, count or 1, p.buffers, p.producers, p.consumers,
                                       pipes.full_barrier(p.name), pipes.empty_barrier(p.name), nbytes)  # fmt: skip
        return out

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
            info = resolve(lay.name, args, shape, dtype, self.role.per, self.layouts)
        except LayoutError as exc:
            role = self.role
            size = fitting_per(lay.name, args, shape, dtype, role.warps, role.per, self.layouts)
            fix = {} if size is None else codes.per_fix(role.role, role.warps, role.per, size)
            self.err(codes.LAYOUT, (s.layout.loc if s.layout else s.loc), f"{exc}", spec=True, **fix)
            info = LayoutInfo(lay.name, args, shape, dtype, self.role.per * 32, 0)
        self.model.regs[s.name] = RegInfo(s, dtype, shape, info, self.role.role.name)

    def attribute(self, value_what: tuple[n.Expr, str]) -> None:
        """An attribute that must be known when the kernel is compiled."""
        self.const(*value_what)

    def op(self, resolved: tuple[n.Op, Primitive, tuple[OperandPlan, ...], tuple[OperandPlan, ...], dict]) -> None:
        """Type a resolved operation (its primitive, output and input operands, derived attributes;
        its written attributes are steps of their own, just before it): the operands' dtypes and
        shapes, its primitive's rule."""
        op, prim, outs, ins, derived = resolved
        operand = self.operand
        typed = TypedOpImpl(op, prim, tuple(map(operand, outs)), tuple(map(operand, ins)), self.role,
                            dict(derived))  # fmt: skip
        model = self.model
        model.ops.append(typed)
        model.by_op[id(op)] = typed
        self.diags += prim.check(typed, self.ctx)

    def operand(self, p: OperandPlan) -> Operand:
        kind = p.kind
        if kind is Kind.SHARED:
            info = self.model.smem[p.name]
            dtype, extents = info.dtype, info.shape
        elif kind is Kind.REGISTERS:
            info_r = self.model.regs[p.name]
            dtype, extents = info_r.dtype, info_r.shape
        elif kind is Kind.GLOBAL:
            dtype, extents = self.model.dtype(p.decl.dtype), p.decl.shape
        elif p.name in self.model.mems:  # a region of a plugin's tier
            info = self.model.mems[p.name]  # type: ignore[assignment]
            dtype, extents = info.dtype, info.shape
        else:
            dtype, extents = None, ()
        dims = p.dims
        if dims:
            env = self.env
            shape: list[int | n.Expr] = []
            for dim in dims:
                size = extents[dim] if type(dim) is int else dim
                if type(size) is not int:
                    v = try_int(size, env)
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


def check_module(
    module: n.Module, primitives: Mapping[str, Primitive], target: Any = None,
    layouts: Mapping[str, TileLayout] = CORE_LAYOUTS,
) -> CheckedModule:  # fmt: skip
    """Resolve and type-check every kernel under every specialization, and bind the program.

    ``primitives`` and ``layouts`` are the registered ones by name (``layouts`` defaults to the core's).
    """
    diags: list[Diagnostic] = []
    models: dict[tuple[str, Spec], KernelModel] = {}
    for k in module.kernels:
        kernel_specs = specs(k.domain)
        per_spec: list[Diagnostic] = []
        resolved: dict[object, list[list[BoundStep]]] = {}
        for spec in kernel_specs:
            model = KernelChecker(k, spec, primitives, target, resolved, layouts).run()
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
