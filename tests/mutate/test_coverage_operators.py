"""The coverage mutation classes: each makes the edit it names, and the verifier refuses every mutant
of every committed schedule with the cake-rules-core rule of its class."""

from __future__ import annotations

from pathlib import Path

import pytest

from cake_core.ir.parser import parse
from cake_core.ir.printer import print_module
from cake_core.mutate import OPERATORS
from cake_core.mutate.coverage_operators import COVERAGE_OPERATORS
from cake_core.verify.expectations import named_target
from cake_core.verify.runner import verify_source
from loaded import prims, registry

PROBLEMS = Path(__file__).resolve().parents[2] / "cake_core" / "problems"
SCHEDULES = sorted(PROBLEMS.glob("*/schedules/**/*.cake"))
#: the rule that names each class's mistake
RULE = {"grid-floor": "CR129", "dropped-self-offset": "CR130"}
#: kernels whose writes are no outputs, out of the rules' reach: they fill program buffers
#: (`c_sq`, `x_sq`, kmeans-update's sorted copy `keys` and `xs`, kmeans-iter's zeroed `sums` and `counts`, the
#: `ones` of its hopper.cake's `mark`: what a later launch reads of them is not tracked), scatter with atomics
#: (kmeans-update's `accumulate`, `histogram`, `scatter`, `segments`) or read back what they write (kmeans-iter's `assign_scatter` reads its `assign`);
#: `FILE:kernel` names one schedule's kernel (knn's hopper_split.cake and hopper_split_big.cake write partial lists a
#: merge launch reads; kmeans-update's gather.cake's `runs` fills the buffer `first` its scatter reads)
OUT_OF_REACH = {"centroid_norms", "point_norms", "accumulate", "zero_sorted", "histogram", "scatter", "segments",
                "zero", "prepare", "assign_scatter", "hopper_split.cake:topk", "hopper.cake:mark",
                "hopper_split_big.cake:topk", "gather.cake:runs"}



def _mutants(path: Path) -> list:
    module = parse(path.read_text(), str(path))
    return [m for op in COVERAGE_OPERATORS for m in op.mutants(module, prims())]


def test_coverage_classes_are_in_the_report() -> None:
    assert {op.name for op in COVERAGE_OPERATORS} == set(RULE)
    assert set(RULE) <= {op.name for op in OPERATORS}


def test_each_class_makes_its_edit() -> None:
    ms = _mutants(PROBLEMS / "kmeans_assign" / "schedules" / "hopper.cake")
    floor = [m for m in ms if m.operator == "grid-floor"]
    assert [m.kernel for m in floor] == ["centroid_norms", "assign"]
    assert "grid (w) over (min(SMS, B * (N / BM)))" in print_module(floor[1].module)
    (dropped,) = [m for m in ms if m.operator == "dropped-self-offset"]
    printed = print_module(dropped.module)
    assert "store out[b, t * BM : +ROWS] <- bi" in printed and "self * ROWS : +ROWS] <- bi" not in printed


@pytest.mark.parametrize("path", SCHEDULES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_coverage_mutant_is_refused_by_the_rule_of_its_class(path: Path) -> None:
    text = path.read_text()
    target = registry().get("targets", named_target(text))
    clean = verify_source(text, str(path), target, registry())
    assert not {d.code for d in clean.diagnostics} & set(RULE.values())
    ms = [m for m in _mutants(path) if not {m.kernel, f"{path.name}:{m.kernel}"} & OUT_OF_REACH]
    assert ms
    for m in ms:
        report = verify_source(print_module(m.module), str(path), target, registry())
        codes = {d.code for d in report.diagnostics if d.is_error}
        assert RULE[m.operator] in codes, (m.description, sorted(codes))
