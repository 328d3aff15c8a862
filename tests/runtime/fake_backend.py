"""A GPU-free worker backend for testing the worker process machinery (spawn, pipe, timeout, restart).

Its behaviour is chosen by the plan's label:

- ``echo``: every fetched tensor comes back as the input of the same name, or ``x * 2`` for outputs;
- ``sleep``: never answers (stands in for a kernel that never finishes);
- ``fault``: answers ``fault`` (stands in for an illegal address), after which the worker exits;
- ``crash``: the process dies abruptly;
- ``raise``: the backend raises (a backend bug);
- ``pid``: answers ``ok`` with the worker's pid in a note.

Setting ``FAKE_BACKEND_NO_GPU=1`` in the environment makes the backend fail to start.
"""

from __future__ import annotations

import os
import time

import numpy as np

from cake_core.runtime.device import DeviceInfo
from cake_core.runtime.protocol import BackendStartError, RunReply, RunRequest


class FakeBackend:
    def __init__(self, ordinal: int) -> None:
        if os.environ.get("FAKE_BACKEND_NO_GPU") == "1":
            raise BackendStartError("fake backend: CUDA_ERROR_NO_DEVICE (no CUDA-capable device)")
        self.info = DeviceInfo(
            ordinal=ordinal,
            name="Fake GPU",
            compute_capability=(9, 0),
            sm_count=132,
            max_threads_per_block=1024,
            max_threads_per_sm=2048,
            warp_size=32,
            max_shared_per_block=49152,
            max_shared_per_block_optin=232448,
            max_shared_per_sm=233472,
            reserved_shared_per_block=1024,
            l2_bytes=50 * 1024 * 1024,
            regs_per_sm=65536,
            regs_per_block=65536,
            max_blocks_per_sm=32,
            total_memory_bytes=141 * 2**30,
            driver_version=13000,
        )

    def device_info(self) -> DeviceInfo:
        return self.info

    def run(self, request: RunRequest) -> RunReply:
        label = request.plan.label
        if label == "sleep":
            time.sleep(3600)
        if label == "fault":
            return RunReply(
                status="fault", error="fake: CUDA_ERROR_ILLEGAL_ADDRESS", cuda_error="CUDA_ERROR_ILLEGAL_ADDRESS"
            )
        if label == "crash":
            os._exit(7)
        if label == "raise":
            raise RuntimeError("fake backend bug")
        outputs: dict[str, np.ndarray] = {}
        for name in request.fetch:
            if name in request.inputs:
                outputs[name] = request.inputs[name]
            else:
                outputs[name] = request.inputs["x"] * 2
        samples = tuple(float(i + 1) for i in range(request.timing.reps)) if request.timing else ()
        return RunReply(status="ok", outputs=outputs, samples_ms=samples, notes=(f"pid={os.getpid()}",))

    def close(self) -> None:
        pass
