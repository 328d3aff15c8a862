"""The ``registers`` tactic on warp-specialized kernels of kmeans-assign (w3, and w3 made persistent) and
knn (``knn_ws``, kept with these tests: knn has no warp-specialized schedule of its own): the splits it
offers, that each rewrite passes the verifier for h200 and the interpreter gate against the problem's
oracle, that the kmeans rewrite compiles with NVRTC for h200 with ``setmaxnreg`` honoured, and that the
precondition refuses a target without ``setmaxnreg``, a kernel without a producer role and the split a
kernel already has."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from cake_core import pipeline, plugins
from cake_core.ir import nodes as n
from cake_core.ir.parser import parse
from cake_core.ir.printer import print_module
from cake_core.lower.program import select_spec
from cake_core.loop.tactic import Application
from cake_core.verify.runner import verify_source

from cake_tactics_core.fit import fits
from cake_tactics_core.judge import judge

SCHEDULES = Path(__file__).parent / "schedules"
PROBLEMS = Path(plugins.__file__).parent / "problems"


def _schedule(name: str) -> n.Module:
    """A schedule kept with these tests, or one of kmeans-assign's."""
    path = SCHEDULES / f"{name}.cake"
    if not path.exists():
        path = PROBLEMS / "kmeans_assign" / "schedules" / f"{name}.cake"
    return parse(path.read_text(encoding="utf-8"), str(path))


def _reg(name: str, kind: str = "tactics"):
    return plugins.registry().get(kind, name)


def _gate(problem: str, module: n.Module) -> str:
    """The verifier for h200 and the interpreter gate with ``problem``'s oracle pass ``module``."""
    text, errors = judge(problem, module)
    assert not errors, errors
    return text


def _keys(module: n.Module, target=None) -> list[str]:
    return [a.key for a in _reg("registers").applications(module, target or _reg("h200", "targets"))]


def _rebalance(module: n.Module, kernel: str, **split: int) -> n.Module:
    return _reg("registers").apply(module, _reg("h200", "targets"), Application("registers", kernel, split))


def test_registers_registers_through_the_entry_point() -> None:
    assert plugins.registry().registration("tactics", "registers").plugin.distribution == "cake-tactics-core"


def test_w3_is_offered_the_splits_its_producer_releases() -> None:
    """12 warps: 168 registers a thread at entry; the producer's 128 threads release (168 - p) each, which
    the consumers' 256 threads take: 40 -> 232 is hopper.cake's split."""
    w3 = _schedule("kmeans_assign_w3")
    assert _keys(w3) == ["registers@assign(main=240,producer=24)", "registers@assign(main=232,producer=40)",
                         "registers@assign(main=224,producer=56)"]  # fmt: skip
    # a larger take than the release pays for blocks `setmaxnreg.inc`: the verifier refuses it (CR110)
    greedy = _rebalance(w3, "assign", producer=24, main=248)
    report = verify_source(print_module(greedy), "greedy.cake", _reg("h200", "targets"), plugins.registry())
    assert "CR110" in {d.code for d in report.diagnostics if d.is_error}


@pytest.mark.parametrize("persistent", [False, True], ids=["w3", "w3-persistent"])
def test_a_rebalanced_kmeans_kernel_computes_the_same(persistent: bool) -> None:
    module, target = _schedule("kmeans_assign_w3"), _reg("h200", "targets")
    if persistent:
        module = _reg("persistent").apply(module, target, Application("persistent", "assign"))
    before = print_module(module)
    out = _rebalance(module, "assign", producer=40, main=232)
    assert print_module(module) == before
    text = print_module(out)
    assert "role producer warps 0..4 regs 40:" in text and "role main warps 4..4 + 4 * WG per 4 regs 232:" in text
    _gate("kmeans-assign", out)
    assert _keys(out) == ["registers@assign(main=240,producer=24)", "registers@assign(main=224,producer=56)"]


def test_the_rebalanced_kmeans_kernel_compiles_with_setmaxnreg_for_h200() -> None:
    target = _reg("h200", "targets")
    out = _rebalance(_schedule("kmeans_assign_w3"), "assign", producer=40, main=232)
    checked = pipeline.check(pipeline.load_text(print_module(out), "registers.cake"), target)
    lowered = pipeline.build(checked, target, select_spec(checked, {"D": 128, "T": "bf16"}))
    assert "setmaxnreg.dec.sync.aligned.u32 40;" in lowered.source
    assert "setmaxnreg.inc.sync.aligned.u32 232;" in lowered.source
    result = pipeline.compile_program(lowered, target, cache=False)
    assert not result.setmaxnreg_ignored
    assert all(not result.kernel(k.function).spills for k in lowered.kernels)


def test_a_rebalanced_knn_kernel_computes_the_same() -> None:
    """8 warps: 248 at entry, and any producer budget pays for the consumers' most, 256."""
    knn = _schedule("knn_ws")
    assert _keys(knn) == [f"registers@topk(main=256,producer={p})" for p in (24, 40, 56)]
    _gate("knn", knn)
    _gate("knn", _rebalance(knn, "topk", producer=40, main=256))


def test_occupancy_1_is_promised_where_the_kernel_promised_none() -> None:
    w3 = parse(print_module(_schedule("kmeans_assign_w3")).replace(" occupancy 1", ""), "w3.cake")
    assert next(k for k in w3.kernels if k.name == "assign").cta.occupancy is None
    out = _rebalance(w3, "assign", producer=40, main=232)
    assert next(k for k in out.kernels if k.name == "assign").cta.occupancy == n.Num(1)
    assert "registers@assign(main=232,producer=40)" in _keys(w3)


def test_registers_refuses_a_target_without_setmaxnreg_a_kernel_without_producer_and_the_current_split() -> None:
    h200, w3 = _reg("h200", "targets"), _schedule("kmeans_assign_w3")
    plain = attrs.evolve(h200, name="h200-without-setmaxnreg", features=h200.features - {"setmaxnreg"})
    assert not plain.has("setmaxnreg") and fits(w3, plain)
    assert _keys(w3, plain) == []
    # one role (ampere, naive): no producer to take registers from
    assert _keys(_schedule("ampere")) == [] and _keys(_schedule("naive")) == []
    # hopper.cake already runs 40 / 232: the other splits only
    assert _keys(_schedule("hopper")) == ["registers@assign(consumers=240,producer=24)",
                                          "registers@assign(consumers=224,producer=56)"]  # fmt: skip
