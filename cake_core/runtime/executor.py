"""Run launch plans with the CUDA driver API (``cuda.bindings.driver``). Imported only in worker processes.

One :class:`CudaExecutor` lives in one spawned worker: it initializes CUDA (``cuInit``, the device's
primary context, one stream), loads cubins (``cuModuleLoadData``, cached by content), and for each
:class:`~cake_core.runtime.protocol.RunRequest`:

1. allocates every tensor of the plan and copies the inputs in;
2. encodes each TMA tensor map with ``cuTensorMapEncodeTiled`` (it needs the driver, so it happens
   here) and packs every argument for ``cuLaunchKernel`` (pointers as ``CUdeviceptr``, scalars by
   ctype, tensor maps as the 128-byte ``CUtensorMap`` by value);
3. raises a kernel's ``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`` where its dynamic shared
   memory exceeds the default limit;
4. before *every* run poisons outputs and scratch (``cuMemsetD8/D16/D32``);
5. untimed: launches in order, synchronizing after each launch so a fault names its launch; timed:
   ``warmup`` runs, then ``reps`` runs, each preceded (outside the timed region) by the poison and an
   L2 flush (a memset over ``flush_bytes``), and timed with CUDA events around the whole launch
   sequence on one stream;
6. copies the fetched tensors back and frees everything.

:meth:`CudaExecutor.time_work` is that timing loop (5.) on its own: a problem's baseline, run in the
same worker by :mod:`cake_core.runtime.baseline_host`, is timed by it too.

Every CUDA return code is checked. A sticky error (illegal address, launch failure, ...) or any
error after which the context no longer synchronizes makes the reply ``fault``; the worker then
exits and the runner starts a fresh one. Nothing here ever resets the device.
"""

from __future__ import annotations

import ctypes
import hashlib
import time
import traceback
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

from cake_core.runtime.device import DeviceInfo
from cake_core.runtime.plan import KernelLaunch, Plan, ScalarArg, TensorArg, TensorMapArg, Timing
from cake_core.runtime.prepare import host_dtype, poison_fill, scalar_value, tensor_nbytes, validate_run
from cake_core.runtime.protocol import BackendStartError, BaselineRequest, RunReply, RunRequest

__all__ = ["STICKY_ERRORS", "CudaError", "CudaExecutor", "encode_tensor_map", "pack_params"]

#: CUresult names after which a context is unusable (the worker must be replaced).
STICKY_ERRORS = frozenset(
    {
        "CUDA_ERROR_ILLEGAL_ADDRESS",
        "CUDA_ERROR_LAUNCH_FAILED",
        "CUDA_ERROR_LAUNCH_TIMEOUT",
        "CUDA_ERROR_ASSERT",
        "CUDA_ERROR_HARDWARE_STACK_ERROR",
        "CUDA_ERROR_ILLEGAL_INSTRUCTION",
        "CUDA_ERROR_MISALIGNED_ADDRESS",
        "CUDA_ERROR_INVALID_ADDRESS_SPACE",
        "CUDA_ERROR_INVALID_PC",
        "CUDA_ERROR_ECC_UNCORRECTABLE",
        "CUDA_ERROR_NVLINK_UNCORRECTABLE",
        "CUDA_ERROR_CONTEXT_IS_DESTROYED",
        "CUDA_ERROR_TENSOR_MEMORY_LEAK",
        "CUDA_ERROR_CONTAINED",
        "CUDA_ERROR_EXTERNAL_DEVICE",
        "CUDA_ERROR_UNKNOWN",
    }
)

_DTYPE_TO_TMAP = {
    "bf16": "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16",
    "f16": "CU_TENSOR_MAP_DATA_TYPE_FLOAT16",
    "f32": "CU_TENSOR_MAP_DATA_TYPE_FLOAT32",
    "f64": "CU_TENSOR_MAP_DATA_TYPE_FLOAT64",
    "tf32": "CU_TENSOR_MAP_DATA_TYPE_TFLOAT32",
    "i32": "CU_TENSOR_MAP_DATA_TYPE_INT32",
    "u32": "CU_TENSOR_MAP_DATA_TYPE_UINT32",
    "i64": "CU_TENSOR_MAP_DATA_TYPE_INT64",
    "u8": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
    "i8": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
    "fp8e4m3": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
    "fp8e5m2": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
}
_SWIZZLE = {
    "none": "CU_TENSOR_MAP_SWIZZLE_NONE",
    "32B": "CU_TENSOR_MAP_SWIZZLE_32B",
    "64B": "CU_TENSOR_MAP_SWIZZLE_64B",
    "128B": "CU_TENSOR_MAP_SWIZZLE_128B",
}
_L2 = {
    0: "CU_TENSOR_MAP_L2_PROMOTION_NONE",
    64: "CU_TENSOR_MAP_L2_PROMOTION_L2_64B",
    128: "CU_TENSOR_MAP_L2_PROMOTION_L2_128B",
    256: "CU_TENSOR_MAP_L2_PROMOTION_L2_256B",
}

# DeviceInfo field -> CU_DEVICE_ATTRIBUTE_* suffix (all required).
_REQUIRED_ATTRIBUTES = {
    "sm_count": "MULTIPROCESSOR_COUNT",
    "max_threads_per_block": "MAX_THREADS_PER_BLOCK",
    "max_threads_per_sm": "MAX_THREADS_PER_MULTIPROCESSOR",
    "warp_size": "WARP_SIZE",
    "max_shared_per_block": "MAX_SHARED_MEMORY_PER_BLOCK",
    "max_shared_per_block_optin": "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN",
    "max_shared_per_sm": "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR",
    "reserved_shared_per_block": "RESERVED_SHARED_MEMORY_PER_BLOCK",
    "l2_bytes": "L2_CACHE_SIZE",
    "regs_per_sm": "MAX_REGISTERS_PER_MULTIPROCESSOR",
    "regs_per_block": "MAX_REGISTERS_PER_BLOCK",
    "max_blocks_per_sm": "MAX_BLOCKS_PER_MULTIPROCESSOR",
}
_OPTIONAL_ATTRIBUTES = (
    "MAX_PERSISTING_L2_CACHE_SIZE",
    "CLOCK_RATE",
    "MEMORY_CLOCK_RATE",
    "GLOBAL_MEMORY_BUS_WIDTH",
    "CLUSTER_LAUNCH",
    "TENSOR_MAP_ACCESS_SUPPORTED",
    "ECC_ENABLED",
    "COMPUTE_MODE",
    "KERNEL_EXEC_TIMEOUT",
    "TOTAL_CONSTANT_MEMORY",
    "INTEGRATED",
)
_FUNCTION_ATTRIBUTES = {
    "registers": "NUM_REGS",
    "local_bytes": "LOCAL_SIZE_BYTES",
    "static_shared_bytes": "SHARED_SIZE_BYTES",
    "const_bytes": "CONST_SIZE_BYTES",
    "max_threads_per_block": "MAX_THREADS_PER_BLOCK",
    "max_dynamic_shared_bytes": "MAX_DYNAMIC_SHARED_SIZE_BYTES",
    "binary_version": "BINARY_VERSION",
    "ptx_version": "PTX_VERSION",
}
_MODULE_CACHE_SIZE = 128


class CudaError(Exception):
    """A CUDA driver call returned an error. ``name`` is the CUresult name."""

    def __init__(self, call: str, name: str, text: str) -> None:
        self.call, self.name, self.text = call, name, text
        super().__init__(f"{call}: {name} ({text})" if text else f"{call}: {name}")

    @property
    def sticky(self) -> bool:
        return self.name in STICKY_ERRORS


class PlanError(Exception):
    """The plan cannot run on this device (found in the worker, e.g. too much shared memory)."""


def _result_name(err: Any) -> str:
    return getattr(err, "name", None) or f"CUresult {int(err)}"


def _check(cu: Any, call: str, result: Any) -> Any:
    """Unpack a cuda.bindings result tuple; raise :class:`CudaError` unless CUDA_SUCCESS."""
    if not isinstance(result, tuple):
        result = (result,)
    err, *values = result
    if err != cu.CUresult.CUDA_SUCCESS:
        text = ""
        try:
            e2, s = cu.cuGetErrorString(err)
            if e2 == cu.CUresult.CUDA_SUCCESS and s:
                text = s.decode(errors="replace") if isinstance(s, bytes) else str(s)
        except Exception:  # the error text is a courtesy
            text = ""
        raise CudaError(call, _result_name(err), text)
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


def encode_tensor_map(cu: Any, arg: TensorMapArg, address: int) -> Any:
    """``cuTensorMapEncodeTiled`` for ``arg`` over device memory at ``address``; returns a CUtensorMap."""
    rank = len(arg.dims)
    return _check(
        cu,
        f"cuTensorMapEncodeTiled(`{arg.name}`)",
        cu.cuTensorMapEncodeTiled(
            getattr(cu.CUtensorMapDataType, _DTYPE_TO_TMAP[arg.dtype]),
            rank,
            cu.CUdeviceptr(address),
            [cu.cuuint64_t(int(d)) for d in arg.dims],
            [cu.cuuint64_t(int(s)) for s in arg.strides],
            [cu.cuuint32_t(int(b)) for b in arg.box],
            [cu.cuuint32_t(1) for _ in range(rank)],
            cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
            getattr(cu.CUtensorMapSwizzle, _SWIZZLE[arg.swizzle]),
            getattr(cu.CUtensorMapL2promotion, _L2[arg.l2_promotion]),
            cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        ),
    )


class PackedParams:
    """The ``void**`` array ``cuLaunchKernel`` reads, with every value it points to kept alive."""

    def __init__(self, values: list[Any], pointers: list[int]) -> None:
        self._values = values  # ctypes scalars and CUtensorMap objects: must outlive the launch
        self._array = (ctypes.c_void_p * max(len(pointers), 1))(*pointers)
        self.count = len(pointers)

    @property
    def address(self) -> int:
        """The ``kernelParams`` argument (0 for a kernel without parameters)."""
        return ctypes.addressof(self._array) if self.count else 0


def pack_params(launch: KernelLaunch, pointers: dict[str, int], tensor_maps: dict[TensorMapArg, Any]) -> PackedParams:
    """Pack a launch's arguments: TensorArg as a 64-bit device pointer, ScalarArg by its ctype,
    TensorMapArg as the address of its encoded 128-byte CUtensorMap (passed by value)."""
    values: list[Any] = []
    addrs: list[int] = []
    for arg in launch.args:
        if isinstance(arg, TensorArg):
            v = ctypes.c_uint64(pointers[arg.name])
            values.append(v)
            addrs.append(ctypes.addressof(v))
        elif isinstance(arg, ScalarArg):
            v = scalar_value(arg)
            values.append(v)
            addrs.append(ctypes.addressof(v))
        elif isinstance(arg, TensorMapArg):
            tmap = tensor_maps[arg]
            values.append(tmap)
            addrs.append(int(tmap.getPtr()))
        else:  # validate_run rejects these before a worker sees them
            raise PlanError(f"unknown argument {arg!r}")
    return PackedParams(values, addrs)


class CudaExecutor:
    """The CUDA driver backend of a GPU worker (see the module docstring)."""

    def __init__(self, ordinal: int = 0, *, driver: Any = None) -> None:
        """Initialize CUDA on device ``ordinal``. ``driver`` replaces ``cuda.bindings.driver`` (tests)."""
        if driver is None:
            try:
                from cuda.bindings import driver as cu
            except Exception as e:
                raise BackendStartError(f"cuda.bindings.driver cannot be imported: {e}") from None
        else:
            cu = driver
        self.cu = cu
        self.ordinal = ordinal
        try:
            _check(cu, "cuInit", cu.cuInit(0))
        except CudaError as e:
            raise BackendStartError(f"cuInit failed: {e.name}" + (f" ({e.text})" if e.text else "")) from None
        except Exception as e:  # libcuda missing: cuda.pathfinder raises
            raise BackendStartError(f"{type(e).__name__}: {e}") from None
        try:
            count = _check(cu, "cuDeviceGetCount", cu.cuDeviceGetCount())
            if not 0 <= ordinal < count:
                raise BackendStartError(f"no CUDA device {ordinal} (the driver sees {count})")
            self.device = _check(cu, "cuDeviceGet", cu.cuDeviceGet(ordinal))
            self.context = _check(cu, "cuDevicePrimaryCtxRetain", cu.cuDevicePrimaryCtxRetain(self.device))
            _check(cu, "cuCtxSetCurrent", cu.cuCtxSetCurrent(self.context))
            # A blocking stream (flags 0): it also orders against the legacy default stream.
            self.stream = _check(cu, "cuStreamCreate", cu.cuStreamCreate(0))
            self.info = self._query_device()
        except CudaError as e:
            raise BackendStartError(f"CUDA start-up failed: {e}") from None
        self._modules: OrderedDict[str, Any] = OrderedDict()
        self._functions: dict[tuple[str, str], Any] = {}
        self._flush: tuple[Any, int] | None = None

    # ------------------------------------------------------------------------------------ device

    def _attribute(self, suffix: str) -> int | None:
        cu = self.cu
        enum = getattr(cu.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{suffix}", None)
        if enum is None:
            return None
        err, value = cu.cuDeviceGetAttribute(enum, self.device)
        return int(value) if err == cu.CUresult.CUDA_SUCCESS else None

    def _query_device(self) -> DeviceInfo:
        cu = self.cu
        raw: dict[str, int] = {}
        fields: dict[str, int] = {}
        for suffix in ("COMPUTE_CAPABILITY_MAJOR", "COMPUTE_CAPABILITY_MINOR", *_REQUIRED_ATTRIBUTES.values()):
            enum = getattr(cu.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{suffix}")
            raw[suffix] = int(_check(cu, f"cuDeviceGetAttribute({suffix})", cu.cuDeviceGetAttribute(enum, self.device)))
        for field, suffix in _REQUIRED_ATTRIBUTES.items():
            fields[field] = raw[suffix]
        for suffix in _OPTIONAL_ATTRIBUTES:
            value = self._attribute(suffix)
            if value is not None:
                raw[suffix] = value
        name = _check(cu, "cuDeviceGetName", cu.cuDeviceGetName(256, self.device))
        name = name.split(b"\0", 1)[0].decode(errors="replace") if isinstance(name, bytes) else str(name)
        total = int(_check(cu, "cuDeviceTotalMem", cu.cuDeviceTotalMem(self.device)))
        version = int(_check(cu, "cuDriverGetVersion", cu.cuDriverGetVersion()))
        try:
            bus = _check(cu, "cuDeviceGetPCIBusId", cu.cuDeviceGetPCIBusId(32, self.device))
            bus_id = bus.split(b"\0", 1)[0].decode() if isinstance(bus, bytes) else str(bus)
        except CudaError:
            bus_id = ""
        return DeviceInfo(
            ordinal=self.ordinal,
            name=name,
            compute_capability=(raw["COMPUTE_CAPABILITY_MAJOR"], raw["COMPUTE_CAPABILITY_MINOR"]),
            total_memory_bytes=total,
            driver_version=version,
            pci_bus_id=bus_id,
            attributes=raw,
            **fields,
        )

    def device_info(self) -> DeviceInfo:
        return self.info

    # ------------------------------------------------------------------------------------ modules

    def _module(self, cubin: bytes) -> tuple[str, Any]:
        cu = self.cu
        digest = hashlib.sha256(cubin).hexdigest()
        if digest in self._modules:
            self._modules.move_to_end(digest)
            return digest, self._modules[digest]
        try:
            module = _check(cu, "cuModuleLoadData", cu.cuModuleLoadData(bytes(cubin)))
        except CudaError as e:
            if e.name == "CUDA_ERROR_NO_BINARY_FOR_GPU":
                raise CudaError(
                    e.call, e.name, f"{e.text}; the cubin was not compiled for this GPU ({self.info.arch})"
                ) from None
            raise
        self._modules[digest] = module
        while len(self._modules) > _MODULE_CACHE_SIZE:
            old, mod = self._modules.popitem(last=False)
            self._functions = {k: v for k, v in self._functions.items() if k[0] != old}
            cu.cuModuleUnload(mod)
        return digest, module

    def _function(self, cubin: bytes, name: str) -> Any:
        digest, module = self._module(cubin)
        key = (digest, name)
        if key not in self._functions:
            self._functions[key] = _check(
                self.cu, f"cuModuleGetFunction(`{name}`)", self.cu.cuModuleGetFunction(module, name.encode())
            )
        return self._functions[key]

    def _function_attributes(self, function: Any) -> dict[str, int]:
        cu = self.cu
        out: dict[str, int] = {}
        for field, suffix in _FUNCTION_ATTRIBUTES.items():
            enum = getattr(cu.CUfunction_attribute, f"CU_FUNC_ATTRIBUTE_{suffix}", None)
            if enum is None:
                continue
            err, value = cu.cuFuncGetAttribute(enum, function)
            if err == cu.CUresult.CUDA_SUCCESS:
                out[field] = int(value)
        return out

    # ------------------------------------------------------------------------------------ running

    def poison(self, fills: list[tuple[Any, Any]]) -> None:
        """Enqueue on :attr:`stream` the poison of every ``(device pointer, PoisonFill)``."""
        cu, s = self.cu, self.stream
        for ptr, fill in fills:
            if fill.count == 0:
                continue
            if fill.width == 8:
                _check(cu, "cuMemsetD8Async(poison)", cu.cuMemsetD8Async(ptr, fill.value, fill.count, s))
            elif fill.width == 16:
                _check(cu, "cuMemsetD16Async(poison)", cu.cuMemsetD16Async(ptr, fill.value, fill.count, s))
            elif fill.width == 32:
                _check(cu, "cuMemsetD32Async(poison)", cu.cuMemsetD32Async(ptr, fill.value, fill.count, s))
            else:
                _check(
                    cu,
                    "cuMemcpyHtoDAsync(poison)",
                    cu.cuMemcpyHtoDAsync(ptr, fill.pattern.ctypes.data, fill.count, s),
                )

    def _flush_buffer(self, nbytes: int) -> Any:
        cu = self.cu
        if self._flush is None or self._flush[1] < nbytes:
            if self._flush is not None:
                cu.cuMemFree(self._flush[0])
                self._flush = None
            ptr = _check(cu, "cuMemAlloc(L2 flush buffer)", cu.cuMemAlloc(nbytes))
            self._flush = (ptr, nbytes)
        return self._flush[0]

    def _launch(self, index: int, launch: KernelLaunch, function: Any, params: PackedParams) -> None:
        cu = self.cu
        gx, gy, gz = (int(v) for v in launch.grid)
        bx, by, bz = (int(v) for v in launch.block)
        _check(
            cu,
            f"cuLaunchKernel(launch {index}, `{launch.function}`)",
            cu.cuLaunchKernel(function, gx, gy, gz, bx, by, bz, int(launch.smem_bytes), self.stream, params.address, 0),
        )

    def _sync(self, what: str) -> None:
        _check(self.cu, f"cuStreamSynchronize ({what})", self.cu.cuStreamSynchronize(self.stream))

    def _context_broken(self) -> bool:
        try:
            (err,) = self.cu.cuCtxSynchronize()
        except Exception:
            return True
        return err != self.cu.CUresult.CUDA_SUCCESS

    def run(self, request: RunRequest) -> RunReply:
        """Execute one request; never raises (every failure becomes a reply)."""
        problems = validate_run(request.plan, request.inputs, request.fetch, request.timing)
        if problems:
            return RunReply(status="error", error="bad plan: " + "; ".join(problems))
        return self._guarded(lambda allocations, events, phases: self._run(request, allocations, events, phases))

    def run_baseline(self, request: BaselineRequest) -> RunReply:
        """Run a problem's baseline on this executor's stream (:mod:`cake_core.runtime.baseline_host`);
        never raises."""
        from cake_core.runtime.baseline_host import run_baseline

        return self._guarded(lambda allocations, events, phases: run_baseline(self, request, events, phases))

    def _guarded(self, body: Callable[[list[Any], list[Any], dict[str, float]], RunReply]) -> RunReply:
        """``body(allocations, events, phases)``'s reply, or a failure reply; then free what it created
        (unless the context broke: a ``fault`` reply, after which the worker exits)."""
        allocations: list[Any] = []
        events: list[Any] = []
        phases: dict[str, float] = {}
        broken = False
        try:
            return body(allocations, events, phases)
        except CudaError as e:
            broken = e.sticky or self._context_broken()
            return RunReply(status="fault" if broken else "error", error=str(e), phases_s=phases, cuda_error=e.name)
        except PlanError as e:
            return RunReply(status="error", error=f"plan cannot run here: {e}", phases_s=phases)
        except Exception as e:
            broken = self._context_broken()
            return RunReply(
                status="fault" if broken else "error",
                error=f"internal error in the GPU worker: {type(e).__name__}: {e}",
                phases_s=phases,
                notes=(traceback.format_exc(),),
            )
        finally:
            if not broken:
                for ev in events:
                    self.cu.cuEventDestroy(ev)
                for ptr in allocations:
                    self.cu.cuMemFree(ptr)

    def time_work(
        self, timing: Timing, before: Callable[[], None], work: Callable[[], None], events: list[Any]
    ) -> tuple[list[float], list[str]]:
        """Time ``work`` (which enqueues on :attr:`stream`) as every plan is timed.

        ``timing.warmup`` calls, then ``timing.reps`` calls (fewer of both for a slow kernel under
        ``timing.budget_ms``: :meth:`~cake_core.runtime.plan.Timing.bounded`), each preceded outside the timed region by
        ``before`` (the poison) and, with ``timing.flush_l2``, an L2 flush (a memset over
        ``flush_bytes``); CUDA events around each timed call. Returns the samples in ms and notes.
        The events created are appended to ``events`` (the caller destroys them).
        """
        cu, info = self.cu, self.info
        notes: list[str] = []
        warmup, reps = timing.warmup, timing.reps
        if warmup and timing.budget_ms is not None:  # the first warm-up call sets the pace
            first = [_check(cu, "cuEventCreate", cu.cuEventCreate(0)) for _ in range(2)]
            events.extend(first)
            before()
            _check(cu, "cuEventRecord(start)", cu.cuEventRecord(first[0], self.stream))
            work()
            _check(cu, "cuEventRecord(end)", cu.cuEventRecord(first[1], self.stream))
            self._sync("after the first warm-up call")
            pace = float(_check(cu, "cuEventElapsedTime", cu.cuEventElapsedTime(first[0], first[1])))
            warmup, reps = timing.bounded(pace)
            if reps < timing.reps:
                notes.append(f"{reps} of {timing.reps} repetitions: a call takes {pace:.3g} ms, the budget is "
                             f"{timing.budget_ms:g} ms")  # fmt: skip
        for _ in range(warmup):
            before()
            work()
        self._sync("after warm-up")
        flush = None
        flush_count = 0
        if timing.flush_l2:
            flush_count = max(timing.flush_bytes // 4, 1)
            flush = self._flush_buffer(flush_count * 4)
            if flush_count * 4 < 2 * info.l2_bytes:
                notes.append(
                    f"the L2 flush buffer ({flush_count * 4} B) is smaller than twice the L2 ({info.l2_bytes} B)"
                )
        first = len(events)
        for r in range(reps):
            start = _check(cu, "cuEventCreate", cu.cuEventCreate(0))
            events.append(start)
            end = _check(cu, "cuEventCreate", cu.cuEventCreate(0))
            events.append(end)
            before()
            if flush is not None:
                _check(
                    cu,
                    "cuMemsetD32Async(L2 flush)",
                    cu.cuMemsetD32Async(flush, (r * 2654435761) & 0xFFFFFFFF, flush_count, self.stream),
                )
            _check(cu, "cuEventRecord(start)", cu.cuEventRecord(start, self.stream))
            work()
            _check(cu, "cuEventRecord(end)", cu.cuEventRecord(end, self.stream))
        self._sync("after timed repetitions")
        samples = []
        for r in range(reps):
            start, end = events[first + 2 * r], events[first + 2 * r + 1]
            samples.append(float(_check(cu, "cuEventElapsedTime", cu.cuEventElapsedTime(start, end))))
        return samples, notes

    def _run(
        self, request: RunRequest, allocations: list[Any], events: list[Any], phases: dict[str, float]
    ) -> RunReply:
        cu = self.cu
        plan: Plan = request.plan
        timing: Timing | None = request.timing
        info = self.info
        notes: list[str] = []
        t0 = time.perf_counter()

        # Kernels, their attributes, and the dynamic shared memory opt-in.
        functions = [self._function(plan.cubins[launch.cubin], launch.function) for launch in plan.launches]
        need_smem: dict[int, tuple[Any, int, str]] = {}
        for i, (launch, fn) in enumerate(zip(plan.launches, functions, strict=True)):
            static = self._function_attributes(fn).get("static_shared_bytes", 0)
            total = static + int(launch.smem_bytes)
            if total > info.max_shared_per_block_optin:
                raise PlanError(
                    f"launch {i} (`{launch.function}`) needs {launch.smem_bytes} B dynamic + {static} B static "
                    f"shared memory; {info.name} allows {info.max_shared_per_block_optin} B per block"
                )
            if int(launch.smem_bytes) > info.max_shared_per_block - static:
                key = id(fn)
                prev = need_smem.get(key)
                if prev is None or prev[1] < launch.smem_bytes:
                    need_smem[key] = (fn, int(launch.smem_bytes), launch.function)
        for fn, nbytes, fname in need_smem.values():
            enum = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            _check(
                cu,
                f"cuFuncSetAttribute(`{fname}`, MAX_DYNAMIC_SHARED_SIZE_BYTES={nbytes})",
                cu.cuFuncSetAttribute(fn, enum, nbytes),
            )
        function_attrs = {
            launch.function: self._function_attributes(fn) for launch, fn in zip(plan.launches, functions, strict=True)
        }
        phases["load_s"] = time.perf_counter() - t0

        # Device memory, inputs, poison.
        t1 = time.perf_counter()
        pointers: dict[str, int] = {}
        devptrs: dict[str, Any] = {}
        fills: list[tuple[Any, Any]] = []
        for spec in plan.tensors:
            nbytes = tensor_nbytes(spec)
            ptr = _check(cu, f"cuMemAlloc(`{spec.name}`, {nbytes} B)", cu.cuMemAlloc(max(nbytes, 16)))
            allocations.append(ptr)
            devptrs[spec.name] = ptr
            pointers[spec.name] = int(ptr)
            if spec.kind == "input":
                if nbytes:
                    host = np.ascontiguousarray(request.inputs[spec.name], dtype=host_dtype(spec.dtype))
                    _check(
                        cu,
                        f"cuMemcpyHtoDAsync(`{spec.name}`)",
                        cu.cuMemcpyHtoDAsync(ptr, host.ctypes.data, nbytes, self.stream),
                    )
                    self._sync(f"upload of `{spec.name}`")  # the host array may be freed after this
            else:
                fills.append((ptr, poison_fill(spec)))
        tensor_maps: dict[TensorMapArg, Any] = {}
        for launch in plan.launches:
            for arg in launch.args:
                if isinstance(arg, TensorMapArg) and arg not in tensor_maps:
                    tensor_maps[arg] = encode_tensor_map(cu, arg, pointers[arg.name])
        params = [pack_params(launch, pointers, tensor_maps) for launch in plan.launches]
        launches = list(zip(plan.launches, functions, params, strict=True))
        phases["upload_s"] = time.perf_counter() - t1

        # Execution.
        t2 = time.perf_counter()
        samples: list[float] = []
        if timing is None:
            self.poison(fills)
            for i, (launch, fn, packed) in enumerate(launches):
                self._launch(i, launch, fn, packed)
                if request.sync_each_launch:
                    self._sync(f"after launch {i}, `{launch.function}`")
            self._sync("end of run")
        else:

            def work() -> None:
                for i, (launch, fn, packed) in enumerate(launches):
                    self._launch(i, launch, fn, packed)

            samples, timing_notes = self.time_work(timing, lambda: self.poison(fills), work, events)
            notes.extend(timing_notes)
        phases["run_s"] = time.perf_counter() - t2

        # Results.
        t3 = time.perf_counter()
        outputs: dict[str, np.ndarray] = {}
        for name in request.fetch:
            spec = plan.tensor(name)
            out = np.empty(spec.shape, dtype=host_dtype(spec.dtype))
            nbytes = tensor_nbytes(spec)
            if nbytes:
                _check(
                    cu,
                    f"cuMemcpyDtoHAsync(`{name}`)",
                    cu.cuMemcpyDtoHAsync(out.ctypes.data, devptrs[name], nbytes, self.stream),
                )
            outputs[name] = out
        self._sync("download")
        phases["download_s"] = time.perf_counter() - t3
        return RunReply(
            status="ok",
            outputs=outputs,
            samples_ms=tuple(samples),
            functions=function_attrs,
            phases_s=phases,
            notes=tuple(notes),
        )

    def close(self) -> None:
        """Release what this executor holds (never resets the device)."""
        cu = self.cu
        if self._flush is not None:
            cu.cuMemFree(self._flush[0])
            self._flush = None
        for mod in self._modules.values():
            cu.cuModuleUnload(mod)
        self._modules.clear()
        self._functions.clear()
        cu.cuStreamDestroy(self.stream)
        cu.cuDevicePrimaryCtxRelease(self.device)
