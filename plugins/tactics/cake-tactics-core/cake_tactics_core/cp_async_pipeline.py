"""The ``cp-async-pipeline`` tactic: pipeline a shared buffer that a loop refills by cp.async in every
iteration, turning it into a ring whose copies run ahead of the reads.

Where iteration ``i`` of a top-level loop copies tile ``i`` into an unstaged shared buffer and waits for it
at once (the tensorize tactic's form)::

    for kt in A .. B:
      cp.async cs <- c[b, kt * BN : +BN, :], oob=zero
      cp.async.commit
      cp.async.wait pending=0
      bar.sync
      ... reads of cs ...
      bar.sync

the rewrite gives the buffer ``S_cs`` stages (a new constant of 2, which the ring-depth tactic can change),
fills the first ``S_cs - 1`` of them before the loop and copies each tile ``S_cs - 1`` iterations ahead, the
form the staging tactic emits::

    let n_cs = B - A
    for p in 0 .. S_cs - 1:
      if p < n_cs:
        cp.async cs[p] <- c[b, (A + p) * BN : +BN, :], oob=zero
      cp.async.commit
    for kt in A .. B:
      cp.async.wait pending=S_cs - 2
      bar.sync
      ... reads of cs[(kt - A) % S_cs] ...
      let j = kt - A + S_cs - 1
      if j < n_cs:
        cp.async cs[j % S_cs] <- c[b, (A + j) * BN : +BN, :], oob=zero
      cp.async.commit

Why it keeps the meaning. The wait at the top of iteration ``i`` leaves only the ``S_cs - 2`` newest groups
pending, so tile ``i``'s group is complete, and the ``bar.sync`` after it makes every thread's copies
visible to all. The copy issued in iteration ``i`` writes stage ``(i - 1) % S_cs``, last read in iteration
``i - 1``: every thread has passed the ``bar.sync`` at the top of iteration ``i`` by then, so it overwrites
no tile another thread still reads (a write after read), and it is not the stage iteration ``i`` reads
(``S_cs >= 2``). The loop's trailing ``bar.sync`` only ordered one iteration's reads before the next
iteration's copy and its other shared-memory work; the next iteration's top ``bar.sync`` now does both, so
it goes; where statements after the loop name a shared buffer the loop's body names, a ``bar.sync`` after
the loop keeps the last iteration's order with them. Copies issued before the loop and not yet committed
(``cp.async xs <- x[...]`` at the top level) join the prologue's first group instead of iteration 0's, and
the first wait completes that group as the old one did; groups committed before the loop are older still.
The extra groups the loop commits after its last tile are empty.

Precondition: the kernel has one role of one instance (its ``bar.sync`` is the whole CTA's); the loop is at
the role's top level with unit step; its body starts with one or more ``cp.async`` of a global tile into a
whole unstaged shared buffer (no ring yet), then ``cp.async.commit``, ``cp.async.wait pending=0`` and
``bar.sync``, and issues no other cp.async, commit or wait (an inner loop included); the tiles' indices use
no name the body binds; nothing but those copies writes the buffers and nothing outside the loop reads
them; and the rewrite fits (:func:`cake_tactics_core.fit.fits`: shared memory per block among others).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from cake_core.ir import nodes as n
from cake_core.ir.printer import expr as print_expr
from cake_core.loop.tactic import Application

from cake_tactics_core.construct import Fresh, ref_at, ring_ahead
from cake_tactics_core.construct import arith as _bin
from cake_tactics_core.construct import op as _op
from cake_tactics_core.fit import names_in, offered, with_kernel

if TYPE_CHECKING:
    from cake_core.target import Target

#: stages of the new ring (the ring-depth tactic changes it afterwards)
DEPTH = 2
COPY_OPS = ("cp.async", "cp.async.commit", "cp.async.wait")


class Refused(Exception):
    """The precondition does not hold (the message says which part)."""


@attrs.frozen
class _Site:
    role: n.Role
    loop: n.For
    copies: tuple[n.Op, ...]  # the leading cp.async of the body, each into a whole unstaged buffer

    @property
    def buffers(self) -> tuple[str, ...]:
        return tuple(_dst(c).name for c in self.copies)


def _is(st: n.Stmt, *names: str) -> bool:
    return isinstance(st, n.Op) and st.name in names


def _dst(op: n.Op) -> n.Ref:
    (e,) = op.outs
    return n.Ref(e.id, loc=e.loc) if isinstance(e, n.Name) else e


def _bound(body: tuple[n.Stmt, ...]) -> set[str]:
    return {st.name if isinstance(st, n.Let) else st.var for st in n.walk_stmts(body) if isinstance(st, (n.Let, n.For))}


def _names(node: object) -> set[str]:
    """The names ``node`` (statements) uses, buffers named by a reference included."""
    refs = {
        e.name
        for st in n.walk_stmts(node)
        if isinstance(st, n.Op)
        for x in (*st.outs, *st.ins, *(a.value for a in st.attrs))
        for e in n.walk_expr(x)
        if isinstance(e, n.Ref)
    }
    return refs | names_in(node)


def _loop_site(kernel: n.Kernel, role: n.Role, loop: n.For) -> _Site:
    """The copies ``loop`` pipelines; raises :class:`Refused` where the loop is not in the form above."""
    body = loop.body
    k = 0
    while k < len(body) and _is(body[k], "cp.async"):
        k += 1
    if k == 0:
        raise Refused(f"the loop over `{loop.var}` does not start with a cp.async")
    tail = [st.name if isinstance(st, n.Op) else "" for st in body[k : k + 3]]
    pending = body[k + 1].attr("pending") if tail == ["cp.async.commit", "cp.async.wait", "bar.sync"] else None
    if pending is None or print_expr(pending) != "0":
        raise Refused(f"the loop over `{loop.var}` does not wait for its copies at once (commit, pending=0, bar.sync)")
    if loop.step is not None:
        raise Refused(f"the loop over `{loop.var}` has a step")
    if any(_is(st, *COPY_OPS) for st in n.walk_stmts(body[k + 3 :])):
        raise Refused(f"the loop over `{loop.var}` issues other cp.async operations")
    params = {p.name for p in kernel.params if p.tier == "global"}
    smem = {s.name: s for s in kernel.smem}
    copies = body[:k]
    inner = _bound(body)
    for c in copies:
        if len(c.outs) != 1 or len(c.ins) != 1:
            raise Refused("a cp.async does not copy one tile")
        dst, (src,) = _dst(c), c.ins
        if dst.name not in smem or not isinstance(src, n.Ref) or src.name not in params:
            raise Refused("a cp.async does not copy a global tile into a shared buffer")
        if dst.index or smem[dst.name].stages is not None:
            raise Refused(f"`{dst.name}` is already a ring")
        if names_in(src) & inner:
            raise Refused(f"the tile copied into `{dst.name}` uses a name the loop binds")
    bufs = {_dst(c).name for c in copies}
    if len(bufs) != len(copies):
        raise Refused("a buffer is copied twice in one iteration")
    for _r, op in n.walk_ops(kernel):
        writes = {_dst_name(e) for x in op.outs for e in n.walk_expr(x) if isinstance(e, n.Ref | n.Name)}
        if all(op is not c for c in copies) and writes & bufs:
            raise Refused(f"`{op.name}` writes a buffer the loop copies into")
    if _names(tuple(st for st in role.body if st is not loop)) & bufs:
        raise Refused("a buffer the loop copies into is named outside the loop")
    return _Site(role, loop, tuple(copies))


def _dst_name(e: n.Expr) -> str:
    return e.name if isinstance(e, n.Ref) else e.id


def plan(kernel: n.Kernel) -> list[_Site]:
    """Every top-level loop of ``kernel``'s role in the form above; raises :class:`Refused` where the kernel
    has no role the tactic may pipeline or no such loop."""
    if len(kernel.roles) != 1 or kernel.roles[0].per is not None:
        raise Refused("the kernel has more than one role instance")
    role = kernel.roles[0]
    loops = [st for st in role.body if isinstance(st, n.For) and st.body and _is(st.body[0], "cp.async")]
    if not loops:
        raise Refused("no top-level loop copies its tile by cp.async")
    return [_loop_site(kernel, role, loop) for loop in loops]


def _sites(kernel: n.Kernel) -> list[_Site]:
    try:
        return plan(kernel)
    except Refused:
        return []


def _site_name(site: _Site) -> str:
    return f"{site.role.name}:{site.loop.var}"


class CpAsyncPipeline:
    """Pipeline the buffers one loop refills by cp.async into a ring copied ahead: the site is
    ``kernel:role:var``, no params."""

    name = "cp-async-pipeline"
    precondition = (
        "a top-level loop of a kernel's only role (one instance) starts each iteration with cp.async of tile i into "
        "whole unstaged shared buffers, commit, `cp.async.wait pending=0` and bar.sync, and issues no other copies; "
        "nothing else writes those buffers or names them outside the loop; the rewrite (a ring of a new S = 2 "
        "stages filled S - 1 iterations ahead, the loop's trailing bar.sync gone) fits"
    )

    def applications(self, module: n.Module, target: Target) -> Sequence[Application]:
        candidates = [
            Application(self.name, f"{kernel.name}:{_site_name(site)}", {})
            for kernel in module.kernels
            for site in _sites(kernel)
        ]
        return offered(self, module, target, candidates)

    def apply(self, module: n.Module, target: Target, application: Application) -> n.Module:
        kernel_name, site_name = application.site.split(":", 1)

        def piped(k: n.Kernel) -> n.Kernel:
            (site,) = [s for s in plan(k) if _site_name(s) == site_name]
            return pipelined(k, site)

        return with_kernel(module, kernel_name, piped)


def pipelined(kernel: n.Kernel, site: _Site) -> n.Kernel:
    """``kernel`` with ``site``'s buffers made a ring copied ``S - 1`` iterations ahead (the module docstring)."""
    fresh = Fresh(kernel)
    first = site.buffers[0]
    depth, count, p, j = fresh(f"S_{first}"), fresh(f"n_{first}"), fresh("p"), fresh("j")
    loop, S, bufs = site.loop, n.Name(depth), set(site.buffers)
    step = _bin("-", n.Name(loop.var), loop.start)

    def copies(offset: n.Expr, stage: n.Expr) -> tuple[n.Stmt, ...]:  # tile ``start + offset`` into ``stage``
        return tuple(attrs.evolve(c, outs=(n.Ref(_dst(c).name, (n.At(stage),)),),
                                  ins=(ref_at(c.ins[0], loop.var, _bin("+", loop.start, offset)),))
                     for c in site.copies)  # fmt: skip

    def staged(e: n.Expr) -> n.Expr:  # a read of a buffer, at the iteration's stage
        if isinstance(e, n.Ref | n.Name) and _dst_name(e) in bufs:
            ref = n.Ref(e.id, loc=e.loc) if isinstance(e, n.Name) else e
            return attrs.evolve(ref, index=(n.At(_bin("%", step, S)), *ref.index))
        return e

    def reads(body: tuple[n.Stmt, ...]) -> tuple[n.Stmt, ...]:
        out: list[n.Stmt] = []
        for st in body:
            if isinstance(st, n.Op):
                st = attrs.evolve(st, ins=tuple(map(staged, st.ins)))
            elif isinstance(st, n.For):
                st = attrs.evolve(st, body=reads(st.body))
            elif isinstance(st, n.If):
                st = attrs.evolve(st, then=reads(st.then), orelse=reads(st.orelse))
            out.append(st)
        return tuple(out)

    k = len(site.copies)
    rest = loop.body[k + 3 :]
    trailing = bool(rest) and _is(rest[-1], "bar.sync")
    if trailing:
        rest = rest[:-1]
    prologue, body = ring_ahead(loop, S, count, p, j, copies, reads(rest))
    smem_names = {s.name for s in kernel.smem}
    index = next(i for i, st in enumerate(site.role.body) if st is loop)
    after = site.role.body[index + 1 :]
    fence = (_op("bar.sync"),) if trailing and _names(after) & _names(rest) & smem_names else ()
    role_body = (*site.role.body[:index], *prologue, attrs.evolve(loop, body=body), *fence, *after)
    smem = tuple(attrs.evolve(s, stages=S) if s.name in bufs else s for s in kernel.smem)
    return attrs.evolve(
        kernel,
        consts=(*kernel.consts, n.Const(depth, n.Num(DEPTH))),
        smem=smem,
        roles=(attrs.evolve(site.role, body=role_body),),
    )
