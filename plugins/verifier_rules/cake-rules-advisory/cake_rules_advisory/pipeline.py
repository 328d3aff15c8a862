"""CA102: rings with more stages than the loops that fill them can ever use."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from cake_core.diagnostics.diagnostic import Diagnostic, Label, Severity
from cake_core.ir import nodes as n
from cake_core.ir.exprs import EvalError, evaluate
from cake_core.ir.primitive import Access
from cake_core.ir.sema import KernelModel
from cake_core.verify.facts import facts
from cake_core.verify.rule import Rule, RuleContext
from cake_core.verify.symbolic import ShapeDomain

BIG = 1 << 20  # a run-time size without an upper bound, for telling bounded loops from growing ones


class _Unknown(Exception):
    """A loop bound or condition that cannot be evaluated from the sizes: no estimate."""


def fills_per_cta(model: KernelModel, sites: set[int], sizes: Mapping[str, int]) -> int:
    """An upper estimate of how often the operations ``sites`` (by ``id`` of the op) run in one CTA.

    Each loop contributes its trip count (the larger of the counts at its outer loops' first and last
    values), each ``if`` its larger branch; grid variables are 0, every role instance counts."""
    base: dict[str, Any] = dict(model.env)
    base.update(sizes)
    for v in model.kernel.grid.vars:
        base[v] = 0

    def value(e: n.Expr, env: Mapping[str, Any]) -> Any:
        try:
            return evaluate(e, env)
        except (EvalError, TypeError, ZeroDivisionError):
            raise _Unknown from None

    def trips(s: n.For, env: Mapping[str, Any]) -> int:
        step = value(s.step, env) if s.step is not None else 1
        if not isinstance(step, int) or step == 0:
            raise _Unknown
        return len(range(int(value(s.start, env)), int(value(s.stop, env)), step))

    def block(body: tuple[n.Stmt, ...], env: dict[str, Any]) -> int:
        count = 0
        for s in body:
            if isinstance(s, n.Op):
                count += id(s) in sites
            elif isinstance(s, n.Let):
                env[s.name] = value(s.value, env)
            elif isinstance(s, n.For):
                k = trips(s, env)
                if k <= 0:
                    continue
                start = int(value(s.start, env))
                step = value(s.step, env) if s.step is not None else 1
                inner = 0
                for v in {start, start + (k - 1) * step}:
                    e2 = dict(env)
                    e2[s.var] = v
                    inner = max(inner, block(s.body, e2))
                count += k * inner
            elif isinstance(s, n.If):
                count += max(block(s.then, dict(env)), block(s.orelse, dict(env)))
        return count

    total = 0
    for info in model.roles:
        for i in range(info.instances):
            env = dict(base)
            env["self"] = i
            total += block(info.role.body, env)
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
        for name, info in m.smem.items():
            if not info.stages or info.stages < 2:
                continue
            sites = {
                id(of.typed.op) for of, e in kf.shared_accesses.get(name, ())
                if e.access in (Access.WRITE, Access.READWRITE) and e.operand.stage is not None
            }  # fmt: skip
            if not sites:
                continue
            try:
                low = fills_per_cta(m, sites, _sizes(shape, BIG, m))
                high = fills_per_cta(m, sites, _sizes(shape, 2 * BIG, m))
            except _Unknown:
                continue
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
