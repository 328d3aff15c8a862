"""Fixtures for problem tests: the GPU runner's architecture (the runner itself is in tests/conftest.py)."""

from __future__ import annotations

import pytest

from cake_core.runtime.worker import GpuRunner


@pytest.fixture(scope="session")
def gpu_arch(gpu_runner: GpuRunner) -> str:
    """The plain ``sm_XY`` of the runner's GPU, what the CUDA reference is compiled for."""
    return gpu_runner.device_info().arch
