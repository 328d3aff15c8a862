"""Messages between a :class:`~cake_core.runtime.worker.GpuRunner` and its worker process.

Everything that crosses the pipe is plain picklable data: attrs classes of this module and of
:mod:`cake_core.runtime.plan`, numpy arrays, strings and numbers. A worker hosts one *backend*
(:class:`Backend`): the CUDA driver executor in production, a fake in tests of the process machinery.
A backend that cannot start raises :class:`BackendStartError`.
"""

from __future__ import annotations

from typing import Protocol

import attrs
import numpy as np

from cake_core.runtime.device import DeviceInfo
from cake_core.runtime.plan import Plan, Timing

__all__ = ["STATUSES", "Backend", "BackendStartError", "RunReply", "RunRequest"]

#: The outcomes of a run: ``ok``; ``fault`` (a sticky CUDA error or a crashed worker: the worker is
#: replaced); ``timeout`` (the worker was killed after ``timeout_s``); ``error`` (a bad plan or a
#: CUDA error that left the context usable).
STATUSES = ("ok", "fault", "timeout", "error")


class BackendStartError(Exception):
    """A backend could not start. ``no_gpu`` says it is for want of a driver or device."""

    def __init__(self, message: str, *, no_gpu: bool = True) -> None:
        super().__init__(message)
        self.no_gpu = no_gpu


@attrs.frozen
class RunRequest:
    """Run ``plan`` once (``timing`` None) or warm up and time it; send back the ``fetch`` tensors.

    ``sync_each_launch`` synchronizes after every launch of an untimed run so that an asynchronous
    fault is attributed to the launch that caused it.
    """

    plan: Plan
    inputs: dict[str, np.ndarray] = attrs.field(eq=False)
    fetch: tuple[str, ...] = attrs.field(converter=tuple)
    timing: Timing | None = None
    sync_each_launch: bool = True


@attrs.frozen
class RunReply:
    """What the worker sends back for one :class:`RunRequest`."""

    status: str
    error: str | None = None
    outputs: dict[str, np.ndarray] = attrs.field(factory=dict, eq=False)
    samples_ms: tuple[float, ...] = ()
    functions: dict[str, dict[str, int]] = attrs.field(factory=dict, eq=False)
    phases_s: dict[str, float] = attrs.field(factory=dict, eq=False)
    notes: tuple[str, ...] = ()
    cuda_error: str | None = None  # the CUresult name, e.g. CUDA_ERROR_ILLEGAL_ADDRESS


class Backend(Protocol):
    """What a worker hosts. Constructed in the worker as ``factory(ordinal)``."""

    def device_info(self) -> DeviceInfo: ...

    def run(self, request: RunRequest) -> RunReply: ...

    def close(self) -> None: ...
