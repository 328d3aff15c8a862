"""The ``tensorize`` tactic: turn a per-item ``rowdot`` loop into a tensor-core tile loop (mma.sync).

The input is the naive form: the rows of a CTA against one item (centroid, point) at a time on CUDA cores,
each product folded into per-row state by a consumer::

    reg dot: f32[R, 1] layout rows
    for k in 0 .. K:
      rowdot dot <- x[b, t*R : +R, :], c[b, k, :], oob=zero
      argmin.update bv, bi <- dot, c_sq[b, k : +1], base=k, scale=-2.0

The rewrite keeps the rows ``x[b, t*R : +R, :]`` in shared memory (``xs``, one cp.async before the loop)
and walks the items ``BN`` at a time (a new constant): each tile ``c[b, kt*BN : +BN, :]`` is copied into
``cs`` by cp.async (one buffer: the ring tactics pipeline it later), and ``D / 16`` ldmatrix + mma.sync
steps of ``WM x WN`` warps (new constants; the CTA and the role become ``WM * WN`` warps) compute the
``[R, BN]`` accumulator ``acc``. The consumer then takes the whole tile: its ``k : +1`` slices become
``kt*BN : +BN``, ``base=k`` becomes ``base=kt*BN`` and ``oob=skip`` drops the columns past ``K`` (the
last tile's rows of ``cs`` are zero-filled). The consumer takes the accumulator in one of two ways (the
``fold`` parameter; only the one that fits is offered):

* ``registers``: the consumer folds the ``mma_acc`` tile in place. Its state moves to the accumulator's
  per-row layout ``mma_rows(WM, WN)``, and after the loop ``P.reduce`` (for a consumer ``P.update``)
  merges the warps' partial states into new ``rows`` tiles through a 32-bit scratch ``f32[2, R, WN]``;
  what read the state after the loop reads those (``argmin.update`` / ``argmin.reduce``).
* ``shared``: the consumer reads a shared tile (``topk.update``): ``store sc <- acc`` into a new
  ``sc: f32[R, BN]``, ``bar.sync``, then the consumer reads ``sc``; its state is left as it was.

Every iteration ends with ``bar.sync``, so no copy into ``cs`` (or store into ``sc``) overwrites what a
warp still reads. Names come from the input (buffers ``xs``/``cs`` after the operands); new names
collide with none of the kernel's.

Precondition: the target has cp.async, ldmatrix and mma.sync (sm_80+); the kernel has one role of one
instance spanning the whole CTA, with no cp.async of its own; a top-level loop ``for k in 0 .. K`` (unit
step) holds exactly the ``rowdot`` and its consumer; the rowdot's result is a register tile nothing else
in the kernel names, its rows are a ``[.., R, D]`` slice of a global parameter that does not move with
``k`` and its vector ``c[.., k, :]`` a row of a global parameter whose item axis spans ``K``; both are
inputs the kernel never writes, masked by zero or not at all; the consumer uses ``k`` only in ``k : +1``
slices of operands whose axis spans ``K`` and in ``base=k``, and masks with ``skip`` or not at all; and
the rewrite fits (:func:`cake_tactics_core.fit.fits`: 16-bit element types, whole tiles per warp, shared
memory, registers, races).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from cake_core.ir import nodes as n
from cake_core.loop.tactic import Application
from cake_core.target import Feature

from cake_tactics_core.construct import Fresh, arith, op
from cake_tactics_core.fit import expressions, names_in, offered, with_kernel

if TYPE_CHECKING:
    from cake_core.target import Target

#: items per tile offered (tile-shapes changes it afterwards)
TILES = (64, 128)
#: the warp grid: WM warps along the rows, WN along the items
WARPS = (4, 2)
#: the k extent of one mma.sync m16n8k16 step
MMA_K = 16
FOLDS = ("registers", "shared")
_NEEDS = (Feature.CP_ASYNC, Feature.LDMATRIX, Feature.MMA_SYNC)


@attrs.frozen
class _Site:
    role: n.Role
    loop: n.For
    rowdot: n.Op
    consumer: n.Op
    dot: n.RegDecl
    rows: n.Ref  # x[b, t*R : +R, :]
    item: n.Ref  # c[b, k, :]
    depth: n.Expr  # D, the dot products' length

    @property
    def name(self) -> str:
        return f"{self.role.name}:{self.loop.var}"

    @property
    def size(self) -> n.Expr:  # R, the rows per CTA
        span = self.rows.index[-2]
        assert isinstance(span, n.Span)
        return span.size


def _uses(node: object, name: str) -> int:
    """How many times ``node``'s expressions name ``name`` (as a name or a reference)."""
    return sum(1 for e in expressions(node) if (isinstance(e, n.Name) and e.id == name) or
               (isinstance(e, n.Ref) and e.name == name))  # fmt: skip


def _oob(o: n.Op) -> str | None:
    v = o.attr("oob")
    return v.id if isinstance(v, n.Name) else (None if v is None else "?")


def _operand(kernel: n.Kernel, e: n.Expr, written: set[str]) -> n.Param | None:
    """The global input ``e`` reads (a reference to a parameter the kernel never writes), or ``None``."""
    if not isinstance(e, n.Ref) or e.transpose or e.name in written:
        return None
    p = kernel.param(e.name)
    return p if p is not None and p.tier == "global" and len(p.shape) == len(e.index) else None


def _consumer_ok(consumer: n.Op, kernel: n.Kernel, loop: n.For, dot: str) -> bool:
    """The consumer reads ``dot`` as its first input only and uses the loop variable only in ``k : +1``
    slices of axes that span the loop, and in ``base=k``."""
    var = loop.var
    if not consumer.ins or consumer.ins[0] != n.Name(dot) or _uses((consumer.outs, consumer.ins[1:]), dot):
        return False
    if _oob(consumer) not in (None, "skip") or consumer.attr("base") != n.Name(var):
        return False
    if any(var in names_in(a.value) or dot in names_in(a.value) for a in consumer.attrs if a.key != "base"):
        return False
    if any(not isinstance(o, n.Name) for o in consumer.outs):
        return False
    for e in consumer.ins[1:]:
        if var not in names_in(e):
            continue
        p = kernel.param(e.name) if isinstance(e, n.Ref) else None
        if p is None or len(p.shape) != len(e.index):
            return False
        for axis, i in enumerate(e.index):
            moving = isinstance(i, n.Span) and i.start == n.Name(var) and i.size == n.Num(1)
            if moving and p.shape[axis] != loop.stop:
                return False
            if not moving and var in names_in(i.expr if isinstance(i, n.At) else i):
                return False
    return True


def sites(kernel: n.Kernel) -> list[_Site]:
    """Every rowdot loop of ``kernel`` the precondition admits (but the fit), in source order."""
    if len(kernel.roles) != 1:
        return []
    role = kernel.roles[0]
    if role.per is not None or role.warp_start != n.Num(0) or role.warp_stop != kernel.cta.warps:
        return []
    if any(isinstance(st, n.Op) and st.name.startswith("cp.async") for st in n.walk_stmts(role.body)):
        return []
    decls = {st.name: st for st in role.body if isinstance(st, n.RegDecl)}
    written = {e.name if isinstance(e, n.Ref) else e.id
               for _r, o in n.walk_ops(kernel) for e in o.outs if isinstance(e, (n.Ref, n.Name))}  # fmt: skip
    out = []
    for loop in role.body:
        if not isinstance(loop, n.For) or loop.step is not None or loop.start != n.Num(0):
            continue
        if len(loop.body) != 2 or not all(isinstance(st, n.Op) for st in loop.body):
            continue
        rowdot, consumer = loop.body
        assert isinstance(rowdot, n.Op) and isinstance(consumer, n.Op)
        if rowdot.name != "rowdot" or len(rowdot.outs) != 1 or len(rowdot.ins) != 2:
            continue
        if _oob(rowdot) not in (None, "zero"):
            continue
        dst = rowdot.outs[0]
        if not isinstance(dst, n.Name) or dst.id not in decls or decls[dst.id].dtype != "f32":
            continue
        # the rowdot's write and the consumer's read: nothing else names the product
        if _uses(kernel.roles, dst.id) != 2 or not _consumer_ok(consumer, kernel, loop, dst.id):
            continue
        rows, item = rowdot.ins
        prow, pitem = _operand(kernel, rows, written), _operand(kernel, item, written)
        if prow is None or pitem is None or len(rows.index) < 2 or len(item.index) < 2:
            continue
        assert isinstance(rows, n.Ref) and isinstance(item, n.Ref)
        if not isinstance(rows.index[-2], n.Span) or not isinstance(rows.index[-1], n.All):
            continue
        if any(not isinstance(i, n.At) for i in rows.index[:-2]) or loop.var in names_in(rows):
            continue
        if item.index[-2] != n.At(n.Name(loop.var)) or not isinstance(item.index[-1], n.All):
            continue
        if any(not isinstance(i, n.At) or loop.var in names_in(i.expr) for i in item.index[:-2]):
            continue
        if pitem.shape[-2] != loop.stop or prow.shape[-1] != pitem.shape[-1]:
            continue
        out.append(_Site(role, loop, rowdot, consumer, decls[dst.id], rows, item, prow.shape[-1]))
    return out


class Tensorize:
    """Tensorize one rowdot loop: the site is ``kernel:role:var``, the params ``{"BN": items per tile,
    "fold": "registers" or "shared"}``."""

    name = "tensorize"
    precondition = (
        "the target has cp.async, ldmatrix and mma.sync; a kernel's only role (one instance, the whole CTA, no "
        "cp.async of its own) loops `for k in 0 .. K` over exactly a rowdot of global rows by the global row "
        "`c[.., k, :]` and one consumer of its result, which nothing else names; the consumer uses k only in "
        "`k : +1` slices over K and `base=k`; the rewrite type-checks, fits shared memory and verifies"
    )

    def applications(self, module: n.Module, target: Target) -> Sequence[Application]:
        if not all(target.has(f) for f in _NEEDS):
            return []
        candidates = [
            Application(self.name, f"{kernel.name}:{site.name}", {"BN": tile, "fold": fold})
            for kernel in module.kernels
            for site in sites(kernel)
            for fold in FOLDS
            if fold == "shared" or _reducer(site.consumer) is not None
            for tile in TILES
        ]
        return offered(self, module, target, candidates)

    def apply(self, module: n.Module, target: Target, application: Application) -> n.Module:
        kernel_name, site_name = application.site.split(":", 1)
        tile, fold = int(application.params["BN"]), str(application.params["fold"])
        if fold not in FOLDS:
            raise ValueError(f"tensorize folds in {FOLDS}, not {fold!r}")

        def tensorized(k: n.Kernel) -> n.Kernel:
            (site,) = [s for s in sites(k) if s.name == site_name]
            return _tensorized(k, site, tile, fold)

        return with_kernel(module, kernel_name, tensorized)


def _reducer(consumer: n.Op) -> str | None:
    """``P.reduce`` for a consumer ``P.update`` where the registry has it: what merges the warps' states."""
    from cake_core import plugins

    stem, _, last = consumer.name.rpartition(".")
    if last != "update" or not stem:
        return None
    name = f"{stem}.reduce"
    return name if name in plugins.registry().names("primitives") else None


def _tensorized(kernel: n.Kernel, site: _Site, tile: int, fold: str) -> n.Kernel:
    fresh = Fresh(kernel)
    BN, WM, WN = (fresh(s) for s in ("BN", "WM", "WN"))
    xs, cs = fresh(f"{site.rows.name}s"), fresh(f"{site.item.name}s")
    acc, a, bt = fresh("acc"), fresh("a"), fresh("bt")
    kt, kk = fresh(f"{site.loop.var}t"), fresh(f"{site.loop.var}{site.loop.var}")
    rows_n, tile_n, wm, wn = site.size, n.Name(BN), n.Name(WM), n.Name(WN)
    prow, pitem = kernel.param(site.rows.name), kernel.param(site.item.name)
    assert prow is not None and pitem is not None
    grid = (wm, wn)
    start = arith("*", n.Name(kt), tile_n)  # the first item of tile kt
    step = arith("*", n.Name(kk), n.Num(MMA_K))
    pad = n.Num(8)  # 16 bytes of a 16-bit element type: rows stay aligned for cp.async and ldmatrix
    smem = [n.Smem(xs, prow.dtype, (rows_n, site.depth), pad=pad),
            n.Smem(cs, pitem.dtype, (tile_n, site.depth), pad=pad)]
    regs = [
        n.RegDecl(name=acc, dtype="f32", shape=(rows_n, tile_n), layout=n.Layout("mma_acc", grid)),
        n.RegDecl(name=a, dtype=prow.dtype, shape=(rows_n, n.Num(MMA_K)), layout=n.Layout("mma_a", grid)),
        n.RegDecl(name=bt, dtype=pitem.dtype, shape=(tile_n, n.Num(MMA_K)), layout=n.Layout("mma_b", grid)),
    ]
    cols = n.Span(step, n.Num(MMA_K))
    items = attrs.evolve(site.item, index=(*site.item.index[:-2], n.Span(start, tile_n), site.item.index[-1]))
    body: list[n.Stmt] = [
        op("cp.async", [n.Name(cs)], [items], oob=n.Name("zero")),
        op("cp.async.commit"),
        op("cp.async.wait", pending=n.Num(0)),
        op("bar.sync"),
        op("fill", ins=[n.Name(acc)], value=n.Num(0.0)),
        n.For(var=kk, start=n.Num(0), stop=arith("/", site.depth, n.Num(MMA_K)), body=(
            op("ldmatrix", [n.Name(a)], [n.Ref(xs, (n.All(), cols))]),
            op("ldmatrix", [n.Name(bt)], [n.Ref(cs, (n.All(), cols))]),
            op("mma.sync", [n.Name(acc)], [n.Name(a), n.Ref(bt, transpose=True)]),
        )),
    ]  # fmt: skip
    consumer = _widened(site, start, tile_n)
    after: list[n.Stmt] = []
    renamed: dict[str, str] = {}
    if fold == "registers":
        red = fresh("red")
        smem.append(n.Smem(red, "f32", (n.Num(2), rows_n, wn)))
        body.append(attrs.evolve(consumer, ins=(n.Name(acc), *consumer.ins[1:])))
        states = [o.id for o in consumer.outs if isinstance(o, n.Name)]
        renamed = {s: fresh(f"{s}_rows") for s in states}
        reducer = _reducer(site.consumer)
        if reducer is None:
            raise ValueError(f"`{site.consumer.name}` has no `.reduce` to merge the warps' states: fold in shared")
        after.append(op(reducer, [n.Name(renamed[s]) for s in states], [*(n.Name(s) for s in states), n.Name(red)]))
    else:
        sc = fresh("sc")
        smem.append(n.Smem(sc, "f32", (rows_n, tile_n), pad=n.Num(4)))
        body += [op("store", [n.Name(sc)], [n.Name(acc)]), op("bar.sync"),
                 attrs.evolve(consumer, ins=(n.Name(sc), *consumer.ins[1:]))]  # fmt: skip
    body.append(op("bar.sync"))
    loop = n.For(var=kt, start=n.Num(0), stop=n.Call("cdiv", (site.loop.stop, tile_n)), body=tuple(body))
    role_body: list[n.Stmt] = []
    seen_loop = False
    for st in site.role.body:
        if st is site.dot:
            continue
        if isinstance(st, n.RegDecl) and st.name in renamed:
            role_body.append(attrs.evolve(st, layout=n.Layout("mma_rows", grid)))
            rows_state = attrs.evolve(st, name=renamed[st.name], layout=n.Layout("rows"))
            regs.append(rows_state)
            continue
        if st is site.loop:
            seen_loop = True
            role_body += [op("cp.async", [n.Name(xs)], [site.rows], oob=n.Name("zero")), loop, *after]
            continue
        role_body.append(_rename(st, renamed) if seen_loop else st)
    decls = [st for st in role_body if isinstance(st, n.RegDecl)]
    rest = [st for st in role_body if not isinstance(st, n.RegDecl)]
    warps = arith("*", wm, wn)
    role = attrs.evolve(site.role, warp_start=n.Num(0), warp_stop=warps, body=(*regs[:3], *decls, *regs[3:], *rest))
    consts = (*kernel.consts, n.Const(BN, n.Num(tile)), n.Const(WM, n.Num(WARPS[0])), n.Const(WN, n.Num(WARPS[1])))
    return attrs.evolve(kernel, consts=consts, cta=attrs.evolve(kernel.cta, warps=warps),
                        smem=(*kernel.smem, *smem), roles=(role,))  # fmt: skip


def _widened(site: _Site, start: n.Expr, size: n.Expr) -> n.Op:
    """The consumer over the tile of items from ``start``: ``k : +1`` slices become ``start : +size``,
    ``base=k`` becomes ``base=start``, and columns past the loop's end are skipped (``oob=skip``)."""
    var = n.Name(site.loop.var)

    def widen(e: n.Expr) -> n.Expr:
        if not isinstance(e, n.Ref):
            return e
        index = tuple(n.Span(start, size) if isinstance(i, n.Span) and i.start == var else i for i in e.index)
        return attrs.evolve(e, index=index)

    c = site.consumer
    new = {"base": start, "oob": n.Name("skip")}
    kept = tuple(attrs.evolve(a, value=new.pop(a.key)) if a.key in new else a for a in c.attrs)
    return attrs.evolve(c, ins=tuple(widen(e) for e in c.ins), attrs=(*kept, *(n.Attr(k, v) for k, v in new.items())))


def _rename(node: object, names: dict[str, str]) -> object:
    """``node`` with every use of a name in ``names`` (a register tile, read after the loop) renamed."""
    if not names:
        return node
    if isinstance(node, n.Name):
        return attrs.evolve(node, id=names.get(node.id, node.id))
    if isinstance(node, n.Ref):
        return attrs.evolve(node, name=names.get(node.name, node.name), index=_rename(node.index, names))
    if isinstance(node, tuple):
        return tuple(_rename(x, names) for x in node)
    if attrs.has(type(node)):
        changes = {f.name: _rename(getattr(node, f.name), names) for f in attrs.fields(type(node))
                   if f.name != "loc" and f.init}  # fmt: skip
        return attrs.evolve(node, **changes)
    return node
