"""The Blackwell mutation classes: each makes the mistake it names on a valid kernel, and the verifier
refuses every mutant that still type-checks with the BW rule of its class (the mutation-kill test of
the pack, as ``tests/mutate`` does for the core's classes and cake-rules-core)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cake_core.ir.parser import parse
from cake_core.ir.printer import print_module
from cake_core.ir.sema import check_module
from cake_core.verify.runner import verify_source

from cake_blackwell.mutations import CAUGHT_BY, MUTATIONS

HERE = Path(__file__).parent
CORPUS = HERE / "corpus"
#: the valid kernels each class has sites in
SUBJECTS = {
    "tmem-columns": [CORPUS / "BW101" / "valid_exact_fit.cake"],
    "dropped-tmem-release": [HERE / "mma.cake", CORPUS / "BW102" / "valid_relinquish_after_dealloc.cake",
                             HERE.parent / "cake_blackwell" / "schedules" / "blackwell.cake"],
    "role-order-swap": [CORPUS / "BW103" / "valid_epilogue_first.cake", CORPUS / "BW104" / "valid_epilogue_waits_commit.cake"],
    "dropped-commit-wait": [HERE / "mma.cake", CORPUS / "BW104" / "valid_epilogue_waits_commit.cake"],
}  # fmt: skip


def _mutants(cls: str, path: Path, registry) -> list:
    prims = {p.name: p for p in registry.values("primitives")}
    (op,) = [m for m in MUTATIONS if m.name == cls]
    return list(op.mutants(parse(path.read_text(), str(path)), prims))


def test_registered_through_the_hook(registry):
    assert registry.registered_by("blackwell")["mutations"] == sorted(CAUGHT_BY)
    for m in MUTATIONS:
        assert registry.get("mutations", m.name) is m
        assert registry.registration("mutations", m.name).plugin.distribution == "cake-blackwell"


def test_every_class_has_a_rule_and_subjects():
    assert [m.name for m in MUTATIONS] == list(CAUGHT_BY) == list(SUBJECTS)
    assert sorted(CAUGHT_BY.values()) == ["BW101", "BW102", "BW103", "BW104"]
    for m in MUTATIONS:
        assert m.summary and "\n" not in m.summary


def test_each_class_makes_its_edit(pack_registry):
    (cols,) = [m for m in _mutants("tmem-columns", SUBJECTS["tmem-columns"][0], pack_registry) if m.subject == "aux"]
    assert "tmem aux: f32[128, 256]" in print_module(cols.module)
    dropped = _mutants("dropped-tmem-release", HERE / "mma.cake", pack_registry)
    assert sorted(m.variant for m in dropped) == ["dealloc", "relinquish"]
    assert all("tcgen05.dealloc" not in print_module(m.module) for m in dropped if m.variant == "dealloc")
    (swap,) = _mutants("role-order-swap", SUBJECTS["role-order-swap"][0], pack_registry)
    text = print_module(swap.module)
    assert "role epi warps 1..5:" in text and "role mma warps 0..1:" in text
    (wait,) = _mutants("dropped-commit-wait", HERE / "mma.cake", pack_registry)
    assert "mbarrier.wait done" not in print_module(wait.module)
    assert "mbarrier.wait loaded" in print_module(wait.module)  # a wait no commit arrives on stays


@pytest.mark.parametrize("cls", list(CAUGHT_BY))
def test_every_mutant_is_refused_by_the_rule_of_its_class(cls, pack_registry):
    target = pack_registry.get("targets", "b200")
    prims = pack_registry.by_name("primitives")
    judged = 0
    for path in SUBJECTS[cls]:
        assert verify_source(path.read_text(), str(path), target, pack_registry).ok, path  # the subject is valid
        ms = _mutants(cls, path, pack_registry)
        assert ms, (cls, path)
        for m in ms:
            text = print_module(m.module)
            if not check_module(parse(text, str(path)), prims, target, layouts=pack_registry.by_name("layouts")).ok:
                continue  # a mutant the type checker refuses is not the rule's to catch
            report = verify_source(text, str(path), target, pack_registry)
            codes = {d.code for d in report.diagnostics if d.is_error}
            assert CAUGHT_BY[cls] in codes, (m.description, sorted(codes))
            judged += 1
    assert judged, cls
