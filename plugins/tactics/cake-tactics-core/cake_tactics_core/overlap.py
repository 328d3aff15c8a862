"""The ``epilogue-overlap`` tactic: software-pipeline a consumer's wgmma loop over two accumulators, so the
tensor cores multiply the next tile while the CUDA cores fold the last one.

The site is a loop of a role (``kernel.role:var``) that is exactly::

    for kt in 0 .. NC:
      pipe.wait s <- ring
      wgmma acc <- A, B, accumulate=0          (A and B may name s and kt)
      wgmma.commit
      wgmma.wait pending=0
      <fold>                                   (reads acc; releases ring[s] once, at its top level)

and becomes (``acc0``/``acc1``, ``s0``/``s1``, ``p`` and ``kl`` fresh names; ``F(a, s, k)`` is the
input's fold with ``acc``, ``s`` and ``kt`` replaced)::

    pipe.wait s0 <- ring
    wgmma acc0 <- A(s0, 0), B(s0, 0), accumulate=0
    wgmma.commit
    for p in 0 .. (NC - 1) / 2:                 (two tiles a trip; s0 is carried from trip to trip)
      pipe.wait s1 <- ring
      wgmma acc1 <- ...(s1, 2 * p + 1) ; wgmma.commit
      wgmma.wait acc0, pending=1
      F(acc0, s0, 2 * p)
      pipe.wait s0 <- ring
      wgmma acc0 <- ...(s0, 2 * p + 2) ; wgmma.commit
      wgmma.wait acc1, pending=1
      F(acc1, s1, 2 * p + 1)
    let kl = (NC - 1) / 2 * 2                  (acc0 holds tile kl)
    if kl + 1 < NC:
      pipe.wait s1 <- ring
      wgmma acc1 <- ...(s1, kl + 1) ; wgmma.commit
      wgmma.wait acc0, pending=1
      F(acc0, s0, kl)
      wgmma.wait pending=0
      F(acc1, s1, kl + 1)
    else:
      wgmma.wait pending=0
      F(acc0, s0, kl)

Tiles are folded in the input's order, each from its own accumulator and stage, so the result is the
input's for every ``NC >= 1``.

CTA barriers in the fold (knn stores the scores to shared memory for ``topk.update`` between two
``bar.sync``) are barriers of every role: the fold of tile ``i`` now comes after the wait for tile
``i + 1``, so another role that takes them at the end of its loop over the same tiles,
``for i in 0 .. NC: P(i); bar.sync; bar.sync``, becomes ``P(0); for i in 0 .. NC: if i + 1 < NC:
P(i + 1); bar.sync; bar.sync`` (the stages ``P(0)`` acquires under fresh names), else both would wait.

Where two accumulators do not fit a thread's registers, the offer ``{BM: v}`` also sets a constant the
accumulator's rows are computed from (one that names no other constant) to a smaller value it takes in
another specialization: ``hopper.cake``'s ``BM = min(256, 32768 / D)`` becomes ``BM = 128``, its value
at ``D = 256``, and the result is ``hopper_overlap.cake``'s roles.

Precondition: the target has wgmma; the loop starts at 0 with no step and its trip count is at least 1
for every size of the domain (a literal, or ``cdiv(X, Y)`` of a size the domain bounds by ``>= 1``,
directly or through the role's ``let``); the accumulator is a register tile of the role that nothing
outside the loop names, and this wgmma is the role's only one (so ``pending=1`` leaves exactly the
newer group in flight); the fold names the accumulator only right of ``<-`` (it reads it), binds no
names, waits on no pipe, mbarrier or copy group and issues no wgmma; its CTA barriers, if any, sit at
its top level, the role takes no other, and every other role that takes any takes as many, only at the
end of one loop over the same trips (``0 .. NC``, the same value); the ring has at least two stages
(the consumer holds two); and the rewrite fits (:func:`cake_tactics_core.fit.fits`: two accumulators'
registers among the rest).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import attrs

from cake_core.ir import nodes as n
from cake_core.ir.transform import set_consts
from cake_core.loop.tactic import Application
from cake_core.target import Feature

from cake_tactics_core import construct
from cake_tactics_core.fit import checked, names_in, offered, reach, with_kernel

if TYPE_CHECKING:
    from cake_core.target import Target

#: operations a fold may not hold: they wait, synchronize or start tensor-core work
_BLOCKING = ("pipe.wait", "pipe.acquire", "wgmma", "wgmma.commit", "wgmma.wait", "cp.async.wait",
             "cp.async.commit", "mbarrier.wait", "mbarrier.arrive", "mbarrier.arrive.expect_tx")  # fmt: skip


@attrs.frozen
class _Site:
    role: n.Role
    loop: n.For
    wait: n.Op  # pipe.wait s <- ring
    mma: n.Op  # wgmma acc <- A, B, accumulate=0
    fold: tuple[n.Stmt, ...]
    ring: str
    stage: str
    acc: str
    #: the loops of other roles whose CTA barriers match the fold's: ``(role, loop)``
    partners: tuple[tuple[n.Role, n.For], ...] = ()


def _plain(e: n.Expr) -> str | None:
    if isinstance(e, n.Name):
        return e.id
    return e.name if isinstance(e, n.Ref) and not e.index and not e.transpose else None


def _is(st: n.Stmt, name: str) -> bool:
    return isinstance(st, n.Op) and st.name == name


def _tiles(op: n.Op, exprs: tuple[n.Expr, ...]) -> set[str]:
    """The tiles and buffers ``exprs`` (operands of ``op``) name."""
    return {e.name if isinstance(e, n.Ref) else e.id for e in exprs if isinstance(e, (n.Ref, n.Name))}


def _release(st: n.Stmt, ring: str, stage: str) -> bool:
    """``st`` is ``pipe.release ring[stage]``."""
    if not _is(st, "pipe.release") or len(st.operands) != 1 or not isinstance(st.operands[0], n.Ref):
        return False
    ref = st.operands[0]
    return ref.name == ring and len(ref.index) == 1 and isinstance(ref.index[0], n.At) and ref.index[0].expr == n.Name(
        stage)  # fmt: skip


def _fold_ok(fold: tuple[n.Stmt, ...], site_acc: str, ring: str, stage: str) -> bool:
    if sum(_release(st, ring, stage) for st in fold) != 1:
        return False
    for st in n.walk_stmts(fold):
        if _is(st, "bar.sync") and not any(st is x for x in fold):
            return False  # a fold's CTA barriers sit at its top level
        if isinstance(st, (n.Let, n.RegDecl)):
            return False
        if isinstance(st, n.Op):
            if st.name in _BLOCKING or (st.name == "pipe.release" and not _release(st, ring, stage)):
                return False
            if st.name == "pipe.release" and not any(st is x for x in fold):
                return False  # the release of the stage sits at the fold's top level
            if site_acc in _tiles(st, st.outs) or (not st.outs and site_acc in _tiles(st, st.ins)):
                return False  # the fold names the accumulator only right of `<-`: it reads it
    return True


def _loop_site(role: n.Role, loop: n.For) -> _Site | None:
    if loop.start != n.Num(0) or loop.step is not None or len(loop.body) < 5:
        return None
    wait, mma, commit, done, *fold = loop.body
    if not (_is(wait, "pipe.wait") and _is(mma, "wgmma") and _is(commit, "wgmma.commit") and _is(done, "wgmma.wait")):
        return None
    if len(wait.outs) != 1 or len(wait.ins) != 1 or _plain(wait.outs[0]) is None or _plain(wait.ins[0]) is None:
        return None
    stage, ring = _plain(wait.outs[0]), _plain(wait.ins[0])
    if len(mma.outs) != 1 or _plain(mma.outs[0]) is None or mma.attr("accumulate") != n.Num(0):
        return None
    acc = _plain(mma.outs[0])
    if commit.operands or commit.attrs or done.attr("pending") != n.Num(0) or len(done.attrs) != 1:
        return None
    if any(_plain(e) != acc for e in done.ins):
        return None
    if not _fold_ok(tuple(fold), acc, ring, stage):
        return None
    return _Site(role, loop, wait, mma, tuple(fold), ring, stage, acc)


def _lets(body: tuple[n.Stmt, ...]) -> dict[str, n.Expr]:
    return {st.name: st.value for st in n.walk_stmts(body) if isinstance(st, n.Let)}


def _at_least_one(kernel: n.Kernel, role: n.Role, e: n.Expr) -> bool:
    """``e`` is at least 1 for every size of the domain: a positive literal, or ``cdiv(X, Y)`` of a
    domain size bounded by ``>= 1`` (or a positive literal), directly or through a ``let``."""
    lets = _lets(role.body)
    consts = {c.name: c.value for c in kernel.consts}
    for _ in range(4):
        if isinstance(e, n.Name) and (e.id in lets or e.id in consts):
            e = lets.get(e.id, consts.get(e.id))
    if isinstance(e, n.Num):
        return isinstance(e.value, int) and e.value >= 1
    if isinstance(e, n.Call) and e.fn == "cdiv" and len(e.args) == 2:
        x = e.args[0]
        if isinstance(x, n.Num):
            return isinstance(x.value, int) and x.value >= 1
        if isinstance(x, n.Name):
            return any(c.var == x.id and c.op == ">=" and len(c.values) == 1 and isinstance(c.values[0], n.Num)
                       and c.values[0].value >= 1 for c in kernel.domain)  # fmt: skip
    return False


def sites(kernel: n.Kernel) -> list[_Site]:
    """The loops of ``kernel`` the precondition admits, without its fit and stage counts (checked by
    :class:`EpilogueOverlap` with the specializations), in source order."""
    out = []
    for role in kernel.roles:
        regs = {st.name for st in role.body if isinstance(st, n.RegDecl)}
        mmas = [st for st in n.walk_stmts(role.body) if _is(st, "wgmma")]
        loops = [st for st in n.walk_stmts(role.body) if isinstance(st, n.For)]
        found = [s for s in (_loop_site(role, loop) for loop in loops) if s is not None]
        for site in found:
            if len(mmas) != 1 or site.acc not in regs or [s.loop.var for s in found].count(site.loop.var) != 1:
                continue
            inside = {id(st) for st in n.walk_stmts(site.loop.body)}
            outside = [st for st in n.walk_stmts(role.body) if id(st) not in inside and st is not site.loop]
            if any(site.acc in (_tiles(st, st.operands) | names_in(st.operands)) for st in outside
                   if isinstance(st, n.Op)):  # fmt: skip
                continue
            if not _at_least_one(kernel, role, site.loop.stop):
                continue
            partners = _partners(kernel, site)
            if partners is not None:
                out.append(attrs.evolve(site, partners=partners))
    return out


def _bars(body: tuple[n.Stmt, ...]) -> list[n.Op]:
    return [st for st in n.walk_stmts(body) if _is(st, "bar.sync")]


def _resolved(role: n.Role, e: n.Expr) -> n.Expr:
    """``e``, or the value of the role's ``let`` it names."""
    return _lets(role.body).get(e.id, e) if isinstance(e, n.Name) else e


def _partners(kernel: n.Kernel, site: _Site) -> tuple[tuple[n.Role, n.For], ...] | None:
    """Where the fold takes CTA barriers: every other role that takes any takes them only at the end of
    one loop over the same trips, as many a trip as the fold (``for i in 0 .. NC: <no barrier>; bar.sync;
    bar.sync``), and the site's role takes none outside the fold; those loops, or ``None`` where this
    does not hold (no barriers: no partners)."""
    k = len(_bars(site.fold))
    if k == 0:
        return ()
    if len(_bars(site.role.body)) != k:
        return None
    trips = _resolved(site.role, site.loop.stop)
    out = []
    for role in kernel.roles:
        if role is site.role or not _bars(role.body):
            continue
        loops = [st for st in n.walk_stmts(role.body) if isinstance(st, n.For) and len(_bars(st.body)) == k
                 and all(_is(x, "bar.sync") for x in st.body[-k:]) and not _bars(st.body[:-k])]  # fmt: skip
        if len(loops) != 1 or len(_bars(role.body)) != k or len(loops[0].body) == k:
            return None
        loop = loops[0]
        if loop.start != n.Num(0) or loop.step is not None or _resolved(role, loop.stop) != trips:
            return None
        out.append((role, loop))
    return tuple(out)


def _stages_ok(site: _Site, kernel: n.Kernel, typed) -> bool:
    models = [m for (name, _), m in typed.models.items() if name == kernel.name]
    return bool(models) and all(site.ring in m.pipes and m.pipes[site.ring].stages >= 2 for m in models)


class EpilogueOverlap:
    """Fold tile ``k`` while the wgmma of tile ``k + 1`` runs (two accumulators): the site is
    ``kernel.role:var`` (the loop's variable), no params."""

    name = "epilogue-overlap"
    precondition = (
        "the target has wgmma; a loop `for kt in 0 .. NC` (NC >= 1 over the domain) of a role is exactly `pipe.wait "
        "s <- ring; wgmma acc <- .., accumulate=0; wgmma.commit; wgmma.wait pending=0` and a fold that reads acc, "
        "releases ring[s] once and holds no wait, wgmma or binding; acc is named nowhere else, the wgmma "
        "is the role's only one, the ring has >= 2 stages, and the two-accumulator rewrite fits; CTA barriers in the "
        "fold only where the other roles take as many at the end of a loop over the same trips (shifted a tile); "
        "{BM: v} cuts the rows' constant to a smaller value of another specialization where two accumulators overflow"
    )

    def applications(self, module: n.Module, target: Target) -> Sequence[Application]:
        found = [(kernel, site) for kernel in module.kernels for site in sites(kernel)]
        if not target.has(Feature.WGMMA) or not found:
            return []
        typed = checked(module, target)
        if typed is None:
            return []
        out: list[Application] = []
        for kernel, site in found:
            if not _stages_ok(site, kernel, typed):
                continue
            at = f"{kernel.name}.{site.role.name}:{site.loop.var}"
            plain = offered(self, module, target, [Application(self.name, at)])
            cuts = [Application(self.name, at, {c: v}) for c, v in _row_cuts(kernel, site, typed)]
            out += plain or offered(self, module, target, cuts)
        return out

    def apply(self, module: n.Module, target: Target, application: Application) -> n.Module:
        kernel_name, rest = application.site.split(".", 1)
        role_name, var = rest.rsplit(":", 1)
        if application.params:
            module = set_consts(module, dict(application.params), kernel_name)

        def rewritten(k: n.Kernel) -> n.Kernel:
            (site,) = [s for s in sites(k) if s.role.name == role_name and s.loop.var == var]
            return _rewrite(k, site)

        return with_kernel(module, kernel_name, rewritten)


def _row_cuts(kernel: n.Kernel, site: _Site, typed) -> list[tuple[str, int]]:
    """Where two accumulators do not fit: each constant the accumulator's rows are computed from that names
    no other constant and takes several values over the specializations (``BM = min(256, 32768 / D)``),
    paired with each value it takes below its largest (``BM = 128``, its value at ``D = 256``)."""
    regs = {st.name: st for st in site.role.body if isinstance(st, n.RegDecl)}
    consts = {c.name: c.value for c in kernel.consts}
    models = [m for (name, _), m in typed.models.items() if name == kernel.name]
    out = []
    for name in sorted(reach(kernel, names_in(regs[site.acc].shape[0]))):
        if name not in consts or names_in(consts[name]) & set(consts):
            continue
        values = sorted({m.env[name] for m in models if isinstance(m.env.get(name), int)})
        out += [(name, v) for v in values[:-1] if v > 0]
    return out


# --- the rewrite ---


def _sub_expr(e: n.Expr, env: Mapping[str, n.Expr]) -> n.Expr:
    """``e`` with names (and tiles named by a reference) replaced: ``env`` maps a name to an expression,
    a tile's new name to an ``n.Name``."""
    if isinstance(e, n.Name):
        return env.get(e.id, e)
    if isinstance(e, n.Ref):
        new = env.get(e.name)
        name = new.id if isinstance(new, n.Name) else e.name
        index = []
        for i in e.index:
            if isinstance(i, n.At):
                index.append(attrs.evolve(i, expr=_sub_expr(i.expr, env)))
            elif isinstance(i, n.Span):
                index.append(attrs.evolve(i, start=_sub_expr(i.start, env), size=_sub_expr(i.size, env)))
            else:
                index.append(i)
        return attrs.evolve(e, name=name, index=tuple(index))
    if isinstance(e, n.Bin):
        left, right = _sub_expr(e.left, env), _sub_expr(e.right, env)
        if e.op == "*" and n.Num(0) in (left, right):
            return n.Num(0)  # ``0 * BN`` where the trip index became 0
        if e.op in "+-*" and (left, right) != (e.left, e.right):
            return construct.arith(e.op, left, right)
        return attrs.evolve(e, left=left, right=right)
    if isinstance(e, n.Unary):
        return attrs.evolve(e, operand=_sub_expr(e.operand, env))
    if isinstance(e, n.Call):
        return attrs.evolve(e, args=tuple(_sub_expr(a, env) for a in e.args))
    return e


def _sub(stmts: tuple[n.Stmt, ...], env: Mapping[str, n.Expr]) -> tuple[n.Stmt, ...]:
    """``stmts`` with ``env`` substituted in every expression (see :func:`_sub_expr`)."""
    out: list[n.Stmt] = []
    for st in stmts:
        if isinstance(st, n.Op):
            out.append(attrs.evolve(
                st, outs=tuple(_sub_expr(e, env) for e in st.outs), ins=tuple(_sub_expr(e, env) for e in st.ins),
                attrs=tuple(attrs.evolve(a, value=_sub_expr(a.value, env)) for a in st.attrs)))  # fmt: skip
        elif isinstance(st, n.For):
            inner = {k: v for k, v in env.items() if k != st.var}
            out.append(attrs.evolve(st, start=_sub_expr(st.start, env), stop=_sub_expr(st.stop, env),
                                    step=None if st.step is None else _sub_expr(st.step, env),
                                    body=_sub(st.body, inner)))  # fmt: skip
        elif isinstance(st, n.If):
            out.append(attrs.evolve(st, cond=_sub_expr(st.cond, env), then=_sub(st.then, env),
                                    orelse=_sub(st.orelse, env)))  # fmt: skip
        elif isinstance(st, n.Let):
            out.append(attrs.evolve(st, value=_sub_expr(st.value, env)))
            env = {k: v for k, v in env.items() if k != st.name}
        else:
            out.append(st)
    return tuple(out)


def _rewrite(kernel: n.Kernel, site: _Site) -> n.Kernel:
    fresh = construct.Fresh(kernel)
    acc0, acc1, s0, s1, p, kl = (fresh(x) for x in ("acc0", "acc1", "s0", "s1", "p", "kl"))
    a0, a1, st0, st1 = n.Name(acc0), n.Name(acc1), n.Name(s0), n.Name(s1)
    nc, kt = site.loop.stop, site.loop.var
    two_p = construct.arith("*", n.Num(2), n.Name(p))
    last = n.Name(kl)

    def env(acc: n.Name, stage: n.Name, k: n.Expr) -> dict[str, n.Expr]:
        return {site.acc: acc, site.stage: stage, kt: k}

    def issue(acc: n.Name, stage: n.Name, k: n.Expr) -> list[n.Stmt]:
        """Wait for the tile ``k`` in ``stage`` and start its multiply into ``acc``."""
        e = env(acc, stage, k)
        return [*_sub((site.wait, site.mma), e), construct.op("wgmma.commit")]

    def fold(acc: n.Name, stage: n.Name, k: n.Expr, pending: int) -> list[n.Stmt]:
        """Wait for ``acc`` (``pending`` newer groups may stay in flight) and fold it."""
        done = construct.op("wgmma.wait", [], [acc] if pending else [], pending=n.Num(pending))
        return [done, *_sub(site.fold, env(acc, stage, k))]

    odd = construct.arith("+", two_p, n.Num(1))
    trip = n.For(var=p, start=n.Num(0), stop=n.Bin("/", construct.arith("-", nc, n.Num(1)), n.Num(2)), body=(
        *issue(a1, st1, odd), *fold(a0, st0, two_p, 1),
        *issue(a0, st0, construct.arith("+", two_p, n.Num(2))), *fold(a1, st1, odd, 1),
    ))  # fmt: skip
    tail = n.If(
        cond=n.Bin("<", construct.arith("+", last, n.Num(1)), nc),
        then=(*issue(a1, st1, construct.arith("+", last, n.Num(1))), *fold(a0, st0, last, 1),
              *fold(a1, st1, construct.arith("+", last, n.Num(1)), 0)),
        orelse=tuple(fold(a0, st0, last, 0)),
    )  # fmt: skip
    pipelined = (
        *issue(a0, st0, n.Num(0)),
        trip,
        n.Let(name=kl, value=n.Bin("*", n.Bin("/", construct.arith("-", nc, n.Num(1)), n.Num(2)), n.Num(2))),
        tail,
    )

    def body(stmts: tuple[n.Stmt, ...]) -> tuple[n.Stmt, ...]:
        out: list[n.Stmt] = []
        for st in stmts:
            if st is site.loop:
                out += pipelined
            elif isinstance(st, n.RegDecl) and st.name == site.acc:
                out += [attrs.evolve(st, name=acc0), attrs.evolve(st, name=acc1)]
            elif isinstance(st, n.For):
                out.append(attrs.evolve(st, body=body(st.body)))
            elif isinstance(st, n.If):
                out.append(attrs.evolve(st, then=body(st.then), orelse=body(st.orelse)))
            else:
                out.append(st)
        return tuple(out)

    roles = {id(site.role): attrs.evolve(site.role, body=body(site.role.body))}
    for role, loop in site.partners:
        roles[id(role)] = attrs.evolve(role, body=_shifted(role.body, loop, fresh))
    return attrs.evolve(kernel, roles=tuple(roles.get(id(r), r) for r in kernel.roles))


def _shifted(stmts: tuple[n.Stmt, ...], loop: n.For, fresh: construct.Fresh) -> tuple[n.Stmt, ...]:
    """``stmts`` with a partner's ``for i in 0 .. NC: P(i); <barriers>`` made ``P(0); for i in 0 .. NC: if
    i + 1 < NC: P(i + 1); <barriers>``: its barriers of tile ``i`` come after its work of tile ``i + 1``,
    as the fold of tile ``i`` now comes after the wait for tile ``i + 1``. The stages ``P(0)`` acquires
    get fresh names (the loop's acquires bind their own)."""
    out: list[n.Stmt] = []
    for st in stmts:
        if st is loop:
            k = len(_bars(loop.body))
            work, bars = loop.body[:-k], loop.body[-k:]
            nxt = construct.arith("+", n.Name(loop.var), n.Num(1))
            ahead = n.If(cond=n.Bin("<", nxt, loop.stop), then=_sub(work, {loop.var: nxt}))
            first: dict[str, n.Expr] = {loop.var: n.Num(0)}
            for x in work:
                if _is(x, "pipe.acquire") and x.outs and isinstance(x.outs[0], n.Name):
                    first[x.outs[0].id] = n.Name(fresh(x.outs[0].id))
            out += [*_sub(work, first), attrs.evolve(loop, body=(ahead, *bars))]
        elif isinstance(st, n.For):
            out.append(attrs.evolve(st, body=_shifted(st.body, loop, fresh)))
        elif isinstance(st, n.If):
            out.append(attrs.evolve(st, then=_shifted(st.then, loop, fresh), orelse=_shifted(st.orelse, loop, fresh)))
        else:
            out.append(st)
    return tuple(out)
