"""The ``wgmma`` tactic: turn a role that multiplies with ``ldmatrix`` + ``mma.sync`` from TMA-fed shared
operands into consumer warpgroups issuing ``wgmma`` from 128B-swizzled buffers.

The site is a role of one instance (no ``per``) whose k-step loop is exactly::

    for kk in 0 .. D / 16:                       # D: the operands' whole k extent (every specialization)
      ldmatrix a <- xs[xb][:, kk * 16 : +16]
      ldmatrix bt <- cs[s][:, kk * 16 : +16]
      mma.sync acc <- a, bt^T

The rewrite splits the role into ``WG = warps / 4`` warpgroups (``per 4``; ``WG`` and ``ROWS = BM / WG``
are new constants, ``BM`` the accumulator's rows), and each warpgroup multiplies its ``ROWS`` rows::

    wgmma acc <- xs[xb][self * ROWS : +ROWS, :], cs[s]^T, accumulate=0
    wgmma.commit
    wgmma.wait pending=0

``accumulate=0`` replaces a ``fill acc, value=0`` before the loop in its block with nothing that names
``acc`` between (a ``pipe.wait`` may be); elsewhere the fills stay and the wgmma accumulates
(``accumulate=1``). The operand buffers become ``swizzle 128B`` (unpadded). The
role's register tiles of ``BM`` rows get ``ROWS`` (``BM * P`` becomes ``ROWS * P``): ``mma_acc``
becomes ``wgmma_acc``, ``mma_rows`` ``wgmma_rows``, ``rows`` stays; the ``a``/``bt`` fragments go.
Every other operation of the role that touches one of those tiles reads or writes the instance's rows
of its global and shared tiles: ``out[b, t * BM + self * ROWS : +ROWS]``, and ``sc[self * ROWS : +ROWS,
:]`` for knn's ``store sc <- acc`` before ``topk.update`` (``store`` takes a ``wgmma_acc`` tile as it
took the ``mma_acc`` one). The cross-warp ``argmin.reduce rv, ri <- bv, bi, red`` becomes the
per-warpgroup ``argmin.reduce bv, bi <- bv, bi`` (later uses of ``rv``/``ri`` read ``bv``/``bi``), and
a scratch buffer nothing else uses goes.

Precondition: the target has wgmma; the role is one instance with exactly one such loop and no other
``ldmatrix``/``mma.sync``; both operands are read from column ``kk * 16`` of the whole rows (``:``) of
their buffers and the loop runs over their whole k extent, so one wgmma covers it from column 0 (CR119):
K-chunked operands, ``xs[xb][:, kc * BK + kk * 16 : +16]`` beside a ring ``T[S][BN, BK]`` as in
``ampere.cake``, are refused; the operand buffers are written only by ``tma.load`` (the swizzle is the
copy engine's; ``cp.async`` does not write swizzled rows) and read by nothing else; the fragments are
the loop's alone; the accumulator's rows are a kernel constant; the role's register tiles are in
``mma_*`` or ``rows`` layouts; every operation of the role that writes a global or shared tile touches
a tile of per-instance rows (so no warpgroup repeats another's write); and the rewrite fits
(:func:`cake_tactics_core.fit.fits`: whole warpgroups, ``ROWS`` a multiple of 64, the verifier's
CR119/CR120 among the rest).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from cake_core.ir import nodes as n
from cake_core.ir.exprs import try_int
from cake_core.loop.tactic import Application
from cake_core.target import Feature

from cake_tactics_core import construct
from cake_tactics_core.fit import checked, names_in, offered, with_kernel

if TYPE_CHECKING:
    from cake_core.ir.model import CheckedModule
    from cake_core.target import Target

#: register layouts the rewrite maps (the fragments ``mma_a``/``mma_b`` are dropped)
LAYOUTS = {"mma_acc": "wgmma_acc", "mma_rows": "wgmma_rows", "rows": "rows"}
SELF = n.Name("self")


@attrs.frozen
class _Site:
    role: n.Role
    loop: n.For
    loads: tuple[n.Op, n.Op]  # ldmatrix of a, of bt (the mma's order)
    mma: n.Op
    acc: n.RegDecl
    x: n.Smem  # the buffer of ``a``
    c: n.Smem  # the buffer of ``bt``


def _ops(body: tuple[n.Stmt, ...]) -> list[n.Op]:
    return [st for st in n.walk_stmts(body) if isinstance(st, n.Op)]


def _named(op: n.Op, exprs: tuple[n.Expr, ...] | None = None) -> set[str]:
    """The names ``op``'s operands (or ``exprs``) reference: tiles, buffers, and names in their indices."""
    out = set()
    for e in op.operands if exprs is None else exprs:
        for x in n.walk_expr(e):
            if isinstance(x, n.Ref):
                out.add(x.name)
            elif isinstance(x, n.Name):
                out.add(x.id)
    return out


def _plain(e: n.Expr) -> str | None:
    """The name of an unindexed, untransposed reference (``acc``)."""
    if isinstance(e, n.Name):
        return e.id
    return e.name if isinstance(e, n.Ref) and not e.index and not e.transpose else None


def _k_step(ref: n.Expr, buffer: n.Smem | None, var: str) -> bool:
    """``ref`` is ``buf[stage][:, var * 16 : +16]`` (no stage index for an unstaged buffer)."""
    if not isinstance(ref, n.Ref) or buffer is None or ref.transpose:
        return False
    stage = 1 if buffer.stages is not None else 0
    if len(ref.index) != stage + 2 or not all(isinstance(i, n.At) for i in ref.index[:stage]):
        return False
    rows, cols = ref.index[stage:]
    step = (n.Bin("*", n.Name(var), n.Num(16)), n.Bin("*", n.Num(16), n.Name(var)))
    return isinstance(rows, n.All) and isinstance(cols, n.Span) and cols.start in step and cols.size == n.Num(16)


def _loop_site(kernel: n.Kernel, role: n.Role, loop: n.For) -> _Site | None:
    if loop.start != n.Num(0) or loop.step is not None or len(loop.body) != 3:
        return None
    if not all(isinstance(st, n.Op) for st in loop.body):
        return None
    mma = loop.body[2]
    if mma.name != "mma.sync" or len(mma.outs) != 1 or len(mma.ins) != 2 or mma.attrs:
        return None
    acc, fa = _plain(mma.outs[0]), _plain(mma.ins[0])
    fb = mma.ins[1].name if isinstance(mma.ins[1], n.Ref) and mma.ins[1].transpose and not mma.ins[1].index else None
    loads = {}
    for op in loop.body[:2]:
        if op.name != "ldmatrix" or len(op.outs) != 1 or len(op.ins) != 1 or op.attrs:
            return None
        loads[_plain(op.outs[0])] = op
    if None in (acc, fa, fb) or set(loads) != {fa, fb} or fa == fb:
        return None
    la, lb = loads[fa], loads[fb]
    x, c = kernel.buffer(_tile(la.ins[0]) or ""), kernel.buffer(_tile(lb.ins[0]) or "")
    if not (_k_step(la.ins[0], x, loop.var) and _k_step(lb.ins[0], c, loop.var)) or x == c:
        return None
    regs = {st.name: st for st in role.body if isinstance(st, n.RegDecl)}
    if acc not in regs or regs[acc].layout is None or regs[acc].layout.name != "mma_acc":
        return None
    return _Site(role, loop, (la, lb), mma, regs[acc], x, c)


def sites(kernel: n.Kernel) -> list[_Site]:
    """The roles of ``kernel`` the precondition admits (see the module docstring; the k extent and the
    fit are checked with the specializations, by :class:`Wgmma`), in declaration order."""
    out = []
    for role in kernel.roles:
        if role.per is not None:
            continue
        loops = [st for st in n.walk_stmts(role.body) if isinstance(st, n.For)]
        found = [s for s in (_loop_site(kernel, role, loop) for loop in loops) if s is not None]
        if len(found) != 1:
            continue
        site = found[0]
        mine = {id(op) for op in (*site.loads, site.mma)}
        if any(op.name in ("ldmatrix", "mma.sync") and id(op) not in mine for op in _ops(role.body)):
            continue
        if not isinstance(site.acc.shape[0], n.Name):
            continue  # the rows are named by a constant (``BM``), so ``ROWS = BM / WG`` can replace them
        fragments = {_plain(op.outs[0]) for op in site.loads}
        layouts = [st.layout.name if st.layout else "rows" for st in role.body if isinstance(st, n.RegDecl)
                   and st.name not in fragments]  # fmt: skip
        if any(name not in LAYOUTS for name in layouts):
            continue
        if not _operands_ok(kernel, site, fragments) or not _writes_rows(kernel, site):
            continue
        out.append(site)
    return out


def _per_row(site: _Site) -> set[str]:
    """The role's register tiles whose first extent is written with the accumulator's rows (``BM``,
    ``BM * P``): each instance holds ``ROWS`` of them after the rewrite. The fragments are not."""
    fragments = {_plain(op.outs[0]) for op in site.loads}
    m = site.acc.shape[0]
    return {st.name for st in site.role.body if isinstance(st, n.RegDecl) and st.name not in fragments
            and st.shape and _mentions(st.shape[0], m)}  # fmt: skip


def _writes_rows(kernel: n.Kernel, site: _Site) -> bool:
    """Every operation of the role that writes a global or shared tile touches a tile of per-instance
    rows, so the rewrite cuts what it writes to the instance's rows (no instance repeats another's
    write)."""
    rows = _per_row(site)
    for op in _ops(site.role.body):
        outs = {_tile(e) for e in op.outs}
        memory = any(kernel.param(x) or kernel.buffer(x) for x in outs if x)
        if memory and not any(_tile(e) in rows for e in op.operands):
            return False
    return True


def _operands_ok(kernel: n.Kernel, site: _Site, fragments: set[str]) -> bool:
    """The operand buffers are written by ``tma.load`` only and read by the loop only; the fragments are
    the loop's alone."""
    loads = {id(op) for op in (*site.loads, site.mma)}
    buffers = {site.x.name, site.c.name}
    written = False
    for _role, op in n.walk_ops(kernel):
        if id(op) in loads:
            continue
        if _named(op) & fragments:
            return False
        touched = _named(op) & buffers
        if not touched:
            continue
        if op.name != "tma.load" or touched - _named(op, op.outs):
            return False
        written = True
    return written


def _k_extent_whole(site: _Site, typed: CheckedModule, kernel: str) -> bool:
    """For every specialization, the loop's ``16 * stop`` is both operand buffers' last extent."""
    models = [m for (name, _), m in typed.models.items() if name == kernel]
    for m in models:
        steps = try_int(site.loop.stop, m.env)
        if steps is None or not 16 * steps == m.smem[site.x.name].shape[-1] == m.smem[site.c.name].shape[-1]:
            return False
    return bool(models)


class Wgmma:
    """Rewrite one role's mma.sync k-loop into consumer warpgroups issuing wgmma: the site is
    ``kernel.role``, no params."""

    name = "wgmma"
    precondition = (
        "the target has wgmma; a role of one instance multiplies in one k-loop `ldmatrix a, ldmatrix bt, mma.sync "
        "acc <- a, bt^T` over the whole rows and whole k extent (from column 0, not K-chunked) of two shared "
        "buffers written only by tma.load and read by nothing else; its register tiles are mma_* or rows tiles, "
        "the accumulator's rows a constant, and its writes to memory touch row tiles; the rewrite (per-4 "
        "warpgroups of ROWS = BM / WG rows, 128B swizzle) type-checks, fits shared memory, keeps divisions exact "
        "and verifies for the target"
    )

    def applications(self, module: n.Module, target: Target) -> Sequence[Application]:
        found = [(kernel.name, site) for kernel in module.kernels for site in sites(kernel)]
        if not target.has(Feature.WGMMA) or not found:
            return []
        typed = checked(module, target)
        if typed is None:
            return []
        candidates = [
            Application(self.name, f"{kernel}.{site.role.name}")
            for kernel, site in found
            if _k_extent_whole(site, typed, kernel)
        ]
        return offered(self, module, target, candidates)

    def apply(self, module: n.Module, target: Target, application: Application) -> n.Module:
        kernel_name, role_name = application.site.split(".", 1)

        def rewritten(k: n.Kernel) -> n.Kernel:
            (site,) = [s for s in sites(k) if s.role.name == role_name]
            return _rewrite(k, site)

        return with_kernel(module, kernel_name, rewritten)


def warp_count(role: n.Role) -> n.Expr:
    """The role's warp count, as written: ``WM * WN`` for ``warps 4..4 + WM * WN``."""
    start, stop = role.warp_start, role.warp_stop
    if isinstance(stop, n.Bin) and stop.op == "+" and stop.left == start:
        return stop.right
    return stop if start == n.Num(0) else n.Bin("-", stop, start)


def _fill_before(stmts: tuple[n.Stmt, ...], site: _Site) -> n.Op | None:
    """The ``fill acc, value=0`` that the k-loop in ``stmts`` follows with only statements between that
    do not name the accumulator (``pipe.wait s <- cring``), or ``None``."""
    at = next((i for i, st in enumerate(stmts) if st is site.loop), None)
    if at is None:
        return None
    for st in reversed(stmts[:at]):
        if _zero_fill(st, site.acc.name):
            return st
        if not isinstance(st, (n.Op, n.Let)) or site.acc.name in (_named(st) if isinstance(st, n.Op) else names_in(st)):
            return None
    return None


def _zero_fill(st: n.Stmt, acc: str) -> bool:
    value = st.attr("value") if isinstance(st, n.Op) else None
    return (isinstance(st, n.Op) and st.name == "fill" and len(st.operands) == 1 and _plain(st.operands[0]) == acc
            and isinstance(value, n.Num) and value.value == 0 and len(st.attrs) == 1)  # fmt: skip


def _rewrite(kernel: n.Kernel, site: _Site) -> n.Kernel:
    fresh = construct.Fresh(kernel)
    wg, rows_name = fresh("WG"), fresh("ROWS")
    rows, m = n.Name(rows_name), site.acc.shape[0]
    role = site.role
    fragments = {_plain(op.outs[0]) for op in site.loads}
    regs = {st.name: st for st in role.body if isinstance(st, n.RegDecl)}
    # the rows the role's tiles hold per instance now: tiles whose first extent is the accumulator's rows
    per_row = _per_row(site)
    # argmin.reduce across warps (mma_rows -> rows through a scratch buffer) becomes per warpgroup, in place
    renames: dict[str, str] = {}
    for op in _ops(role.body):
        if op.name == "argmin.reduce" and len(op.ins) == 3 and all(_plain(e) in regs for e in op.operands[:4]):
            parts = [regs[_plain(e)] for e in op.ins[:2]]
            if all(p.layout is not None and p.layout.name == "mma_rows" for p in parts):
                renames.update({_plain(o): p.name for o, p in zip(op.outs, parts, strict=True)})
    stage = lambda ref, buf: ref.index[: 1 if buf.stages is not None else 0]  # noqa: E731
    la, lb = site.loads
    a = n.Ref(site.x.name, (*stage(la.ins[0], site.x), n.Span(n.Bin("*", SELF, rows), rows), n.All()))
    b = n.Ref(site.c.name, stage(lb.ins[0], site.c), transpose=True)

    def body(stmts: tuple[n.Stmt, ...]) -> tuple[n.Stmt, ...]:
        out: list[n.Stmt] = []
        fill = _fill_before(stmts, site)
        for st in stmts:
            if st is fill:
                continue  # the wgmma starts from zero instead
            if st is site.loop:
                zero = fill is not None
                out += [
                    construct.op("wgmma", [n.Name(site.acc.name)], [a, b], accumulate=n.Num(0 if zero else 1)),
                    construct.op("wgmma.commit"),
                    construct.op("wgmma.wait", pending=n.Num(0)),
                ]
            elif isinstance(st, n.RegDecl):
                if st.name in fragments or st.name in renames:
                    continue
                layout = st.layout
                if layout is not None and layout.name != "rows":
                    layout = n.Layout(LAYOUTS[layout.name])
                shape = (swap(st.shape[0], m, rows), *st.shape[1:]) if st.name in per_row else st.shape
                out.append(attrs.evolve(st, shape=shape, layout=layout))
            elif isinstance(st, n.For):
                out.append(attrs.evolve(st, body=body(st.body)))
            elif isinstance(st, n.If):
                out.append(attrs.evolve(st, then=body(st.then), orelse=body(st.orelse)))
            elif isinstance(st, n.Op):
                out.append(_op_rows(kernel, st, renames, per_row, m, rows))
            else:
                out.append(st)
        return tuple(out)

    new_role = attrs.evolve(role, per=n.Num(4), body=body(role.body))
    roles = tuple(new_role if r is role else r for r in kernel.roles)
    consts = (
        *kernel.consts,
        n.Const(wg, n.Bin("/", warp_count(role), n.Num(4))),
        n.Const(rows_name, n.Bin("/", m, n.Name(wg))),
    )
    used = {x for rr in roles for st in n.walk_stmts(rr.body) if isinstance(st, n.Op) for x in _named(st)}
    used |= {b for p in kernel.pipes for b in p.buffers}
    smem = []
    for s in kernel.smem:
        if s.name in (site.x.name, site.c.name):
            smem.append(attrs.evolve(s, swizzle="128B", pad=None))
        elif s.name in used:
            smem.append(s)
    return attrs.evolve(kernel, consts=consts, smem=tuple(smem), roles=roles)


def _tile(e: n.Expr) -> str | None:
    """The tile or buffer an operand names (``acc``, ``sc``, ``out[b, ...]``)."""
    return e.id if isinstance(e, n.Name) else (e.name if isinstance(e, n.Ref) else None)


def _mentions(e: n.Expr, m: n.Expr) -> bool:
    return any(x == m for x in n.walk_expr(e))


def swap(e: n.Expr, m: n.Expr, rows: n.Expr) -> n.Expr:
    """``e`` with every occurrence of the expression ``m`` replaced by ``rows``."""
    if e == m:
        return rows
    if isinstance(e, n.Bin):
        return attrs.evolve(e, left=swap(e.left, m, rows), right=swap(e.right, m, rows))
    if isinstance(e, n.Call):
        return attrs.evolve(e, args=tuple(swap(x, m, rows) for x in e.args))
    if isinstance(e, n.Unary):
        return attrs.evolve(e, operand=swap(e.operand, m, rows))
    return e


def _op_rows(kernel: n.Kernel, op: n.Op, renames: dict[str, str], per_row: set[str], m: n.Expr, rows: n.Name) -> n.Op:
    """``op`` of the split role: the cross-warp ``argmin.reduce`` made per warpgroup, renamed tiles read
    under their new names, and where it touches a tile of per-instance rows, its global and shared tiles
    cut to the instance's rows."""
    if op.name == "argmin.reduce" and {_plain(o) for o in op.outs} <= set(renames) and len(op.ins) == 3:
        return attrs.evolve(op, outs=op.ins[:2], ins=op.ins[:2])
    operands = [n.Name(renames[_plain(e)], loc=e.loc) if _plain(e) in renames else e for e in op.operands]
    if any(_tile(e) in per_row for e in operands):
        operands = [_instance_rows(kernel, e, m, rows) for e in operands]
    return attrs.evolve(op, outs=tuple(operands[: len(op.outs)]), ins=tuple(operands[len(op.outs) :]))


def _instance_rows(kernel: n.Kernel, e: n.Expr, m: n.Expr, rows: n.Name) -> n.Expr:
    """A global or shared tile ``e`` cut to the instance's rows: its span of ``m`` rows (or, in a shared
    buffer whose rows are ``m``, the whole rows) becomes ``self * ROWS : +ROWS`` within it."""
    name = _tile(e)
    if name is None or (kernel.param(name) is None and kernel.buffer(name) is None):
        return e
    if isinstance(e, n.Name):
        e = n.Ref(name, loc=e.loc)
    mine = n.Bin("*", SELF, rows)
    index = list(e.index)
    for i, item in enumerate(index):
        if isinstance(item, n.Span) and item.size == m:
            start = mine if item.start == n.Num(0) else n.Bin("+", item.start, mine)
            index[i] = attrs.evolve(item, start=start, size=rows)
            return attrs.evolve(e, index=tuple(index))
    buf = kernel.buffer(e.name)
    if buf is None or not buf.shape or buf.shape[0] != m:
        return e
    stage = 1 if buf.stages is not None else 0
    if not index and buf.stages is None:
        index = [n.All() for _ in buf.shape]
    if len(index) != stage + len(buf.shape) or not isinstance(index[stage], n.All):
        return e
    index[stage] = n.Span(mine, rows)
    return attrs.evolve(e, index=tuple(index))
