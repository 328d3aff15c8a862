"""CR105, CR106: vector accesses whose widths the tiles they touch cannot honour.

A vector access moves ``width`` bytes from one address that must be a multiple of ``width``. For a
tile access that means: the tile's rows are a whole number of accesses; consecutive rows of the
tensor or buffer start ``width``-aligned (the row pitch is a multiple of ``width``); and the first
column the tile starts at is ``width``-aligned. Global tensors are assumed to start 256-byte aligned
(what the allocator gives); shared buffers start at least 16-byte aligned (the type checker lays
them out so). Run-time sizes enter through the row pitch and the start column, so those are decided
over the whole shape domain by :class:`cake_core.verify.domain.KernelDomain`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from cake_core.diagnostics.diagnostic import Diagnostic, Label
from cake_core.ir import nodes as n
from cake_core.location import Loc
from cake_core.ir.primitive import Kind, Operand
from cake_core.ir.printer import expr as text
from cake_core.ir.model import TypedOpImpl
from cake_core.verify.verdicts import Status
from cake_core.verify.rule import Rule, RuleContext

CP_ASYNC_SIZES = (4, 8, 16)
VECTOR_SIZES = (1, 2, 4, 8, 16)

#: Vector widths of core primitives that do not write them as a ``bytes`` attribute, per operand slot:
#: ``ldmatrix`` reads each 8x8 matrix row (16 bytes) from one 16-byte-aligned shared address.
KNOWN_WIDTHS: dict[str, dict[str, int]] = {"ldmatrix": {"src": 16}, "stmatrix": {"dst": 16}}


def tile_alignment(
    rule: Rule, ctx: RuleContext, typed: TypedOpImpl, o: Operand, width: int, what: str, *, inner: bool = True
) -> Iterator[Diagnostic]:
    """Findings for one tile operand accessed ``width`` bytes at a time."""
    if o.dtype is None or o.name is None:
        return
    e = o.dtype.bytes
    ref = text(o.expr)
    last = o.shape[-1] if o.shape else None
    if inner and isinstance(last, int) and (last * e) % width:
        yield rule.at(
            o.expr.loc,
            f"{what} moves {width} bytes at a time, but the rows of `{ref}` are {last * e} bytes "
            f"({last} x {o.dtype})",
            label=f"rows of {last * e} bytes",
            help=f"make the tile's innermost extent a multiple of {_elements(width, e)} elements",
        )
    start = _inner_start(o, len(_extents(ctx, o)))
    if o.kind is Kind.GLOBAL and isinstance(o.decl, n.Param):
        shape = o.decl.shape
        if len(shape) >= 2:
            v = ctx.domain.multiple_of(None, shape[-1], e, width, "row pitch in bytes:")
            if v.status is Status.VIOLATED and v.witness is not None:
                hint = ""
                if isinstance(shape[-1], n.Name):
                    hint = f"add `{shape[-1].id} % {_elements(width, e)} == 0` to the domain, or "
                yield rule.at(
                    o.expr.loc,
                    f"{what} moves {width} bytes at a time, but rows of `{o.name}` are `{text(shape[-1])}` x {e} "
                    f"bytes apart, not a multiple of {width}{v.witness.when}",
                    label="rows not aligned",
                    secondary=(Label(o.decl.loc, f"`{o.name}` declared here"),),
                    help=f"{hint}use narrower accesses",
                )  # fmt: skip
    elif o.kind is Kind.SHARED and o.name in ctx.model.smem:
        info = ctx.model.smem[o.name]
        pitch = info.row_stride * e
        if len(info.shape) >= 2 and pitch % width:
            pad = info.row_stride - info.shape[-1]
            yield rule.at(
                o.expr.loc,
                f"{what} moves {width} bytes at a time, but rows of shared buffer `{o.name}` are {pitch} bytes "
                f"apart, not a multiple of {width}",
                label="rows not aligned",
                secondary=(Label(info.decl.loc, f"rows of {info.shape[-1]} + pad {pad} = {info.row_stride} "
                                 f"elements ({pitch} bytes)"),),
                help=f"pad rows to a multiple of {_elements(width, e)} elements",
            )  # fmt: skip
        elif info.stages and info.stage_bytes % width:
            yield rule.at(
                o.expr.loc,
                f"{what} moves {width} bytes at a time, but the stages of shared buffer `{o.name}` are "
                f"{info.stage_bytes} bytes apart, not a multiple of {width}",
                label="stages not aligned",
                secondary=(Label(info.decl.loc, f"stages of {info.stage_bytes} bytes"),),
            )
    else:
        return
    if start is not None:
        expr, loc = start
        v = ctx.domain.multiple_of(typed, expr, e, width, "starts at byte")
        if v.status is Status.VIOLATED and v.witness is not None:
            yield rule.at(
                loc,
                f"{what} moves {width} bytes at a time, but `{ref}` starts at column `{text(expr)}`, which is "
                f"not {width}-byte aligned{v.witness.when}",
                label=v.witness.what,
                help=f"start the tile at a multiple of {_elements(width, e)} elements",
            )


def _elements(width: int, elem_bytes: int) -> int:
    return width // math.gcd(width, elem_bytes)


def _extents(ctx: RuleContext, o: Operand) -> tuple:
    if o.kind is Kind.GLOBAL and isinstance(o.decl, n.Param):
        return o.decl.shape
    if o.kind is Kind.SHARED and o.name in ctx.model.smem:
        return ctx.model.smem[o.name].shape
    return ()


def _inner_start(o: Operand, rank: int) -> tuple[n.Expr, Loc] | None:
    """The expression the innermost dimension starts at, if the access indexes it."""
    if rank == 0 or len(o.index) < rank:
        return None
    item = o.index[rank - 1]
    if isinstance(item, n.Span):
        return item.start, item.loc
    if isinstance(item, n.At):
        return item.expr, item.loc
    return None


# ---------------------------------------------------------------------------------------------------
# CR105
# ---------------------------------------------------------------------------------------------------


class CpAsyncSizeAlignment(Rule):
    name = "CR105"
    slug = "cp-async-size-alignment"
    summary = "a cp.async whose copy size, tile rows, row pitches or start are not aligned to it"
    explanation = """
## What it does
Checks every `cp.async`:
- its `bytes` (per thread per copy) is 4, 8 or 16;
- the rows of the copied tile (its innermost extent times the element size) are a multiple of it;
- the global tensor's row pitch (its innermost size times the element size) is a multiple of it for
  **every** size in the shape domain — a run-time innermost size needs a divisibility clause;
- the shared buffer's row pitch, padding included, and its stage size are multiples of it;
- the first column of the global and of the shared tile is aligned to it, for every value of the
  loop and grid variables it depends on.

## Why is this bad?
`cp.async.ca/cg.shared.global` with 4, 8 or 16 bytes is all the hardware has, and both addresses
must be aligned to the copy size. A misaligned copy is a misaligned-address fault at run time — only
for the sizes that misalign, which is why the whole domain is checked and not the sizes a test ran.

## Example
```
kernel k(x: global bf16[N, K], out: global f32[N])
  domain N >= 1, K >= 64
  smem xs: bf16[64, 64] pad 4                         # rows of 136 bytes
  ...
    cp.async xs <- x[t * 64 : +64, 0 : +64], oob=zero # K=65 gives rows of 130 bytes
```

## Use instead
```
  domain N >= 1, K >= 64, K % 8 == 0
  smem xs: bf16[64, 64] pad 8                         # rows of 144 bytes
```
"""

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        for typed in ctx.ops():
            if typed.prim.name != "cp.async":
                continue
            width, loc = ctx.attr_const(typed, "bytes")
            if width is None:
                continue
            if width not in CP_ASYNC_SIZES:
                yield self.at(
                    loc, f"`cp.async` copies 4, 8 or 16 bytes per thread, not {width}", label=f"{width} bytes",
                    help="write `bytes=16` (or 8, or 4 for 4-byte-aligned data)",
                )  # fmt: skip
                continue
            tiles = [eff.operand for eff in ctx.effects(typed) if eff.operand.kind in (Kind.GLOBAL, Kind.SHARED)]
            for i, o in enumerate(sorted(tiles, key=lambda o: o.kind is not Kind.GLOBAL)):
                yield from tile_alignment(self, ctx, typed, o, width, f"`cp.async` with `bytes={width}`", inner=i == 0)


# ---------------------------------------------------------------------------------------------------
# CR106
# ---------------------------------------------------------------------------------------------------


class VectorAccessAlignment(Rule):
    name = "CR106"
    slug = "vector-access-alignment"
    summary = "a vectorized tile access whose width the tile's rows, pitch or start cannot honour"
    explanation = """
## What it does
Checks vectorized tile accesses other than `cp.async` (which CR105 checks): any operation whose
primitive takes a compile-time `bytes` attribute (the width of each access; a run-time `bytes`, such as
an expect-tx byte count, is not a width), any primitive that declares widths
through a `vector_bytes(op)` method (slot name to bytes), and the core's `ldmatrix`, which reads each
8x8 matrix row (16 bytes) from one 16-byte-aligned shared address. For every global or shared tile
such an operation touches: the width is 1, 2, 4, 8 or 16 bytes; the tile's rows are a whole number
of accesses; the row pitch (with padding, for shared buffers; for every size in the shape domain, for
global tensors) is a multiple of the width; and the tile's first column is aligned to it for every
value of the variables it depends on.

## Why is this bad?
A vector load or store from an address that is not a multiple of its width faults
(misaligned address), and `ldmatrix` with a misaligned row address reads the wrong data or faults.
Padding chosen to avoid bank conflicts is the usual culprit: 4 bf16 of padding misaligns every other
row.

## Example
```
  smem cs: bf16[3][128, 32] pad 4                     # rows of 72 bytes
  ...
    ldmatrix bt <- cs[s][:, kk * 16 : +16]            # 16-byte rows at 72-byte pitch
```

## Use instead
```
  smem cs: bf16[3][128, 32] pad 8                     # rows of 80 bytes
```
"""

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        for typed in ctx.ops():
            if typed.prim.name == "cp.async":
                continue
            for slot, width, loc in _widths(ctx, typed):
                if width is None:
                    continue
                if width not in VECTOR_SIZES:
                    yield self.at(loc, f"`{typed.op.name}` accesses {width} bytes at a time; vector accesses are "
                                  f"1, 2, 4, 8 or 16 bytes", label=f"{width} bytes")  # fmt: skip
                    break
                if not typed.has(slot):
                    continue
                o = typed.operand(slot)
                if o.kind in (Kind.GLOBAL, Kind.SHARED):
                    yield from tile_alignment(self, ctx, typed, o, width, f"`{typed.op.name}`")


def _widths(ctx: RuleContext, typed: TypedOpImpl) -> list[tuple[str, int | None, Loc]]:
    declared = getattr(typed.prim, "vector_bytes", None)
    if callable(declared):
        return [(slot, w, typed.op.loc) for slot, w in declared(typed).items()]
    spec = typed.prim.signature.attr("bytes")
    if spec is not None and spec.kind == "const":
        width, loc = ctx.attr_const(typed, "bytes")
        return [(o.slot.name, width, loc) for o in typed.outs + typed.ins if o.kind in (Kind.GLOBAL, Kind.SHARED)]
    return [(slot, w, typed.op.loc) for slot, w in KNOWN_WIDTHS.get(typed.prim.name, {}).items()]
