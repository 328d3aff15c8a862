"""The witness search skips a size assignment whose walk can reach no leaf (a let that always fails, an
empty loop, a false guard, at those sizes) with the verdicts, witnesses and sample counts of the full walk."""

from __future__ import annotations

import pytest
from cake_core import plugins
from cake_core.ir.parser import parse
from cake_core.ir.sema import check_module
from cake_core.verify.domain import KernelDomain
from cake_core.verify.witness import WitnessSearch

HEAD = """kernel k(x: global f32[N, D], out: global f32[N])
  domain N >= 1, D in {64, 128, 256}
  const R = 128
  const XS = 255 / D
  grid (t) over (cdiv(N, R))
  cta warps 4
  role all warps 0..4:
    reg s: f32[R] layout rows
"""
BODY = "    sumsq s <- x[t * R : +R, :], oob=zero\n    store out[t * R : +R] <- s\n"
#: at D = 256, XS is 0: the let divides by zero wherever the walk meets it, the loop is empty, the guard false
CASES = {
    "zero divisor": "    let xb = t % XS\n" + BODY,
    "empty loop": "    for i in 0 .. XS:\n" + BODY.replace("    ", "      "),
    "false guard": "    if XS > 0:\n" + BODY.replace("    ", "      "),
}


def _verdicts(text: str) -> list[tuple]:
    reg = plugins.registry()
    prims = {p.name: p for p in reg.values("primitives")}
    checked = check_module(parse(text, "k.cake"), prims, reg.get("targets", "h200"))
    assert checked.ok
    return [
        (spec.label, av.typed.op.loc.line, av.operand.slot.name, av.verdict.status, av.verdict.samples,
         av.verdict.witness)
        for (_, spec), model in checked.models.items()
        for av in KernelDomain(model).accesses()
    ]  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
def test_skipping_unreachable_assignments_changes_no_verdict(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    text = HEAD + CASES[case]
    skipped = []
    unreachable = WitnessSearch._unreachable

    def counted(checks, env):  # type: ignore[no-untyped-def]
        out = unreachable(checks, env)
        skipped.append(out)
        return out

    monkeypatch.setattr(WitnessSearch, "_unreachable", staticmethod(counted))
    pruned = _verdicts(text)
    assert any(skipped)  # the D = 256 walks were skipped
    monkeypatch.setattr(WitnessSearch, "_unreachable", staticmethod(lambda checks, env: False))
    assert pruned == _verdicts(text)
    # the store's tail is found at D = 64 and D = 128, where the walk reaches it
    assert {v[0] for v in pruned if v[3].value == "violated"} == {"D=64", "D=128"}
