"""Values written in a size of the domain: a tile or a ring that fits only the smaller listed sizes is offered
as ``min(new, new * v / X)``, and the rewrite keeps the kernel's meaning at every size (verifier and
interpreter gate against the oracle, as in test_tactics)."""

from __future__ import annotations

from pathlib import Path

from cake_core import plugins
from cake_core.ir import nodes as n
from cake_core.ir.parser import parse
from cake_core.ir.printer import print_module
from cake_core.ir.transform import set_consts
from cake_core.loop.tactic import Application
from cake_core.verify.interp_gate import run_gate
from cake_core.verify.runner import verify_source

HOPPER = Path(plugins.__file__).parent / "problems" / "kmeans_assign" / "schedules" / "hopper.cake"


def _hopper(**consts: int) -> n.Module:
    module = parse(HOPPER.read_text(encoding="utf-8"), str(HOPPER))
    return set_consts(module, consts, kernel="assign")


def _target():
    return plugins.registry().get("targets", "h200")


def _keys(tactic: str, module: n.Module) -> list[str]:
    return [a.key for a in plugins.registry().get("tactics", tactic).applications(module, _target())]


def _applied(tactic: str, module: n.Module, site: str, **params) -> str:
    out = plugins.registry().get("tactics", tactic).apply(module, _target(), Application(tactic, site, params))
    text = print_module(out)
    reg = plugins.registry()
    report = verify_source(text, "rewritten.cake", _target(), reg)
    assert report.ok, [d.message for d in report.diagnostics if d.is_error]
    gate = run_gate(reg.get("problems", "kmeans-assign"), parse(text, "rewritten.cake"), reg)
    assert gate.ok, [d.message for d in gate.diagnostics]
    return text


def test_rows_per_cta_double_where_the_domain_leaves_room() -> None:
    """128 rows a CTA: 256 overflow shared memory at D=256 only, so 256 is offered written in D."""
    module = _hopper(BM=128)
    keys = _keys("tile-shapes", module)
    assert "tile-shapes@assign(BM=256)" not in keys
    assert "tile-shapes@assign(BM=256,size=D,upto=128)" in keys
    text = _applied("tile-shapes", module, "assign", BM=256, size="D", upto=128)
    assert "const BM = min(256, 32768 / D)" in text  # hopper.cake's own choice


def test_a_pipe_ring_deepens_where_the_domain_leaves_room() -> None:
    """One x stage: two overflow at D=256 only. The pipe's code never spells its depth, so a literal stage
    count is changed too (here the constant XS)."""
    module = _hopper(XS=1)
    keys = _keys("ring-depth", module)
    assert "ring-depth@assign.xs(stages=2)" not in keys
    assert "ring-depth@assign.xs(size=D,stages=2,upto=128)" in keys
    text = _applied("ring-depth", module, "assign.xs", stages=2, size="D", upto=128)
    assert "const XS = min(2, 256 / D)" in text


def test_a_literal_pipe_ring_deepens_too() -> None:
    """Written as a literal (`T[1][BM, D]`), the x pipe's ring is changed in its declaration."""
    text = print_module(_hopper()).replace("smem xs: T[XS][BM, D]", "smem xs: T[1][BM, D]")
    module = parse(text, "literal.cake")
    assert "ring-depth@assign.xs(size=D,stages=2,upto=128)" in _keys("ring-depth", module)
    out = _applied("ring-depth", module, "assign.xs", stages=2, size="D", upto=128)
    assert "smem xs: T[min(2, 256 / D)][BM, D]" in out


def test_an_offer_that_would_change_nothing_is_not_made() -> None:
    """hopper.cake's x ring is already `min(2, 256 / D)`: ring-depth offers no rewrite to the same depth."""
    module = parse(HOPPER.read_text(encoding="utf-8"), str(HOPPER))
    assert not [k for k in _keys("ring-depth", module) if k.startswith("ring-depth@assign.xs")]
