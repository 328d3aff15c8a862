"""The ``warpgroups`` tactic: change how many consumer warpgroups share a CTA's rows.

The site is a role of warpgroup instances (``per 4``) that splits the CTA's rows among them through a
*rows constant*, ``ROWS = BM / WG``, and names its instance only as ``self * ROWS``. ``hopper.cake``::

    const BM = min(256, 32768 / D), BN = 128, WG = 2
    const ROWS = BM / WG
    cta warps 4 + 4 * WG occupancy 1
    role consumers warps 4..4 + 4 * WG per 4 regs 232:

The rewrite gives the role ``WG'`` warpgroups, the current count halved or doubled (1 .. 4): the count
constant takes the new value, the role's warps become ``start .. start + 4 * WG`` and the CTA's warps
follow (the role's warp count, where the CTA's count is written with it, becomes ``4 * WG``; a literal
CTA count grows or shrinks by the warps the role gains or loses). The count is handled in each of the
forms it is written in: a constant with a literal value (``WG = 2``: the value changes), a constant
with an expression (``WG = WM * WN / 4``, the wgmma tactic's output, whose role runs ``4..4 + WM * WN``:
``WG`` takes a literal and the role and the CTA are written in it), or a literal in the rows constant
(``ROWS = BM / 2`` beside ``warps 4..12 per 4``: a new constant ``WG`` is declared and used there).
Where the doubled count fits only the smaller sizes a domain lists, it is offered written in the size
(``WG = min(4, 512 / D)``: :mod:`cake_tactics_core.adaptive`), so each specialization keeps warpgroups
of a whole multiple of 64 rows.

Registers: where the kernel's roles carry ``setmaxnreg`` budgets (``regs``), the CTA's thread count
changes, and with it the registers each thread starts with. The budgets are *recomputed*: the producer
keeps its budget and the consumers take what its release pays for at the new thread count (the
``registers`` tactic's formula); where that budget pays for
nothing above the producer's (the producer's budget is not one the ``registers`` tactic offers, or the
entry count is already below it), every ``regs`` is *dropped* and the registers tactic may rebalance the
result. Either way CR104 (the tiles fit the budgets), CR109 (whole-warpgroup roles) and CR110 (the
release pays for the take) are checked by :func:`cake_tactics_core.fit.fits`.

Precondition: the role has ``per 4``, the same instance count in every specialization, and no role
after it in the CTA's warps; a kernel constant divides some rows by its count (``ROWS = BM / WG``, with
``BM`` not written in ``WG``); the role names ``self`` only as ``self * ROWS``; the CTA's warps are
written with the role's warp count or as a literal; and the rewrite fits
(:func:`cake_tactics_core.fit.fits`: ``ROWS`` whole, each division exact, wgmma's 64-row warpgroups
(CR119/CR120), registers, threads, shared memory). The pipes' derived arrival counts follow the new
instance count by themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from cake_core.ir import nodes as n
from cake_core.ir.exprs import try_int
from cake_core.loop.tactic import Application

from cake_tactics_core import construct
from cake_tactics_core.adaptive import scalings, value
from cake_tactics_core.fit import checked, expressions, names_in, offered, reach, with_kernel
from cake_tactics_core.registers import producers, splits
from cake_tactics_core.wgmma import swap, warp_count

if TYPE_CHECKING:
    from cake_core.target import Target

#: the warpgroup counts offered (a CTA of 4 + 4 * 4 warps is the most the register file feeds)
LEAST, MOST = 1, 4
SELF = n.Name("self")


@attrs.frozen
class _Site:
    role: n.Role
    rows: n.Const  # ROWS = M / G
    count: n.Expr  # G: the warpgroup count as the rows constant divides by it (a name or a literal)


def _self_only_in(role: n.Role, rows: str) -> bool:
    """``self`` occurs in the role's body only as ``self * rows`` (or ``rows * self``)."""
    every = list(expressions(role.body))
    scaled = {id(e.left if e.left == SELF else e.right) for e in every
              if isinstance(e, n.Bin) and e.op == "*" and {e.left, e.right} == {SELF, n.Name(rows)}}  # fmt: skip
    return all(id(e) in scaled for e in every if e == SELF)


def sites(kernel: n.Kernel) -> list[_Site]:
    """The roles the precondition admits by their text (the counts and the fit are checked with the
    specializations), in declaration order."""
    out = []
    consts = {c.name for c in kernel.consts}
    for role in kernel.roles:
        if role.per != n.Num(4):
            continue
        for c in kernel.consts:
            v = c.value
            if not (isinstance(v, n.Bin) and v.op == "/" and isinstance(v.right, (n.Name, n.Num))):
                continue
            if isinstance(v.right, n.Name) and (v.right.id not in consts
                                                or v.right.id in reach(kernel, names_in(v.left))):  # fmt: skip
                continue
            if isinstance(v.right, n.Num) and type(v.right.value) is not int:
                continue
            if _self_only_in(role, c.name) and c.name in names_in(role.body):
                out.append(_Site(role, c, v.right))
                break
    return out


def _count(kernel: n.Kernel, site: _Site, models: list) -> int | None:
    """The role's instance count, where it is the same in every specialization, the rows constant divides
    by it, and no role runs after it in the CTA's warps."""
    counts = set()
    for m in models:
        mine = next(r for r in m.roles if r.role.name == site.role.name)
        if any(r.stop > mine.start for r in m.roles if r is not mine):
            return None
        if try_int(site.count, m.env) != mine.instances:
            return None
        counts.add(mine.instances)
    return counts.pop() if len(counts) == 1 else None


class Warpgroups:
    """Halve or double a role's consumer warpgroups: the site is ``kernel.role``, the params the new count
    (``{warpgroups: 4}``, or written in a listed size: ``{warpgroups: 4, size: D, upto: 128}``)."""

    name = "warpgroups"
    precondition = (
        "a role of per-4 warpgroup instances (the same count in every specialization, no role after it) splits "
        "rows by its count through a constant (ROWS = BM / WG, or BM / 2) and names self only as self * ROWS; the "
        "count halved or doubled (1..4; doubled up to a listed size where it does not fit them all), the role's "
        "and the CTA's warps written in it, setmaxnreg budgets recomputed or dropped, type-checks, fits shared "
        "memory, keeps divisions exact and verifies for the target"
    )

    def applications(self, module: n.Module, target: Target) -> Sequence[Application]:
        found = [(k, s) for k in module.kernels for s in sites(k)]
        if not found:
            return []
        typed = checked(module, target)
        if typed is None:
            return []
        out: list[Application] = []
        for kernel, site in found:
            g = _count(kernel, site, [m for (name, _), m in typed.models.items() if name == kernel.name])
            if g is None:
                continue
            where = f"{kernel.name}.{site.role.name}"
            if g % 2 == 0 and g // 2 >= LEAST:
                out += offered(self, module, target, [Application(self.name, where, {"warpgroups": g // 2})])
            if 2 * g <= MOST:
                fitting = offered(self, module, target, [Application(self.name, where, {"warpgroups": 2 * g})])
                if not fitting:  # doubled where the domain's sizes leave room, as it is elsewhere
                    scaled = [Application(self.name, where, {"warpgroups": 2 * g, **s}) for s in scalings(kernel)]
                    fitting = offered(self, module, target, scaled)
                out += fitting
        return out

    def apply(self, module: n.Module, target: Target, application: Application) -> n.Module:
        kernel_name, role_name = application.site.split(".", 1)
        params = dict(application.params)
        count = value(int(params["warpgroups"]), params.get("size"), params.get("upto"))  # type: ignore[arg-type]
        (site,) = [s for s in sites(module.kernel(kernel_name)) if s.role.name == role_name]
        out = with_kernel(module, kernel_name, lambda k: _rewrite(k, site, count))
        if any(r.regs is not None for r in out.kernel(kernel_name).roles):
            out = _budgets(out, kernel_name, target)
        return out


def _rewrite(kernel: n.Kernel, site: _Site, count: n.Expr) -> n.Kernel:
    """``kernel`` with ``site``'s role running ``count`` warpgroups (see the module docstring)."""
    role = site.role
    if isinstance(site.count, n.Name):
        name = site.count.id
        consts = tuple(attrs.evolve(c, value=count) if c.name == name else c for c in kernel.consts)
    else:
        name = construct.Fresh(kernel)("WG")
        consts = []
        for c in kernel.consts:
            if c.name == site.rows.name:
                consts += [n.Const(name, count), attrs.evolve(c, value=n.Bin("/", site.rows.value.left, n.Name(name)))]
            else:
                consts.append(c)
        consts = tuple(consts)
    warps = n.Bin("*", n.Num(4), n.Name(name))
    cta = kernel.cta.warps
    before = warp_count(role)
    if any(e == before for e in n.walk_expr(cta)) and not isinstance(before, n.Num):
        cta = swap(cta, before, warps)
    elif isinstance(cta, n.Num) and isinstance(role.warp_start, n.Num) and isinstance(role.warp_stop, n.Num):
        cta = construct.arith("+", n.Num(cta.value - (role.warp_stop.value - role.warp_start.value)), warps)
    else:
        # the CTA's warps are not written in the role's: the rewrite keeps them, and the fit refuses it
        pass
    new_role = attrs.evolve(role, warp_stop=construct.arith("+", role.warp_start, warps))
    roles = tuple(new_role if r is role else r for r in kernel.roles)
    return attrs.evolve(kernel, consts=consts, roles=roles, cta=attrs.evolve(kernel.cta, warps=cta))


def _budgets(module: n.Module, kernel_name: str, target: Target) -> n.Module:
    """``module`` with the kernel's ``regs`` recomputed for its new thread count: the producers keep theirs,
    the consumers take what that pays for; where nothing does, the budgets go."""
    kernel = module.kernel(kernel_name)
    given = {r.regs for r in kernel.roles if r.name in producers(kernel)}
    bare = with_kernel(module, kernel_name, lambda k: attrs.evolve(
        k, roles=tuple(attrs.evolve(r, regs=None) for r in k.roles)))  # fmt: skip
    if len(given) != 1 or not isinstance(p := given.pop(), n.Num):
        return bare
    typed = checked(bare, target)
    split = next((s for s in splits(bare.kernel(kernel_name), typed, target)
                  if all(s[r] == p.value for r in producers(kernel))), None)  # fmt: skip
    if split is None:
        return bare
    return with_kernel(bare, kernel_name, lambda k: attrs.evolve(
        k, roles=tuple(attrs.evolve(r, regs=n.Num(split[r.name])) for r in k.roles)))  # fmt: skip
