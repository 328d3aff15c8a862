"""What the atomic primitives charge (``CostTerms.global_atomics``, ``shared_atomics``): global reductions as
the L2's atomic units take them, one request per vector a lane adds to a row of its own (the width the
lowering picks); shared atomics one per element. A wgmma accumulator's quads, one request per 8 columns,
are checked on kmeans-update's vector.cake in the roofline's tests."""

from __future__ import annotations

import pytest

from cake_core import plugins
from cake_core.ir.sema import CheckCtx

SCATTER = """
kernel scatter(v: global f32[R0, C], dst: global f32[K, C], cnt: global i32[K])
  domain R0 >= 1, K >= 1, C in {COLS}
  grid (t) over (cdiv(R0, 64))
  cta warps 2
  smem acc: f32[64, C]
  role all warps 0..2:
    reg ir: i32[64] layout rows
    reg vr: f32[64, C] layout rows
    reg one: i32[64] layout rows
    reg old: i32[64] layout rows
    iota ir, start=t
    fill one, value=1
    load vr <- v[t * 64 : +64, :], oob=zero
    atomic.add dst[:, :] <- vr, ir, oob=skip
    segment.add dst[:, :] <- vr, ir, oob=skip
    atomic.add acc[:, :] <- vr, ir, oob=skip
    atomic.fetch_add old, cnt[:] <- one, ir, oob=skip
"""


def _costs(compile_cake, cols: str, target: str) -> list[tuple[str, str, float, float]]:
    """(primitive, destination, global requests, shared atomics) of every atomic operation of the kernel."""
    checked = compile_cake(SCATTER.replace("COLS", cols))
    (model,) = checked.models.values()
    tgt = plugins.registry().get("targets", target)
    out = []
    for typed in model.ops:
        c = typed.prim.cost(typed, CheckCtx(model, typed.role, tgt))
        if typed.prim.name.startswith(("atomic", "segment")):
            dst = typed.outs[-1]
            out.append((typed.prim.name, dst.name, c.global_atomics, c.shared_atomics))
    return out


@pytest.mark.parametrize(("cols", "target", "width"), [("8", "h200", 4), ("6", "h200", 2), ("8", "a100", 1)])
def test_a_lane_adding_its_own_row_is_a_request_per_vector(compile_cake, cols: str, target: str, width: int) -> None:
    """64 rows of C f32: ``red.global.add.v4.f32`` where C is a multiple of 4 (sm_90 on), ``.v2`` for C = 6,
    scalar before sm_90; `segment.add` one per element (its runs are not known statically)."""
    c = int(cols)
    assert _costs(compile_cake, cols, target) == [
        ("atomic.add", "dst", 64 * c / width, 0.0),
        ("segment.add", "dst", 64.0 * c, 0.0),
        ("atomic.add", "acc", 0.0, 64.0 * c),
        ("atomic.fetch_add", "cnt", 64.0, 0.0),
    ]

