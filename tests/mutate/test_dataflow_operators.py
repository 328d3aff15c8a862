"""The data-flow mutation classes: each makes the mistake it names, and the verifier refuses their
mutants of the committed schedules with the cake-rules-core rule of the class (CR127 for a dropped
write of a buffer that is still read, CR128 for a dropped `limit=`), not only with a race rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from cake_core.ir import nodes as n
from cake_core.ir.parser import parse
from cake_core.ir.printer import print_module
from cake_core.mutate import OPERATORS
from cake_core.mutate.dataflow_operators import DATAFLOW_OPERATORS, shared_buffers
from cake_core.problems import kmeans_assign, knn
from cake_core.verify.runner import verify_source
from loaded import prims, registry

KMEANS = Path(kmeans_assign.__file__).parent / "schedules"
KNN = Path(knn.__file__).parent / "schedules"
SCHEDULES = [KMEANS / "hopper.cake", KMEANS / "hopper_overlap.cake", KMEANS / "ampere.cake",
             KMEANS / "explicit" / "hopper.cake", KMEANS / "explicit" / "hopper_overlap.cake",
             KNN / "fused_topk.cake"]  # fmt: skip
RULE = {"dropped-write": "CR127", "dropped-limit": "CR128"}




def _mutants(path: Path) -> list:
    module = parse(path.read_text(), path.name)
    return [m for op in DATAFLOW_OPERATORS for m in op.mutants(module, prims())]


def test_dataflow_classes_are_in_the_report() -> None:
    assert {op.name for op in DATAFLOW_OPERATORS} == set(RULE)
    assert set(RULE) <= {op.name for op in OPERATORS}


def test_each_class_makes_its_edit() -> None:
    ms = _mutants(KMEANS / "hopper.cake")
    assert {(m.operator, m.subject) for m in ms} == {
        ("dropped-write", "xs"), ("dropped-write", "cs"), ("dropped-write", "csq"), ("dropped-limit", "argmin.update"),
    }  # fmt: skip
    text = print_module(next(m for m in ms if m.subject == "csq").module)
    assert "tma.load csq" not in text and "tma.load cs[s]" in text
    text = print_module(next(m for m in ms if m.operator == "dropped-limit").module)
    assert "limit=" not in text and "base=kt * BN, scale=-2.0" in text


def test_a_write_alone_in_an_if_drops_the_if() -> None:
    ms = _mutants(KMEANS / "ampere.cake")
    text = print_module(next(m for m in ms if "cs[j % S]" in m.description).module)
    assert "if j < NT" not in text and "cp.async cs[j % S]" not in text
    assert "cp.async cs[p]" in text


def _still_read(m) -> bool:
    kernel = next(k for k in m.module.kernels if k.name == m.kernel)
    return any(m.subject in shared_buffers(op, kernel, prims(), write=False) for _, op in n.walk_ops(kernel))


@pytest.mark.parametrize("path", SCHEDULES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_mutant_is_refused_by_the_rule_of_its_class(path: Path) -> None:
    target = registry().get("targets", "h200")
    judged = 0
    for m in _mutants(path):
        if m.operator == "dropped-write" and not _still_read(m):
            continue  # a scratch buffer written and read by the dropped operation alone: nothing reads it
        report = verify_source(print_module(m.module), path.name, target, registry())
        codes = {d.code for d in report.diagnostics if d.is_error}
        assert RULE[m.operator] in codes, (m.description, sorted(codes))
        judged += 1
    assert judged >= 3
