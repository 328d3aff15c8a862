"""A GPU-free worker backend that runs baselines on the host with numpy, and baseline entries for it.

``NumpyGpu`` is ``fake_gpu.ZeroGpu`` (plans answered with zeros) plus ``run_baseline``: it follows the
contract of the real baseline host (import the entry, unavailable if it cannot be imported; outputs
poisoned before every call; prepare, then one call or warm-up and timed repetitions; the fetched
outputs sent back) with numpy arrays in place of CUDA tensors and ``perf_counter`` in place of events.
It tests the request plumbing (runner, pipe, child, reply, oracle), not the CUDA timing.

Entries (``numpy_baseline:NAME``), called as ``entry(inputs, outputs, shape, dtype)``:

- ``nearest``: kmeans-assign in float32 numpy (correct);
- ``off_by_one``: the nearest index plus one, modulo K (wrong at every point);
- ``right_once``: ``nearest`` on a request's first call, ``off_by_one`` on every later one (so right
  when run once, wrong when timed);
- ``lazy_import``: imports a module that does not exist when prepared (unavailable).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import numpy as np
from fake_gpu import ZeroGpu

from cake_core.hostdata import decode
from cake_core.runtime.prepare import host_dtype
from cake_core.runtime.protocol import BaselineRequest, RunReply, load_object


class NumpyGpu(ZeroGpu):
    def run_baseline(self, request: BaselineRequest) -> RunReply:
        try:
            entry = load_object(request.entry)
        except (ImportError, AttributeError, ValueError) as e:
            return RunReply(status="unavailable", error=f"cannot load `{request.entry}`: {e}")
        inputs = {s.name: request.inputs[s.name] for s in request.tensors if s.kind == "input"}
        outputs = {s.name: np.empty(s.shape, host_dtype(s.dtype)) for s in request.tensors if s.kind != "input"}

        def poison() -> None:
            for array in outputs.values():
                array.view(np.uint8).fill(0xFF)

        try:
            call = entry(inputs, outputs, dict(request.shape), request.dtype)
        except ImportError as e:
            return RunReply(status="unavailable", error=f"`{request.entry}` cannot be prepared: {e}")
        samples: list[float] = []
        if request.timing is None:
            poison()
            call()
        else:
            for _ in range(request.timing.warmup):
                poison()
                call()
            for _ in range(request.timing.reps):
                poison()
                t0 = time.perf_counter()
                call()
                samples.append((time.perf_counter() - t0) * 1e3)
        fetched = {name: outputs[name].copy() for name in request.fetch}
        return RunReply(status="ok", outputs=fetched, samples_ms=tuple(samples))


def _assign(shift: int) -> Callable[..., Callable[[], None]]:
    def entry(inputs: Mapping[str, np.ndarray], outputs: Mapping[str, np.ndarray], shape: Mapping[str, int],
              dtype: str) -> Callable[[], None]:  # fmt: skip
        x = decode(inputs["x"], dtype, np.float32)
        c = decode(inputs["c"], dtype, np.float32)
        c_sq = np.einsum("bkd,bkd->bk", c, c)

        def call() -> None:
            best = np.argmin(c_sq[:, None, :] - 2.0 * np.einsum("bnd,bkd->bnk", x, c), axis=-1)
            outputs["out"][...] = (best + shift) % shape["K"]

        return call

    return entry


nearest = _assign(0)
off_by_one = _assign(1)


def right_once(inputs, outputs, shape, dtype):  # type: ignore[no-untyped-def]
    right, wrong = nearest(inputs, outputs, shape, dtype), off_by_one(inputs, outputs, shape, dtype)
    calls: list[int] = []

    def call() -> None:
        (wrong if calls else right)()
        calls.append(1)

    return call


def lazy_import(inputs, outputs, shape, dtype):  # type: ignore[no-untyped-def]
    import cake_no_such_module  # noqa: F401

    raise AssertionError("unreachable")
