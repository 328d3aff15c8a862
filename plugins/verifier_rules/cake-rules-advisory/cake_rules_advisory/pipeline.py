"""CA102: rings with more stages than the loops that fill them can ever use."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from cake_core.diagnostics.diagnostic import Diagnostic, Label, Severity
from cake_core.ir import nodes as n
from cake_core.ir.exprs import EvalError, Fn
from cake_core.ir.primitive import Access
from cake_core.ir.model import KernelModel
from cake_core.verify.facts import facts
from cake_core.verify.rule import Rule, RuleContext
from cake_core.verify.shapes import ShapeDomain
from cake_core.verify.samples import per_kernel
from cake_core.verify.traces import compiler

BIG = 1 << 20  # a run-time size without an upper bound, for telling bounded loops from growing ones


class _Unknown(Exception):
    """A loop bound or condition that cannot be evaluated from the sizes: no estimate."""


_OP, _LET, _FOR, _IF = 0, 1, 2, 3
_Program = list[tuple]


def _program(body: tuple[n.Stmt, ...], comp: Callable[[n.Expr | None], Fn | None]) -> _Program:
    """A role body ready for counting: operations (by ``id``), lets, loops and conditionals with their
    expressions compiled; the other statements (declarations) dropped."""
    out: _Program = []
    for s in body:
        if isinstance(s, n.Op):
            out.append((_OP, id(s)))
        elif isinstance(s, n.Let):
            out.append((_LET, s.name, comp(s.value)))
        elif isinstance(s, n.For):
            out.append((_FOR, s.var, comp(s.start), comp(s.stop), comp(s.step), _program(s.body, comp)))
        elif isinstance(s, n.If):
            out.append((_IF, comp(s.cond), _program(s.then, comp), _program(s.orelse, comp)))
    return out


def _programs(model: KernelModel) -> dict[str, _Program]:
    """Every role's program; they depend on the kernel's syntax alone, so the specializations of a
    kernel share them (through the protocol's per-kernel analyses)."""

    def make(kernel: n.Kernel) -> dict[str, _Program]:
        comp = compiler(model)
        return {r.name: _program(r.body, comp) for r in kernel.roles}

    return per_kernel(model, "pipeline programs", make)  # type: ignore[no-any-return]


def fills_per_cta(model: KernelModel, sites: Sequence[set[int]], sizes: Mapping[str, int]) -> list[int]:
    """Upper estimates of how often the operations of each of ``sites`` (sets of ``id`` of the ops) run
    in one CTA.

    Each loop contributes its trip count (the larger of the counts at its outer loops' first and last
    values), each ``if`` its larger branch; grid variables are 0, every role instance counts. The walk
    itself does not depend on the sites, so one walk counts every set (a vector of counts, one per
    set)."""
    base: dict[str, Any] = dict(model.env)
    base.update(sizes)
    for v in model.kernel.grid.vars:
        base[v] = 0
    width = len(sites)
    counted: dict[int, list[int]] = {}  # op id -> the sets it is in
    for i, ops in enumerate(sites):
        for op in ops:
            counted.setdefault(op, []).append(i)

    def value(fn: Fn, env: dict[str, Any]) -> Any:
        try:
            return fn(env)
        except (EvalError, KeyError, TypeError):  # a free name, a division by zero, an unknown operator
            raise _Unknown from None

    def block(prog: _Program, env: dict[str, Any]) -> list[int]:
        count = [0] * width
        for ins in prog:
            kind = ins[0]
            if kind == _OP:
                for i in counted.get(ins[1], ()):
                    count[i] += 1
            elif kind == _LET:
                env[ins[1]] = value(ins[2], env)
            elif kind == _FOR:
                _, var, start_fn, stop_fn, step_fn, body = ins
                step = value(step_fn, env) if step_fn is not None else 1
                if not isinstance(step, int) or step == 0:
                    raise _Unknown
                start = int(value(start_fn, env))
                k = len(range(start, int(value(stop_fn, env)), step))
                if k <= 0:
                    continue
                inner = [0] * width
                for v in {start, start + (k - 1) * step}:
                    e2 = dict(env)
                    e2[var] = v
                    inner = list(map(max, inner, block(body, e2)))
                count = [c + k * i for c, i in zip(count, inner)]  # noqa: B905 - one width
            else:
                then, orelse = block(ins[2], dict(env)), block(ins[3], dict(env))
                count = [c + max(a, b) for c, a, b in zip(count, then, orelse)]  # noqa: B905
        return count

    programs = _programs(model)
    total = [0] * width
    for info in model.roles:
        for i in range(info.instances):
            env = dict(base)
            env["self"] = i
            total = [t + c for t, c in zip(total, block(programs[info.role.name], env))]  # noqa: B905
    return total


class PipelineDeeperThanLoop(Rule):
    name = "CA102"
    slug = "pipeline-deeper-than-loop"
    severity = Severity.WARNING
    summary = "a shared ring with more stages than the loops that fill it run, for every size of a specialization"
    explanation = """
## What it does
For every shared buffer with stages (a ring), counts how often one CTA writes it — each write's
enclosing loops multiplied out, the larger branch of every `if` — with the run-time sizes at their
upper bounds, or growing without bound where the domain gives none. When even that count is smaller
than the ring's stages, under some specialization, the stages past it never hold data: the warning
names the specialization. A ring that loops over a run-time size without an upper bound is filled as
often as the size asks and is never reported: at small sizes every ring is deeper than its loop.

## Why is this bad?
Every stage costs shared memory for the whole kernel. Stages that are never filled only lower the
occupancy (or keep a wider tile from fitting), and a compile-time trip count makes it certain.

## Example
```
  domain N >= 1, D in {64, 128, 256}
  smem xs: bf16[4][128, 64]
  ...
      for kc in 0 .. D / 64:                    # 1 trip at D=64: 3 stages never used
        cp.async xs[kc] <- x[t * 128 : +128, kc * 64 : +64], oob=zero
```

## Use instead
```
  smem xs: bf16[D / 64][128, 64]
```
"""

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        m = ctx.model
        shape = ShapeDomain.of(m)
        if shape.empty():
            return
        kf = facts(m)
        rings = []  # (name, info, the operations writing it)
        for name, info in m.smem.items():
            if not info.stages or info.stages < 2:
                continue
            sites = {
                id(of.typed.op) for of, e in kf.shared_accesses.get(name, ())
                if e.access in (Access.WRITE, Access.READWRITE) and e.operand.stage is not None
            }  # fmt: skip
            if sites:
                rings.append((name, info, sites))
        if not rings:
            return
        try:
            lows = fills_per_cta(m, [sites for *_, sites in rings], _sizes(shape, BIG, m))
            highs = fills_per_cta(m, [sites for *_, sites in rings], _sizes(shape, 2 * BIG, m))
        except _Unknown:
            return
        for (name, info, sites), low, high in zip(rings, lows, highs):  # noqa: B905 - one per ring
            if high != low or low >= info.stages:
                continue
            decl = info.decl
            where = decl.stages.loc if decl.stages is not None and decl.stages.loc.line else decl.loc
            unused = info.stages - low
            yield self.at(
                where,
                f"`{name}` has {info.stages} stages, but the loops that fill it run at most {low} time(s) a CTA: "
                f"{unused} stage(s) never hold data",
                label=f"{info.stages} stages",
                secondary=tuple(Label(of.typed.op.loc, "fills the ring") for of in kf.ops if id(of.typed.op) in sites),
                notes=(f"{unused} x {info.stage_bytes} = {unused * info.stage_bytes} bytes of shared memory for "
                       "nothing",),  # fmt: skip
                help=f"use {max(low, 1)} stage(s) here (stages may be an expression of the domain's sizes)",
            )


def _sizes(shape: ShapeDomain, big: int, model: KernelModel) -> dict[str, int]:
    out = {s: (r.hi if r.hi is not None else big) for s, r in shape.sizes.items()}
    out.update({p.name: big for p in model.kernel.params if p.tier == "scalar"})
    return out
