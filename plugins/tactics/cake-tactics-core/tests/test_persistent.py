"""The ``persistent`` tactic on schedules of kmeans-assign, knn and kmeans-update: every rewrite passes the
verifier for h200 and the interpreter gate against the problem's oracle (whose ``wrap`` run has one CTA
walk every tile), the kmeans rewrites compile with NVRTC for h200, and the precondition refuses a grid
that is already persistent and a kernel that reads a global it writes."""

from __future__ import annotations

import re
from pathlib import Path

import attrs
import pytest

from cake_core import pipeline, plugins
from cake_core.ir import nodes as n
from cake_core.ir.parser import parse
from cake_core.ir.printer import print_module
from cake_core.lower.program import select_spec
from cake_core.loop.tactic import Application
from cake_core.verify.interp_gate import run_gate

from cake_tactics_core.judge import judge
from cake_tactics_core.persistent import refusal

SCHEDULES = Path(__file__).parent / "schedules"
PROBLEMS = Path(plugins.__file__).parent / "problems"


def _schedule(problem: str, name: str) -> n.Module:
    """A schedule of ``problem``, or one kept with these tests (``kmeans_assign_w3``: warp-specialized
    TMA + wgmma, one tile a CTA; ``knn_ws``: warp-specialized TMA, scored with ``rowdot``)."""
    path = SCHEDULES / f"{name}.cake"
    if not path.exists():
        path = PROBLEMS / problem.replace("-", "_") / "schedules" / f"{name}.cake"
    return parse(path.read_text(encoding="utf-8"), str(path))


def _target():
    return plugins.registry().get("targets", "h200")


def _tactic(name: str):
    return plugins.registry().get("tactics", name)


def _passes(problem: str, module: n.Module) -> str:
    """The verifier for h200 and the interpreter gate with ``problem``'s oracle pass ``module``."""
    text, errors = judge(problem, module)
    assert not errors, errors
    return text


def _apply(module: n.Module, kernel: str) -> n.Module:
    return _tactic("persistent").apply(module, _target(), Application("persistent", kernel))


def _kernel(module: n.Module, name: str) -> n.Kernel:
    return next(k for k in module.kernels if k.name == name)


def _compiles(module: n.Module) -> str:
    """The module lowered for h200 at D=128, bf16, and compiled by NVRTC; its CUDA source."""
    target = _target()
    checked = pipeline.check(pipeline.load_text(print_module(module), "persistent.cake"), target)
    lowered = pipeline.build(checked, target, select_spec(checked, {"D": 128, "T": "bf16"}))
    result = pipeline.compile_program(lowered, target, cache=False)
    assert all(not result.kernel(k.function).spills for k in lowered.kernels)
    return lowered.source


def test_persistent_registers_through_the_entry_point() -> None:
    assert plugins.registry().registration("tactics", "persistent").plugin.distribution == "cake-tactics-core"


CASES = [
    # (problem, schedule, kernels offered, kernel rewritten)
    ("kmeans-assign", "kmeans_assign_w3", ["centroid_norms", "assign"], "assign"),
    ("kmeans-assign", "ampere", ["centroid_norms", "assign"], "assign"),
    ("knn", "fused_topk", ["point_norms", "topk"], "topk"),
    ("knn", "knn_ws", ["point_norms", "topk"], "topk"),
    ("kmeans-update", "atomic", ["zero", "accumulate", "finalize"], "accumulate"),
]


@pytest.mark.parametrize(("problem", "schedule", "kernels", "kernel"), CASES, ids=lambda v: str(v))
def test_a_persistent_kernel_computes_what_the_grid_did(
    problem: str, schedule: str, kernels: list[str], kernel: str
) -> None:
    module = _schedule(problem, schedule)
    _passes(problem, module)
    apps = _tactic("persistent").applications(module, _target())
    assert [a.key for a in apps] == [f"persistent@{k}()" for k in kernels]
    before = print_module(module)
    out = _apply(module, kernel)
    _passes(problem, out)
    assert print_module(module) == before  # the input is left as it was
    assert kernel not in {a.site for a in _tactic("persistent").applications(out, _target())}


def test_the_grid_becomes_one_cta_per_multiprocessor_walking_the_tiles() -> None:
    """w3's assign: the registers stay declared once, each tile starts from its own fills, the grid's
    variable names are kept, and the pipes carry over (no barrier between tiles in a multi-role kernel)."""
    out = _kernel(_apply(_schedule("kmeans-assign", "kmeans_assign_w3"), "assign"), "assign")
    text = print_module(n.Module(kernels=(out,)))
    assert "  grid (w) over (min(SMS, cdiv(N, BM) * B))\n" in text
    consumer = text.split("role main")[1]
    assert (
        "    reg bi: i32[ROWS] layout wgmma_rows\n"
        "    for tile in w .. cdiv(N, BM) * B step min(SMS, cdiv(N, BM) * B):\n"
        "      let t = tile % cdiv(N, BM)\n      let b = tile / cdiv(N, BM)\n      fill bv, value=inf\n"
    ) in consumer
    assert "bar.sync" not in text


def test_one_role_with_shared_memory_synchronizes_between_tiles() -> None:
    """ampere's assign: without the ``bar.sync`` that ends each tile, the next tile's cp.async overwrites
    rows of ``xs`` another warp still reads; the gate's one-CTA run sees that race."""
    module = _schedule("kmeans-assign", "ampere")
    out = _apply(module, "assign")
    role = _kernel(out, "assign").roles[0]
    (loop,) = [st for st in role.body if isinstance(st, n.For)]
    assert loop.body[-1] == n.Op(name="bar.sync")
    unsynced = attrs.evolve(role, body=(*role.body[:-1], attrs.evolve(loop, body=loop.body[:-1])))
    kernel = attrs.evolve(_kernel(out, "assign"), roles=(unsynced,))
    bad = attrs.evolve(out, kernels=(_kernel(out, "centroid_norms"), kernel))
    gate = run_gate(plugins.registry().get("problems", "kmeans-assign"), bad, plugins.registry())
    assert not gate.ok and any("overwrite" in d.message for d in gate.diagnostics)


def test_names_that_collide_are_made_fresh() -> None:
    text = (SCHEDULES / "kmeans_assign_w3.cake").read_text(encoding="utf-8")
    module = parse(re.sub(r"\bkt\b", "tile", re.sub(r"\bNC\b", "w", text)), "collide.cake")
    out = _apply(module, "assign")
    assert _kernel(out, "assign").grid.vars == ("w2",)
    assert "for tile2 in w2 .. cdiv(N, BM) * B step min(SMS, cdiv(N, BM) * B):" in print_module(out)
    _passes("kmeans-assign", out)


def test_the_kmeans_rewrites_compile_for_h200() -> None:
    for module in (_schedule("kmeans-assign", "kmeans_assign_w3"), _schedule("kmeans-assign", "ampere")):
        source = _compiles(_apply(_apply(module, "assign"), "centroid_norms"))
        assert source.count("for (int tile = w; tile < ") == len(module.kernels[1].roles) + 1


def test_persistent_refuses_a_persistent_grid_mbarriers_an_unpiped_buffer_and_a_global_read_and_written() -> None:
    target = _target()
    hopper = _schedule("kmeans-assign", "hopper")
    assert refusal(_kernel(hopper, "assign")) == "the grid is already persistent"
    assert [a.site for a in _tactic("persistent").applications(hopper, target)] == ["centroid_norms"]
    # the same kernel with hand-written mbarriers, its grid put back to one tile a CTA: their parities
    # would not carry across tiles
    explicit = _kernel(_schedule("kmeans-assign", "explicit/hopper"), "assign")
    tiled = attrs.evolve(explicit, grid=_kernel(_schedule("kmeans-assign", "kmeans_assign_w3"), "assign").grid)
    assert refusal(tiled) == "the kernel declares mbarriers of its own"
    # ampere warp-specialized: its consumer's argmin scratch `red` is in no pipe, and no barrier of the
    # consumer alone would order its reuse across tiles
    ampere = _schedule("kmeans-assign", "ampere")
    split = _tactic("warp-specialize").apply(ampere, target, Application("warp-specialize", "assign"))
    reason = "a shared buffer outside every pipe in a kernel of several roles (nothing orders its reuse)"
    assert refusal(_kernel(split, "assign")) == reason
    # finalize writing its quotients back into `sums`: a tile could read what another tile wrote
    text = print_module(_schedule("kmeans-update", "atomic")).replace("store centroids[", "store sums[")
    in_place = parse(text, "in_place.cake")
    assert refusal(_kernel(in_place, "finalize")) == "global `sums` is both read and written"
    assert "finalize" not in {a.site for a in _tactic("persistent").applications(in_place, target)}
