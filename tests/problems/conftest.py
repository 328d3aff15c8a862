"""Fixtures for problem tests: a GPU runner and its architecture, skipped cleanly without a driver."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cake_core.runtime.device import driver_status
from cake_core.runtime.worker import GpuRunner


@pytest.fixture(scope="session")
def gpu_runner() -> Iterator[GpuRunner]:
    """A live GPU worker shared by the session's tests (CUDA is never initialised in this process)."""
    ok, reason = driver_status()
    if not ok:
        pytest.skip(f"no NVIDIA driver here: {reason}")
    with GpuRunner() as runner:
        yield runner


@pytest.fixture(scope="session")
def gpu_arch(gpu_runner: GpuRunner) -> str:
    """The plain ``sm_XY`` of the runner's GPU, what the CUDA reference is compiled for."""
    return gpu_runner.device_info().arch
