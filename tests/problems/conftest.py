"""Fixtures for problem tests: the GPU runner's architecture (the runner itself is in tests/conftest.py)
and the texts of the kmeans-update and knn schedules."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from cake_core.problems import kmeans_update, knn
from cake_core.runtime.worker import GpuRunner

SCHEDULES = {
    "atomic": Path(kmeans_update.__file__).parent / "schedules" / "atomic.cake",
    "fused_topk": Path(knn.__file__).parent / "schedules" / "fused_topk.cake",
}


@pytest.fixture(scope="session")
def gpu_arch(gpu_runner: GpuRunner) -> str:
    """The plain ``sm_XY`` of the runner's GPU, what the CUDA reference is compiled for."""
    return gpu_runner.device_info().arch


@pytest.fixture(scope="session")
def schedule_text() -> Callable[[str], str]:
    return lambda name: SCHEDULES[name].read_text()
