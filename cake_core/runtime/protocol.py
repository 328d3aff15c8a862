"""Messages between a :class:`~cake_core.runtime.worker.GpuRunner` and its worker process.

Everything that crosses the pipe is plain picklable data: attrs classes of this module and of
:mod:`cake_core.runtime.plan`, numpy arrays, strings and numbers. A worker hosts one *backend*
(:class:`Backend`): the CUDA driver executor in production, a fake in tests of the process machinery.
A backend that cannot start raises :class:`BackendStartError`.

Two requests exist: :class:`RunRequest` runs a launch plan; :class:`BaselineRequest` runs a problem's
baseline (a Python function named ``module:function``, imported in the worker) on the same kind of
inputs. Both are answered with a :class:`RunReply`. :func:`load_object` resolves a
``module:attribute`` name, for backends and baselines alike.

An input may be a :class:`Kept` reference instead of an array: the worker holds that array already (it
came once, in the ``keep`` field of an earlier message, see :meth:`GpuRunner.keep
<cake_core.runtime.worker.GpuRunner.keep>`), and the worker puts it back in place before its backend
sees the request. Backends only ever see arrays.
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol

import attrs
import numpy as np

from cake_core.runtime.device import DeviceInfo
from cake_core.runtime.plan import Plan, TensorSpec, Timing

__all__ = [
    "STATUSES",
    "Backend",
    "BackendStartError",
    "BaselineRequest",
    "Kept",
    "NOT_HELD",
    "RunReply",
    "RunRequest",
    "load_object",
]

#: The outcomes of a run: ``ok``; ``fault`` (a sticky CUDA error or a crashed worker: the worker is
#: replaced); ``timeout`` (the worker was killed after ``timeout_s``); ``error`` (a bad plan or a
#: CUDA error that left the context usable); ``unavailable`` (a baseline whose code cannot be
#: imported in the worker, or a backend that runs no baselines).
STATUSES = ("ok", "fault", "timeout", "error", "unavailable")


class BackendStartError(Exception):
    """A backend could not start. ``no_gpu`` says it is for want of a driver or device."""

    def __init__(self, message: str, *, no_gpu: bool = True) -> None:
        super().__init__(message)
        self.no_gpu = no_gpu


#: how a worker's reply begins when a request names a kept input it does not hold (the runner then sends
#: every kept array again)
NOT_HELD = "the worker holds no kept input"


@attrs.frozen
class Kept:
    """An input array the worker already holds, under ``key`` (it crossed the pipe once, not once per run)."""

    key: str


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
class BaselineRequest:
    """Run the baseline ``entry`` (``module:function``, see :class:`~cake_core.problems.problem.Baseline`)
    once (``timing`` None) or prepare, warm up and time it, exactly as a plan is timed; send back the
    ``fetch`` tensors.

    ``tensors`` declares the problem's tensors at this cell (inputs, whose arrays are ``inputs``, and
    outputs, allocated and poisoned by the worker before every call); ``shape`` and ``dtype`` are the
    cell, passed on to the entry.
    """

    name: str
    entry: str
    tensors: tuple[TensorSpec, ...] = attrs.field(converter=tuple)
    inputs: dict[str, np.ndarray] = attrs.field(eq=False)
    fetch: tuple[str, ...] = attrs.field(converter=tuple)
    shape: dict[str, int] = attrs.field(converter=dict)
    dtype: str
    timing: Timing | None = None

    @property
    def label(self) -> str:
        """What results are labelled with: ``baseline:NAME``."""
        return f"baseline:{self.name}"


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
    """What a worker hosts. Constructed in the worker as ``factory(ordinal)``.

    A backend may also have ``run_baseline(request: BaselineRequest) -> RunReply`` (the CUDA executor
    has); the worker answers baseline requests ``unavailable`` for one that has not.
    """

    def device_info(self) -> DeviceInfo: ...

    def run(self, request: RunRequest) -> RunReply: ...

    def close(self) -> None: ...


def load_object(spec: str) -> Any:
    """The object a ``module:attribute`` name refers to, importing the module.

    Raises ValueError for a malformed name and ImportError (or AttributeError) when it cannot be loaded.
    """
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ValueError(f"bad name `{spec}` (expected module:attribute)")
    return getattr(importlib.import_module(module_name), attr)
