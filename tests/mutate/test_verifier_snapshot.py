"""The verifier says exactly what it said before it was optimized, on every schedule, every corpus file
and a sample of their mutants (see ``verifier_snapshot.py`` for what is recorded and how)."""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest
import verifier_snapshot as vs


@functools.cache
def _snapshot() -> dict[str, Any]:
    return json.loads(vs.SNAPSHOT.read_text())


@functools.cache
def _registry() -> Any:
    return vs.registry()


def _bases() -> list[str]:
    return sorted(_snapshot()["bases"])


def test_snapshot_covers_every_rule_and_many_outcomes() -> None:
    snap = _snapshot()
    codes = {d["code"] for case in snap["cases"] for d in case["expect"]["diagnostics"]}
    assert set(snap["rules"]) <= codes  # every rule of the pack fires somewhere
    assert {"CK006", "CK010"} <= codes  # type errors too
    assert sum(1 for case in snap["cases"] if case["expect"]["accesses"]) > 20  # unproved accesses recorded
    assert len(snap["cases"]) > 500


@pytest.mark.parametrize("base", _bases())
def test_verifier_matches_snapshot(base: str) -> None:
    snap = _snapshot()
    reg = _registry()
    codes = frozenset(snap["rules"])
    mismatches = []
    for case_id, path, target, text, expect in vs.cases(snap):
        if case_id != base and not case_id.startswith(base + "~"):
            continue
        got = vs.observe(text, path, target, reg, codes)
        for key in ("diagnostics", "accesses", "digest"):
            if got[key] != expect[key]:
                mismatches.append(f"{case_id}: {key} differ\n  expected {expect[key]}\n  got      {got[key]}")
    assert not mismatches, "\n".join(mismatches)
