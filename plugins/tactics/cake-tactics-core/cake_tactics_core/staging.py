"""The ``staging`` tactic: stage a global operand of a loop through a shared-memory ring fed by cp.async.

Where a loop ``for v in A .. B`` of a kernel reads a global tile whose position moves with ``v``
(``rowdot dot <- x[...], c[b, k, :]``), the rewrite adds a ring ``smem c_ring: T[S_c][D]`` (its depth a
new constant ``S_c``, which the ring-depth tactic can change later), fills the first ``S_c - 1`` stages
before the loop, and in every iteration waits for the oldest copy, synchronizes the CTA, reads the tile
from its stage instead of global memory, and issues the copy ``S_c - 1`` iterations ahead::

    let n = B - A
    for p in 0 .. S_c - 1:
      if p < n:
        cp.async c_ring[p] <- c[b, A + p, :], oob=zero
      cp.async.commit
    for v in A .. B:
      cp.async.wait pending=S_c - 2
      bar.sync
      ... c_ring[(v - A) % S_c] in place of c[b, v, :] ...
      let j = v - A + S_c - 1
      if j < n:
        cp.async c_ring[j % S_c] <- c[b, A + j, :], oob=zero
      cp.async.commit

The copy into a stage is issued after the ``bar.sync`` that follows the stage's last reads, so no thread
overwrites a tile another still reads; the tile's values are the ones the loop read. Precondition: the
kernel has one role of one instance (the ``bar.sync`` is the whole CTA's) with no cp.async of its own
(its groups would mix with the ring's), the loop is at the role's top level with unit step, the tile is a
read of a global parameter the kernel never writes, its index uses the loop variable and no name bound
inside the loop, the reading operation masks out-of-bounds reads with zero or not at all, and the
rewrite fits (:func:`cake_tactics_core.fit.fits`: the verifier refuses, among others, a tile whose rows
are not whole 16-byte copies, ``c_sq[b, k : +1]``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
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

#: ring depths offered (the ring-depth tactic changes it afterwards)
DEPTHS = (2, 3)


@attrs.frozen
class _Site:
    role: n.Role
    loop: n.For
    ref: n.Ref
    param: n.Param

    @property
    def name(self) -> str:
        return f"{self.role.name}:{self.loop.var}:{print_expr(self.ref)}"


def _bound(body: tuple[n.Stmt, ...]) -> set[str]:
    out: set[str] = set()
    for st in n.walk_stmts(body):
        if isinstance(st, n.Let):
            out.add(st.name)
        elif isinstance(st, n.For):
            out.add(st.var)
    return out


def _ops(body: tuple[n.Stmt, ...]) -> Iterator[n.Op]:
    return (st for st in n.walk_stmts(body) if isinstance(st, n.Op))


def _oob(op: n.Op) -> str | None:
    return next((print_expr(a.value) for a in op.attrs if a.key == "oob"), None)


def sites(kernel: n.Kernel) -> list[_Site]:
    """Every (loop, global tile) of ``kernel`` the precondition admits, in source order."""
    if len(kernel.roles) != 1 or kernel.roles[0].per is not None:
        return []
    role = kernel.roles[0]
    if any(op.name.startswith("cp.async") for op in _ops(role.body)):
        return []
    params = {p.name: p for p in kernel.params if p.tier == "global"}
    written = {r.name for _r, op in n.walk_ops(kernel) for e in op.outs for r in n.walk_expr(e) if isinstance(r, n.Ref)}
    out: list[_Site] = []
    for loop in role.body:
        if not isinstance(loop, n.For) or loop.step is not None:
            continue
        inner = _bound(loop.body)
        for op in _ops(loop.body):
            if _oob(op) not in (None, "zero"):
                continue
            for ref in op.ins:
                if not isinstance(ref, n.Ref) or ref.name not in params or ref.name in written:
                    continue
                used = set().union(*(names_in(i) for i in ref.index)) if ref.index else set()
                if loop.var not in used or used & inner or not any(not isinstance(i, n.At) for i in ref.index):
                    continue
                site = _Site(role, loop, attrs.evolve(ref, transpose=False), params[ref.name])
                if all(s.name != site.name for s in out):
                    out.append(site)
    return out


def _replace(node: object, old: n.Ref, new: n.Ref) -> object:
    """``node`` with every read of the tile ``old`` (either orientation) made a read of ``new``."""
    if isinstance(node, n.Ref):
        if attrs.evolve(node, transpose=False) != old:
            return node
        return attrs.evolve(new, transpose=node.transpose, loc=node.loc)
    if isinstance(node, tuple):
        return tuple(_replace(x, old, new) for x in node)
    if isinstance(node, n.Op):
        return attrs.evolve(node, ins=_replace(node.ins, old, new))
    if isinstance(node, n.For):
        return attrs.evolve(node, body=_replace(node.body, old, new))
    if isinstance(node, n.If):
        return attrs.evolve(node, then=_replace(node.then, old, new), orelse=_replace(node.orelse, old, new))
    return node


class Staging:
    """Stage one global tile of a loop through a shared ring: the site is ``kernel:role:var:tile``, the
    params ``{"stages": n}``."""

    name = "staging"
    precondition = (
        "a top-level loop of a kernel's only role (one instance, no cp.async of its own) reads a global tile that "
        "moves with the loop variable, masked by zero or not at all; the rewrite (whole 16-byte rows among others) "
        "type-checks, fits shared memory, keeps compile-time divisions exact and verifies for the target"
    )

    def applications(self, module: n.Module, target: Target) -> Sequence[Application]:
        candidates = [
            Application(self.name, f"{kernel.name}:{site.name}", {"stages": depth})
            for kernel in module.kernels
            for site in sites(kernel)
            for depth in DEPTHS
        ]
        return offered(self, module, target, candidates)

    def apply(self, module: n.Module, target: Target, application: Application) -> n.Module:
        kernel_name, site_name = application.site.split(":", 1)

        def staged(k: n.Kernel) -> n.Kernel:
            (site,) = [s for s in sites(k) if s.name == site_name]
            return _staged(k, site, int(application.params["stages"]))

        return with_kernel(module, kernel_name, staged)

def _staged(kernel: n.Kernel, site: _Site, stages: int) -> n.Kernel:
    fresh = Fresh(kernel)
    depth, ring = fresh(f"S_{site.ref.name}"), fresh(f"{site.ref.name}_ring")
    count, p, j = fresh("n_" + site.ref.name), fresh("p"), fresh("j")
    loop, ref, S = site.loop, site.ref, n.Name(depth)
    shape = []
    for i, idx in enumerate(ref.index):
        if isinstance(idx, n.Span):
            shape.append(idx.size)
        elif isinstance(idx, n.All):
            shape.append(site.param.shape[i])
    smem = n.Smem(ring, site.param.dtype, tuple(shape), stages=S)

    def stage(e: n.Expr) -> n.Ref:
        return n.Ref(ring, (n.At(e),))

    def copy(offset: n.Expr, at: n.Expr) -> tuple[n.Stmt, ...]:  # the tile the loop reads at v = start + offset
        tile = ref_at(ref, loop.var, _bin("+", loop.start, offset))
        return (_op("cp.async", [stage(at)], [tile], oob=n.Name("zero")),)

    step = _bin("-", n.Name(loop.var), loop.start)
    reads = tuple(_replace(loop.body, ref, stage(_bin("%", step, S))))
    prologue, body = ring_ahead(loop, S, count, p, j, copy, reads)
    role_body: list[n.Stmt] = []
    for st in site.role.body:
        if st is loop:
            role_body += [*prologue, attrs.evolve(loop, body=body)]
        else:
            role_body.append(st)
    role = attrs.evolve(site.role, body=tuple(role_body))
    return attrs.evolve(
        kernel, consts=(*kernel.consts, n.Const(depth, n.Num(stages))), smem=(*kernel.smem, smem), roles=(role,)
    )
