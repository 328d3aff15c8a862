"""The core tactics on real schedules of several problems: what each offers, that each rewrite keeps the
kernel's meaning (the input and the output pass the verifier for the target and the interpreter gate
against the problem's oracle, as ``cake verify --problem`` runs them) and that each precondition refuses
the sites where it does not hold."""

from __future__ import annotations

from pathlib import Path

import pytest

from cake_core import plugins
from cake_core.ir import nodes as n
from cake_core.ir.parser import parse
from cake_core.ir.printer import print_module
from cake_core.loop.tactic import Application, Tactic
from cake_core.verify.runner import check_registered, verify_source

from cake_tactics_core.judge import judge

PROBLEMS = Path(plugins.__file__).parent / "problems"


def _schedule(problem: str, name: str) -> n.Module:
    folder = problem.replace("-", "_")
    path = PROBLEMS / folder / "schedules" / f"{name}.cake"
    return parse(path.read_text(encoding="utf-8"), str(path))


def _tactic(name: str) -> Tactic:
    return plugins.registry().get("tactics", name)


def _target():
    return plugins.registry().get("targets", "h200")


#: (problem, text) of the modules judged to pass so far: a schedule several cases start from is judged once
_PASSED: set[tuple[str, str]] = set()


def _passes(problem: str, module: n.Module) -> str:
    """The verifier for h200 and the interpreter gate with ``problem``'s oracle pass ``module``."""
    text = print_module(module)
    if (problem, text) in _PASSED:
        return text
    text, errors = judge(problem, module)
    assert not errors, errors
    _PASSED.add((problem, text))
    return text


def _const(module: n.Module, kernel: str, name: str) -> n.Expr:
    k = next(k for k in module.kernels if k.name == kernel)
    return next(c.value for c in k.consts if c.name == name)


def _smem(module: n.Module, kernel: str, name: str) -> n.Smem:
    k = next(k for k in module.kernels if k.name == kernel)
    return next(s for s in k.smem if s.name == name)


def test_the_tactics_register_through_the_entry_point() -> None:
    reg = plugins.registry()
    for name in ("tile-shapes", "ring-depth", "smem-layout", "staging"):
        assert reg.registration("tactics", name).plugin.distribution == "cake-tactics-core"
        tactic = reg.get("tactics", name)
        assert isinstance(tactic, Tactic) and tactic.precondition and "\n" not in tactic.precondition


# --- the rewrites keep the meaning: a handful of applications per tactic, on two problems or more ---

CASES = [
    # (problem, schedule, tactic, application keys to run)
    ("kmeans-assign", "ampere", "tile-shapes", ["tile-shapes@assign(BM=64)", "tile-shapes@assign(BK=64)"]),
    ("kmeans-assign", "naive", "tile-shapes", ["tile-shapes@assign(R=64)"]),
    ("kmeans-update", "atomic", "tile-shapes", ["tile-shapes@accumulate(DC=16)", "tile-shapes@finalize(R=256)"]),
    ("kmeans-assign", "ampere", "ring-depth", ["ring-depth@assign.cs(stages=2)", "ring-depth@assign.cs(stages=5)"]),
    ("kmeans-assign", "hopper", "ring-depth", ["ring-depth@assign.cs(stages=2)"]),
    ("knn", "fused_topk", "ring-depth", ["ring-depth@topk.xs(stages=4)"]),
    ("kmeans-assign", "ampere", "smem-layout", ["smem-layout@assign.xs(pad=0)", "smem-layout@assign.red(pad=4)",
                                                "smem-layout@assign.xs(swizzle=128B)"]),
    ("knn", "fused_topk", "smem-layout", ["smem-layout@topk.xs(pad=16)", "smem-layout@topk.sc(pad=0)",
                                          "smem-layout@topk.xs(swizzle=64B)"]),
    ("kmeans-assign", "naive", "staging", ["staging@assign:all:k:c[b, k, :](stages=2)"]),
    ("kmeans-update", "atomic", "staging", ["staging@finalize:all:dc:c[b, t * R : +R, dc * DC : +DC](stages=3)",
                                            "staging@finalize:all:dc:sums[b, t * R : +R, dc * DC : +DC](stages=2)"]),
]


@pytest.mark.parametrize(("problem", "schedule", "tactic", "keys"), CASES, ids=lambda v: str(v))
def test_a_rewrite_keeps_the_kernels_meaning(problem: str, schedule: str, tactic: str, keys: list[str]) -> None:
    module, t = _schedule(problem, schedule), _tactic(tactic)
    _passes(problem, module)
    offered = {a.key: a for a in t.applications(module, _target())}
    assert set(keys) <= set(offered), sorted(offered)
    before = print_module(module)
    for key in keys:
        out = t.apply(module, _target(), offered[key])
        assert print_module(out) != before
        _passes(problem, out)
    assert print_module(module) == before  # the input is left as it was


def test_applications_come_in_a_stable_order() -> None:
    module, target = _schedule("kmeans-assign", "ampere"), _target()
    for name in ("tile-shapes", "ring-depth", "smem-layout"):
        first = _tactic(name).applications(module, target)
        assert first and list(first) == list(_tactic(name).applications(module, target))
        assert all(a.tactic == name for a in first)


# --- what each tactic rewrites, and where its precondition refuses ---


def test_tile_shapes_changes_one_tile_constant_and_no_warp_or_stage_count() -> None:
    module, target = _schedule("kmeans-assign", "ampere"), _target()
    apps = _tactic("tile-shapes").applications(module, target)
    changed = {(a.site, k) for a in apps for k in a.params}
    # rows per CTA, column tile, K chunk; S counts stages (ring-depth), WM and WN count warps
    assert changed == {("centroid_norms", "R"), ("assign", "BM"), ("assign", "BN"), ("assign", "BK")}
    assert all(len(a.params) == 1 for a in apps)
    out = _tactic("tile-shapes").apply(module, target, Application("tile-shapes", "assign", {"BK": 64}))
    assert _const(out, "assign", "BK") == n.Num(64) and _const(out, "centroid_norms", "R") == n.Num(128)
    # the halving and the doubling, nothing else
    assert {a.params["BM"] for a in apps if "BM" in a.params} == {64, 256}


def test_tile_shapes_refuses_a_tile_the_target_cannot_hold() -> None:
    """knn's top-k kernel at 256 queries a CTA needs more registers per thread than h200 has (CR104): not
    offered, though the rewrite itself is well-formed."""
    module, target = _schedule("knn", "fused_topk"), _target()
    t = _tactic("tile-shapes")
    keys = {a.key for a in t.applications(module, target)}
    assert "tile-shapes@topk(BM=64)" in keys and "tile-shapes@topk(BM=256)" not in keys
    refused = t.apply(module, target, Application("tile-shapes", "topk", {"BM": 256}))
    report = verify_source(print_module(refused), "refused.cake", target, plugins.registry())
    assert "CR104" in {d.code for d in report.diagnostics if d.is_error}


def test_tile_shapes_refuses_a_k_chunk_that_no_longer_divides_the_rows() -> None:
    """``KC = D / BK``: a K chunk of 128 leaves D=64 with no chunk at all; the ladder never reaches it
    from 32, so set it up from 64 (whose double is 128)."""
    module, target = _schedule("kmeans-assign", "ampere"), _target()
    t = _tactic("tile-shapes")
    at64 = t.apply(module, target, Application("tile-shapes", "assign", {"BK": 64}))
    keys = {a.key for a in t.applications(at64, target)}
    assert "tile-shapes@assign(BK=32)" in keys and "tile-shapes@assign(BK=128)" not in keys


def test_ring_depth_sets_the_stage_constant_and_stops_at_shared_memory() -> None:
    module, target = _schedule("kmeans-assign", "hopper"), _target()
    t = _tactic("ring-depth")
    keys = [a.key for a in t.applications(module, target)]
    # at D=256 one stage of cs is 64 KiB beside 64 KiB of xs: three stages overflow h200's 227 KiB;
    # the xs ring (XS) cannot take 2 stages there either, so it is not offered at all
    assert keys == ["ring-depth@assign.cs(stages=2)"]
    out = t.apply(module, target, Application("ring-depth", "assign.cs", {"stages": 2}))
    assert _const(out, "assign", "S") == n.Num(2)
    # the same const sizes csq's ring, and the pipe over both follows: the rewrite still checks
    checked = check_registered(out, target, plugins.registry())
    assert {m.pipes["cring"].stages for (k, _), m in checked.models.items() if k == "assign"} == {2}


def test_ring_depth_refuses_a_kernel_without_a_ring() -> None:
    for problem, schedule in (("kmeans-assign", "naive"), ("kmeans-update", "atomic")):
        assert _tactic("ring-depth").applications(_schedule(problem, schedule), _target()) == []


def test_smem_layout_pads_rows_by_16_bytes_and_leaves_tma_and_wgmma_buffers_alone() -> None:
    module, target = _schedule("kmeans-assign", "ampere"), _target()
    t = _tactic("smem-layout")
    keys = [a.key for a in t.applications(module, target)]
    # xs and cs are bf16/f16 (8 elements = 16 bytes), red is f32 (4); the current pad is left out. Swizzles where
    # the rows are whole panels (cs's 32-element K chunks are 64 bytes) and every access addresses them: red is
    # read by plain loads (CR120), and its 8-byte rows make no panel anyway
    assert keys == ["smem-layout@assign.xs(pad=0)", "smem-layout@assign.xs(pad=16)",
                    "smem-layout@assign.xs(swizzle=32B)", "smem-layout@assign.xs(swizzle=64B)",
                    "smem-layout@assign.xs(swizzle=128B)",
                    "smem-layout@assign.cs(pad=0)", "smem-layout@assign.cs(pad=16)",
                    "smem-layout@assign.cs(swizzle=32B)", "smem-layout@assign.cs(swizzle=64B)",
                    "smem-layout@assign.red(pad=4)", "smem-layout@assign.red(pad=8)"]  # fmt: skip
    out = t.apply(module, target, Application("smem-layout", "assign.xs", {"pad": 16}))
    assert _smem(out, "assign", "xs").pad == n.Num(16) and _smem(out, "assign", "cs").pad == n.Num(8)
    unpadded = t.apply(module, target, Application("smem-layout", "assign.xs", {"pad": 0}))
    assert _smem(unpadded, "assign", "xs").pad is None
    swizzled = t.apply(module, target, Application("smem-layout", "assign.xs", {"swizzle": "128B"}))
    assert (_smem(swizzled, "assign", "xs").swizzle, _smem(swizzled, "assign", "xs").pad) == ("128B", None)
    # back from a swizzle: a pad drops it
    again = [a.key for a in t.applications(swizzled, target) if a.site == "assign.xs"]
    assert again == ["smem-layout@assign.xs(pad=0)", "smem-layout@assign.xs(pad=8)", "smem-layout@assign.xs(pad=16)",
                     "smem-layout@assign.xs(swizzle=32B)", "smem-layout@assign.xs(swizzle=64B)"]  # fmt: skip
    # the Hopper kernel's buffers are TMA destinations and wgmma operands: nothing to offer
    assert t.applications(_schedule("kmeans-assign", "hopper"), target) == []


def test_staging_feeds_a_ring_the_ring_depth_tactic_can_deepen() -> None:
    """naive.cake's loop over centroids reads ``c[b, k, :]`` from global memory: staged, it reads a ring
    filled by cp.async ``S_c - 1`` centroids ahead; deepened to 4 stages it still passes."""
    module, target = _schedule("kmeans-assign", "naive"), _target()
    site = Application("staging", "assign:all:k:c[b, k, :]", {"stages": 2})
    text = print_module(staged := _tactic("staging").apply(module, target, site))
    assert "smem c_ring: T[S_c][D]" in text and "c_ring[k % S_c]" in text
    assert "cp.async c_ring[j % S_c] <- c[b, j, :]" in text
    deeper = [a for a in _tactic("ring-depth").applications(staged, target) if a.site == "assign.c_ring"]
    assert [a.params["stages"] for a in deeper][:3] == [3, 4, 5]
    _passes("kmeans-assign", _tactic("ring-depth").apply(staged, target, deeper[1]))


def test_staging_refuses_where_its_precondition_does_not_hold() -> None:
    target, t = _target(), _tactic("staging")
    naive = _schedule("kmeans-assign", "naive")
    keys = {a.site for a in t.applications(naive, target)}
    # x[b, t * R : +R, :] does not move with k; c_sq[b, k : +1] rows are 4 bytes, not whole 16-byte
    # copies (the verifier refuses that rewrite); only c is offered
    assert keys == {"assign:all:k:c[b, k, :]"}
    refused = t.apply(naive, target, Application("staging", "assign:all:k:c_sq[b, k : +1]", {"stages": 2}))
    assert not verify_source(print_module(refused), "refused.cake", target, plugins.registry()).ok
    # two role instances per CTA (accumulate), or a kernel with its own cp.async groups (ampere, knn): none
    atomic = _schedule("kmeans-update", "atomic")
    assert {a.site.split(":")[0] for a in t.applications(atomic, target)} == {"finalize"}
    assert t.applications(_schedule("kmeans-assign", "ampere"), target) == []
