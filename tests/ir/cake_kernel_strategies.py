"""Hypothesis strategies for random *valid* Cake modules, and the edits the property tests apply.

:func:`modules` builds a module from templates of real constructs (the kmeans-assign schedules and the
verifier corpus), varying every choice the type rules leave open:

* a shape domain of run-time sizes (``>=``, ``<=``, ``%`` clauses), a finite set of sizes and,
  optionally, a type variable over ``{bf16, f16}``;
* constants (literals and expressions of earlier ones), a grid of one or two variables, a ``cta`` line
  with optional occupancy and cluster;
* shared buffers with stages, padding, swizzle and alignment; mbarriers, some of them rings;
* one to three roles over consecutive warps, with ``per`` and ``regs``;
* role bodies built from units — a row reduction and its store, fills, an argmin fold over a loop of
  centroids, ``mma.sync`` from ``ldmatrix`` fragments, a ``cp.async`` ring, a TMA / mbarrier pipeline
  with ``wgmma`` — wrapped in ``for`` loops (with steps), ``if``/``else`` and ``let`` bindings;
* optionally, a program that launches every kernel.

Every tree is one the parser produces (negative literals folded, ``inf`` a name, left-associative
operators), so ``parse(print(m)) == m`` is a fair property. :func:`rename` renames every declared name
consistently and :func:`noisy_text` prints a module with comments, blank lines, extra spaces, wrapped
lines and redundant parentheses.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import attrs
from hypothesis import strategies as st

from cake_core.ir import nodes as n
from cake_core.ir import printer
from cake_core.ir.parser import KEYWORDS
from cake_core.ir.types import DTYPE_NAMES

Draw = Callable[[st.SearchStrategy[Any]], Any]

#: words a declared name must not be: keywords, element types, attribute words, layouts, builtins
RESERVED = frozenset(KEYWORDS) | DTYPE_NAMES | {
    "self", "inf", "zero", "skip", "none", "thread", "instance", "rows", "mma_acc", "mma_a", "mma_b", "mma_rows",
    "wgmma_acc", "wgmma_rows", "cdiv", "min", "max", "THREADS", "SMS",
}  # fmt: skip


def N(v: int | float) -> n.Num:
    return n.Num(v)


def V(name: str) -> n.Name:
    return n.Name(name)


def B(op: str, a: n.Expr, b: n.Expr) -> n.Bin:
    return n.Bin(op, a, b)


def C(fn: str, *args: n.Expr) -> n.Call:
    return n.Call(fn, tuple(args))


def At(e: n.Expr) -> n.At:
    return n.At(e)


def Sp(start: n.Expr, size: n.Expr) -> n.Span:
    return n.Span(start, size)


def R(name: str, *index: n.Idx, t: bool = False) -> n.Ref:
    return n.Ref(name, tuple(index), t)


def op(name: str, outs: tuple[n.Expr, ...] = (), ins: tuple[n.Expr, ...] = (), **kw: n.Expr) -> n.Op:
    return n.Op(name, outs, ins, tuple(n.Attr(k, v) for k, v in kw.items()))


class Names:
    """Fresh identifiers drawn by hypothesis, unique within a module."""

    def __init__(self, draw: Draw) -> None:
        self.draw = draw
        self.used: set[str] = set()

    def fresh(self, upper: bool = False) -> str:
        pattern = r"[A-Z][A-Z0-9_]{0,4}" if upper else r"[a-z][a-z0-9_]{0,5}"
        base = self.draw(st.from_regex(pattern, fullmatch=True))
        name = base
        i = 0
        while name in self.used or name in RESERVED or name.lower() in RESERVED:
            i += 1
            name = f"{base}{i}"
        self.used.add(name)
        return name


@attrs.define
class Ctx:
    """What the generator knows while it builds one kernel."""

    draw: Draw
    names: Names
    elem: str  # element type of x and c: a dtype or the type variable
    elem_bytes: int
    sizes: dict[str, str]  # role -> declared name: "N", "K", "B", "D"
    d_values: tuple[int, ...]
    params: dict[str, str]  # role -> declared name: "x", "c", "out", "csq"
    batch: bool
    grid: dict[str, str]  # "t" (row tile), "b" (batch)
    rows: str  # the rows-per-CTA constant
    rows_value: int
    consts: dict[str, int] = attrs.field(factory=dict)
    smem: list[n.Smem] = attrs.field(factory=list)
    barriers: list[n.Barrier] = attrs.field(factory=list)
    scope: list[str] = attrs.field(factory=list)  # integer names usable in expressions (loops, lets)

    def choice(self, options: Any) -> Any:
        return self.draw(st.sampled_from(list(options)))

    def flag(self) -> bool:
        return self.draw(st.booleans())

    def row_index(self) -> list[n.Idx]:
        """Leading indices of a [B?, N, ...] tensor for this CTA's rows."""
        lead: list[n.Idx] = [At(V(self.grid["b"]))] if self.batch else []
        return lead + [Sp(B("*", V(self.grid["t"]), V(self.rows)), V(self.rows))]


# ---------------------------------------------------------------------------------------------------
# Expressions
# ---------------------------------------------------------------------------------------------------


def small_int_expr(ctx: Ctx) -> n.Expr:
    """An integer expression over constants, sizes and names in scope (used where any integer goes)."""
    leaves: list[n.Expr] = [N(ctx.choice((0, 1, 2, 3, 7, 16, 128))), N(-ctx.choice((1, 2))), V(ctx.rows)]
    leaves += [V(x) for x in ctx.scope]
    leaves += [V(ctx.sizes["N"])]
    a = ctx.choice(leaves)
    kind = ctx.choice(("leaf", "bin", "call", "neg", "chain"))
    if kind == "leaf":
        return a
    b = ctx.choice(leaves)
    if kind == "bin":
        o = ctx.choice(("+", "-", "*", "/", "%"))
        return B(o, a, N(ctx.choice((1, 2, 3, 4))) if o in "/%" or ctx.flag() else b)
    if kind == "call":
        return C(ctx.choice(("cdiv", "min", "max")), a, N(ctx.choice((1, 2, 8))))
    if kind == "neg":
        return n.Unary("-", V(ctx.rows) if not ctx.scope else V(ctx.choice(ctx.scope)))
    # a left-associative chain, as the parser builds it, with a parenthesized right operand
    return B("-", B("+", a, b), B("*", N(2), a))


def condition(ctx: Ctx) -> n.Expr:
    """A boolean condition: comparisons joined by and/or/not."""
    x = V(ctx.choice(ctx.scope)) if ctx.scope else B("*", V(ctx.grid["t"]), V(ctx.rows))
    cmp1 = B(ctx.choice(("<", "<=", ">", ">=", "==", "!=")), x, ctx.choice((V(ctx.sizes["N"]), N(3), V(ctx.rows))))
    kind = ctx.choice(("cmp", "and", "or", "not"))
    if kind == "cmp":
        return cmp1
    cmp2 = B("==", B("%", x, N(2)), N(0))
    if kind == "and":
        return B("and", cmp1, cmp2)
    if kind == "or":
        return B("or", cmp1, n.Unary("not", cmp2))
    return n.Unary("not", cmp1)


# ---------------------------------------------------------------------------------------------------
# Units: statements of a role body, valid by construction
# ---------------------------------------------------------------------------------------------------

Unit = tuple[list[n.Stmt], list[n.Stmt]]  # (register declarations, statements)


def unit_reduce(ctx: Ctx, per: int) -> Unit:
    """``sumsq`` of this CTA's rows into a register vector, stored masked."""
    s = ctx.names.fresh()
    src = R(ctx.params["x"], *ctx.row_index(), n.All())
    mask = {"oob": V(ctx.choice(("zero", "none")))} if ctx.flag() else {}
    decl = n.RegDecl(s, "f32", (V(ctx.rows),), n.Layout("rows") if ctx.flag() else None)
    body: list[n.Stmt] = [op("sumsq", (V(s),), (src,), **mask)]
    if ctx.flag():
        dst = R(ctx.params["out"], *ctx.row_index())
        body.append(op("store", (dst,), (V(s),), oob=V("skip")))
    return [decl], body


def unit_fill(ctx: Ctx, per: int) -> Unit:
    """A register tile in ``rows`` layout of any shape, filled with a float or ``inf``."""
    v = ctx.names.fresh()
    dtype = ctx.choice(("f32", "i32", "f16", ctx.elem))
    shape = tuple(N(x) for x in ctx.draw(st.lists(st.sampled_from((1, 4, 16, 64, 128)), min_size=1, max_size=2)))
    value = ctx.choice((N(0.0), N(1.5), N(-2.0), V("inf"), n.Unary("-", V("inf")), N(1e-3), N(-1)))
    return [n.RegDecl(v, dtype, shape, n.Layout("rows"))], [op("fill", ins=(V(v),), value=value)]


def unit_argmin(ctx: Ctx, per: int) -> Unit:
    """A running argmin over a loop of centroids (the naive kmeans schedule)."""
    if "c" not in ctx.params or "csq" not in ctx.params:
        return unit_fill(ctx, per)
    bv, bi, dot, k = (ctx.names.fresh() for _ in range(4))
    lead: list[n.Idx] = [At(V(ctx.grid["b"]))] if ctx.batch else []
    decls: list[n.Stmt] = [
        n.RegDecl(bv, "f32", (V(ctx.rows),), n.Layout("rows")),
        n.RegDecl(bi, "i32", (V(ctx.rows),), n.Layout("rows")),
        n.RegDecl(dot, "f32", (V(ctx.rows), N(1)), n.Layout("rows")),
    ]
    ctx.scope.append(k)
    loop = n.For(k, N(0), V(ctx.sizes["K"]), None, (
        op("rowdot", (V(dot),), (R(ctx.params["x"], *ctx.row_index(), n.All()),
                                 R(ctx.params["c"], *lead, At(V(k)), n.All())), oob=V("zero")),
        op("argmin.update", (V(bv), V(bi)), (V(dot), R(ctx.params["csq"], *lead, Sp(V(k), N(1)))),
           base=V(k), scale=N(-2.0)),
    ))  # fmt: skip
    ctx.scope.remove(k)
    body: list[n.Stmt] = [op("fill", ins=(V(bv),), value=V("inf")), op("fill", ins=(V(bi),), value=N(-1)), loop]
    return decls, body


def unit_mma(ctx: Ctx, per: int) -> Unit:
    """``mma.sync`` on fragments (filled, or loaded with ``ldmatrix`` from a padded shared buffer)."""
    grids = [(wm, per // wm) for wm in (1, 2, 4, 8) if per % wm == 0]
    wm, wn = ctx.choice(grids)
    m, nn = 16 * wm * ctx.choice((1, 2)), 8 * wn * ctx.choice((1, 2))
    frag = ctx.choice(("bf16", "f16"))
    acc, a, bt = (ctx.names.fresh() for _ in range(3))
    lay = lambda name: n.Layout(name, (N(wm), N(wn)))  # noqa: E731
    decls: list[n.Stmt] = [
        n.RegDecl(acc, "f32", (N(m), N(nn)), lay("mma_acc")),
        n.RegDecl(a, frag, (N(m), N(16)), lay("mma_a")),
        n.RegDecl(bt, frag, (N(nn), N(16)), lay("mma_b")),
    ]
    body: list[n.Stmt] = [op("fill", ins=(V(acc),), value=N(0.0)), op("fill", ins=(V(bt),), value=N(1.0))]
    if ctx.flag():
        buf = ctx.names.fresh()
        ctx.smem.append(n.Smem(buf, frag, (N(m), N(32)), None, None, N(ctx.choice((0, 8))), None))
        kk = ctx.names.fresh()
        body.append(n.For(kk, N(0), N(2), None, (
            op("ldmatrix", (V(a),), (R(buf, n.All(), Sp(B("*", V(kk), N(16)), N(16))),)),
            op("mma.sync", (V(acc),), (V(a), R(bt, t=True))),
        )))  # fmt: skip
    else:
        body += [op("fill", ins=(V(a),), value=N(1.0)), op("mma.sync", (V(acc),), (V(a), R(bt, t=True)))]
    return decls, body


def unit_cp_async(ctx: Ctx, per: int) -> Unit:
    """A ``cp.async`` ring filled in a loop, committed, waited for and synchronized."""
    ring, p = ctx.names.fresh(), ctx.names.fresh()
    stages = ctx.choice((2, 3, 4))
    width = ctx.choice((8, 16, 32))
    stage_expr: n.Expr = N(stages)
    if ctx.flag():
        sname = ctx.names.fresh(upper=True)
        ctx.consts[sname] = stages
        stage_expr = V(sname)
    ctx.smem.append(n.Smem(ring, ctx.elem, (V(ctx.rows), N(width)), stage_expr, None,
                           N(8) if ctx.flag() else None, N(128) if ctx.flag() else None))  # fmt: skip
    src = R(ctx.params["x"], *ctx.row_index(), Sp(B("*", V(p), N(width)), N(width)))
    copy = op("cp.async", (R(ring, At(B("%", V(p), stage_expr))),), (src,), oob=V("zero"))
    guarded: n.Stmt = n.If(B("<", B("*", V(p), N(width)), V(ctx.sizes["D"])), (copy,)) if ctx.flag() else copy
    body: list[n.Stmt] = [
        n.For(p, N(0), stage_expr, None, (guarded, op("cp.async.commit"))),
        op("cp.async.wait", pending=N(ctx.choice((0, 1)))),
        op("bar.sync"),
    ]
    return [], body


def unit_pipeline(ctx: Ctx, per: int) -> Unit:
    """A TMA ring gated by full/empty mbarriers (Hopper), with ``wgmma`` when the role is a warpgroup."""
    stages = ctx.choice((1, 2, 3))
    buf, full, empty, i = (ctx.names.fresh() for _ in range(4))
    swz = ctx.choice((None, "32B", "64B", "128B"))
    ctx.smem.append(n.Smem(buf, ctx.elem, (V(ctx.rows), V(ctx.sizes["D"])), N(stages), swz, None, None))
    ctx.barriers.append(n.Barrier(full, "mbarrier", N(1), N(stages)))
    ctx.barriers.append(n.Barrier(empty, "mbarrier", B("*", N(32), N(per)), N(stages) if ctx.flag() else None))
    slot = At(B("%", V(i), N(stages)))
    e_ref = R(empty, slot) if ctx.barriers[-1].stages is not None else V(empty)
    ctx.scope.append(i)
    inner: list[n.Stmt] = [
        op("mbarrier.wait", ins=(e_ref,), parity=B("%", B("+", B("/", V(i), N(stages)), N(1)), N(2))),
        op("mbarrier.arrive.expect_tx", ins=(R(full, slot),),
           bytes=B("*", B("*", V(ctx.rows), V(ctx.sizes["D"])), N(ctx.elem_bytes))),
        op("tma.load", (R(buf, slot),), (R(ctx.params["x"], *ctx.row_index(), n.All()), R(full, slot))),
        op("mbarrier.wait", ins=(R(full, slot),), parity=B("%", B("/", V(i), N(stages)), N(2))),
    ]  # fmt: skip
    if ctx.flag():
        inner.append(op("fence.proxy_async"))
    decls: list[n.Stmt] = []
    if per == 4 and ctx.rows_value % 64 == 0 and ctx.elem != "f32":
        acc, cs = ctx.names.fresh(), ctx.names.fresh()
        bn = ctx.choice((8, 64, 128))
        ctx.smem.append(n.Smem(cs, ctx.elem, (N(bn), V(ctx.sizes["D"])), None, "128B", None, None))
        decls.append(n.RegDecl(acc, "f32", (V(ctx.rows), N(bn)), n.Layout("wgmma_acc")))
        inner += [
            op("wgmma", (V(acc),), (R(buf, slot), R(cs, t=True)), accumulate=N(0)),
            op("wgmma.commit"),
            op("wgmma.wait", ins=(V(acc),) if ctx.flag() else (), pending=N(0)),
        ]
    per_kw = {"per": V(ctx.choice(("thread", "instance")))} if ctx.flag() else {}
    inner.append(op("mbarrier.arrive", ins=(e_ref,), **per_kw))
    ctx.scope.remove(i)
    step = N(ctx.choice((1, 2))) if ctx.flag() else None
    return decls, [n.For(i, N(0), V(ctx.sizes["N"]), step, tuple(inner))]


UNITS = (unit_reduce, unit_fill, unit_argmin, unit_mma, unit_cp_async, unit_pipeline)


def wrap(ctx: Ctx, stmts: list[n.Stmt], depth: int) -> list[n.Stmt]:
    """Statements, possibly under a ``let``, inside a ``for`` or an ``if``/``else`` (nested).

    Names a wrapper binds are in scope only inside it: the scope is restored on the way out.
    """
    if depth >= 2 or not stmts:
        return stmts
    saved = list(ctx.scope)
    kind = ctx.choice(("none", "none", "for", "if", "let"))
    out = stmts
    if kind == "for":
        v = ctx.names.fresh()
        start = N(ctx.choice((0, 1)))
        stop = ctx.choice((N(2), V(ctx.rows), C("cdiv", V(ctx.sizes["N"]), V(ctx.rows)), B("-", V(ctx.rows), N(1))))
        step = N(ctx.choice((1, 2, 3))) if ctx.flag() else None
        ctx.scope.append(v)
        out = [n.For(v, start, stop, step, tuple(wrap(ctx, stmts, depth + 1)))]
    elif kind == "if":
        cond = condition(ctx)
        then = tuple(wrap(ctx, stmts, depth + 1))
        ctx.scope[:] = saved
        orelse = tuple(wrap(ctx, [op("bar.sync")], depth + 1)) if ctx.flag() else ()
        out = [n.If(cond, then, orelse)]
    elif kind == "let":
        v = ctx.names.fresh()
        let = n.Let(v, small_int_expr(ctx))
        ctx.scope.append(v)
        out = [let] + wrap(ctx, stmts, depth + 1)
    ctx.scope[:] = saved
    return out


# ---------------------------------------------------------------------------------------------------
# Kernels and modules
# ---------------------------------------------------------------------------------------------------


@attrs.frozen
class Signature:
    """What every kernel of one module shares: parameters and their shape domain."""

    params: tuple[n.Param, ...]
    domain: tuple[n.Constraint, ...]
    elem: str
    elem_bytes: int
    sizes: dict[str, str]
    d_values: tuple[int, ...]
    param_names: dict[str, str]
    batch: bool


def signature(draw: Draw, names: Names) -> Signature:
    """Parameters and their domain. No scalar parameters: no launch can pass one yet (the program
    binding takes tensors only, also for a module's implicit program)."""
    sizes = {"N": names.fresh(upper=True), "D": names.fresh(upper=True)}
    batch = draw(st.booleans())
    if batch:
        sizes["B"] = names.fresh(upper=True)
    centroids = draw(st.booleans())
    if centroids:
        sizes["K"] = names.fresh(upper=True)
    d_values = tuple(sorted(draw(st.sets(st.sampled_from((32, 64, 128, 256)), min_size=1, max_size=3))))
    domain: list[n.Constraint] = []
    typevar = draw(st.booleans())
    if typevar:
        tv = names.fresh(upper=True)
        tvals = draw(st.lists(st.sampled_from(("bf16", "f16")), min_size=1, max_size=2, unique=True))
        elem, elem_bytes = tv, 2
        domain.append(n.Constraint(tv, "in", tuple(V(t) for t in tvals)))
    else:
        elem = draw(st.sampled_from(("bf16", "f16")))
        elem_bytes = 2
    for role in ("B", "N", "K"):
        if role not in sizes:
            continue
        s = sizes[role]
        domain.append(n.Constraint(s, ">=", (N(draw(st.sampled_from((0, 1, 8)))),)))
        if draw(st.booleans()):
            domain.append(n.Constraint(s, "<=", (N(draw(st.sampled_from((4096, 65536)))),)))
        if draw(st.booleans()):
            domain.append(n.Constraint(s, "%", (N(draw(st.sampled_from((2, 8, 16)))),)))
    domain.append(n.Constraint(sizes["D"], "in", tuple(N(v) for v in d_values)))
    order = draw(st.permutations(range(len(domain))))
    domain = [domain[i] for i in order]
    lead = (V(sizes["B"]),) if batch else ()
    pn = {"x": names.fresh(), "out": names.fresh()}
    params = [n.Param(pn["x"], "global", elem, lead + (V(sizes["N"]), V(sizes["D"])))]
    if centroids:
        pn["c"], pn["csq"] = names.fresh(), names.fresh()
        params.append(n.Param(pn["c"], "global", elem, lead + (V(sizes["K"]), V(sizes["D"]))))
        params.append(n.Param(pn["csq"], "global", "f32", lead + (V(sizes["K"]),)))
    params.append(n.Param(pn["out"], "global", "f32", lead + (V(sizes["N"]),)))
    if draw(st.booleans()):
        params.append(n.Param(names.fresh(), "global", "i32", lead + (V(sizes["N"]),)))
    return Signature(tuple(params), tuple(domain), elem, elem_bytes, sizes, d_values, pn, batch)


def kernel(draw: Draw, names: Names, sig: Signature) -> n.Kernel:
    rows_name = names.fresh(upper=True)
    rows_value = draw(st.sampled_from((64, 128)))
    grid = {"t": names.fresh()}
    if sig.batch:
        grid["b"] = names.fresh()
    ctx = Ctx(draw, names, sig.elem, sig.elem_bytes, sig.sizes, sig.d_values, sig.param_names, sig.batch, grid,
              rows_name, rows_value)  # fmt: skip
    consts: list[n.Const] = [n.Const(rows_name, N(rows_value))]
    for _ in range(draw(st.integers(0, 2))):
        name = names.fresh(upper=True)
        value = ctx.choice((B("/", V(rows_name), N(2)), C("min", V(rows_name), N(64)), B("*", N(2), N(3)),
                            C("max", N(2), B("/", N(256), V(sig.sizes["D"]))), N(7)))  # fmt: skip
        consts.append(n.Const(name, value))
    # roles over consecutive warps
    roles: list[n.Role] = []
    start = 0
    for _ in range(draw(st.integers(1, 3))):
        width = draw(st.sampled_from((1, 2, 4, 8)))
        per = draw(st.sampled_from([p for p in (1, 2, 4) if width % p == 0 and p < width] + [width]))
        decls: list[n.Stmt] = []
        body: list[n.Stmt] = []
        for unit in draw(st.lists(st.sampled_from(UNITS), min_size=1, max_size=3)):
            d, s = unit(ctx, per)
            decls += d
            body += wrap(ctx, s, 0)
            ctx.scope.clear()
        regs = N(draw(st.sampled_from((40, 64, 128, 232)))) if draw(st.booleans()) else None
        roles.append(n.Role(names.fresh(), N(start), N(start + width), N(per) if per != width else None, regs,
                            tuple(decls + body)))  # fmt: skip
        start += width
    consts += [n.Const(k, N(v)) for k, v in ctx.consts.items()]
    extents = (C("cdiv", V(sig.sizes["N"]), V(rows_name)),) + ((V(sig.sizes["B"]),) if sig.batch else ())
    occupancy = N(draw(st.sampled_from((1, 2)))) if draw(st.booleans()) else None
    cluster = (N(2), N(1)) if draw(st.booleans()) else ()
    return n.Kernel(
        names.fresh(), sig.params, sig.domain, tuple(consts), n.Grid(tuple(grid.values()), extents),
        n.Cta(N(start), occupancy, cluster), tuple(ctx.smem), tuple(ctx.barriers), tuple(roles),
    )  # fmt: skip


@st.composite
def modules(draw: Draw) -> n.Module:
    """A random valid module: one to three kernels of one signature, and sometimes a program."""
    names = Names(draw)
    with_program = draw(st.booleans())
    sig = signature(draw, names)
    kernels = tuple(kernel(draw, names, sig) for _ in range(draw(st.integers(1, 2))))
    program = None
    if with_program:
        program = n.Program(names.fresh(), sig.params, sig.domain, (),
                            tuple(n.Launch(k.name, tuple(p.name for p in sig.params)) for k in kernels))  # fmt: skip
    return n.Module(kernels, program)


# ---------------------------------------------------------------------------------------------------
# Renaming and noisy printing
# ---------------------------------------------------------------------------------------------------


def declared_names(module: n.Module) -> list[str]:
    """Every name the module declares (kernels, program, parameters, sizes and type variables,
    constants, grid variables, buffers, barriers, roles, register tiles, loop variables, lets)."""
    out: list[str] = []

    def add(x: str) -> None:
        if x not in out and x not in DTYPE_NAMES:
            out.append(x)

    for k in module.kernels:
        add(k.name)
        for p in k.params:
            add(p.name)
            add(p.dtype)
        for c in k.domain:
            add(c.var)
        for c in k.consts:
            add(c.name)
        for v in k.grid.vars:
            add(v)
        for s in k.smem:
            add(s.name)
        for b in k.barriers:
            add(b.name)
        for r in k.roles:
            add(r.name)
            for s in n.walk_stmts(r.body):
                if isinstance(s, (n.Let, n.RegDecl)):
                    add(s.name)
                elif isinstance(s, n.For):
                    add(s.var)
    if module.program is not None:
        add(module.program.name)
        for p in module.program.params:
            add(p.name)
            add(p.dtype)
        for b in module.program.buffers:
            add(b.name)
    return out


_RENAMED = {
    n.Name: ("id",), n.Ref: ("name",), n.Param: ("name", "dtype"), n.Constraint: ("var",), n.Const: ("name",),
    n.Smem: ("name", "dtype"), n.Barrier: ("name",), n.Role: ("name",), n.Let: ("name",),
    n.RegDecl: ("name", "dtype"), n.For: ("var",), n.Kernel: ("name",), n.Buffer: ("name", "dtype"),
    n.Launch: ("kernel",), n.Program: ("name",),
}  # fmt: skip


def rename(node: Any, mapping: Mapping[str, str]) -> Any:
    """``node`` with every declared name renamed through ``mapping`` (primitive, layout, function and
    attribute names are not declarations and stay)."""
    if isinstance(node, tuple):
        return tuple(rename(x, mapping) for x in node)
    if not attrs.has(type(node)) or type(node).__name__ == "Loc":
        return node
    changes: dict[str, Any] = {}
    for f in attrs.fields(type(node)):
        v = getattr(node, f.name)
        if isinstance(v, str):
            if f.name in _RENAMED.get(type(node), ()):
                changes[f.name] = mapping.get(v, v)
        elif isinstance(v, tuple) and v and all(isinstance(x, str) for x in v):
            if (type(node), f.name) in ((n.Grid, "vars"), (n.Launch, "args")):
                changes[f.name] = tuple(mapping.get(x, x) for x in v)
        elif v is not None and not isinstance(v, (int, float, bool)):
            changes[f.name] = rename(v, mapping)
    return attrs.evolve(node, **changes)


@contextmanager
def _parenthesizing(rng: random.Random, share: float) -> Iterator[None]:
    """Make the printer wrap a random share of expressions in redundant parentheses."""
    plain = printer.expr

    def noisy(e: n.Expr, parent: int = 0) -> str:
        s = plain(e, parent)
        return f"({s})" if rng.random() < share else s

    printer.expr = noisy  # type: ignore[assignment]
    try:
        yield
    finally:
        printer.expr = plain  # type: ignore[assignment]


def noisy_text(module: n.Module, seed: int) -> str:
    """``module`` printed with comments, blank lines, extra spaces, wrapped lines and parentheses."""
    rng = random.Random(seed)
    with _parenthesizing(rng, 0.25):
        text = printer.print_module(module)
    out: list[str] = []
    for line in text.splitlines():
        indent = len(line) - len(line.lstrip(" "))
        head, rest = line[:indent], line[indent:]
        if rng.random() < 0.2:
            out.append(" " * rng.randrange(0, 12) + "# a comment line, at any indentation")
        if rng.random() < 0.15:
            out.append("")
        rest = re.sub(r" ", lambda _: " " * rng.choice((1, 1, 2, 3)), rest)
        rest = re.sub(r"([(\[,])", lambda m: m.group(1) + (" " if rng.random() < 0.3 else ""), rest)
        rest = _wrap_inside_brackets(rest, rng)
        if rng.random() < 0.3:
            rest += "   # trailing remark"
        out.append(head + rest)
    return "\n".join(out) + "\n" * rng.choice((1, 2, 3))


def _wrap_inside_brackets(line: str, rng: random.Random) -> str:
    """Break the line after some commas inside brackets (the lexer joins such lines)."""
    depth = 0
    out = []
    for ch in line:
        out.append(ch)
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth > 0 and rng.random() < 0.2:
            out.append("\n" + " " * rng.randrange(0, 9))
    return "".join(out)
