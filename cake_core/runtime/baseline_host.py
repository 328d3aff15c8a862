"""Run a problem's baseline inside a GPU worker, on the executor's stream, timed as plans are timed.

Imported only in a worker process, and only when a
:class:`~cake_core.runtime.protocol.BaselineRequest` arrives (it imports torch there). For one request
:func:`run_baseline`

1. imports the baseline's entry (``module:function``); one that cannot be imported, or whose own
   lazy imports fail, makes the reply ``unavailable`` with the reason;
2. makes torch's current stream the executor's stream, so that torch and Triton work and the
   executor's poison, L2 flush and CUDA events are ordered on one stream;
3. copies the inputs to the GPU as torch tensors (bf16 bit patterns as ``torch.bfloat16``) and
   allocates the outputs;
4. calls the entry, which prepares (operands the baseline is given precomputed, autotuning) and
   returns the callable to time: all of this is outside any timed region;
5. untimed: poisons the outputs, calls once, synchronizes; timed:
   :meth:`~cake_core.runtime.executor.CudaExecutor.time_work`, the very loop that times plans (warm-up,
   then each repetition poisoned and L2-flushed outside CUDA events around the call);
6. copies the fetched tensors back as host storage arrays (:func:`~cake_core.runtime.prepare.host_dtype`).

Failures other than imports propagate to the executor, which turns them into ``error`` or ``fault``.
"""

from __future__ import annotations

import time
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np

from cake_core.runtime.prepare import host_dtype, poison_fill
from cake_core.runtime.protocol import BaselineRequest, RunReply, load_object

if TYPE_CHECKING:
    from cake_core.runtime.executor import CudaExecutor

__all__ = ["TORCH_DTYPES", "run_baseline"]

#: The Cake element types a baseline's tensors may have, and their torch names.
TORCH_DTYPES = {
    "bf16": "bfloat16",
    "f16": "float16",
    "f32": "float32",
    "f64": "float64",
    "i32": "int32",
    "i64": "int64",
    "i8": "int8",
    "u8": "uint8",
}


def _unavailable(request: BaselineRequest, e: BaseException) -> RunReply:
    return RunReply(
        status="unavailable",
        error=f"baseline `{request.name}` cannot be loaded in the GPU worker: {type(e).__name__}: {e}",
    )


def _to_device(torch: Any, array: np.ndarray, dtype: str, device: Any) -> Any:
    host = np.ascontiguousarray(array, dtype=host_dtype(dtype))
    with warnings.catch_warnings():  # a kept input is read-only; it is only copied to the device here
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        if dtype == "bf16":  # numpy has no bfloat16: move the bits, then view them
            return torch.from_numpy(host.view(np.int16)).to(device).view(torch.bfloat16)
        return torch.from_numpy(host).to(device)


def _to_host(torch: Any, tensor: Any, dtype: str) -> np.ndarray:
    if dtype == "bf16":
        return tensor.view(torch.int16).cpu().numpy().view(np.uint16)
    return tensor.cpu().numpy().astype(host_dtype(dtype), copy=False)


def run_baseline(
    executor: CudaExecutor, request: BaselineRequest, events: list[Any], phases: dict[str, float]
) -> RunReply:
    """Run ``request`` on ``executor``'s device and stream (see the module docstring).

    ``events`` collects the CUDA events the timing creates and ``phases`` the time spent in each
    phase; the executor frees the one and reports the other.
    """
    t0 = time.perf_counter()
    try:
        entry = load_object(request.entry)
        import torch
    except (ImportError, AttributeError, ValueError) as e:
        return _unavailable(request, e)
    bad = [s.name for s in request.tensors if s.dtype not in TORCH_DTYPES]
    if bad:
        return RunReply(status="error", error=f"baseline tensors {bad} have element types torch cannot hold here")
    missing = [s.name for s in request.tensors if s.kind == "input" and s.name not in request.inputs]
    unknown = [n for n in request.fetch if n not in {s.name for s in request.tensors}]
    if missing or unknown:
        return RunReply(status="error", error=f"bad baseline request: inputs {missing} missing, fetch {unknown} unknown")
    torch.cuda.set_device(executor.ordinal)
    device = torch.device("cuda", executor.ordinal)
    specs = {s.name: s for s in request.tensors}
    with torch.cuda.stream(torch.cuda.ExternalStream(int(executor.stream), device=device)):
        tensors = {
            s.name: _to_device(torch, request.inputs[s.name], s.dtype, device)
            if s.kind == "input"
            else torch.empty(s.shape, dtype=getattr(torch, TORCH_DTYPES[s.dtype]), device=device)
            for s in request.tensors
        }
        inputs = {s.name: tensors[s.name] for s in request.tensors if s.kind == "input"}
        outputs = {s.name: tensors[s.name] for s in request.tensors if s.kind != "input"}
        fills = [(executor.cu.CUdeviceptr(outputs[n].data_ptr()), poison_fill(specs[n])) for n in outputs]
        torch.cuda.current_stream().synchronize()
        phases["upload_s"] = time.perf_counter() - t0

        t1 = time.perf_counter()
        try:
            call = entry(inputs, outputs, dict(request.shape), request.dtype)
        except ImportError as e:
            return _unavailable(request, e)
        torch.cuda.current_stream().synchronize()
        phases["prepare_s"] = time.perf_counter() - t1  # imports, precomputed operands, autotuning

        t2 = time.perf_counter()
        samples: list[float] = []
        notes: list[str] = []
        if request.timing is None:
            executor.poison(fills)
            call()
            torch.cuda.current_stream().synchronize()
        else:
            samples, notes = executor.time_work(request.timing, lambda: executor.poison(fills), call, events)
        phases["run_s"] = time.perf_counter() - t2

        t3 = time.perf_counter()
        fetched = {n: _to_host(torch, tensors[n], specs[n].dtype) for n in request.fetch}
        phases["download_s"] = time.perf_counter() - t3
    del tensors, inputs, outputs, call
    torch.cuda.empty_cache()
    return RunReply(status="ok", outputs=fetched, samples_ms=tuple(samples), phases_s=phases, notes=tuple(notes))
