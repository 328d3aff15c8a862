"""The pack as a plugin: discovery through the `cake` entry-point group, rule declarations and their
documentation, the corpus each rule must have, warnings that leave `cake verify` exiting 0, and the
real schedules (no advice for them)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cake_core import cli, plugins
from cake_core.diagnostics.diagnostic import Severity
from cake_core.verify.expectations import check_file, parse_expectations
from cake_core.pipeline import Candidate

import cake_rules_advisory

from .conftest import PACK_ONLY, allow

CORPUS = Path(__file__).parent / "corpus"
DISTRIBUTION = "cake-rules-advisory"
SCHEDULES = Path(cli.__file__).parent / "problems" / "kmeans_assign" / "schedules"

#: Ids are forever: this table changes only by adding rows.
IDS = {
    "CA101": "bank-conflict",
    "CA102": "pipeline-deeper-than-loop",
    "CA103": "occupancy-cliff",
}


def test_rules_register_through_the_entry_point(registry: plugins.Registry) -> None:
    assert registry.names("rules") == sorted(IDS) == [cls.name for cls in cake_rules_advisory.RULES]
    for rule_id, slug in IDS.items():
        reg = registry.registration("rules", rule_id)
        assert reg.plugin.distribution == DISTRIBUTION and reg.plugin.version == cake_rules_advisory.__version__
        assert reg.obj.slug == slug
        assert reg.obj.severity is Severity.WARNING  # advice, never a hard gate


@pytest.mark.parametrize("cls", cake_rules_advisory.RULES, ids=lambda c: c.name)
def test_rule_declaration_is_well_formed(cls) -> None:
    rule = cls()
    assert rule.problems() == []
    example = rule.explanation.split("## Example", 1)[1].split("## Use instead", 1)
    assert "```" in example[0] and "```" in example[1]


@pytest.mark.parametrize("rule_id", sorted(IDS))
def test_every_rule_has_two_flagged_kernels_and_a_near_miss(rule_id: str) -> None:
    files = sorted((CORPUS / rule_id).glob("*.cake"))
    invalid = [f for f in files if f.name.startswith("invalid_")]
    valid = [f for f in files if f.name.startswith("valid_")]
    assert len(invalid) >= 2 and len(valid) >= 1, files
    for f in invalid:
        _, expected = parse_expectations(f.read_text(), str(f))
        assert any(e.code == rule_id and e.severity is Severity.WARNING for e in expected), f.name
    for f in valid:
        _, expected = parse_expectations(f.read_text(), str(f))
        assert expected == (), f"{f.name} is a near miss: it must expect nothing"


@pytest.mark.parametrize("rule_id", sorted(IDS))
def test_explain_prints_the_rule(rule_id: str, capsys: pytest.CaptureFixture) -> None:
    plugins.reset()
    assert cli.main(["explain", rule_id.lower()]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{rule_id} ({IDS[rule_id]}, warning, {DISTRIBUTION} {cake_rules_advisory.__version__}): ")


def test_verify_exits_0_with_warnings_only(capsys: pytest.CaptureFixture) -> None:
    path = CORPUS / "CA101" / "invalid_ldmatrix_unpadded.cake"
    with allow(PACK_ONLY):
        plugins.reset()
        try:
            assert cli.main(["verify", str(path), "--target", "a100"]) == 0
        finally:
            plugins.reset()
    out = capsys.readouterr().out
    assert "warning[CA101]" in out and "error" not in out.split("warning[CA101]")[0]


@pytest.mark.parametrize("target", ["h200", "a100"])
@pytest.mark.parametrize("name", ["naive.cake", "ampere.cake", "hopper.cake", "hopper_overlap.cake"])
def test_the_real_schedules_get_no_advice(registry, name: str, target: str) -> None:
    report = Candidate.load(SCHEDULES / name, registry.get("targets", target), registry).verify()
    assert report.diagnostics == () and set(IDS) <= set(report.rules), report.diagnostics


def _diags(registry, rel: str):
    outcome = check_file(CORPUS / rel, registry)
    assert outcome.ok, outcome.explain()
    return outcome.diagnostics


def test_ca102_names_each_specialization_and_its_unused_stages(registry) -> None:
    assert [d.message for d in _diags(registry, "CA102/invalid_stage_per_k_chunk.cake")] == [
        "`xs` has 4 stages, but the loops that fill it run at most 1 time(s) a CTA: 3 stage(s) never hold data "
        "(with D=64)",
        "`xs` has 4 stages, but the loops that fill it run at most 2 time(s) a CTA: 2 stage(s) never hold data "
        "(with D=128)",
    ]


def test_ca103_says_how_much_to_give_up(registry) -> None:
    (d,) = _diags(registry, "CA103/invalid_shared_memory_just_over_half.cake")
    assert d.message == (
        "kernel `rows` needs 118528 bytes of shared memory a CTA (115.8 KiB with the runtime's reservation): 1 CTA(s) "
        "fit an SM of `h200`; 1792 bytes (1.5%) less would fit 2"
    )
