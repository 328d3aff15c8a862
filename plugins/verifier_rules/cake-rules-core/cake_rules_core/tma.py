"""CR118: bulk tensor copies (TMA) whose tensor map cannot be encoded, or whose shared destination is misaligned.

A bulk tensor copy is recognised by its declared effects, not its name: an operation that moves a tile
between a global tensor and a shared buffer with both accesses through the async proxy. Its tensor map
is derived as the lowering derives it (:meth:`cake_core.lower.cuda.KernelLowering.tensor_map_for`):
the shared tile, rank 1 or 2, is one or more boxes — with a swizzle, panels of the swizzle width along
the rows; rows in boxes of at most 256.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from cake_core.diagnostics.diagnostic import Diagnostic, Label
from cake_core.ir import nodes as n
from cake_core.ir.cluster import CRANK, cluster_size
from cake_core.ir.exprs import try_int
from cake_core.ir.primitive import Kind, Operand, static_shape
from cake_core.ir.printer import expr as text
from cake_core.ir.swizzle import SWIZZLE_BYTES
from cake_core.target import Feature
from cake_core.verify.verdicts import Status
from cake_core.verify.facts import OpFacts, facts
from cake_core.verify.rule import Rule, RuleContext

MAX_BOX = 256  # elements per box dimension
STRIDE_ALIGN = 16  # bytes: global strides of a tensor map
SHARED_ALIGN = 128  # bytes: the shared destination of a bulk tensor copy
WGMMA_ALIGN = 1024  # bytes: a 128B-swizzled tile read by wgmma through a descriptor
SWIZZLE_ATOM_ROWS = 8  # rows of one swizzle atom: a swizzled row slice starts on one


def tensor_copies(ctx: RuleContext) -> Iterator[tuple[OpFacts, Operand, Operand]]:
    """Every bulk tensor copy: (operation, global operand, shared operand)."""
    for of in facts(ctx.model).ops:
        g = [e.operand for e in of.effects if e.tier is Kind.GLOBAL and e.async_proxy]
        s = [e.operand for e in of.effects if e.tier is Kind.SHARED and e.async_proxy]
        if len(g) == 1 and len(s) == 1:
            yield of, g[0], s[0]


def read_by_wgmma(ctx: RuleContext, buffer: str) -> bool:
    return any(Feature.WGMMA in of.features for of, _ in facts(ctx.model).shared_accesses.get(buffer, ()))


class TmaBoxAndAlignment(Rule):
    name = "CR118"
    slug = "tma-box-and-alignment"
    summary = "a bulk tensor copy whose boxes, global strides or shared destination the tensor map cannot take"
    explanation = """
## What it does
For every bulk tensor copy (an operation moving a tile between a global tensor and a shared buffer,
both through the async proxy, such as `tma.load`), derives the tensor map as the lowering does and
checks what `cuTensorMapEncodeTiled` and the copy instruction require:
- the shared tile is a stage, or a slice of a stage's rows (`cs[s][crank * 64 : +64, :]`, as the ranks
  of a cluster split a multicast stage), in a buffer of rank 1 or 2; a slice's first row follows from
  constants and `crank`, lies on the swizzle atom (a multiple of 8 rows) in a swizzled buffer, and keeps
  the destination aligned (below) — for every rank of the cluster;
- every box dimension is at most 256 elements: an unswizzled row of at most 256 elements, rows in
  boxes of 256 (more rows must be a multiple of 256); a swizzled row is whole panels of the swizzle
  width (128 bytes = 64 bf16 for `128B`), so the inner box is never wider than the swizzle;
- the inner box is a multiple of 16 bytes;
- every global stride (the bytes between consecutive indices of each outer dimension: the product of
  the inner extents times the element size) is a multiple of 16 for **every** size in the shape domain;
- the shared destination is 128-byte aligned — 1024-byte aligned when the buffer is swizzled 128B and
  `wgmma` reads it — for every stage: the buffer's offset, its stage size and the alignment the kernel
  gives its shared-memory base.

## Why is this bad?
`cuTensorMapEncodeTiled` refuses a map with a box over 256, an inner box wider than the swizzle, or
a stride that is not a multiple of 16: the launch never happens, and only for the sizes whose rows
misalign (`K = 101` f32 elements are 404 bytes). A misaligned shared destination faults, and a
128B-swizzled tile not aligned to 1024 bytes is read back by `wgmma` with the wrong swizzle phase.

## Example
```
  smem csq: f32[S][BN]
  ...
    tma.load csq[s] <- c_sq[b, kt * BN : +BN], cfull[s]   # rows of c_sq are K x 4 bytes apart
```

## Use instead
```
  domain B >= 1, K >= 1, K % 4 == 0                      # or pad c_sq's rows to a multiple of 4
```
"""

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        seen: set[tuple] = set()
        for of, g, s in tensor_copies(ctx):
            info = ctx.model.smem.get(s.name or "")
            if info is None or not isinstance(g.decl, n.Param) or g.dtype is None:
                continue
            name = of.typed.op.name
            yield from self._tile(ctx, name, s, info)
            yield from self._box(name, s, info, g.dtype.bytes)
            key = (g.name,)
            if key not in seen:
                seen.add(key)
                yield from self._strides(ctx, name, g)
            yield from self._destination(ctx, name, s, info)

    def _tile(self, ctx: RuleContext, name: str, s: Operand, info) -> Iterator[Diagnostic]:  # noqa: ANN001
        """The lowering copies a tile to its stage's start, or to a slice of its rows (panels a stage's rows
        apart); a swizzled slice starts on the swizzle atom, for every rank of the cluster."""
        if len(info.shape) > 2:
            yield self.at(s.expr.loc, f"`{name}` copies into `{text(s.expr)}` of rank {len(info.shape)}: bulk tensor "
                          "copies fill buffers of rank 1 or 2 here", label=f"rank {len(info.shape)}",
                          secondary=(Label(info.decl.loc, f"`{info.decl.name}` declared here"),))  # fmt: skip
            return
        for d, item in enumerate(s.index):
            start = item.expr if isinstance(item, n.At) else (item.start if isinstance(item, n.Span) else None)
            if start is None or ctx.const(start) == 0:
                continue
            if d == 0 and isinstance(item, n.Span):
                yield from self._row_slice(ctx, name, s, info, item)
                continue
            yield self.at(
                item.loc if item.loc.line else s.expr.loc,
                f"`{name}` copies into `{text(s.expr)}`, which starts at `{text(start)}` inside its stage along "
                f"dimension {d + 1}: the copy lands at the start of {'the stage' if d == 0 else 'a row'}",
                label="starts inside the stage" if d == 0 else "starts inside the rows",
                secondary=(Label(info.decl.loc, f"`{info.decl.name}` declared here"),),
                help="copy whole rows of a stage (a slice of its rows, `[r0 : +R, :]`), or give each part its own "
                "buffer",
            )
            return

    def _row_slice(self, ctx: RuleContext, name: str, s: Operand, info,  # noqa: ANN001
                   item: n.Span) -> Iterator[Diagnostic]:  # fmt: skip
        """A copy into a slice of a stage's rows: its first row is known from constants and `crank` (for each
        rank of the cluster), on the swizzle atom of 8 rows, and the bytes before it keep the destination
        aligned."""
        env = dict(ctx.model.env)
        rows: list[int | None] = []
        for r in range(cluster_size(ctx.kernel, env)):
            env[CRANK] = r
            rows.append(try_int(item.start, env))
        loc = item.loc if item.loc.line else s.expr.loc
        decl = (Label(info.decl.loc, f"`{info.decl.name}` declared here"),)
        if any(v is None for v in rows):
            yield self.at(loc, f"`{name}` copies into `{text(s.expr)}`, whose first row `{text(item.start)}` does not "
                          "follow from constants and `crank`: the lowering places the copy when it compiles",
                          label="first row not known when compiled", secondary=decl,
                          help="start the slice at a constant row, or one computed from `crank`")  # fmt: skip
            return
        width = SWIZZLE_BYTES.get(info.swizzle or "", 0)
        pitch = width if width else info.row_stride * info.dtype.bytes
        need = WGMMA_ALIGN if info.swizzle == "128B" and read_by_wgmma(ctx, info.decl.name) else SHARED_ALIGN
        step = SWIZZLE_ATOM_ROWS if width else need // math.gcd(need, pitch)
        for v in rows:
            assert v is not None
            if width and v % SWIZZLE_ATOM_ROWS:
                why = f"not a multiple of the swizzle atom's {SWIZZLE_ATOM_ROWS} rows"
            elif (v * pitch) % need:
                why = f"{v * pitch} bytes into the stage, not {need}-byte aligned"
            else:
                continue
            each = f" (rank {rows.index(v)})" if len(rows) > 1 else ""
            yield self.at(loc, f"`{name}` copies into `{text(s.expr)}`, which starts at row {v}{each}: {why}",
                          label=f"starts at row {v}", secondary=decl,
                          help=f"start every slice at a multiple of {step} rows")  # fmt: skip
            return

    def _box(self, name: str, s: Operand, info, elem: int) -> Iterator[Diagnostic]:  # noqa: ANN001
        shape = static_shape(s)
        if shape is None or not shape or len(shape) > 2:
            return
        inner = shape[-1]
        rows = shape[-2] if len(shape) == 2 else 1
        swz = info.swizzle
        if swz is not None:
            width = SWIZZLE_BYTES[swz]
            if (inner * elem) % width:
                yield self.at(
                    s.expr.loc,
                    f"`{name}` copies rows of {inner * elem} bytes into {swz}-swizzled `{info.decl.name}`: a swizzled "
                    f"box is one {width}-byte panel wide, and the rows are not whole panels",
                    label=f"rows of {inner * elem} bytes",
                    help=f"make the rows a multiple of {width // math.gcd(width, elem)} elements, or drop the swizzle",
                )
        else:
            if inner > MAX_BOX:
                yield self.at(
                    s.expr.loc,
                    f"`{name}` copies rows of {inner} elements into unswizzled `{info.decl.name}`: a box dimension "
                    f"is at most {MAX_BOX} elements",
                    label=f"{inner} elements",
                    help="swizzle the buffer (the row is then split into panels), or copy narrower tiles",
                )
            if (inner * elem) % 16:
                yield self.at(
                    s.expr.loc,
                    f"`{name}` copies rows of {inner * elem} bytes: the inner box of a tensor map is a multiple of "
                    "16 bytes",
                    label=f"rows of {inner * elem} bytes",
                    help=f"make the rows a multiple of {16 // math.gcd(16, elem)} elements",
                )
        if rows > MAX_BOX and rows % MAX_BOX:
            yield self.at(
                s.expr.loc,
                f"`{name}` copies {rows} rows: more than {MAX_BOX} rows are copied in boxes of {MAX_BOX}, so they must "
                f"be a multiple of {MAX_BOX}",
                label=f"{rows} rows",
                help=f"copy at most {MAX_BOX} rows, or a multiple of {MAX_BOX}",
            )

    def _strides(self, ctx: RuleContext, name: str, g: Operand) -> Iterator[Diagnostic]:
        p = g.decl
        assert isinstance(p, n.Param) and g.dtype is not None
        elem = g.dtype.bytes
        for d in range(len(p.shape) - 1):
            inner = p.shape[d + 1 :]
            expr: n.Expr = inner[0]
            for e in inner[1:]:
                expr = n.Bin("*", expr, e)
            v = ctx.domain.multiple_of(None, expr, elem, STRIDE_ALIGN, "the stride in bytes is")
            if v.status is not Status.VIOLATED or v.witness is None:
                continue
            words = " x ".join(f"`{text(e)}`" for e in inner)
            hint = ""
            if len(inner) == 1 and isinstance(inner[0], n.Name):
                hint = f"add `{inner[0].id} % {STRIDE_ALIGN // math.gcd(STRIDE_ALIGN, elem)} == 0` to the domain, or "
            yield self.at(
                g.expr.loc,
                f"`{name}` reads `{p.name}` through a tensor map, whose stride over dimension {d + 1} ({words} x {elem} "
                f"bytes) is not a multiple of {STRIDE_ALIGN}{v.witness.when}",
                label="stride not a multiple of 16 bytes",
                secondary=(Label(p.loc, f"`{p.name}` declared here"),),
                notes=("`cuTensorMapEncodeTiled` takes global strides that are multiples of 16 bytes; the copy "
                       "cannot be launched at these sizes",),  # fmt: skip
                help=f"{hint}pad the tensor's rows to a multiple of 16 bytes",
            )
            return

    def _destination(self, ctx: RuleContext, name: str, s: Operand, info) -> Iterator[Diagnostic]:  # noqa: ANN001
        need = WGMMA_ALIGN if info.swizzle == "128B" and read_by_wgmma(ctx, info.decl.name) else SHARED_ALIGN
        base = ctx.model.smem_align
        problems = []
        if base % need:
            problems.append(f"the shared-memory base is aligned to {base} bytes only")
        if info.offset % need:
            problems.append(f"`{info.decl.name}` starts at byte {info.offset}")
        if info.stages is not None and info.stages > 1 and info.stage_bytes % need:
            problems.append(f"its stages are {info.stage_bytes} bytes apart")
        if not problems:
            return
        why = " (128B-swizzled and read by `wgmma`)" if need == WGMMA_ALIGN else ""
        yield self.at(
            s.expr.loc,
            f"`{name}` copies into `{text(s.expr)}`, which must be {need}-byte aligned{why}, but "
            + " and ".join(problems),
            label=f"not {need}-byte aligned",
            secondary=(Label(info.decl.loc, f"offset {info.offset}, {info.stage_bytes} bytes a stage"),),
            help=f"declare `{info.decl.name}` with `align {need}` and stages a multiple of {need} bytes",
        )


def _whole(ctx: RuleContext, item: n.Idx, extent: int) -> bool:
    """Whether one index of a shared operand covers the whole extent."""
    if isinstance(item, n.All):
        return True
    if isinstance(item, n.Span):
        return ctx.const(item.start) == 0 and ctx.const(item.size) == extent
    return False

