"""The problem's real schedules against the rules, on the targets they are written for and others."""

from __future__ import annotations

from pathlib import Path

import pytest
from cake_core import cli
from cake_core.ir.parser import parse_file
from cake_core.pipeline import Candidate

import cake_rules_core

SCHEDULES = Path(cli.__file__).parent / "problems" / "kmeans_assign" / "schedules"
PACK = {cls.name for cls in cake_rules_core.RULES}


def _report(registry, name: str, target: str):
    return Candidate.load(SCHEDULES / name, registry.get("targets", target), registry).verify()


def _line(name: str, text: str) -> int:
    return next(i for i, line in enumerate((SCHEDULES / name).read_text().splitlines(), 1) if text in line)


@pytest.mark.parametrize("target", ["h200", "h100", "a100"])
@pytest.mark.parametrize("name", ["naive.cake", "ampere.cake"])
def test_ampere_path_schedules_verify_clean(pack_registry, name: str, target: str) -> None:
    report = _report(pack_registry, name, target)
    assert report.diagnostics == () and PACK <= set(report.rules), report.diagnostics


@pytest.mark.parametrize("target", ["h200", "h100"])
@pytest.mark.parametrize("name", ["hopper.cake", "hopper_overlap.cake"])
def test_hopper_schedules_verify_clean(pack_registry, name: str, target: str) -> None:
    """Every hard gate passes on sm_90a: warpgroups, register budgets, the mbarrier protocol (counts,
    expect-tx bytes, parities, no deadlock), ring hazards, proxy fences, wgmma operands, swizzles, TMA
    strides. (CR118 once caught the tensor map over an unpadded `c_sq` f32[B, K], whose K x 4-byte row
    stride is a multiple of 16 only when K is a multiple of 4; the schedules now pad its rows.)"""
    report = _report(pack_registry, name, target)
    assert report.diagnostics == () and PACK <= set(report.rules), report.diagnostics


def test_unpadded_c_sq_is_refused_by_the_tma_stride_rule(pack_registry, tmp_path: Path) -> None:
    text = (SCHEDULES / "hopper.cake").read_text()
    assert "buffer c_sq: global f32[B, cdiv(K, 4) * 4]" in text
    path = tmp_path / "hopper_unpadded.cake"
    path.write_text(text.replace("buffer c_sq: global f32[B, cdiv(K, 4) * 4]", "buffer c_sq: global f32[B, K]")
                    .replace("KP % 4 == 0, ", ""))  # fmt: skip
    report = Candidate.load(path, pack_registry.get("targets", "h200"), pack_registry).verify()
    assert [d.code for d in report.diagnostics] == ["CR118"], report.diagnostics
    assert "is not a multiple of 16" in report.diagnostics[0].message


def test_hopper_schedule_fails_where_its_features_are_missing(pack_registry) -> None:
    on_b200 = _report(pack_registry, "hopper.cake", "b200")
    assert {d.code for d in on_b200.diagnostics} == {"CR101"}  # wgmma is sm_90a only
    on_a100 = _report(pack_registry, "hopper.cake", "a100")
    assert {d.code for d in on_a100.diagnostics} == {"CR101", "CR102"}  # no TMA; 192 KiB > 163 KiB
    # one error per missing feature (not one per operation), each counting the operations that need it
    missing = [d.message.split(", which")[0] for d in on_a100.diagnostics if d.code == "CR101"]
    assert missing == [
        "`pipe.acquire` and 8 more operations in kernel `assign` need the feature `mbarrier.tx`",
        "`tma.load` and 2 more operations in kernel `assign` need the feature `tma`",
        "`wgmma` and 2 more operations in kernel `assign` need the feature `wgmma`",
    ]


def test_ampere_schedule_fits_a10_by_1024_bytes(pack_registry) -> None:
    """At D=256 the Ampere schedule needs 100352 bytes (98 KiB: x rows 128 x (256+8) x 2, a 3-stage
    ring 3 x 128 x (32+8) x 2, the reduction scratch 2 x 128 x 2 x 4). sm_86 grants a block 101376
    (99 KiB), so the schedule fits; one more stage would not (corpus/CR102/invalid_deep_ring_on_a10)."""
    module, _ = parse_file(SCHEDULES / "ampere.cake")
    from cake_core.ir.sema import check_module

    prims = {p.name: p for p in pack_registry.values("primitives")}
    a10 = pack_registry.get("targets", "a10")
    checked = check_module(module, prims, a10)
    widest = max(m.smem_bytes for (k, _), m in checked.models.items() if k == "assign")
    assert (widest, a10.smem_per_block_optin) == (100352, 101376)
    assert _report(pack_registry, "ampere.cake", "a10").diagnostics == ()
