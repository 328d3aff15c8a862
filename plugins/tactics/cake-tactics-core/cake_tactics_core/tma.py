"""The ``tma`` tactic: TMA in place of cp.async in a one-role kernel, without warp specialization.

A kernel whose only role fills shared buffers with ``cp.async`` (``ampere.cake``, the staging tactic's
output) keeps its one role and issues the copies as ``tma.load`` through pipes that the role both
produces and consumes (``pipe cring: main -> main of cs``, docs/pipelines.md): where it issued a copy it
takes the stage to fill (``pipe.acquire f <- cring``) and copies into it; where it read the stage
(``cs[i % S]``) it waits for it (``pipe.wait s <- cring``, reading ``cs[s]``) and it gives it back after
the last read (``pipe.release cring[s]``). The barriers, stage indices, parities and byte counts are the
compiler's; nothing here writes one. ``ampere.cake`` becomes::

    pipe.acquire xf <- xring                      # x rows, once (a ring of one stage)
    tma.load xs[xf] <- x[b, t * BM : +BM, :]
    for p in 0 .. S - 1:                          # the prologue fills S - 1 stages ahead, as before
      if p < NT:
        pipe.acquire f <- cring
        tma.load cs[f] <- c[b, p / KC * BN : +BN, p % KC * BK : +BK]
    pipe.wait xb <- xring
    for i in 0 .. NT:
      pipe.wait s <- cring
      ... ldmatrix bt <- cs[s][:, kk * 16 : +16] ...
      pipe.release cring[s]
      let j = i + S - 1
      if j < NT:                                  # the prefetch S - 1 tiles ahead
        pipe.acquire f <- cring
        tma.load cs[f] <- c[b, j / KC * BN : +BN, j % KC * BK : +BK]
      ...
    pipe.release xring[xb]

The copies' ``cp.async.commit`` / ``cp.async.wait`` go, and so do the ``bar.sync`` barriers that only
ordered the copies (the release of a stage by every thread, which its next acquire waits for, orders
the reads before the refill). The filled buffers become TMA destinations: 128-byte-aligned rings
without padding (a top-level buffer one stage, ``T[1][BM, D]``; a ring keeps its depth). The copy
forms followed are :func:`cake_tactics_core.warp_specialize.plan`'s (a copy at the role's top level,
or a ring filled ahead by a prologue and a prefetch ``let j = i + OFF``).

A pipe whose producer and consumer are one role is what the pipe construct allows since this tactic
(the construct counts a role's acquires and waits apart, ``cring#p`` and ``cring#n``; the rules take an
access's side from the access: a copy is the producer's, any other the consumer's); the interpreter
orders an instance's threads by an arrival of all of them followed by their wait, as the hardware does.

Precondition: the target has TMA; the kernel has one role of one instance, no pipes or mbarriers of its
own, and fills shared buffers only by cp.async in the forms above, each loop's copies through a ring
filled ahead (a loop that copies tile ``i`` in iteration ``i`` and waits for it at once would gain
nothing from one role issuing TMA: warp specialization overlaps those); and the rewrite fits
(:func:`cake_tactics_core.fit.fits`: TMA boxes, rows that are whole 16 bytes, the pipe rules).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from cake_core.ir import nodes as n
from cake_core.loop.tactic import Application

from cake_tactics_core import warp_specialize as ws
from cake_tactics_core.construct import Fresh
from cake_tactics_core.construct import op as _op
from cake_tactics_core.fit import offered, with_kernel

if TYPE_CHECKING:
    from cake_core.target import Target

Refused = ws.Refused


def plan(kernel: n.Kernel, target: Target) -> list:
    """The copy sites of ``kernel``'s role (:func:`cake_tactics_core.warp_specialize.plan`); raises
    :class:`Refused` where the precondition does not hold."""
    sites = ws.plan(kernel, target)
    if any(s.loop is not None and not s.ring for s in sites):
        raise Refused("a loop copies tile i in iteration i without a ring filled ahead")
    return sites


def _op_named(st: n.Stmt, *names: str) -> bool:
    return isinstance(st, n.Op) and st.name in names


def _whole(e: n.Expr) -> n.Expr:
    """A buffer or tensor named bare (``xs``) as a reference without an index."""
    return n.Ref(e.id, loc=e.loc) if isinstance(e, n.Name) else e


def one_role_tma(kernel: n.Kernel, target: Target) -> n.Kernel:
    """``kernel`` issuing its copies as ``tma.load`` through pipes its one role produces and consumes (see
    the module docstring)."""
    sites = plan(kernel, target)
    role = kernel.roles[0]
    fresh = Fresh(kernel)
    smem = {s.name: s for s in kernel.smem}
    pipes, stage, ring, by_loop, fills = [], {}, set(), {}, {}
    for site in sites:
        stem, top = site.copies[0].src.name, site.loop is None
        pipe = fresh(f"{stem}ring")
        taken = fresh(f"{stem}b" if top else "s")
        filled = fresh(f"{stem}f" if top else "f")
        pipes.append(n.Pipe(pipe, (role.name,), (role.name,), site.buffers))
        for c in site.copies:
            buf = smem[c.buffer]
            smem[c.buffer] = attrs.evolve(buf, stages=n.Num(1) if top else buf.stages, pad=None, align=n.Num(128))
            stage[c.buffer] = n.Name(taken)
            fills[c.buffer] = (pipe, filled)
            if site.ring:
                ring.add(c.buffer)
        by_loop[id(site.loop)] = (site, pipe, taken)
    scratch = {name for name in smem if name not in stage}

    def block(body: tuple[n.Stmt, ...]) -> tuple[n.Stmt, ...]:
        """``body`` with its copies through the pipes (a stage acquired before a block's first copy into
        it), the copies' groups gone and the reads of the filled buffers at the stage taken."""
        out: list[n.Stmt] = []
        acquired: set[str] = set()
        for st in body:
            if _op_named(st, "cp.async"):
                dst = _whole(st.outs[0])
                pipe, name = fills[dst.name]
                if pipe not in acquired:
                    out.append(_op("pipe.acquire", [n.Name(name)], [n.Name(pipe)]))
                    acquired.add(pipe)
                out.append(_op("tma.load", [n.Ref(dst.name, (n.At(n.Name(name)),))], [_whole(st.ins[0])]))
            elif _op_named(st, *ws.COPY_OPS):
                continue
            elif isinstance(st, n.For) and id(st) in by_loop:
                site, pipe, taken = by_loop[id(st)]
                inner = block(ws.drop_copy_barriers(st.body, True, scratch))
                out.append(attrs.evolve(st, body=ws.with_pipe(inner, site, pipe, taken)))
            elif isinstance(st, n.For):
                out.append(attrs.evolve(st, body=block(st.body)))
            elif isinstance(st, n.If):
                out.append(attrs.evolve(st, then=block(st.then), orelse=block(st.orelse)))
            elif isinstance(st, n.Op):
                out.append(attrs.evolve(st, ins=tuple(ws.restage(e, stage, ring) for e in st.ins)))
            else:
                out.append(st)
        return tuple(out)

    body = block(ws.drop_copy_barriers(role.body, False, scratch))
    if id(None) in by_loop:
        site, pipe, taken = by_loop[id(None)]
        body = ws.with_pipe(body, site, pipe, taken)
    return attrs.evolve(
        kernel, smem=tuple(smem[s.name] for s in kernel.smem), pipes=tuple(pipes),
        roles=(attrs.evolve(role, body=body),),
    )  # fmt: skip


def _follows(kernel: n.Kernel, target: Target) -> bool:
    """Whether :func:`plan` follows ``kernel``'s copies."""
    try:
        plan(kernel, target)
    except Refused:
        return False
    return True


class Tma:
    """Issue a one-role kernel's cp.async copies as TMA through pipes the role produces and consumes: the
    site is the kernel, no params."""

    name = "tma"
    precondition = (
        "on a target with TMA, one role of one instance without pipes or mbarriers whose shared buffers only "
        "cp.async fills, at the top level or through rings filled ahead (prologue + prefetch); rewritten to "
        "tma.load through pipes the role both produces and consumes (acquire where it copied, wait before the "
        "first read, release after the last), the rewrite fits"
    )

    def applications(self, module: n.Module, target: Target) -> Sequence[Application]:
        candidates = [Application(self.name, k.name) for k in module.kernels if _follows(k, target)]
        return offered(self, module, target, candidates)

    def apply(self, module: n.Module, target: Target, application: Application) -> n.Module:
        return with_kernel(module, application.site, lambda k: one_role_tma(k, target))
