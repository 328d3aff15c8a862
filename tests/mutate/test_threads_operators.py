"""The thread mutation classes: each makes the mistake it names, the verifier refuses every mutant of
the schedules it applies to with the cake-rules-core rule of its class, and the interpreter finds the
race the elected release leaves."""

from __future__ import annotations

from pathlib import Path

import pytest

from cake_core.ir.parser import parse
from cake_core.ir.printer import print_module
from cake_core.ir.sema import check_module
from cake_core.mutate import OPERATORS
from cake_core.mutate.threads_operators import THREADS_OPERATORS
from cake_core.problems import kmeans_assign
from cake_core.problems.kmeans_assign import KMEANS_ASSIGN
from cake_core.semantics import run_program
from cake_core.verify.runner import verify_source
from loaded import prims, registry

SCHEDULES = Path(kmeans_assign.__file__).parent / "schedules"
RULE = {"arrive-per-instance": "CR125", "dropped-instance-sync": "CR126"}
#: the schedules each class has sites in
SUBJECTS = {"arrive-per-instance": ["explicit/hopper.cake", "explicit/hopper_overlap.cake"],
            "dropped-instance-sync": ["ampere.cake"]}  # fmt: skip
#: mutants that change nothing: `xempty` releases `xs`, which only `wgmma` reads, one unit's read
#: for the whole warpgroup, complete for the elected thread once it waited for the group
EQUIVALENT = {"xempty"}




def _mutants(name: str, cls: str) -> list:
    module = parse((SCHEDULES / name).read_text(), name)
    return [m for op in THREADS_OPERATORS if op.name == cls for m in op.mutants(module, prims())]


def test_thread_classes_are_registered() -> None:
    assert {op.name for op in THREADS_OPERATORS} == set(RULE)
    assert set(RULE) <= {op.name for op in OPERATORS}


def test_each_class_makes_its_edit() -> None:
    (m,) = [m for m in _mutants("explicit/hopper.cake", "arrive-per-instance") if m.subject == "cempty"]
    text = print_module(m.module)
    assert "mbarrier.arrive cempty[s], per=instance" in text
    assert "barrier cempty: mbarrier[S] count 128 * WG / (32 * 4)" in text
    (d,) = _mutants("ampere.cake", "dropped-instance-sync")
    assert "bar.sync" not in print_module(d.module)
    # a barrier another role also arrives on is left alone; so is an arrival already per instance
    assert all(m.subject in ("cempty", "xempty") for m in _mutants("explicit/hopper.cake", "arrive-per-instance"))


@pytest.mark.parametrize("cls", sorted(RULE))
def test_every_thread_mutant_is_refused_by_the_rule_of_its_class(cls: str) -> None:
    target = registry().get("targets", "h200")
    for name in SUBJECTS[cls]:
        ms = [m for m in _mutants(name, cls) if m.subject not in EQUIVALENT]
        assert ms, name
        for m in ms:
            report = verify_source(print_module(m.module), name, target, registry())
            codes = {d.code for d in report.diagnostics if d.is_error}
            assert RULE[cls] in codes, (m.description, sorted(codes))


def test_the_interpreter_names_the_threads_an_elected_release_leaves_unordered() -> None:
    (m,) = [m for m in _mutants("explicit/hopper.cake", "arrive-per-instance") if m.subject == "cempty"]
    checked = check_module(m.module, prims())
    sizes = {"B": 2, "N": 130, "K": 300, "D": 64}  # two tiles: the ring of four stages wraps
    inputs = KMEANS_ASSIGN.make_inputs(sizes, "bf16", 3)
    result = run_program(checked, inputs, {**sizes, "T": "bf16"}, policy="sequential", sms=1)
    (race,) = result.by_code("CS003")
    assert "`csq` stage 0" in race.message and "by one elected thread of its 128" in race.message
    assert "the other 127 threads' accesses" in race.message
    # the unmutated schedule runs clean at the same shape
    clean = check_module(parse((SCHEDULES / "explicit/hopper.cake").read_text(), "hopper.cake"), prims())
    assert run_program(clean, inputs, {**sizes, "T": "bf16"}, policy="sequential", sms=1).ok
