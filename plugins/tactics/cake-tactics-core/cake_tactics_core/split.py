"""The ``split-reduction`` tactic: split a kernel's reduction loop across ``SP`` CTAs, each writing its
partial result to a program buffer, and merge the partials in a new launch.

The site is a kernel (not persistent: no grid extent names ``SMS``) launched once by its program, whose
roles run a loop ``for kt in 0 .. NC`` over the same tiles (the producer's copies and the consumer's
folds), where the consumer ends with a per-row reduction and stores its indices::

    argmin.reduce bv, bi <- bv, bi            (or topk.reduce fv, fi <- tv, ti, k=K)
    store out[b, t * BM + self * ROWS : +ROWS] <- bi, oob=skip

The rewrite (``SP`` = 2 or 4; ``sp``, ``SP``, the buffers and the merge kernel fresh names)::

    buffer out_v: global f32[B, N, SP]         (the output's shape, SP after its rows)
    buffer out_i: global i32[B, N, SP]
    launch assign(x, c, c_sq, out_v, out_i)
    launch merge(out_v, out_i, out)
    kernel assign(..., out_v: ..., out_i: ...)
      grid (t, b, sp) over (cdiv(N, BM), B, SP)
      ... every role:  for kt in sp * cdiv(NC, SP) .. min(NC, (sp + 1) * cdiv(NC, SP)):
      ... the consumer: store out_v[b, rows, sp] <- bv ; store out_i[b, rows, sp] <- bi
    kernel merge(out_v: ..., out_i: ..., out: ...)          (one row per thread)
      load v <- out_v[b, t * R : +R, :], oob=fill, value=inf
      load i <- out_i[b, t * R : +R, :], oob=fill, value=-1
      topk.reduce fv, fi <- v, i, k=1          (k=K for top-k lists)
      store out[b, t * R : +R] <- fi, oob=skip

``topk.reduce`` orders pairs by value, then by index, so of equal partial minima the lower index wins, as
the kmeans-assign oracle requires; a split with no tiles keeps ``(inf, -1)``, which loses to every real
candidate. Whether the split pays depends on the grid at the cell (a grid with fewer CTAs than the target
has multiprocessors leaves some idle), which is not known statically: both factors are offered and the
cost model judges.

Precondition: the kernel is not persistent and is launched once; every role that loops over ``0 .. NC``
(the same value, through the roles' ``let``) at its top level does so exactly once, and the consumer's
last two statements are the reduction and the store of its indices (``oob=skip``) into an output of the
program that nothing else writes, indexed by grid variables and one span of rows; the merge's primitives
(``load`` into ``rows`` tiles, ``topk.reduce`` through a shared scratch of two words per row and list
entry) and the rewritten kernel **lower for the target**; and the rewrite fits
(:func:`cake_tactics_core.fit.fits`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from cake_core.errors import CakeUserError
from cake_core.ir import nodes as n
from cake_core.loop.tactic import Application

from cake_tactics_core import construct
from cake_tactics_core.fit import fits

if TYPE_CHECKING:
    from cake_core.target import Target

FACTORS = (2, 4)
REDUCES = ("argmin.reduce", "topk.reduce")
MERGE_ROWS = 128  # rows a merge CTA takes: one a thread of four warps


@attrs.frozen
class _Site:
    kernel: n.Kernel
    consumer: n.Role
    reduce: n.Op  # argmin.reduce / topk.reduce V, I <- ...
    store: n.Op  # store out[...] <- I, oob=skip
    out: str  # the kernel's output parameter
    row_axis: int  # the output's axis indexed by the span of rows
    loops: tuple[tuple[n.Role, n.For], ...]  # every role's loop over the tiles


def _plain(e: n.Expr) -> str | None:
    return e.id if isinstance(e, n.Name) else (e.name if isinstance(e, n.Ref) and not e.index else None)


def _lets(role: n.Role) -> dict[str, n.Expr]:
    return {st.name: st.value for st in n.walk_stmts(role.body) if isinstance(st, n.Let)}


def _site(module: n.Module, kernel: n.Kernel) -> _Site | None:
    prog = module.program
    if prog is None or [x.kernel for x in prog.launches].count(kernel.name) != 1:
        return None
    if "SMS" in {e.id for x in kernel.grid.extents for e in n.walk_expr(x) if isinstance(e, n.Name)}:
        return None  # persistent: each CTA walks tiles already
    launch = next(x for x in prog.launches if x.kernel == kernel.name)
    outputs = {p.name for p in prog.params} - {a for x in prog.launches if x is not launch for a in x.args}
    for role in kernel.roles:
        tail = [st for st in role.body if isinstance(st, n.Op)][-2:]
        if len(tail) != 2 or tail[0] is not role.body[-2] or tail[1] is not role.body[-1]:
            continue
        red, store = tail
        if red.name not in REDUCES or store.name != "store" or len(red.outs) != 2 or len(store.ins) != 1:
            continue
        if _plain(store.ins[0]) != _plain(red.outs[1]) or store.attr("oob") != n.Name("skip"):
            continue
        dst = store.outs[0] if store.outs else None
        if not isinstance(dst, n.Ref) or kernel.param(dst.name) is None:
            continue
        spans = [i for i, x in enumerate(dst.index) if isinstance(x, n.Span)]
        grid = set(kernel.grid.vars)
        if len(spans) != 1 or any(not isinstance(x, (n.At, n.Span, n.All)) for x in dst.index):
            continue
        if any(isinstance(x, n.At) and not (isinstance(x.expr, n.Name) and x.expr.id in grid) for x in dst.index):
            continue
        arg = launch.args[[p.name for p in kernel.params].index(dst.name)]
        writers = [op for _r, op in n.walk_ops(kernel) if any(_plain(o) == dst.name or (isinstance(o, n.Ref) and
                   o.name == dst.name) for o in op.outs)]  # fmt: skip
        if arg not in outputs or writers != [store]:
            continue
        loops = _loops(kernel, role)
        if loops is not None:
            return _Site(kernel, role, red, store, dst.name, spans[0], loops)
    return None


def _loops(kernel: n.Kernel, consumer: n.Role) -> tuple[tuple[n.Role, n.For], ...] | None:
    """Every role's one top-level loop ``0 .. NC`` over the consumer's tiles, or None."""
    mine = [st for st in consumer.body if isinstance(st, n.For)]
    if len(mine) != 1 or mine[0].start != n.Num(0) or mine[0].step is not None:
        return None
    trips = _lets(consumer).get(getattr(mine[0].stop, "id", ""), mine[0].stop)
    out = []
    for role in kernel.roles:
        loops = [st for st in role.body if isinstance(st, n.For)]
        same = [x for x in loops if x.start == n.Num(0) and x.step is None
                and _lets(role).get(getattr(x.stop, "id", ""), x.stop) == trips]  # fmt: skip
        if len(same) > 1 or (role is consumer and not same):
            return None
        if same:
            out.append((role, same[0]))
    return tuple(out)


def _lowers(module: n.Module, target: Target) -> bool:
    """Every kernel of ``module`` lowers to CUDA for ``target`` at the program's first specialization."""
    from cake_core import pipeline
    from cake_core.ir.printer import print_module

    try:
        cand = pipeline.Candidate(pipeline.load_text(print_module(module), "split.cake"), target)
        specs = cand.specs()
        return bool(specs) and cand.build(specs[0]) is not None
    except CakeUserError:
        return False


class SplitReduction:
    """Split a kernel's reduction loop across CTAs and merge the partial results in a new launch: the site
    is the kernel, params ``{split: 2 or 4}``."""

    name = "split-reduction"
    precondition = (
        "a kernel launched once, not persistent, whose roles loop once over the same tiles `0 .. NC` at their top "
        "level and whose consumer ends with `argmin.reduce`/`topk.reduce V, I` and `store out[grid vars, rows] <- I, "
        "oob=skip` into a program output nothing else writes; the merge (`load` rows tiles, `topk.reduce`) and the "
        "split kernel lower for the target, and the rewrite fits"
    )

    def applications(self, module: n.Module, target: Target) -> Sequence[Application]:
        out = []
        for kernel in module.kernels:
            if _site(module, kernel) is None:
                continue
            for factor in FACTORS:
                app = Application(self.name, kernel.name, {"split": factor})
                rewritten = self.apply(module, target, app)
                if not fits(rewritten, target) or not _lowers(rewritten, target):
                    break  # what refuses 2 refuses 4
                out.append(app)
        return out

    def apply(self, module: n.Module, target: Target, application: Application) -> n.Module:
        site = _site(module, module.kernel(application.site))
        assert site is not None, application.key
        return _rewrite(module, site, int(application.params["split"]))


# --- the rewrite ---


def _rewrite(module: n.Module, site: _Site, factor: int) -> n.Module:
    prog = module.program
    kernel = site.kernel
    fresh = construct.Fresh(kernel, {k.name for k in module.kernels} | {b.name for b in prog.buffers}
                            | {p.name for p in prog.params})  # fmt: skip
    sp_const, sp = fresh("SP"), fresh("sp")
    launch = next(x for x in prog.launches if x.kernel == kernel.name)
    arg = launch.args[[p.name for p in kernel.params].index(site.out)]
    vals, idxs, merge = fresh(f"{arg}_v"), fresh(f"{arg}_i"), fresh("merge")
    kv, ki = vals, idxs  # the kernel's parameters are named as the buffers it is passed
    regs = {st.name: st for st in site.consumer.body if isinstance(st, n.RegDecl)}
    v_tile, i_tile = _plain(site.reduce.outs[0]), _plain(site.reduce.outs[1])
    v_type, i_type = regs[v_tile].dtype, regs[i_tile].dtype
    prog_param = next(p for p in prog.params if p.name == arg)
    ax = site.row_axis + 1

    def split_shape(shape: tuple[n.Expr, ...]) -> tuple[n.Expr, ...]:
        return (*shape[:ax], n.Num(factor), *shape[ax:])

    # the split kernel: its output becomes the two partial buffers, one more grid variable, the tiles cut
    params = []
    for p in kernel.params:
        if p.name == site.out:
            params += [attrs.evolve(p, name=kv, dtype=v_type, shape=split_shape(p.shape)),
                       attrs.evolve(p, name=ki, dtype=i_type, shape=split_shape(p.shape))]  # fmt: skip
        else:
            params.append(p)
    cut = {id(loop): role for role, loop in site.loops}

    def loop_of(loop: n.For) -> n.For:
        per = n.Call("cdiv", (loop.stop, n.Name(sp_const)))
        start = n.Bin("*", n.Name(sp), per)
        stop = n.Call("min", (loop.stop, n.Bin("*", construct.arith("+", n.Name(sp), n.Num(1)), per)))
        return attrs.evolve(loop, start=start, stop=stop)

    def at(ref: n.Ref, name: str) -> n.Ref:
        return attrs.evolve(ref, name=name, index=(*ref.index[:ax], n.At(n.Name(sp)), *ref.index[ax:]))

    dst = site.store.outs[0]
    stores = (
        attrs.evolve(site.store, outs=(at(dst, kv),), ins=(site.reduce.outs[0],)),
        attrs.evolve(site.store, outs=(at(dst, ki),), ins=(site.reduce.outs[1],)),
    )
    roles = []
    for role in kernel.roles:
        body = tuple(loop_of(st) if id(st) in cut else st for st in role.body)
        if role is site.consumer:
            body = (*body[:-1], *stores)
        roles.append(attrs.evolve(role, body=body))
    grid = attrs.evolve(kernel.grid, vars=(*kernel.grid.vars, sp), extents=(*kernel.grid.extents, n.Name(sp_const)))
    split = attrs.evolve(kernel, params=tuple(params), consts=(*kernel.consts, n.Const(sp_const, n.Num(factor))),
                         grid=grid, roles=tuple(roles))  # fmt: skip

    # the program: the partial buffers, the split launch writes them, the merge reads them into the output
    buffers = (*prog.buffers, n.Buffer(vals, v_type, split_shape(prog_param.shape)),
               n.Buffer(idxs, i_type, split_shape(prog_param.shape)))  # fmt: skip
    args = tuple(x for a in launch.args for x in ((vals, idxs) if a == arg else (a,)))
    launches = []
    for x in prog.launches:
        launches.append(attrs.evolve(x, args=args) if x is launch else x)
        if x is launch:
            launches.append(n.Launch(merge, (vals, idxs, arg)))
    new_prog = attrs.evolve(prog, buffers=buffers, launches=tuple(launches))
    merged = _merge(merge, prog, prog_param, site.row_axis, (v_type, i_type), factor)
    kernels = tuple(k2 for k in module.kernels for k2 in ((split, merged) if k is kernel else (k,)))
    return attrs.evolve(module, program=new_prog, kernels=kernels)


def _merge(name: str, prog: n.Program, out: n.Param, ax: int, types: tuple[str, str], factor: int) -> n.Kernel:
    """The merge kernel over the program's output ``out`` (rows on axis ``ax``): one row of partials a
    thread."""
    dims = out.shape
    fresh = construct.Fresh(n.Kernel(name=name), {e.id for d in dims for e in n.walk_expr(d) if isinstance(e, n.Name)})
    r, t = fresh("R"), fresh("t")
    batch = [fresh(f"b{i}" if i else "b") for i in range(ax)]
    trailing = dims[ax + 1 :]
    width: n.Expr = n.Num(1)
    for d in trailing:
        width = construct.arith("*", width, d)
    rows = n.Span(n.Bin("*", n.Name(t), n.Name(r)), n.Name(r))
    lead = tuple(n.At(n.Name(b)) for b in batch)

    def ref(param: str, split: bool) -> n.Ref:
        return n.Ref(param, (*lead, rows, *((n.All(),) if split else ()), *(n.All() for _ in trailing)))

    pv = n.Param("part_v", "global", types[0], (*dims[: ax + 1], n.Num(factor), *trailing))
    pi = attrs.evolve(pv, name="part_i", dtype=types[1])
    params = (pv, pi, attrs.evolve(out, name="out"))
    sizes = {e.id for d in dims for e in n.walk_expr(d) if isinstance(e, n.Name)}
    domain = tuple(c for c in prog.domain if c.var in sizes)
    vv, vi, fv, fi, red = fresh("v"), fresh("i"), fresh("fv"), fresh("fi"), fresh("red")
    many = (n.Bin("*", n.Name(r), n.Num(factor)), width)
    one = (n.Name(r), width)
    body = (
        n.RegDecl(name=vv, dtype=types[0], shape=many, layout=n.Layout("rows")),
        n.RegDecl(name=vi, dtype=types[1], shape=many, layout=n.Layout("rows")),
        n.RegDecl(name=fv, dtype=types[0], shape=one, layout=n.Layout("rows")),
        n.RegDecl(name=fi, dtype=types[1], shape=one, layout=n.Layout("rows")),
        construct.op("load", [n.Name(vv)], [ref("part_v", True)], oob=n.Name("fill"), value=n.Name("inf")),
        construct.op("load", [n.Name(vi)], [ref("part_i", True)], oob=n.Name("fill"), value=n.Num(-1)),
        # the partials of a row are held by `factor` threads: they merge through a shared scratch of the row's
        # values and indices (two 32-bit words each)
        construct.op("topk.reduce", [n.Name(fv), n.Name(fi)], [n.Name(vv), n.Name(vi), n.Name(red)], k=width),
        construct.op("store", [ref("out", False)], [n.Name(fi)], oob=n.Name("skip")),
    )
    role = n.Role("all", n.Num(0), n.Num(4), body=body)
    grid = n.Grid((t, *batch), (n.Call("cdiv", (dims[ax], n.Name(r))), *dims[:ax]))
    scratch = n.Smem(red, "f32", (n.Name(r), construct.arith("*", n.Num(2), width)))
    return n.Kernel(name=name, params=params, domain=domain, consts=(n.Const(r, n.Num(MERGE_ROWS)),), grid=grid,
                    cta=n.Cta(n.Num(4)), smem=(scratch,), roles=(role,))  # fmt: skip
