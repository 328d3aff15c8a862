"""The pipe mutation classes: each makes the mistake it names, and the verifier refuses every mutant of
the Hopper schedules with the cake-rules-core rule of its class."""

from __future__ import annotations

from pathlib import Path

import pytest

from cake_core.ir.parser import parse
from cake_core.ir.printer import print_module
from cake_core.mutate import OPERATORS
from cake_core.mutate.pipe_operators import PIPE_OPERATORS
from cake_core.problems import kmeans_assign
from cake_core.verify.runner import verify_source
from loaded import prims, registry

SCHEDULES = Path(kmeans_assign.__file__).parent / "schedules"
#: the rule that names each class's mistake
RULE = {"pipe-trips": "CR121", "pipe-release": "CR122", "pipe-copy-stage": "CR123", "pipe-stage-outside": "CR124"}




def test_pipe_classes_are_in_the_report() -> None:
    assert {op.name for op in PIPE_OPERATORS} == set(RULE)
    assert set(RULE) <= {op.name for op in OPERATORS}


def _mutants(name: str) -> list:
    text = (SCHEDULES / name).read_text()
    module = parse(text, name)
    return [m for op in PIPE_OPERATORS for m in op.mutants(module, prims())]


def test_each_class_makes_its_edit() -> None:
    ms = _mutants("hopper.cake")
    by = {(m.operator, m.variant) for m in ms}
    assert {("pipe-trips", "+1"), ("pipe-trips", "-1"), ("pipe-release", "drop"), ("pipe-release", "twice"),
            ("pipe-copy-stage", "fixed"), ("pipe-copy-stage", "other pipe"), ("pipe-stage-outside", "fixed"),
            ("pipe-stage-outside", "early release")} <= by  # fmt: skip
    twice = next(m for m in ms if m.variant == "twice" and "cring" in m.description)
    assert print_module(twice.module).count("pipe.release cring[s]") == 2
    dropped = next(m for m in ms if m.variant == "drop" and "xring" in m.description)
    assert "pipe.release xring" not in print_module(dropped.module)


@pytest.mark.parametrize("name", ["hopper.cake", "hopper_overlap.cake"])
def test_every_pipe_mutant_is_refused_by_the_rule_of_its_class(name: str) -> None:
    target = registry().get("targets", "h200")
    ms = _mutants(name)
    assert len(ms) >= 20
    for m in ms:
        report = verify_source(print_module(m.module), name, target, registry())
        codes = {d.code for d in report.diagnostics if d.is_error}
        assert RULE[m.operator] in codes, (m.description, sorted(codes))
