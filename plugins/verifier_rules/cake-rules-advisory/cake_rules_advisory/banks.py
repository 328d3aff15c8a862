"""CA101: shared-memory rows whose pitch puts a column of them in one bank."""

from __future__ import annotations

from collections.abc import Iterator

from cake_core.diagnostics.diagnostic import Diagnostic, Label, Severity
from cake_core.ir import nodes as n
from cake_core.ir.primitive import Access, Operand
from cake_core.ir.printer import expr as text
from cake_core.verify.facts import facts
from cake_core.verify.rule import Rule, RuleContext

BANK_CYCLE = 128  # bytes: 32 banks of 4 bytes; addresses this far apart share a bank


def rows_touched(ctx: RuleContext, o: Operand, extent: int) -> int | None:
    """How many rows of its buffer an access spans (the index of the row dimension), if known."""
    info = ctx.model.smem[o.name]  # type: ignore[index]
    d = len(info.shape) - 2
    item = o.index[d] if d < len(o.index) else n.All()
    if isinstance(item, n.At):
        return 1
    if isinstance(item, n.Span):
        return ctx.const(item.size)
    return extent


class BankConflict(Rule):
    name = "CA101"
    slug = "bank-conflict"
    severity = Severity.WARNING
    summary = "shared rows a multiple of 128 bytes apart, read or written across rows, without padding or swizzle"
    explanation = """
## What it does
Finds synchronous generic-proxy accesses to shared memory (`ldmatrix`, loads and stores a role's
threads issue row by row — any declared effect that is neither asynchronous nor through the async
proxy) that span several rows of an unswizzled buffer whose row pitch, padding included, is a
multiple of 128 bytes. Asynchronous copies (`cp.async`, TMA), which move whole rows, and accesses
through the async proxy (`wgmma`), which read swizzled panels, are left out.

## Why is this bad?
Shared memory has 32 banks of 4 bytes: two addresses 128 bytes apart are in the same bank. When the
threads of a warp touch the same column of consecutive rows — `ldmatrix` reads 8 rows of 16 bytes
per matrix, a `rows` layout gives each thread a row — rows 128 bytes apart serialize into as many
transactions as rows (an 8-way conflict for `ldmatrix`), several times the shared-memory time.

## Example
```
  smem cs: bf16[3][128, 64]                 # rows of 128 bytes
  ...
      ldmatrix bt <- cs[s][:, kk * 16 : +16]
```

## Use instead
```
  smem cs: bf16[3][128, 64] pad 8           # rows of 144 bytes: eight rows hit eight bank groups
```
"""

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        seen: set[tuple] = set()
        for name, accesses in facts(ctx.model).shared_accesses.items():
            info = ctx.model.smem.get(name)
            if info is None or info.swizzle is not None or len(info.shape) < 2:
                continue
            pitch = info.row_stride * info.dtype.bytes
            if pitch % BANK_CYCLE:
                continue
            for of, e in accesses:
                if e.asynchronous or e.async_proxy or e.access is Access.NONE:
                    continue
                o = e.operand
                rows = rows_touched(ctx, o, info.shape[-2])
                key = (id(of.typed.op), o.slot.name)
                if rows is None or rows < 2 or key in seen:
                    continue
                seen.add(key)
                pad = -(-16 // info.dtype.bytes)
                verb = "reads" if e.access is Access.READ else "writes"
                yield self.at(
                    o.expr.loc,
                    f"`{of.typed.op.name}` {verb} {rows} rows of `{text(o.expr)}` whose starts are {pitch} bytes apart: "
                    f"the same column of every row is in one shared-memory bank",
                    label=f"rows {pitch} bytes apart",
                    secondary=(Label(info.decl.loc, f"`{name}`: rows of {info.shape[-1]} x {info.dtype} "
                                     f"+ pad {info.row_stride - info.shape[-1]}"),),
                    notes=("32 banks of 4 bytes: addresses 128 bytes apart share a bank, so a warp touching one "
                           "column of several rows waits for as many transactions as rows",),
                    help=f"pad each row by {pad} elements (`pad {pad}`, 16 bytes), or swizzle the buffer",
                )  # fmt: skip
