"""cost.counts: how often each operation runs, for the busiest CTA, at concrete sizes."""

from __future__ import annotations

import pytest

from cake_core.cost.counts import executions

KERNEL = """
kernel k(x: global f32[N], out: global f32[N])
  domain N >= 1
  const R = 128, P = {period}
  grid (t) over (cdiv(N, R))
  cta warps 4
  role all warps 0..4:
    reg v: f32[R] layout rows
    fill v, value=0.0
    for i in 0 .. 12:
      load v <- x[t * R : +R], oob=zero
      if i % P == P - 1:
        store out[t * R : +R] <- v, oob=skip
"""


def _times(checked, prim: str) -> float:
    (model,) = checked.models.values()
    counts = executions(model, {**model.env, "N": 1024})
    (op,) = [t for t in model.ops if t.prim.name == prim]
    return counts.times[id(op.op)]


@pytest.mark.parametrize(("period", "stores"), [(1, 12), (3, 4), (4, 3), (12, 1)])
def test_a_branch_on_the_loop_variable_counts_the_trips_it_takes(compile_cake, period, stores) -> None:
    """The branch runs on one trip in P: walking only the first trip would count it 12 times or never."""
    checked = compile_cake(KERNEL.format(period=period))
    assert _times(checked, "load") == 12
    assert _times(checked, "store") == pytest.approx(stores)
