"""CR119, CR120: warpgroup MMA operands, and shared layouts their readers cannot read.

``wgmma`` reads its shared operands through descriptors: K-major tiles in 128-byte swizzle panels,
eight rows (1024 bytes) per core-matrix group. The lowering (:mod:`cake_core.primitives.hopper`)
builds those descriptors from the operand's buffer, its first row and the k-step — so what it can
express is exactly what these rules accept. Operations are found by their features and effects (an
operation that needs the `wgmma` feature; accesses through the async proxy or not), so primitives from
plugins are covered; the shape checks apply to operations with the core's operand names (`acc`, `a`,
`b`).
"""

from __future__ import annotations

from collections.abc import Iterator

from cake_core.diagnostics.diagnostic import Diagnostic, Label
from cake_core.ir import nodes as n
from cake_core.ir.exprs import try_int
from cake_core.ir.primitive import Access, Kind, Operand, static_shape
from cake_core.ir.printer import expr as text
from cake_core.target import Feature
from cake_core.verify.verdicts import Status
from cake_core.verify.facts import OpFacts, facts, swizzle_aware
from cake_core.verify.rule import Rule, RuleContext

M_STEP, N_STEP, N_MAX, K_STEP = 64, 8, 256, 16
CORE_ROWS = 8  # rows of one core-matrix group (1024 bytes in 128B swizzle)
WGMMA_SWIZZLE = "128B"


def _wgmma_ops(ctx: RuleContext) -> Iterator[OpFacts]:
    for of in facts(ctx.model).ops:
        if Feature.WGMMA in of.features:
            yield of


def _shared_reads(of: OpFacts) -> list[Operand]:
    return [e.operand for e in of.effects if e.tier is Kind.SHARED and e.async_proxy and e.access is not Access.NONE]


# ---------------------------------------------------------------------------------------------------
# CR119
# ---------------------------------------------------------------------------------------------------


class WgmmaShapeAndOperands(Rule):
    name = "CR119"
    slug = "wgmma-shape-and-operands"
    summary = "a wgmma that is not m64nNk16, not issued by one warpgroup, or whose operands the descriptors cannot address"
    explanation = """
## What it does
Checks every warpgroup MMA (an operation that needs the `wgmma` feature) as the lowering will issue it:
- the role instance issuing it is exactly one warpgroup (`per 4`);
- `acc (+)= a @ b^T` is a whole number of `m64nNk16` instructions: M (rows of `a` and `acc`) a multiple
  of 64, N (rows of `b`, columns of `acc`) a multiple of 8 from 8 to 256, K a multiple of 16;
- `acc` is a whole register tile (the instructions write all of its fragment);
- `a` and `b` are K-major in shared memory: `a` is not transposed (`b` is written `b^T`), and their
  slices start at column 0 (the descriptors walk K from the tile's first panel) and at a row that is
  a multiple of 8 (a core-matrix group) for every value of the variables it depends on.
Element types (bf16 or f16 into f32) are the type checker's.

## Why is this bad?
There is no instruction for other shapes; a warpgroup MMA issued by fewer or more warps than one
warpgroup is undefined; a descriptor cannot start inside a core-matrix group, and a slice the lowering
cannot express is silently read from the wrong place.

## Example
```
  role consumers warps 4..12 per 4:
    reg acc: f32[64, 128] layout wgmma_acc
    ...
      wgmma acc <- xs[self * 60 : +64, :], cs[s][:, 64 : +64]^T     # row 60; k from column 64
```

## Use instead
```
      wgmma acc <- xs[self * 64 : +64, :], cs[s]^T
```
"""

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        for of in _wgmma_ops(ctx):
            typed = of.typed
            role = of.role
            if role.per != 4:
                yield self.at(
                    typed.op.loc,
                    f"`{typed.op.name}` is issued by one warpgroup (4 warps), but role `{role.role.name}` runs it in "
                    f"instances of {role.per} warp(s)",
                    label=f"instances of {role.per} warps",
                    secondary=(Label(role.role.loc, f"role `{role.role.name}`"),),
                    help="split the role into warpgroups: `per 4`",
                )
            if not (typed.has("acc") and typed.has("a") and typed.has("b")):
                continue
            acc, a, b = typed.operand("acc"), typed.operand("a"), typed.operand("b")
            yield from self._shape(typed.op, acc, a, b)
            if acc.index:
                yield self.at(acc.expr.loc, f"`{typed.op.name}` writes its whole accumulator: `{text(acc.expr)}` is a "
                              "slice, which the instructions cannot address", label="a slice of the accumulator",
                              help=f"declare an accumulator of the slice's shape, or write `{acc.name}`")  # fmt: skip
            if a.transpose:
                yield self.at(a.expr.loc, f"`{typed.op.name}` reads `a` K-major, as stored: `{text(a.expr)}` asks for "
                              "its transpose", label="transposed", help=f"write `{a.name}`, stored [M, K]")  # fmt: skip
            for o in (a, b):
                yield from self._placement(ctx, of, o)

    def _shape(self, op: n.Op, acc: Operand, a: Operand, b: Operand) -> Iterator[Diagnostic]:
        sa, sb = static_shape(a), static_shape(b)
        if sa is None or sb is None or len(sa) != 2 or len(sb) != 2:
            return
        m, k = sa
        nn = sb[0]
        problems = []
        if m % M_STEP:
            problems.append(f"M = {m} is not a multiple of {M_STEP}")
        if nn % N_STEP or not N_STEP <= nn <= N_MAX:
            problems.append(f"N = {nn} is not a multiple of {N_STEP} from {N_STEP} to {N_MAX}")
        if k % K_STEP:
            problems.append(f"K = {k} is not a multiple of {K_STEP}")
        if problems:
            yield self.at(op.loc, f"`{op.name}` of [{m}, {k}] by [{nn}, {k}]^T is not whole m64nNk16 instructions: "
                          + "; ".join(problems), label=f"m{m}n{nn}k{k}",
                          help="tile M by 64, N by multiples of 8 up to 256, K by 16")  # fmt: skip

    def _placement(self, ctx: RuleContext, of: OpFacts, o: Operand) -> Iterator[Diagnostic]:
        info = ctx.model.smem.get(o.name or "")
        if info is None or len(info.shape) != 2:
            return
        rows = o.index[0] if o.index else None
        cols = o.index[1] if len(o.index) > 1 else None
        if isinstance(cols, n.Span) and ctx.const(cols.start) != 0 or isinstance(cols, n.At):
            yield self.at(
                cols.loc if cols.loc.line else o.expr.loc,
                f"`{of.typed.op.name}` reads `{text(o.expr)}` from a column other than 0: its descriptors walk K from "
                "the first panel of the tile",
                label="k slice not at column 0",
                help="keep the k extent whole (`:`), or start it at 0 and issue one operation per k range of its own "
                "buffer",
            )
        start = rows.start if isinstance(rows, n.Span) else (rows.expr if isinstance(rows, n.At) else None)
        if start is None:
            return
        decided, bad = _instance_witness(ctx, of, start)
        if not decided:
            v = ctx.domain.multiple_of(of.typed, start, 1, CORE_ROWS, "the first row is")
            if v.status is Status.VIOLATED and v.witness is not None:
                bad = (v.witness.when, v.witness.what)
        if bad is not None:
            when, what = bad
            yield self.at(
                rows.loc if rows is not None and rows.loc.line else o.expr.loc,
                f"`{of.typed.op.name}` reads `{text(o.expr)}` from row `{text(start)}`, which is not a multiple of "
                f"{CORE_ROWS}{when}: a descriptor starts at a core-matrix group of {CORE_ROWS} rows",
                label=what,
                help=f"start the rows at a multiple of {CORE_ROWS}",
            )


def _instance_witness(ctx: RuleContext, of: OpFacts, start: n.Expr) -> tuple[bool, tuple[str, str] | None]:
    """Decides a row start that depends on nothing but compile-time values and ``self`` by trying every
    instance: ``(True, None)`` when every row is a multiple of :data:`CORE_ROWS`, ``(True, (when,
    what))`` for the first that is not; ``(False, None)`` when the start depends on other variables (the
    shape domain decides those)."""
    env = dict(ctx.model.env)
    names = {x.id for x in n.walk_expr(start) if isinstance(x, n.Name)}
    if not names <= set(env) | {"self"}:
        return False, None
    for i in range(of.role.instances):
        env["self"] = i
        v = try_int(start, env)
        if v is None:
            return False, None
        if v % CORE_ROWS:
            return True, (f" (at self={i})" if "self" in names else "", f"the first row is {v}")
    return True, None


# ---------------------------------------------------------------------------------------------------
# CR120
# ---------------------------------------------------------------------------------------------------


class SwizzleMismatch(Rule):
    name = "CR120"
    slug = "swizzle-mismatch"
    summary = "a shared buffer whose swizzle or padding is not the layout one of its readers or writers assumes"
    explanation = """
## What it does
A shared buffer has one layout — its rows, padding and swizzle — and every operation that touches it
must address it that way:
- `wgmma` (any operation needing the `wgmma` feature) reads its shared operands through descriptors
  of K-major, 128B-swizzled tiles: such a buffer is declared `swizzle 128B`;
- operations that access shared memory through the generic proxy (stores, loads, reductions — any
  effect without `async_proxy`) compute plain row-major addresses: they cannot read or write a swizzled
  buffer, unless their primitive declares `swizzle_aware = True` (`cp.async` and `ldmatrix` do: their
  lowering puts and finds each 16-byte chunk where the swizzle does);
- a swizzled buffer has no padding: TMA and `wgmma` address it as dense 8-row panels;
- an async-proxy write (a TMA copy) lands dense rows: its destination has no padding either.

## Why is this bad?
TMA writes a tile with one swizzle; a reader expecting another (or none) permutes every 16-byte chunk
of every row: the numbers are all there, in the wrong places, and nothing faults. Padding shifts every
row out of the panel the swizzle assumes.

## Example
```
  smem cs: bf16[3][128, 64] swizzle 64B
  ...
      wgmma acc <- xs, cs[s]^T                  # descriptors assume 128B panels
```

## Use instead
```
  smem cs: bf16[3][128, 64] swizzle 128B
```
"""

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        m = ctx.model
        kf = facts(m)
        for name, info in m.smem.items():
            if info.swizzle is not None and info.row_stride != info.shape[-1]:
                pad = info.row_stride - info.shape[-1]
                yield self.at(
                    info.decl.pad.loc if info.decl.pad is not None and info.decl.pad.loc.line else info.decl.loc,
                    f"`{name}` is {info.swizzle}-swizzled and padded by {pad} element(s) a row: a swizzled buffer is "
                    "addressed as dense panels",
                    label=f"pad {pad}", help="drop the padding: the swizzle already spreads the rows over the banks",
                )  # fmt: skip
        seen: set[tuple] = set()
        for name, accesses in kf.shared_accesses.items():
            info = m.smem.get(name)
            if info is None:
                continue
            for of, e in accesses:
                key = (id(of.typed.op), e.operand.slot.name)
                if key in seen:
                    continue
                seen.add(key)
                o = e.operand
                if Feature.WGMMA in of.features and e.async_proxy and info.swizzle != WGMMA_SWIZZLE:
                    have = f"{info.swizzle}-swizzled" if info.swizzle else "not swizzled"
                    yield self.at(
                        o.expr.loc,
                        f"`{of.typed.op.name}` reads `{text(o.expr)}` as K-major 128B-swizzled panels, but `{name}` is "
                        f"{have}",
                        label=f"`{name}` is {have}",
                        secondary=(Label(info.decl.loc, f"`{name}` declared here"),),
                        help=f"declare `{name}` with `swizzle 128B` (its writers then store it so)",
                    )
                elif (e.async_proxy and e.access is Access.WRITE and info.swizzle is None
                      and info.row_stride != info.shape[-1]):  # fmt: skip
                    pad = info.row_stride - info.shape[-1]
                    yield self.at(
                        o.expr.loc,
                        f"`{of.typed.op.name}` writes `{text(o.expr)}` as dense rows through the async proxy, but "
                        f"`{name}` pads each row by {pad} element(s)",
                        label="writes dense rows",
                        secondary=(Label(info.decl.loc, f"`{name}` declared with `pad {pad}`"),),
                        help=f"drop the padding of `{name}` (a swizzle spreads TMA-written rows over the banks)",
                    )
                elif not e.async_proxy and info.swizzle is not None and not swizzle_aware(of.prim):
                    verb = "writes" if e.access is Access.WRITE else ("updates" if e.access is Access.READWRITE
                                                                       else "reads")  # fmt: skip
                    yield self.at(
                        o.expr.loc,
                        f"`{of.typed.op.name}` {verb} `{text(o.expr)}` as plain rows, but `{name}` is stored "
                        f"{info.swizzle}-swizzled: its 16-byte chunks are permuted within each row",
                        label="assumes no swizzle",
                        secondary=(Label(info.decl.loc, f"`{name}` declared `swizzle {info.swizzle}`"),),
                        help=f"give `{of.typed.op.name}` an unswizzled buffer of its own, or access `{name}` only "
                        "through TMA and wgmma",
                    )
