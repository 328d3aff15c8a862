"""A GPU-free worker backend that answers every run with outputs of the right shape, all zeros.

It stands in for the GPU where a test follows a candidate through ``cake bench`` or ``cake run``'s
benchmark stage: the plan crosses into a real worker process, which reports a Hopper-class device
(``fake_backend.FakeBackend``'s) and ``ok`` with zero outputs (which the oracle then finds wrong).
"""

from __future__ import annotations

import numpy as np

from cake_core.runtime.device import DeviceInfo
from cake_core.runtime.prepare import host_dtype
from cake_core.runtime.protocol import RunReply, RunRequest


class ZeroGpu:
    def __init__(self, ordinal: int) -> None:
        self.info = DeviceInfo(
            ordinal=ordinal, name="Fake GPU", compute_capability=(9, 0), sm_count=132, max_threads_per_block=1024,
            max_threads_per_sm=2048, warp_size=32, max_shared_per_block=49152, max_shared_per_block_optin=232448,
            max_shared_per_sm=233472, reserved_shared_per_block=1024, l2_bytes=50 * 2**20, regs_per_sm=65536,
            regs_per_block=65536, max_blocks_per_sm=32, total_memory_bytes=141 * 2**30, driver_version=13000,
        )  # fmt: skip

    def device_info(self) -> DeviceInfo:
        return self.info

    def run(self, request: RunRequest) -> RunReply:
        tensors = {t.name: t for t in request.plan.tensors}
        outputs = {name: np.zeros(tensors[name].shape, host_dtype(tensors[name].dtype)) for name in request.fetch}
        samples = tuple(1.0 for _ in range(request.timing.reps)) if request.timing else ()
        return RunReply(status="ok", outputs=outputs, samples_ms=samples)

    def close(self) -> None:
        pass


class ReferenceGpu(ZeroGpu):
    """Answers kmeans-assign plans with the numpy reference's outputs (so the oracle passes them) and times that
    differ by candidate: a function of the plan's cubins, the same on every run."""

    def run(self, request: RunRequest) -> RunReply:
        import zlib

        from cake_core.problems.kmeans_assign import oracle

        x, c = request.inputs["x"], request.inputs["c"]
        dtype = "bf16" if x.dtype == np.uint16 else "f16"
        outputs = {"out": oracle.nearest_numpy(x, c, dtype).astype(np.int32)}
        ms = 1.0 + zlib.crc32(b"".join(request.plan.cubins[k] for k in sorted(request.plan.cubins))) % 1000 / 1000
        samples = tuple(ms for _ in range(request.timing.reps)) if request.timing else ()
        return RunReply(status="ok", outputs={k: outputs[k] for k in request.fetch}, samples_ms=samples)
