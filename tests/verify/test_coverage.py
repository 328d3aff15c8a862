"""The global-write walk of CR129/CR130 (:mod:`cake_core.verify.coverage`): which tensors are outputs,
the ragged samples, holes and overlaps with their writers, the site a hole is blamed on, the budget."""

from __future__ import annotations

from cake_core import plugins
from cake_core.ir.holes import site
from cake_core.ir.parser import parse
from cake_core.ir.sema import check_module
from cake_core.verify import coverage as cov
from cake_core.verify.facts import facts
from cake_core.verify.samples import sizes

HEADER = """\
program p(x: global T[B, N, 64], y: global i32[B, N], out: global f32[B, N], counts: global i32[B, N])
  domain T in {bf16}, B >= 1, N >= 1
  buffer scratch: global f32[B, N + 7]
  launch k(x, y, out, counts, scratch)

kernel k(x: global T[B, N, 64], y: global i32[B, N], out: global f32[B, N], counts: global i32[B, N],
         scratch: global f32[B, NP])
  domain T in {bf16}, B >= 1, N >= 1, NP >= N
  const R = 128
"""

BODY = """\
  grid (t, b) over (GRID, B)
  cta warps 4
  role all warps 0..4:
    reg s: f32[R, 1] layout rows
    reg one: i32[R] layout rows
    reg ai: i32[R] layout rows
    sumsq s <- x[b, t * R : +R, :], oob=zero
    store out[b, t * R : +R] <- s, oob=skip
    store scratch[b, t * R : +R] <- s, oob=skip
    load ai <- y[b, t * R : +R], oob=fill, value=-1
    fill one, value=1
    atomic.add counts[b, :] <- one, ai, oob=skip
"""


def _checked(grid: str):
    reg = plugins.registry()
    prims = {p.name: p for p in reg.values("primitives")}
    text = HEADER + BODY.replace("GRID", grid)
    checked = check_module(parse(text, "t.cake"), prims, reg.get("targets", "h200"))
    assert checked.ok, [d.message for d in checked.diagnostics]
    (model,) = checked.models.values()
    return checked, model


def test_outputs_are_program_parameters_written_plainly() -> None:
    checked, model = _checked("cdiv(N, R)")
    # `scratch` is a program buffer, `counts` an atomic scatter target, `x` and `y` are read
    assert cov.outputs(checked, model, facts(model)) == ("out",)
    c = cov.coverage(checked, model)
    assert c.outputs == ("out",) and not c.holes and not c.overlaps and not c.skipped


def test_samples_are_ragged_and_several_tiles_long() -> None:
    _, model = _checked("cdiv(N, R)")
    got = [dict(s.sizes)["N"] for s in cov.coverage_samples(sizes(model))]
    assert got == [1, 128 + 65, 256 + 65]  # one, two and three tiles, the last one partial


def test_a_floor_grid_has_a_hole_blamed_on_the_grid() -> None:
    checked, model = _checked("N / R")
    (hole,) = cov.coverage(checked, model).holes
    assert hole.tensor == "out" and hole.index == (0, 0) and hole.missing == hole.total == 1
    ragged = [h for h in cov.coverage(checked, model).holes if dict(h.sample.sizes)["N"] > 1]
    assert not ragged  # the first sample that shows a tensor's hole names it
    loc, what = site(model, "out", hole.dims)
    assert what == "grid" and loc == model.kernel.grid.loc


def test_an_extra_cta_overlaps_with_its_writers_named() -> None:
    text_grid = "cdiv(N, R) + 1"
    checked, model = _checked(text_grid)
    c = cov.coverage(checked, model)
    assert not c.overlaps and not c.holes  # the extra CTA writes past the end: masked, nothing written

    reg = plugins.registry()
    prims = {p.name: p for p in reg.values("primitives")}
    clamped = "min(t, cdiv(N, R) - 1) * R : +R] <- s"
    text = HEADER + BODY.replace("GRID", text_grid).replace("t * R : +R] <- s", clamped)
    checked = check_module(parse(text, "t.cake"), prims, reg.get("targets", "h200"))
    (model,) = checked.models.values()
    (o,) = cov.coverage(checked, model).overlaps
    assert o.tensor == "out" and o.index == (0, 0)
    assert o.first.words == "CTA (t=0, b=0) role `all`" and o.second.words == "CTA (t=1, b=0) role `all`"


def test_a_walk_past_the_budget_is_skipped(monkeypatch) -> None:
    checked, model = _checked("cdiv(N, R)")
    monkeypatch.setattr(cov, "MAX_CTAS", 1)
    c = cov.coverage(checked, model)  # no analysis table attached: computed afresh
    assert not c.holes and len(c.skipped) == 2 and all("too large to walk" in s for s in c.skipped)
