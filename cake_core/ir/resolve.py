"""Name resolution of a kernel's role bodies: which declaration each name and operand refers to,
under the names a specialization defines (never their values).

The :class:`Resolver` turns each role body into a list of steps that
:class:`cake_core.ir.sema.KernelChecker` replays under each specialization's values; the name checks
here serve the checker's checks of kernel-level declarations too.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Set
from typing import Any

import attrs

from cake_core.diagnostics import codes
from cake_core.diagnostics.diagnostic import Diagnostic, Label
from cake_core.ir import nodes as n
from cake_core.ir import pipes
from cake_core.ir.exprs import WORDS
from cake_core.ir.primitive import BarrierAction, Kind, Primitive, Slot
from cake_core.ir.types import DTYPE_NAMES, DType
from cake_core.location import Loc


@attrs.define(eq=False)
class OperandPlan:
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


#: one step of a resolved role body: the name of a :class:`~cake_core.ir.sema.KernelChecker` method
#: (``report``, ``let``, ``reg``, ``attribute``, ``op``) and its argument; an ``op``'s argument is the
#: operation, its primitive, its output and input operands and its derived attributes
Step = tuple[str, Any]


class Resolver:
    """Name resolution and scoping of a kernel's role bodies: everything that depends on which names a
    specialization defines, never on their values.

    Specializations of a kernel define the same names, except where a constant fails to evaluate
    under one of them, or a buffer's stage count does; :meth:`cake_core.ir.sema.KernelChecker.run`
    keys a resolution by exactly what it reads, so each :func:`check_module` call resolves a kernel once (twice in such
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
        self.tensors.update({p.name: p for p in kernel.pipes})
        self.tensors.update({b.name: b for b in pipes.barrier_decls(kernel)})
        self.tensors.update({m.name: m for m in kernel.mems})
        self.owner = pipes.owner(kernel)  # the pipe of each buffer a pipe names
        self.role_name = ""
        self.handles: dict[str, str] = {}  # stage names bound in the role: name -> pipe
        self.reg_names: dict[str, Loc] = {}
        self.steps: list[Step] = []
        self.role_regs: set[str] = set()

    def roles(self, scope: frozenset[str], seen: dict[str, Loc]) -> list[list[Step]]:
        """The steps of each role's body; ``seen`` holds the kernel-level declarations."""
        out = []
        for r in self.k.roles:
            self.steps, self.role_regs = [], set()
            self.role_name, self.handles = r.name, {}
            # each role is its own scope: roles may reuse local names, never kernel-level ones
            self.block(r.body, scope | {"self"}, seen)
            out.append(self.steps)
        return out

    def err(self, code: codes.Code, loc: Loc, message: str, **kw: Any) -> None:
        self.steps.append(("report", code.at(loc, message, **kw)))

    def names_ok(self, e: n.Expr, scope: Set[str], what: str) -> bool:
        if names_clean(e, scope):
            return True  # the common case, decided without walking twice
        errors = name_errors(e, scope, what)
        self.steps += [("report", d) for d in errors]
        return not errors

    def block(self, body: tuple[n.Stmt, ...], scope: Set[str], seen: dict[str, Loc]) -> None:
        """Resolve a block. ``seen`` holds the declarations visible here; sibling blocks may reuse
        names, a nested one may not shadow."""
        scope = set(scope)
        seen = dict(seen)
        steps = self.steps
        for s in body:
            if type(s) is n.Op or isinstance(s, n.Op):
                bound = self.op(s, scope, seen)
                if bound is not None:
                    scope.add(bound)
            elif isinstance(s, n.Let):
                self.names_ok(s.value, scope, "a `let`")
                self.decl_local(s.name, s.loc, seen, "let")
                scope.add(s.name)
                steps.append(("let", s))
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
                steps.append(("reg", s))
                if s.dtype in DTYPE_NAMES or s.dtype in self.typevars:  # the checker's `reg` models it
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
        d = check_declaration(name, loc, seen, self.k.name, what, f"second declaration ({what})")
        if d is not None:
            self.steps.append(("report", d))

    def op(self, op: n.Op, scope: Set[str], seen: dict[str, Loc]) -> str | None:
        """Resolve an operation; returns the name it binds for the rest of the block, if any."""
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
        bound = self.bound_name(op, sig.outs, scope, seen)
        outs = self.operands(op, op.outs, sig.outs, scope, "output")
        ins = self.operands(op, op.ins, [x for x in sig.ins if not x.derived], scope, "input")
        if outs is None or ins is None:
            return bound
        derived: dict[str, n.Expr] = {}
        ins = self.derive(op, prim, outs, ins, derived)
        if ins is None:
            return bound
        self.attributes(op, prim, scope)
        self.steps.append(("op", (op, prim, outs, ins, derived)))
        return bound

    def bound_name(self, op: n.Op, slots: tuple[Slot, ...], scope: Set[str], seen: dict[str, Loc]) -> str | None:
        """The name an operation's binding output gives the rest of the block (a pipe stage): new, or
        one that already holds a stage of the same pipe (taken again, as a loop carries it)."""
        if not (slots and slots[0].binds and op.outs and isinstance(op.outs[0], n.Name)):
            return None
        name = op.outs[0].id  # type: ignore[attr-defined]
        pipe = pipes.pipe_named(op.ins[0] if op.ins else None)
        if name in scope and self.handles.get(name) == pipe and pipe is not None:
            return name
        self.decl_local(name, op.outs[0].loc, seen, "stage name")
        if pipe is not None:
            self.handles[name] = pipe
        return name

    def derive(
        self, op: n.Op, prim: Primitive, outs: tuple[OperandPlan, ...], ins: tuple[OperandPlan, ...],
        derived: dict[str, n.Expr],
    ) -> tuple[OperandPlan, ...] | None:
        """The operands and attributes the compiler derives from a pipe: a pipe operation's stage,
        parity and barriers (:mod:`cake_core.ir.pipes`), the barrier a copy into a pipe's stage
        completes on."""
        sig = prim.signature
        pipe_in = next((o for o in ins if o.kind is Kind.PIPE), None)
        if pipe_in is not None:
            pipe = pipe_in.decl
            if "stage" in prim.derives:
                derived.update(pipes.take(self.k, pipe, pipes.take_side(prim)))
            stage = pipe_in.stage if pipe_in.stage is not None else derived.get("stage")
            extra = []
            for slot in sig.ins:
                if slot.derived:
                    name = pipes.full_barrier(pipe.name) if slot.name == "full" else pipes.empty_barrier(pipe.name)
                    extra.append(self.barrier_plan(op, slot, name, stage))
            return ins + tuple(extra)
        # a copy into a pipe's stage completes on the pipe's full barrier
        dst = next((o for o in outs if o.kind is Kind.SHARED and o.name in self.owner), None)
        tx = [x for x in sig.ins if x.barrier is BarrierAction.COMPLETE_TX]
        if not tx:
            return ins
        given = {o.slot.name for o in ins}
        missing = [x for x in tx if x.name not in given]
        if dst is None:
            if missing and not missing[0].optional:
                return ins
            if missing:
                self.err(
                    codes.OPERANDS, op.loc, f"`{op.name}` needs a barrier to complete on (operand "
                    f"`{missing[0].name}`): only a copy into a pipe's stage has one derived",
                    label="no barrier",
                )  # fmt: skip
                return None
            return ins
        p = self.owner[dst.name]  # type: ignore[index]
        if not missing:
            written = next(o for o in ins if o.slot.name in {x.name for x in tx})
            self.err(
                codes.PIPE, written.expr.loc, f"`{dst.name}` is a buffer of pipe `{p.name}`: a copy into it "
                f"completes on the pipe's own barrier, which the compiler derives",
                label="leave this barrier out", help=f"write `{op.name}` without a barrier operand",
            )  # fmt: skip
            return None
        return ins + tuple(self.barrier_plan(op, x, pipes.full_barrier(p.name), dst.stage) for x in missing)

    def barrier_plan(self, op: n.Op, slot: Slot, name: str, stage: n.Expr | None) -> OperandPlan:
        """A barrier operand the compiler derives, located at the operation that implies it."""
        index = (n.At(stage, loc=op.loc),) if stage is not None else ()
        ref = n.Ref(name, index, loc=op.loc)
        return OperandPlan(ref, slot, Kind.BARRIER, name, self.tensors[name], stage, (), False, None, (), False)

    def operands(
        self, op: n.Op, exprs: tuple[n.Expr, ...], slots: tuple[Slot, ...], scope: Set[str], what: str
    ) -> tuple[OperandPlan, ...] | None:
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

    def operand(self, e: n.Expr, slot: Slot, scope: Set[str], op: n.Op) -> OperandPlan | None:
        if slot.binds:
            if not isinstance(e, n.Name):
                self.err(codes.OPERANDS, e.loc, f"`{op.name}` binds a name: write one, e.g. `{op.name} s <- ...`")
                return None
            return OperandPlan(e, slot, Kind.VALUE, e.id)
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
            return OperandPlan(e, slot, Kind.VALUE)
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
        elif dt is n.Mem:  # a region of a plugin's tier: its kind is the tier's name
            kind, staged, rank = Kind(decl.tier), decl.stages is not None, len(decl.shape)
        elif dt is n.Barrier:
            kind, staged, rank = Kind.BARRIER, decl.stages is not None, 0
        elif dt is n.Pipe:
            kind, staged, rank = Kind.PIPE, False, 0
            if index and type(index[0]) is n.At:  # one stage of the pipe: `cring[s]`
                if len(index) > 1:
                    self.err(codes.OPERANDS, e.loc, f"pipe `{name}` takes one index, its stage: `{name}[s]`")
                    return None
                if kind not in slot.kinds:
                    self.err(codes.OPERANDS, e.loc, f"operand `{slot.name}` of `{op.name}` must be a "
                             f"{_kinds(slot)}, but `{name}` is a pipe")  # fmt: skip
                    return None
                return OperandPlan(e, slot, kind, name, decl, index[0].expr)
            if index:
                self.err(codes.OPERANDS, e.loc, f"pipe `{name}` takes one index, its stage: `{name}[s]`")
                return None
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
        return OperandPlan(e, slot, kind, name, decl, stage, index, transpose, layout, dims_t, ring)

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
            if spec.kind == "flag":
                if not (isinstance(v, n.Name) and v.id == a.key):
                    self.err(codes.ATTRIBUTES, v.loc, f"`{a.key}` of `{op.name}` is a bare flag: write `, {a.key}`")
            elif spec.kind == "word":
                if not (isinstance(v, n.Name) and v.id in spec.choices):
                    self.err(
                        codes.ATTRIBUTES, v.loc,
                        f"`{a.key}` of `{op.name}` is one of {', '.join(spec.choices)}",
                    )  # fmt: skip
            elif spec.kind == "const":
                self.steps.append(("attribute", (v, f"attribute `{a.key}` of `{op.name}`")))
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


def name_errors(e: n.Expr, scope: Set[str], what: str) -> list[Diagnostic]:
    """What is wrong with the names in ``e``: names not in ``scope``, tiles, unknown functions (callers
    first ask :func:`names_clean`, which decides the common case without walking twice)."""
    out = []
    for sub in n.walk_expr(e):
        if isinstance(sub, n.Name) and sub.id not in scope and sub.id != "inf":
            out.append(codes.UNKNOWN_NAME.at(sub.loc, f"`{sub.id}` is not declared", label=f"in {what}"))
        elif isinstance(sub, n.Ref):
            out.append(codes.OPERANDS.at(sub.loc, f"`{sub.name}[...]` is a tile, not a number", label=what))
        elif isinstance(sub, n.Call) and sub.fn not in ("cdiv", "min", "max"):
            out.append(codes.UNKNOWN_NAME.at(sub.loc, f"unknown function `{sub.fn}` (known: cdiv, min, max)"))
    return out

def check_declaration(
    name: str, loc: Loc, seen: dict[str, Loc], kernel: str, what: str, second: str
) -> Diagnostic | None:
    """Record in ``seen`` that ``name`` is declared at ``loc``, or say why it may not be: it is a built-in
    word, or ``seen`` holds it already (``second`` labels this second declaration)."""
    if name in WORDS:
        # every evaluator of Cake (the interpreter, the protocol replay, the lowering to CUDA) reads the
        # word as its built-in value, so a kernel may not give it another
        return codes.DUPLICATE_NAME.at(
            loc, f"`{name}` is a built-in constant ({WORDS[name]}); it cannot name a {what}", label=f"this {what}"
        )
    if name in seen:
        return codes.DUPLICATE_NAME.at(
            loc, f"`{name}` is declared twice in kernel `{kernel}`", label=second,
            secondary=(Label(seen[name], "first declared here"),),
        )  # fmt: skip
    seen[name] = loc
    return None


def names_in(e: n.Expr) -> set[str]:
    if type(e) is n.Name:
        return {e.id}  # type: ignore[attr-defined]
    return {s.id for s in n.walk_expr(e) if isinstance(s, n.Name)}


def names_clean(e: n.Expr, scope: Set[str]) -> bool:
    """Whether :func:`name_errors` finds nothing wrong in ``e`` (False also where it must look:
    references, unknown functions and expression classes it does not dispatch on here)."""
    t = type(e)
    if t is n.Name:
        return e.id in scope or e.id == "inf"  # type: ignore[attr-defined]
    if t is n.Num:
        return True
    if t is n.Bin:
        return names_clean(e.left, scope) and names_clean(e.right, scope)  # type: ignore[attr-defined]
    if t is n.Unary:
        return names_clean(e.operand, scope)  # type: ignore[attr-defined]
    if t is n.Call:
        return e.fn in _FUNCTIONS and all(names_clean(a, scope) for a in e.args)  # type: ignore[attr-defined]
    return False


_FUNCTIONS = frozenset(("cdiv", "min", "max"))


def _kind_word(k: Kind) -> str:
    """What a diagnostic calls an operand of kind ``k``: the core's kinds by the declaration that makes
    them, a plugin's kind by its name."""
    return _KIND_WORDS.get(k) or f"`{k}` operand"


_KIND_WORDS = {
    Kind.GLOBAL: "global tensor", Kind.SHARED: "shared buffer", Kind.REGISTERS: "register tile",
    Kind.BARRIER: "barrier", Kind.PIPE: "pipe", Kind.VALUE: "value",
}  # fmt: skip


def _kinds(slot: Slot) -> str:
    return " or ".join(sorted(_kind_word(k) for k in slot.kinds))


def _closest(word: str, options: list[str]) -> str | None:
    m = difflib.get_close_matches(word, options, n=1, cutoff=0.7)
    return m[0] if m else None
