"""The problem's real schedules against the rules, on the targets they are written for and others."""

from __future__ import annotations

from pathlib import Path

import pytest
from cake_core import cli
from cake_core.ir.parser import parse_file
from cake_core.verify.runner import run

SCHEDULES = Path(cli.__file__).parent / "problems" / "kmeans_assign" / "schedules"


def _report(registry, name: str, target: str):
    module, _ = parse_file(SCHEDULES / name)
    return run(module, registry.get("targets", target), registry)


@pytest.mark.parametrize("target", ["h200", "h100", "a100"])
@pytest.mark.parametrize("name", ["naive.cake", "ampere.cake"])
def test_ampere_path_schedules_verify_clean(plain_registry, name: str, target: str) -> None:
    report = _report(plain_registry, name, target)
    assert report.diagnostics == () and len(report.rules) == 8, report.diagnostics


@pytest.mark.parametrize("target", ["h200", "h100"])
def test_hopper_schedule_verifies_clean_on_sm_90a(plain_registry, target: str) -> None:
    report = _report(plain_registry, "hopper.cake", target)
    assert report.diagnostics == (), report.diagnostics


def test_hopper_schedule_fails_where_its_features_are_missing(plain_registry) -> None:
    on_b200 = _report(plain_registry, "hopper.cake", "b200")
    assert {d.code for d in on_b200.diagnostics} == {"CR101"}  # wgmma is sm_90a only
    on_a100 = _report(plain_registry, "hopper.cake", "a100")
    assert {d.code for d in on_a100.diagnostics} == {"CR101", "CR102"}  # no TMA; 192 KiB > 163 KiB


def test_ampere_schedule_fits_a10_by_1024_bytes(plain_registry) -> None:
    """At D=256 the Ampere schedule needs 100352 bytes (98 KiB: x rows 128 x (256+8) x 2, a 3-stage
    ring 3 x 128 x (32+8) x 2, the reduction scratch 2 x 128 x 2 x 4). sm_86 grants a block 101376
    (99 KiB), so the schedule fits; one more stage would not (corpus/CR102/invalid_deep_ring_on_a10)."""
    module, _ = parse_file(SCHEDULES / "ampere.cake")
    from cake_core.ir.sema import check_module

    prims = {p.name: p for p in plain_registry.values("primitives")}
    a10 = plain_registry.get("targets", "a10")
    checked = check_module(module, prims, a10)
    widest = max(m.smem_bytes for (k, _), m in checked.models.items() if k == "assign")
    assert (widest, a10.smem_per_block_optin) == (100352, 101376)
    assert _report(plain_registry, "ampere.cake", "a10").diagnostics == ()
