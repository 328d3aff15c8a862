"""CR108: tile accesses that can leave what they index, with no mask to catch them."""

from __future__ import annotations

from collections.abc import Iterator

from cake_core.diagnostics.diagnostic import Diagnostic
from cake_core.ir.primitive import Access, Kind
from cake_core.ir.printer import expr as text
from cake_core.verify.verdicts import AccessVerdict, Status
from cake_core.verify.rule import Rule, RuleContext

_VERB = {Access.READ: "reads", Access.WRITE: "writes", Access.READWRITE: "updates", Access.NONE: "touches"}
_WHAT = {Kind.GLOBAL: "", Kind.SHARED: "shared buffer ", Kind.REGISTERS: "register tile ", Kind.BARRIER: "barrier "}


class UnmaskedOutOfBounds(Rule):
    name = "CR108"
    slug = "unmasked-out-of-bounds"
    summary = "a tile access that leaves its tensor, buffer or ring for some size in the domain, unmasked"
    explanation = """
## What it does
For every operation and every tile it touches (read through its primitive's declared effects, so
primitives from plugins are covered), decides whether each index stays inside the extent it indexes
for **every** size in the shape domain (ranges, divisibility, finite sets) and every value of the
enclosing grid variables, `self`, loop variables and `if` conditions. Stage indices of shared rings
and barrier rings count too. An access whose effect is masked (`oob=zero`, `oob=skip`) handles
out-of-bounds elements and is not examined; any other access must stay in bounds.

Affine indices (and floor division, remainders, `cdiv`, `min` and `max` of them) are *proved* in
bounds symbolically over the whole domain. What cannot be proved is searched for a witness: sizes
just around the kernel's constants and their multiples, the least admissible sizes, large ones, with
loops and grids run at their ends. A witness is an error naming the sizes and variable values; an
access that is neither proved nor broken by any sample passes (`cake_core.verify.domain` documents
exactly what is proved and what is sampled).

## Why is this bad?
An unmasked access past a global tensor's end reads garbage or faults — but only for the sizes that
are not multiples of the tile, which a test at "nice" sizes never hits. Past a shared buffer or ring
it silently corrupts a neighbouring buffer.

## Example
```
kernel k(x: global f32[N], out: global f32[N])
  domain N >= 1
  grid (t) over (cdiv(N, 128))
  ...
    store out[t * 128 : +128] <- v            # N=1: the tile covers 0..127 of 1
```

## Use instead
```
    store out[t * 128 : +128] <- v, oob=skip  # or `domain N >= 1, N % 128 == 0`
```
"""

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        seen: set[tuple] = set()
        domain_words = ctx.domain.shape.describe() or "no run-time sizes"
        for av in ctx.domain.accesses():
            if av.verdict.status is not Status.VIOLATED or av.verdict.witness is None:
                continue
            key = (id(av.typed.op), av.operand.expr.loc)
            if key in seen:
                continue
            seen.add(key)
            yield self._finding(av, domain_words)

    def _finding(self, av: AccessVerdict, domain_words: str) -> Diagnostic:
        o, typed = av.operand, av.typed
        w = av.verdict.witness
        assert w is not None
        verb = _VERB[av.effect.access]
        mask = o.slot.mask_attr
        if mask is not None:
            spec = typed.prim.signature.attr(mask)
            choices = [c for c in (spec.choices if spec else ()) if c != "none"]
            how = f"mask it (`{mask}={choices[0]}`)" if choices else f"mask it with `{mask}`"
            help_ = f"{how}, guard it with `if`, or constrain the shape domain so it cannot happen"
        else:
            help_ = "keep the index inside the extent (a guard `if`, a smaller range, or a remainder)"
        return self.at(
            o.expr.loc,
            f"`{typed.op.name}` {verb} {_WHAT.get(o.kind, '')}`{text(o.expr)}` out of bounds{w.when}: {w.what}",
            label="unmasked and out of bounds" if mask is not None else "out of bounds",
            notes=(f"the run-time domain is: {domain_words}",),
            help=help_,
        )
