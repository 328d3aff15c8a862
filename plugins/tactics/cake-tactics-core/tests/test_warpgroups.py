"""The ``warpgroups`` tactic on warpgroup-consumer kernels of two problems: kmeans-assign (``hopper.cake``,
``kmeans_assign_w3``, and ``t1_kmeans_wg_literal``, its count written only as literals) and knn (the wgmma
tactic's output, ``t1_knn_wgmma``, whose count is ``WG = WM * WN / 4``). What it offers, that input and
output pass the verifier for h200 and the interpreter gate against the problem's oracle, that the kmeans
rewrites compile with NVRTC for h200, how ``setmaxnreg`` budgets are recomputed or dropped, and where the
precondition refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from cake_core import pipeline, plugins
from cake_core.ir import nodes as n
from cake_core.ir.parser import parse
from cake_core.ir.printer import print_module
from cake_core.loop.tactic import Application
from cake_core.lower.program import select_spec

from cake_tactics_core.judge import judge

SCHEDULES = Path(__file__).parent / "schedules"
PROBLEMS = Path(plugins.__file__).parent / "problems"


def _schedule(name: str, **edits: str) -> n.Module:
    """A schedule kept with these tests, or one of kmeans-assign's, with text ``edits`` (old=new)."""
    path = SCHEDULES / f"{name}.cake"
    if not path.exists():
        path = PROBLEMS / "kmeans_assign" / "schedules" / f"{name}.cake"
    text = path.read_text(encoding="utf-8")
    for old, new in edits.items():
        assert old in text
        text = text.replace(old, new)
    return parse(text, str(path))


def _target():
    return plugins.registry().get("targets", "h200")


def _tactic():
    return plugins.registry().get("tactics", "warpgroups")


def _keys(module: n.Module) -> list[str]:
    return [a.key for a in _tactic().applications(module, _target())]


def _apply(module: n.Module, site: str, **params: int | str) -> n.Module:
    before = print_module(module)
    out = _tactic().apply(module, _target(), Application("warpgroups", site, params))
    assert print_module(module) == before  # the input is left as it was
    return out


def _passes(problem: str, module: n.Module) -> str:
    """The verifier for h200 and the interpreter gate with ``problem``'s oracle pass ``module``; its text."""
    text, errors = judge(problem, module)
    assert not errors, errors
    return text


def _kernel(text: str, name: str) -> str:
    return text.split(f"kernel {name}(")[1]


def _compiles(module: n.Module, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """NVRTC compiles ``module`` for h200 at D=128, bf16 (a private cache), with the budgets it gives."""
    monkeypatch.setenv("CAKE_CACHE_DIR", str(tmp_path))
    checked = pipeline.check(pipeline.load_text(print_module(module), "warpgroups.cake"), _target())
    lowered = pipeline.build(checked, _target(), select_spec(checked, {"D": 128, "T": "bf16"}))
    for role in module.kernel("assign").roles:
        if role.regs is not None:
            assert f"setmaxnreg.{'dec' if role.name == 'producer' else 'inc'}.sync.aligned.u32 {role.regs.value};" \
                in lowered.source  # fmt: skip
    result = pipeline.compile_program(lowered, _target(), cache=False)
    assert result.kernel("cake_assign__T_bf16__D_128").registers > 0


def test_the_tactic_is_registered_with_a_one_line_precondition() -> None:
    registration = plugins.registry().registration("tactics", "warpgroups")
    assert registration.plugin.distribution == "cake-tactics-core" and "\n" not in registration.obj.precondition


def test_hopper_gets_four_warpgroups_where_its_rows_leave_64_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """hopper.cake (BM = min(256, 32768 / D), WG = 2): one warpgroup would hold 256 rows' accumulators
    (over the registers), four hold 32 rows at D=256 (under wgmma's 64): four are offered written in D.
    At 20 warps a thread starts with 96 registers; the producer keeps 40 and the consumers take 104."""
    hopper = _schedule("hopper")
    assert _keys(hopper) == ["warpgroups@assign.consumers(size=D,upto=128,warpgroups=4)"]
    out = _apply(hopper, "assign.consumers", warpgroups=4, size="D", upto=128)
    text = _kernel(_passes("kmeans-assign", out), "assign")
    assert "const WG = min(4, 512 / D)" in text and "const ROWS = BM / WG" in text
    assert "cta warps 4 + 4 * WG occupancy 1" in text
    assert "role producer warps 0..4 regs 40:" in text and "role consumers warps 4..4 + 4 * WG per 4 regs 104:" in text
    _compiles(out, tmp_path, monkeypatch)


def test_w3_gets_one_warpgroup_and_its_budgets_are_dropped_where_none_pays() -> None:
    """w3 (BM = 128, WG = 2): one warpgroup of 128 rows; four would hold 32 rows each (refused). With a
    producer budget the registers tactic does not offer (48), the budgets go: at 8 warps it pays for
    nothing the consumers could take."""
    w3 = _schedule("kmeans_assign_w3")
    assert _keys(w3) == ["warpgroups@assign.main(warpgroups=1)"]
    out = _apply(w3, "assign.main", warpgroups=1)
    text = _kernel(_passes("kmeans-assign", out), "assign")
    assert "const WG = 1" in text and "cta warps 4 + 4 * WG occupancy 1" in text
    assert "role main warps 4..4 + 4 * WG per 4:" in text
    budgets = _schedule("kmeans_assign_w3", **{"role producer warps 0..4:": "role producer warps 0..4 regs 48:",
                                               "per 4:": "per 4 regs 224:"})  # fmt: skip
    assert _keys(budgets) == ["warpgroups@assign.main(warpgroups=1)"]
    text = _kernel(print_module(_apply(budgets, "assign.main", warpgroups=1)), "assign")
    assert " regs " not in text and "role producer warps 0..4:" in text


def test_a_literal_count_gets_a_constant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``warps 4..12 per 4``, ``cta warps 12``, ``ROWS = BM / 2``: a new constant ``WG`` counts the
    warpgroups, the role, the CTA and the rows are written in it."""
    literal = _schedule("t1_kmeans_wg_literal")
    _passes("kmeans-assign", literal)
    assert _keys(literal) == ["warpgroups@assign.main(size=D,upto=64,warpgroups=4)",
                              "warpgroups@assign.main(size=D,upto=128,warpgroups=4)"]  # fmt: skip
    out = _apply(literal, "assign.main", warpgroups=4, size="D", upto=128)
    text = _kernel(_passes("kmeans-assign", out), "assign")
    assert "const WG = min(4, 512 / D)\n  const ROWS = BM / WG" in text
    assert "cta warps 4 + 4 * WG occupancy 1" in text and "role main warps 4..4 + 4 * WG per 4:" in text
    _compiles(out, tmp_path, monkeypatch)


def test_knn_wgmma_output_gets_one_warpgroup() -> None:
    """The wgmma tactic's knn output counts its warpgroups as ``WG = WM * WN / 4`` over ``warps 4..4 + WM *
    WN``: ``WG`` takes the new count and the role and the CTA are written in it; the producer keeps 40
    registers and the consumer takes 256 at 8 warps."""
    knn = _schedule("t1_knn_wgmma")
    _passes("knn", knn)
    assert _keys(knn) == ["warpgroups@topk.main(warpgroups=1)"]
    text = _kernel(_passes("knn", _apply(knn, "topk.main", warpgroups=1)), "topk")
    assert "const WG = 1" in text and "cta warps 4 + 4 * WG occupancy 1" in text
    assert "role producer warps 0..4 regs 40:" in text and "role main warps 4..4 + 4 * WG per 4 regs 256:" in text


# --- where the precondition refuses ---


def test_refused_without_warpgroup_instances_or_rows_split_by_the_count() -> None:
    # knn_ws: one consumer instance of 4 warps (no `per 4`)
    assert _keys(_schedule("knn_ws")) == []
    # an instance named otherwise than `self * ROWS`: its rows would not follow the count
    assert _keys(_schedule("kmeans_assign_w3", **{"t * BM + self * ROWS": "t * BM + self * 64"})) == []
    # rows not divided by the count: nothing says how the CTA's rows split
    assert _keys(_schedule("kmeans_assign_w3", **{"const ROWS = BM / WG": "const ROWS = 64"})) == []
    # two warpgroups of knn's 2-lists-a-query tiles: one would not fit its registers (CR104)
    assert _keys(_schedule("t1_knn_wgmma", **{"const P = 1": "const P = 2"})) == []
