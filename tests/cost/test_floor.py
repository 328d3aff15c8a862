"""The floor (``cake_core.cost.floor``): the bound it computes, the rates it takes, and that no correct
kmeans-assign measurement recorded on an H200 in ``bench/results`` ever beat it."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest
from cake_core import plugins
from cake_core.cost.floor import floor_ms, peak_gbs, peak_tflops

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"
DEFAULT = {"B": 32, "N": 65536, "K": 1024, "D": 128}


@pytest.fixture(scope="module")
def problem():
    return plugins.registry().get("problems", "kmeans-assign")


@pytest.fixture(scope="module")
def h200():
    return plugins.registry().get("targets", "h200")


def test_the_default_cell_is_bound_by_the_tensor_peak(problem, h200) -> None:
    # 550 GFLOP at the datasheet's 989.4 bf16 TFLOP/s (above the 761 measured: the floor takes the higher)
    assert peak_tflops(h200, "bf16") == 989.4 and peak_tflops(h200, "f16") == 989.4
    assert floor_ms(problem, DEFAULT, "bf16", h200) == pytest.approx(2 * 32 * 65536 * 1024 * 128 / 989.4e12 * 1e3)
    assert floor_ms(problem, DEFAULT, "bf16", h200) == pytest.approx(0.5556, abs=1e-4)


def test_one_centroid_is_bound_by_dram(problem, h200) -> None:
    shape = {**DEFAULT, "K": 1}
    assert peak_gbs(h200) == 4800.0
    assert floor_ms(problem, shape, "bf16", h200) == pytest.approx(problem.min_bytes(shape, "bf16") / 4800e9 * 1e3)


def test_a_measured_ceiling_above_the_datasheet_raises_the_rate(h200) -> None:
    from cake_core.target import Ceiling

    faster = attrs.evolve(h200, measured=(Ceiling("copy_gbs", 5000.0, "GB/s", "2026-12-01", "test"),
                                          Ceiling("bf16_tflops", 1000.0, "TFLOP/s", "2026-12-01", "test")))
    assert peak_gbs(faster) == 5000.0 and peak_tflops(faster, "bf16") == 1000.0


def test_an_element_type_without_a_tensor_rate_takes_the_fastest_listed(h200) -> None:
    assert peak_tflops(h200, "i8") == max(h200.tensor_tflops.values())


def test_no_recorded_correct_measurement_beats_the_floor(problem) -> None:
    """Every correct kmeans-assign time recorded on an H200 (the committed schedules, flash-kmeans, torch)
    lies above the floor; the fastest, hopper at the default cell (1.106 ms), is 1.99 times it."""
    targets = plugins.registry()
    ratios = []
    for path in sorted(RESULTS.glob("*.json")):
        data = json.loads(path.read_text())
        records = data if isinstance(data, list) else data.get("measurements", data.get("results", []))
        for m in records if isinstance(records, list) else []:
            if not (isinstance(m, dict) and m.get("problem") == "kmeans-assign" and m.get("correct")
                    and m.get("median_ms") and m.get("gpu") == "NVIDIA H200"):  # fmt: skip
                continue
            floor = floor_ms(problem, m["shape"], m["dtype"], targets.get("targets", "h200"))
            ratios.append((m["median_ms"] / floor, path.name, m["impl"], m["shape"]))
    assert len(ratios) >= 100
    assert min(ratios)[0] > 1.5, min(ratios)
