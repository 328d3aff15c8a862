"""The ``warp-specialize`` tactic: split a kernel's one role, whose shared buffers cp.async fills from global
tiles, into a producer role that issues ``tma.load`` through pipes and the old role as their consumer.

On a target with TMA, the kernel's only role (one instance) fills shared buffers with ``cp.async`` in one of
two forms: a copy at the role's top level (``cp.async xs <- x[b, t * BM : +BM, :]``, issued once), or a copy
of tile ``i`` in iteration ``i`` of a top-level loop, either directly (``cp.async cs <- c[b, kt * BN : +BN,
:]`` into an unstaged buffer) or through a ring filled ahead (a prologue ``for p in 0 .. OFF`` copying tile
``p`` into stage ``p``, and in the loop ``let j = i + OFF`` / ``if j < STOP: cp.async cs[j % S] <- ...``
while the loop reads ``cs[i % S]``). The rewrite:

* adds a producer role of 4 warps (warps 0..4) that repeats the consumer's skeleton: its loops, the lets
  they and the copies' indices need, and the ``bar.sync`` barriers the consumer keeps (a CTA barrier
  counts every thread, so the producer passes each one too: knn's score tile). Where the consumer waits
  for a stage, the producer takes one (``pipe.acquire``) and issues ``tma.load`` into it for every copy; a
  ring's copy index is recovered from its prefetch index (``j`` becomes ``i``: tile ``i`` in iteration
  ``i``). Where the CTA's registers fit only so, the producer gets a setmaxnreg budget of 40 (the
  application ``{"regs": 40}``);
* shifts the old role after the producer's warps and removes its cp.async, cp.async.commit,
  cp.async.wait, the prologue, the prefetch lets and the ``bar.sync`` barriers that only ordered the
  copies (one next to a copy or a wait, in a scope where nothing else writes shared memory);
* declares one pipe per copy site (the top-level copies share one, each loop's copies share one): its
  consumer waits (``pipe.wait``) before the first statement that reads the stage and releases it
  (``pipe.release``) after the last, in the scope of the copies (the loop body, or the role's top level);
  the barriers, parities and byte counts are the compiler's (docs/pipelines.md);
* makes each filled buffer a ring of TMA destinations: a top-level one one stage (``T[1][BM, D]``), a
  loop's ``S`` stages (an existing ring keeps its depth; an unstaged buffer gets a new constant of 2, which
  the ring-depth tactic can change), aligned to 128 bytes, its padding dropped (TMA writes dense rows; the
  advisory bank-conflict warning CA101 is expected).

Precondition: the target has TMA; the kernel has one role of one instance and no pipes or mbarriers of its
own; every cp.async copies a global tile into a whole shared buffer (or its stage) in one of the forms above,
with no attribute but ``oob=zero``; nothing else writes those buffers; a loop's buffers are read only in its
body and after their copy, a top-level buffer only after its copy; and the rewrite fits
(:func:`cake_tactics_core.fit.fits`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import attrs

from cake_core.ir import nodes as n
from cake_core.ir.exprs import free_names, substitute, try_int
from cake_core.ir.printer import expr as print_expr
from cake_core.loop.tactic import Application
from cake_core.target import Feature

from cake_tactics_core.construct import Fresh
from cake_tactics_core.fit import names_in, offered, with_kernel

if TYPE_CHECKING:
    from cake_core.target import Target

#: warps of the producer role (one warpgroup, so that setmaxnreg can rebalance it later)
PRODUCER_WARPS = 4
#: the producer's setmaxnreg budget, offered only where the split does not fit the CTA's registers without one
PRODUCER_REGS = 40
#: stages of a ring made from an unstaged buffer copied in a loop
DEPTH = 2
COPY_OPS = ("cp.async", "cp.async.commit", "cp.async.wait")


@attrs.frozen
class _Copy:
    buffer: str
    src: n.Ref  # the tile the producer loads, in the names of its scope (tile i in iteration i)


@attrs.frozen
class _Site:
    """The copies of one scope: the role's top level (``loop`` None) or one top-level loop's body."""

    loop: n.For | None
    copies: tuple[_Copy, ...]
    ring: bool = False  # a ring filled ahead (reads index stage ``loop.var % S``)
    prologue: n.For | None = None
    prefetch: str | None = None  # the name of the prefetch let (``j``)

    @property
    def buffers(self) -> tuple[str, ...]:
        return tuple(c.buffer for c in self.copies)


class Refused(Exception):
    """The precondition does not hold (the message says which part)."""


def _same(a: object, b: object) -> bool:
    if isinstance(a, n.Expr) and isinstance(b, n.Expr):
        return print_expr(a) == print_expr(b)
    return a == b


def _equal(a: n.Expr, b: n.Expr) -> bool:
    """``a`` and ``b`` agree wherever their names take a few unrelated positive values (``i + S - 1`` and
    ``i + (S - 1)``)."""
    names = sorted(free_names(a) | free_names(b))
    for seed in (3, 5, 11):
        env = {name: seed * 7 + 13 * k + 29 for k, name in enumerate(names)}
        if try_int(a, env) is None or try_int(a, env) != try_int(b, env):
            return False
    return True


def _is(st: n.Stmt, *names: str) -> bool:
    return isinstance(st, n.Op) and st.name in names


def _ref(e: n.Expr) -> n.Expr:
    """A whole buffer named bare (``xs``) as the reference ``xs`` with no index; other expressions as they are."""
    return n.Ref(e.id, loc=e.loc) if isinstance(e, n.Name) else e


def _named(e: n.Expr, names: set[str]) -> bool:
    return isinstance(e, (n.Ref, n.Name)) and (e.name if isinstance(e, n.Ref) else e.id) in names


def _copy_parts(op: n.Op, params: set[str], smem: dict[str, n.Smem]) -> tuple[n.Ref, n.Ref]:
    (dst,), (src,) = tuple(map(_ref, op.outs)), tuple(map(_ref, op.ins))
    if not (isinstance(dst, n.Ref) and dst.name in smem and isinstance(src, n.Ref) and src.name in params):
        raise Refused("a cp.async does not copy a global tile into a shared buffer")
    if any(a.key != "oob" or print_expr(a.value) != "zero" for a in op.attrs) or src.transpose or dst.transpose:
        raise Refused("a cp.async carries an attribute other than oob=zero")
    return dst, src


def _prologue(loop: n.For) -> dict[str, tuple[n.Expr, n.Ref, n.Ref]] | None:
    """``for p in 0 .. OFF: if p < STOP: cp.async buf[p] <- src; cp.async.commit``: buffer -> (guard bound,
    dst, src); ``None`` where ``loop`` is not of that form."""
    out: dict[str, tuple[n.Expr, n.Ref, n.Ref]] = {}
    for st in loop.body:
        if _is(st, "cp.async.commit"):
            continue
        if not (isinstance(st, n.If) and not st.orelse and isinstance(st.cond, n.Bin) and st.cond.op == "<"):
            return None
        if not _same(st.cond.left, n.Name(loop.var)) or not all(_is(c, "cp.async") for c in st.then):
            return None
        for c in st.then:
            out[_ref(c.outs[0]).name] = (st.cond.right, _ref(c.outs[0]), _ref(c.ins[0]))
    return out or None


def plan(kernel: n.Kernel, target: Target) -> list[_Site]:
    """The copy sites of ``kernel``'s role; raises :class:`Refused` where the precondition does not hold."""
    if Feature.TMA not in target.features:
        raise Refused(f"{target.name} has no TMA")
    if len(kernel.roles) != 1 or kernel.roles[0].per is not None:
        raise Refused("the kernel has more than one role instance")
    if kernel.pipes or kernel.barriers:
        raise Refused("the kernel already has pipes or mbarriers")
    role = kernel.roles[0]
    params = {p.name for p in kernel.params if p.tier == "global"}
    smem = {s.name: s for s in kernel.smem}
    copies = [op for op in n.walk_stmts(role.body) if _is(op, "cp.async")]
    if not copies:
        raise Refused("the role issues no cp.async")
    filled = {_copy_parts(op, params, smem)[0].name for op in copies}
    for st in n.walk_stmts(role.body):
        if isinstance(st, n.Op) and st.name != "cp.async":
            if any(_named(r, filled) for e in st.outs for r in n.walk_expr(e)):
                raise Refused(f"`{st.name}` writes a buffer cp.async fills")
    seen: list[n.Op] = []
    top: list[_Copy] = []
    sites: list[_Site] = []
    prologues: dict[str, tuple[n.For, tuple[n.Expr, n.Ref, n.Ref]]] = {}
    lets: dict[str, n.Expr] = {}  # the role's top-level lets so far, by name
    for st in role.body:
        if isinstance(st, n.Let):
            lets[st.name] = substitute(st.value, lets)
        if _is(st, "cp.async"):
            dst, src = _copy_parts(st, params, smem)
            if dst.index or smem[dst.name].stages is not None:
                raise Refused("a top-level copy fills a stage of a ring")
            top.append(_Copy(dst.name, src))
            seen.append(st)
        elif isinstance(st, n.For) and (pro := _prologue(st)) is not None:
            for buf, parts in pro.items():
                prologues[buf] = (st, parts)
            seen += [c for c in n.walk_stmts(st.body) if _is(c, "cp.async")]
        elif isinstance(st, n.For):
            site = _loop_site(st, params, smem, prologues, lets)
            if site is not None:
                sites.append(site)
                seen += [c for c in n.walk_stmts(st.body) if _is(c, "cp.async")]
    if len(seen) != len(copies):
        raise Refused("a cp.async is not at the top level or in a top-level loop in a form the tactic follows")
    buffers = [c.buffer for s in sites for c in s.copies] + [c.buffer for c in top]
    if len(set(buffers)) != len(buffers) or set(buffers) != filled:
        raise Refused("a buffer is copied at more than one place")
    used = [p for s in sites if s.prologue is not None for p in [s.prologue]]
    if {id(p) for p, _ in prologues.values()} != {id(p) for p in used}:
        raise Refused("a prologue fills a ring no loop continues")
    out = ([_Site(None, tuple(top))] if top else []) + sites
    _check_reads(role, out, smem)
    return out


def _loop_site(
    loop: n.For, params: set[str], smem: dict[str, n.Smem], prologues: dict, outer: dict[str, n.Expr]
) -> _Site | None:
    """The copies of ``loop`` (``outer``: the role's lets before it, by name), ``None`` where it has none."""
    lets = {st.name: st.value for st in loop.body if isinstance(st, n.Let)}
    direct, ring, prefetch = [], [], None
    for st in loop.body:
        if _is(st, "cp.async"):
            dst, src = _copy_parts(st, params, smem)
            if dst.index or smem[dst.name].stages is not None:
                raise Refused("a loop's direct copy fills a stage of a ring")
            direct.append(_Copy(dst.name, src))
        elif isinstance(st, n.If) and any(_is(c, "cp.async") for c in n.walk_stmts(st.then)):
            cond = st.cond
            if st.orelse or not (isinstance(cond, n.Bin) and cond.op == "<" and isinstance(cond.left, n.Name)):
                raise Refused("a loop's guarded copy is not `if j < STOP`")
            j = cond.left.id
            bounded = _equal(substitute(cond.right, outer), substitute(loop.stop, outer))
            if j not in lets or not bounded or not all(_is(c, "cp.async") for c in st.then):
                raise Refused("a loop's guarded copy is not the prefetch of a ring")
            for c in st.then:
                dst, src = _copy_parts(c, params, smem)
                ring.append(_ring_copy(loop, j, lets[j], dst, src, smem[dst.name], prologues, outer))
            prefetch = j
    if direct and ring:
        raise Refused("a loop copies both directly and through a ring")
    if not direct and not ring:
        return None
    if ring:
        pros = list({id(prologues[c.buffer][0]): prologues[c.buffer][0] for c in ring}.values())
        if len(pros) != 1:
            raise Refused("a loop's rings are filled by different prologues")
        pro = pros[0]
        return _Site(loop, tuple(ring), ring=True, prologue=pro, prefetch=prefetch)
    return _Site(loop, tuple(direct))


def _ring_copy(
    loop: n.For, j: str, offset_expr: n.Expr, dst: n.Ref, src: n.Ref, buf: n.Smem, prologues: dict, outer: dict
) -> _Copy:
    """The copy of tile ``i`` in iteration ``i`` that the prefetch ``let j = i + OFF`` / prologue pair
    issues ``OFF`` iterations ahead; raises where the pair does not fill tiles ``0 .. STOP`` in order."""
    if buf.stages is None or dst.name not in prologues or not _same(loop.start, n.Num(0)) or loop.step is not None:
        raise Refused(f"`{dst.name}` is prefetched without a ring, a prologue or a loop from 0")
    pro, (bound, pro_dst, pro_src) = prologues[dst.name]
    if not _equal(offset_expr, n.Bin("+", n.Name(loop.var), pro.stop)):
        raise Refused(f"the prefetch index `{j}` is not `{loop.var}` plus the prologue's length")
    if not (_same(pro.start, n.Num(0)) and _equal(substitute(bound, outer), substitute(loop.stop, outer))):
        raise Refused("the prologue does not fill the tiles the loop's prefetch skips")
    if not _at_stage(dst, n.Bin("%", n.Name(j), buf.stages)):
        raise Refused(f"the prefetch does not copy into stage `{j} % {print_expr(buf.stages)}`")
    if not _at_stage(pro_dst, n.Name(pro.var)):
        raise Refused("the prologue does not copy tile p into stage p")
    mine = _tile(src, j, loop.var)
    if not _same(mine, _tile(pro_src, pro.var, loop.var)):
        raise Refused("the prologue and the prefetch copy different tiles")
    return _Copy(dst.name, mine)


def _at_stage(ref: n.Ref, stage: n.Expr) -> bool:
    """``ref`` is the whole stage ``stage`` of its ring (``cs[j % S]``)."""
    return len(ref.index) == 1 and isinstance(ref.index[0], n.At) and _same(ref.index[0].expr, stage)


def _tile(ref: n.Ref, old: str, new: str) -> n.Ref:
    """``ref`` with the name ``old`` replaced by ``new`` in its index."""
    env = {old: n.Name(new)}

    def index(i: n.Idx) -> n.Idx:
        if isinstance(i, n.At):
            return attrs.evolve(i, expr=substitute(i.expr, env))
        if isinstance(i, n.Span):
            return attrs.evolve(i, start=substitute(i.start, env), size=substitute(i.size, env))
        return i

    return attrs.evolve(ref, index=tuple(map(index, ref.index)))


def _reads(node: object, names: set[str]) -> bool:
    return any(_named(e, names) for e in _exprs(node))


def _exprs(node: object):
    for st in n.walk_stmts(node if isinstance(node, tuple) else (node,)):
        if isinstance(st, n.Op) and st.name not in COPY_OPS:
            for e in (*st.ins, *(a.value for a in st.attrs)):
                yield from n.walk_expr(e)


def _check_reads(role: n.Role, sites: list[_Site], smem: dict[str, n.Smem]) -> None:
    """Each site's buffers are read only after their copy (in its loop, where it has one); a ring's only at
    the stage of the iteration's tile (``cs[i % S]``)."""
    for site in sites:
        bufs = set(site.buffers)
        if site.loop is not None and _reads(tuple(st for st in role.body if st is not site.loop), bufs):
            raise Refused("a loop's buffer is read outside the loop")
        scope = role.body if site.loop is None else site.loop.body
        copy = next(i for i, st in enumerate(scope) if _copies_into(st, bufs))
        if not site.ring and _reads(scope[:copy], bufs):
            raise Refused("a buffer is read before its copy")
        for e in map(_ref, _exprs(scope)) if site.ring else ():
            if isinstance(e, n.Ref) and e.name in bufs:
                stage = n.Bin("%", n.Name(site.loop.var), smem[e.name].stages)
                if not (e.index and isinstance(e.index[0], n.At) and _same(e.index[0].expr, stage)):
                    raise Refused(f"`{e.name}` is read at a stage other than `{print_expr(stage)}`")


def _copies_into(st: n.Stmt, bufs: set[str]) -> bool:
    return any(_is(c, "cp.async") and _named(c.outs[0], bufs) for c in n.walk_stmts((st,)))


# --- the rewrite ---



def _op(name: str, outs=(), ins=()) -> n.Op:
    return n.Op(name=name, outs=tuple(outs), ins=tuple(ins))


def _plus(a: n.Expr, b: n.Expr) -> n.Expr:
    if isinstance(a, n.Num) and isinstance(b, n.Num):
        return n.Num(a.value + b.value)
    return b if _same(a, n.Num(0)) else a if _same(b, n.Num(0)) else n.Bin("+", a, b)


def _map_stmts(body: tuple[n.Stmt, ...], fn: Callable[[n.Stmt], list[n.Stmt]]) -> tuple[n.Stmt, ...]:
    """``body`` with every statement (innermost first) replaced by ``fn``'s list; a loop or branch left
    empty by the edit goes too."""
    out: list[n.Stmt] = []
    for st in body:
        if isinstance(st, n.For):
            inner = _map_stmts(st.body, fn)
            if st.body and not inner:
                continue
            st = attrs.evolve(st, body=inner)
        elif isinstance(st, n.If):
            then, orelse = _map_stmts(st.then, fn), _map_stmts(st.orelse, fn)
            if (st.then or st.orelse) and not (then or orelse):
                continue
            st = attrs.evolve(st, then=then, orelse=orelse)
        out += fn(st)
    return tuple(out)


def restage(e: n.Expr, stage: dict[str, n.Expr], ring: set[str]) -> n.Expr:
    """``e`` reading a filled buffer at the stage named in ``stage`` (a ring's own stage index replaced)."""
    if _named(e, set(stage)):
        e = _ref(e)
        rest = e.index[1:] if e.name in ring else e.index
        return attrs.evolve(e, index=(n.At(stage[e.name]), *rest))
    return e


def _smem_writes(body: tuple[n.Stmt, ...], smem: set[str]) -> bool:
    return any(
        isinstance(st, n.Op) and st.name not in COPY_OPS
        and any(_named(r, smem) for e in st.outs for r in n.walk_expr(e))
        for st in n.walk_stmts(body)
    )  # fmt: skip


def drop_copy_barriers(body: tuple[n.Stmt, ...], cyclic: bool, smem: set[str]) -> tuple[n.Stmt, ...]:
    """``body`` without the ``bar.sync`` barriers next to a copy or a wait (cyclically in a loop body), where
    nothing else in the scope writes shared memory."""
    if _smem_writes(body, smem):
        return body

    def copy_like(i: int) -> bool:
        if not (0 <= i < len(body) or cyclic):
            return False
        st = body[i % len(body)]
        return _is(st, *COPY_OPS) or any(_is(c, "cp.async") for c in n.walk_stmts((st,)))

    def ordered_copies(i: int, st: n.Stmt) -> bool:
        return _is(st, "bar.sync") and (copy_like(i - 1) or copy_like(i + 1))

    return tuple(st for i, st in enumerate(body) if not ordered_copies(i, st))


def with_pipe(body: tuple[n.Stmt, ...], site: _Site, pipe: str, s: str) -> tuple[n.Stmt, ...]:
    """``body`` waiting for stage ``s`` of ``pipe`` before the first statement reading the site's buffers
    (in a loop body, before the lets just ahead of it that the copies do not use) and releasing it after
    the last."""
    bufs, loop = set(site.buffers), site.loop is not None
    uses = set().union(*(names_in(c.src) for c in site.copies))
    wait = _op("pipe.wait", [n.Name(s)], [n.Name(pipe)])
    release = _op("pipe.release", ins=[n.Ref(pipe, (n.At(n.Name(s)),))])
    idx = [i for i, st in enumerate(body) if _reads(st, bufs)]
    first, last = idx[0], idx[-1]
    while loop and first > 0 and isinstance(body[first - 1], n.Let) and body[first - 1].name not in uses:
        first -= 1
    return (*body[:first], wait, *body[first : last + 1], release, *body[last + 1 :])


def _needed(body: list[n.Stmt], after: set[str]) -> list[n.Stmt]:
    """``body`` without the lets nothing after them needs (``after``: the names needed after ``body``)."""
    out: list[n.Stmt] = []
    for st in reversed(body):
        if isinstance(st, n.For):
            st = attrs.evolve(st, body=tuple(_needed(list(st.body), set(after))))
        elif isinstance(st, n.If):
            st = attrs.evolve(st, then=tuple(_needed(list(st.then), set(after))),
                              orelse=tuple(_needed(list(st.orelse), set(after))))  # fmt: skip
        if isinstance(st, n.Let):
            if st.name not in after:
                continue
            after |= names_in(st.value)
        else:
            after |= names_in(st)
        out.append(st)
    return out[::-1]


def warp_specialized(kernel: n.Kernel, target: Target, regs: int | None = None) -> n.Kernel:
    """``kernel`` split into a TMA producer and its old role as the consumer (see the module docstring)."""
    sites = plan(kernel, target)
    role = kernel.roles[0]
    fresh = Fresh(kernel)
    producer = fresh("producer")
    consts, smem = list(kernel.consts), {s.name: s for s in kernel.smem}
    pipes, stage, ring, by_loop = [], {}, set(), {}
    for site in sites:
        stem = site.copies[0].src.name
        pipe = fresh(f"{stem}ring")
        s = fresh(f"{stem}b" if site.loop is None else "s")
        pipes.append(n.Pipe(pipe, (producer,), (role.name,), site.buffers))
        for c in site.copies:
            buf = smem[c.buffer]
            depth = buf.stages
            if site.loop is None:
                depth = n.Num(1)
            elif depth is None:
                depth = n.Name(fresh("S"))
                consts.append(n.Const(depth.id, n.Num(DEPTH)))
            smem[c.buffer] = attrs.evolve(buf, stages=depth, pad=None, align=n.Num(128))
            stage[c.buffer] = n.Name(s)
            if site.ring:
                ring.add(c.buffer)
        by_loop[id(site.loop)] = (site, pipe, s)

    # the consumer: the old role without its copies, waiting for and releasing each stage
    top = by_loop.get(id(None))
    drop_lets = {s.prefetch for s in sites if s.prefetch}
    prologues = {id(s.prologue) for s in sites if s.prologue is not None}
    scratch = {name for name in smem if name not in stage}

    def edit(st: n.Stmt) -> list[n.Stmt]:
        if _is(st, *COPY_OPS) or (isinstance(st, n.Let) and st.name in drop_lets):
            return []
        if isinstance(st, n.Op):
            return [attrs.evolve(st, ins=tuple(restage(e, stage, ring) for e in st.ins))]
        return [st]

    body: list[n.Stmt] = []
    for st in drop_copy_barriers(role.body, False, scratch):
        if id(st) in prologues:
            continue
        if isinstance(st, n.For) and id(st) in by_loop:
            site, pipe, s = by_loop[id(st)]
            inner = _map_stmts(drop_copy_barriers(st.body, True, scratch), edit)
            body.append(attrs.evolve(st, body=with_pipe(inner, site, pipe, s)))
        else:
            body += _map_stmts((st,), edit)
    if top is not None:
        site, pipe, s = top
        body = list(with_pipe(tuple(body), site, pipe, s))
    # the producer: the consumer's skeleton (its loops, lets, CTA barriers), a stage taken and filled where
    # the consumer waits for one
    loads = {pipe: [_op("tma.load", [n.Ref(c.buffer, (n.At(n.Name(s)),))], [c.src]) for c in site.copies]
             for site, pipe, s in by_loop.values()}  # fmt: skip

    def skeleton(body: tuple[n.Stmt, ...]) -> list[n.Stmt]:
        out: list[n.Stmt] = []
        for st in body:
            if isinstance(st, n.Let) or _is(st, "bar.sync"):
                out.append(st)
            elif _is(st, "pipe.wait"):
                out += [attrs.evolve(st, name="pipe.acquire"), *loads[st.ins[0].id]]
            elif isinstance(st, n.For) and (inner := skeleton(st.body)):
                out.append(attrs.evolve(st, body=tuple(inner)))
            elif isinstance(st, n.If) and (skeleton(st.then) or skeleton(st.orelse)):
                out.append(attrs.evolve(st, then=tuple(skeleton(st.then)), orelse=tuple(skeleton(st.orelse))))
        return _needed(out, set()) if any(not isinstance(st, n.Let) for st in out) else []

    four = n.Num(PRODUCER_WARPS)
    consumer = attrs.evolve(
        role, warp_start=_plus(role.warp_start, four), warp_stop=_plus(four, role.warp_stop),
        body=tuple(_needed(body, set())),  # the lets only the copies used go too
    )  # fmt: skip
    return attrs.evolve(
        kernel,
        consts=tuple(consts),
        cta=attrs.evolve(kernel.cta, warps=_plus(four, kernel.cta.warps)),
        smem=tuple(smem[s.name] for s in kernel.smem),
        pipes=tuple(pipes),
        roles=(n.Role(producer, n.Num(0), four, regs=None if regs is None else n.Num(regs),
                      body=tuple(skeleton(tuple(body)))), consumer),  # fmt: skip
    )


class WarpSpecialize:
    """Split a kernel's cp.async-fed role into a TMA producer and a consumer joined by pipes: the site is
    the kernel; no params, or ``{"regs": 40}`` (the producer's setmaxnreg budget) where the split fits the
    CTA's registers only with it."""

    name = "warp-specialize"
    precondition = (
        "the target has TMA; the kernel's only role (one instance, no pipes or mbarriers) fills shared buffers "
        "only by cp.async from global tiles, at its top level or tile i in iteration i of a top-level loop "
        "(directly or through a ring filled ahead by a prologue and a prefetch `let j = i + OFF`); the rewrite "
        "(a producer of 4 warps issuing tma.load through pipes, TMA rings, the copies' barriers gone; with a "
        "producer register budget of 40 only where it needs one) fits"
    )

    def applications(self, module: n.Module, target: Target) -> Sequence[Application]:
        out: list[Application] = []
        for kernel in module.kernels:
            try:
                plan(kernel, target)
            except Refused:
                continue
            plain = Application(self.name, kernel.name, {})
            budget = Application(self.name, kernel.name, {"regs": PRODUCER_REGS})
            out += offered(self, module, target, [plain]) or offered(self, module, target, [budget])
        return out

    def apply(self, module: n.Module, target: Target, application: Application) -> n.Module:
        regs = application.params.get("regs")
        return with_kernel(module, application.site, lambda k: warp_specialized(k, target, regs))
