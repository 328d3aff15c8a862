"""CR128: min-reductions (argmin, top-k) over tile columns that may be the zero-filled padding of a
load past its tensor's extent, with no limit or mask to exclude them."""

from __future__ import annotations

from collections.abc import Iterator

import attrs

from cake_core.diagnostics.diagnostic import Diagnostic, Label
from cake_core.ir import nodes as n
from cake_core.ir.model import KernelModel
from cake_core.ir.primitive import Access, Effect, Kind, Operand
from cake_core.ir.printer import expr as text
from cake_core.verify.facts import OpFacts, facts
from cake_core.verify.rule import Rule, RuleContext
from cake_core.verify.verdicts import Status, Witness

_READS = (Access.READ, Access.READWRITE)
_WRITES = (Access.WRITE, Access.READWRITE)
_TILES = (Kind.SHARED, Kind.REGISTERS)


@attrs.frozen
class Padding:
    """A zero-filling load of a global tile: the operation, its global read and the sliced dimension
    whose span may run past the tensor's extent."""

    of: OpFacts
    effect: Effect
    dim: int  # the global tensor's dimension
    span: n.Span


class PaddedReduction(Rule):
    name = "CR128"
    slug = "padded-reduction"
    summary = "an argmin or top-k over tile columns that may be zero-filled padding past the tensor's extent"
    explanation = """
## What it does
Finds loads that fill a tile with zeros where it runs past its global tensor — `oob=zero` on a load
or `cp.async`, and every `tma.load`, whose hardware zero-fills out-of-bounds elements — and follows
each sliced dimension of the loaded tile through the kernel's data flow: copies between shared
memory and registers (`ldmatrix`, `store`) keep a dimension where the extents agree, and a
tensor-core product `acc <- a, b^T` (`mma.sync`, `wgmma`) turns the rows of `a` into the rows of
`acc` and the rows of `b` into its columns (the summed K dimension carries no padding: zeros add
nothing). A min-reduction over the columns of a tile (`argmin.update`, `topk.update`, any primitive
with a `tile` operand and a `limit` attribute) whose columns, or whose `bias`, may hold such padding
must exclude them: with `limit=` (columns with `base + j >= limit` are skipped) or with a global
`bias` masked by `oob=skip`.

Whether a load's span can run past the extent is decided over the whole shape domain
(`cake_core.verify.domain`): a finding names the sizes of a witness (`K=1`); a span proved inside
the extent for every size is no padding. Sums over padded elements (`rowdot`, `sumsq`) are exact —
zero is the identity of addition — and are not reported.

What it does not see: the data flow is per kernel and flow-insensitive (a tile that ever holds
padding is taken to hold it everywhere), any `limit=` counts as excluding the padding whatever its
value, and a global `bias` masked by `oob=skip` is taken to cover the tile's columns. A padding that
is neither proved nor broken by the witness search is not reported.

## Why is this bad?
A padded column scores `bias + scale * 0`: for nearest-centroid search that is a distance of
`||c||^2` of a centroid that does not exist, usually 0, which beats every real one. The answer is
an index past the end — only for sizes that are not a multiple of the tile, which tests at round
sizes never see.

## Example
```
      tma.load cs[s] <- c[b, kt * BN : +BN, :]            # K % BN != 0: rows past K are zeros
      ...
      wgmma acc <- xs[xb], cs[s]^T, accumulate=0
      argmin.update bv, bi <- acc, csq[s], base=kt * BN, scale=-2.0
```

## Use instead
```
      argmin.update bv, bi <- acc, csq[s], base=kt * BN, scale=-2.0, limit=K
```
"""

    def check(self, ctx: RuleContext) -> Iterator[Diagnostic]:
        kf = facts(ctx.model)
        taint = padded_dims(ctx.model, kf.ops)
        if not taint:
            return
        decided: dict[int, Witness | None] = {}
        for of in kf.ops:
            typed = of.typed
            if typed.prim.signature.attr("limit") is None or not typed.has("tile") or typed.attr("limit") is not None:
                continue
            tile = typed.operand("tile")
            sources = list(_sources(ctx.model, tile, 1, taint))
            if typed.has("bias"):
                bias = next(e for e in of.effects if e.operand.slot.name == "bias")
                if bias.tier is Kind.GLOBAL and bias.masked:
                    continue  # columns whose bias is out of bounds are skipped
                sources += _sources(ctx.model, bias.operand, len(bias.operand.shape) - 1, taint)
            for pad in sources:
                if id(pad) not in decided:
                    decided[id(pad)] = _witness(ctx, pad)
                w = decided[id(pad)]
                if w is not None:
                    yield self._finding(of, tile, pad, w)
                    break

    def _finding(self, of: OpFacts, tile: Operand, pad: Padding, w: Witness) -> Diagnostic:
        load, src = pad.of.typed.op, pad.effect.operand
        ext = src.decl.shape[pad.dim] if isinstance(src.decl, n.Param) else None
        ext_words = f"`{text(ext)}`" if ext is not None else "its extent"
        return self.at(
            tile.expr.loc,
            f"`{of.typed.op.name}` reduces over the columns of `{text(tile.expr)}`, which may be the zero-filled "
            f"padding of `{load.name} {text(src.expr)}` past {ext_words}{w.when}: {w.what}; with no `limit` the "
            "padded columns can win",
            label="reduces over padding",
            secondary=(Label(load.loc, f"`{load.name}` zero-fills what lies past {ext_words}"),),
            notes=("a padded column scores `bias + scale * 0`: an element that does not exist takes part in the "
                   "reduction",),  # fmt: skip
            help=(f"skip the padded columns with `limit=` (e.g. `limit={text(ext)}` when the columns index that "
                  "dimension) or mask a global bias with `oob=skip`") if ext is not None else
                 "skip the padded columns with `limit=`, or mask a global bias with `oob=skip`",  # fmt: skip
        )


def padded_dims(model: KernelModel, ops: list[OpFacts]) -> dict[tuple[str, int], Padding]:
    """Every (shared buffer or register tile, dimension) that may hold zero-filled padding, with the load
    it comes from: a flow-insensitive fixpoint over the kernel's operations (a dimension of a ring counts
    ``-1`` for its stage). Which paddings really run past their extent is decided later."""
    taint: dict[tuple[str, int], Padding] = {}
    changed = True
    while changed:
        changed = False
        for of in ops:
            reads = [e for e in of.effects if e.access in _READS and e.operand.name is not None]
            matmul = any(e.operand.transpose for e in reads)
            for w in of.effects:
                wo = w.operand
                if w.access not in _WRITES or w.tier not in _TILES or wo.name is None:
                    continue
                wdims = _dims(model, wo)
                if wdims is None:
                    continue
                for r in reads:
                    if r.operand.name == wo.name:
                        continue
                    for wp, rp in _pairs(wo, r.operand, matmul):
                        for pad in _at(model, of, r, rp, taint):
                            key = (wo.name, wdims[wp])
                            if key not in taint:
                                taint[key] = pad
                                changed = True
    return taint


def _pairs(w: Operand, r: Operand, matmul: bool) -> list[tuple[int, int]]:
    """Which positions of the written operand take which positions of the read one."""
    ws, rs = w.shape, r.shape
    if matmul:  # acc <- a, b^T: acc's rows are a's rows, its columns b's rows; K is summed away
        if len(ws) != 2 or len(rs) != 2:
            return []
        wp = 1 if r.transpose else 0
        return [(wp, 0)] if ws[wp] == rs[0] else []
    if len(ws) != len(rs):
        return []
    return [(i, i) for i in range(len(ws)) if ws[i] == rs[i]]


def _at(model: KernelModel, of: OpFacts, e: Effect, pos: int, taint: dict) -> list[Padding]:
    """The paddings position ``pos`` of a read operand may carry."""
    o = e.operand
    dims = _dims(model, o)
    if dims is None:
        return []
    if e.tier is Kind.GLOBAL:
        d = dims[pos]
        item = o.index[d] if 0 <= d < len(o.index) else None
        if isinstance(item, n.Span) and _zero_fill(of, e):
            return [Padding(of, e, d, item)]
        return []
    pad = taint.get((o.name, dims[pos]))  # type: ignore[arg-type]
    return [pad] if pad is not None else []


def _zero_fill(of: OpFacts, e: Effect) -> bool:
    """Whether the read fills out-of-bounds elements with zeros (TMA, or ``oob=zero``)."""
    slot = e.operand.slot
    if slot.masked_always:
        return True
    value = of.typed.attr(slot.mask_attr) if slot.mask_attr is not None else None
    return isinstance(value, n.Name) and value.id == "zero"


def _dims(model: KernelModel, o: Operand) -> list[int] | None:
    """The dimension of what ``o`` indexes that each position of its tile shape is (``-1``: a ring's
    stage); None where the shapes do not line up."""
    staged = False
    if o.kind is Kind.GLOBAL and isinstance(o.decl, n.Param):
        rank = len(o.decl.shape)
    elif o.kind is Kind.SHARED and o.name in model.smem:
        info = model.smem[o.name]
        rank, staged = len(info.shape), info.stages is not None
    elif o.kind is Kind.REGISTERS and o.name in model.regs:
        rank = len(model.regs[o.name].shape)
    else:
        return None
    dims = [-1] if staged and o.stage is None else []
    dims += [d for d in range(rank) if not (d < len(o.index) and isinstance(o.index[d], n.At))]
    return dims if len(dims) == len(o.shape) else None


def _sources(model: KernelModel, o: Operand, pos: int, taint: dict) -> list[Padding]:
    """The paddings that position ``pos`` of a shared or register operand may hold."""
    if o.kind not in _TILES or pos < 0:
        return []
    dims = _dims(model, o)
    if dims is None or pos >= len(dims):
        return []
    pad = taint.get((o.name, dims[pos]))  # type: ignore[arg-type]
    return [pad] if pad is not None else []


def _witness(ctx: RuleContext, pad: Padding) -> Witness | None:
    """Sizes for which the padding's span runs past the extent (None where it is proved or sampled not to)."""
    obligations = [
        ob for ob in ctx.domain.access_obligations(pad.of.typed, pad.effect)
        if len(ob.exprs) == 3 and ob.exprs[0] is pad.span.start and ob.exprs[1] is pad.span.size
    ]  # fmt: skip
    verdict = ctx.domain.decide(pad.of.typed, obligations)
    return verdict.witness if verdict.status is Status.VIOLATED else None
