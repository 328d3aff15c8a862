"""Fixtures shared by every test directory: a live GPU runner (skipped cleanly without a driver) and a
recorder that keeps GPU measurements when ``CAKE_RESULTS_DIR`` is set."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from cake_core.convert import unstructure


@pytest.fixture(scope="session")
def gpu_runner() -> Iterator[object]:
    """A GPU worker shared by the session's tests (CUDA is never initialised in this process)."""
    from cake_core.runtime.device import driver_status
    from cake_core.runtime.worker import GpuRunner

    ok, reason = driver_status()
    if not ok:
        pytest.skip(f"no NVIDIA driver here: {reason}")
    with GpuRunner() as runner:
        yield runner


@pytest.fixture(scope="session")
def record() -> Iterator[object]:
    """``record(section, measurement_or_dict)``: appended to $CAKE_RESULTS_DIR/gpu_tests.jsonl if set."""
    directory = os.environ.get("CAKE_RESULTS_DIR")
    path = Path(directory) / "gpu_tests.jsonl" if directory else None
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)

    def write(section: str, item: object) -> None:
        if path is None:
            return
        data = dict(unstructure(item))
        data["section"] = section
        with path.open("a") as f:
            f.write(json.dumps(data) + "\n")

    yield write
