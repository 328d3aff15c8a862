"""A stand-in for ``cuda.bindings.driver`` that runs the executor's logic on the host.

"Device memory" is host memory (so device pointers are real addresses), "kernels" are Python
functions that read their parameters from the ``kernelParams`` array exactly as the driver would,
and every call returns the same tuple shapes as cuda.bindings (``(CUresult, value...)``). Argument
types are checked the way the Cython bindings check them (a wrong type raises TypeError, an
out-of-range memset value OverflowError), so a test against this module catches mistakes in how the
executor calls the driver, which otherwise only a GPU would reveal.

A fake cubin is ``b"FAKECUBIN-<arch>:<kernel>,<kernel>..."``; the arch must be ``sm_90``/``sm_90a``.
"""

from __future__ import annotations

import ctypes
import enum
import itertools
from collections.abc import Callable
from typing import Any

import numpy as np


class CUresult(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_INVALID_VALUE = 1
    CUDA_ERROR_OUT_OF_MEMORY = 2
    CUDA_ERROR_NO_DEVICE = 100
    CUDA_ERROR_INVALID_IMAGE = 200
    CUDA_ERROR_NO_BINARY_FOR_GPU = 209
    CUDA_ERROR_NOT_FOUND = 500
    CUDA_ERROR_ILLEGAL_ADDRESS = 700
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701


_DEVICE_ATTRIBUTES = {
    "COMPUTE_CAPABILITY_MAJOR": 9,
    "COMPUTE_CAPABILITY_MINOR": 0,
    "MULTIPROCESSOR_COUNT": 132,
    "MAX_THREADS_PER_BLOCK": 1024,
    "MAX_THREADS_PER_MULTIPROCESSOR": 2048,
    "WARP_SIZE": 32,
    "MAX_SHARED_MEMORY_PER_BLOCK": 49152,
    "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": 232448,
    "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR": 233472,
    "RESERVED_SHARED_MEMORY_PER_BLOCK": 1024,
    "L2_CACHE_SIZE": 50 * 1024 * 1024,
    "MAX_REGISTERS_PER_MULTIPROCESSOR": 65536,
    "MAX_REGISTERS_PER_BLOCK": 65536,
    "MAX_BLOCKS_PER_MULTIPROCESSOR": 32,
    "CLOCK_RATE": 1980000,
    "TENSOR_MAP_ACCESS_SUPPORTED": 1,
}
CUdevice_attribute = enum.Enum(  # type: ignore[misc]
    "CUdevice_attribute", [f"CU_DEVICE_ATTRIBUTE_{k}" for k in [*_DEVICE_ATTRIBUTES, "MEMORY_CLOCK_RATE"]]
)
CUfunction_attribute = enum.Enum(  # type: ignore[misc]
    "CUfunction_attribute",
    [
        f"CU_FUNC_ATTRIBUTE_{k}"
        for k in (
            "MAX_THREADS_PER_BLOCK", "SHARED_SIZE_BYTES", "CONST_SIZE_BYTES", "LOCAL_SIZE_BYTES", "NUM_REGS",
            "PTX_VERSION", "BINARY_VERSION", "MAX_DYNAMIC_SHARED_SIZE_BYTES",
        )
    ],
)  # fmt: skip
CUtensorMapDataType = enum.Enum(  # type: ignore[misc]
    "CUtensorMapDataType",
    [f"CU_TENSOR_MAP_DATA_TYPE_{k}" for k in ("UINT8", "UINT16", "UINT32", "INT32", "UINT64", "INT64", "FLOAT16",
                                                "FLOAT32", "FLOAT64", "BFLOAT16", "FLOAT32_FTZ", "TFLOAT32")],
)  # fmt: skip
CUtensorMapInterleave = enum.Enum("CUtensorMapInterleave", ["CU_TENSOR_MAP_INTERLEAVE_NONE"])  # type: ignore[misc]
CUtensorMapSwizzle = enum.Enum(  # type: ignore[misc]
    "CUtensorMapSwizzle", [f"CU_TENSOR_MAP_SWIZZLE_{k}" for k in ("NONE", "32B", "64B", "128B")]
)
CUtensorMapL2promotion = enum.Enum(  # type: ignore[misc]
    "CUtensorMapL2promotion", [f"CU_TENSOR_MAP_L2_PROMOTION_{k}" for k in ("NONE", "L2_64B", "L2_128B", "L2_256B")]
)
CUtensorMapFloatOOBfill = enum.Enum("CUtensorMapFloatOOBfill", ["CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE"])  # type: ignore[misc]
_ELEMENT_BYTES = {"UINT8": 1, "UINT16": 2, "FLOAT16": 2, "BFLOAT16": 2, "UINT32": 4, "INT32": 4, "FLOAT32": 4,
                  "FLOAT32_FTZ": 4, "TFLOAT32": 4, "UINT64": 8, "INT64": 8, "FLOAT64": 8}  # fmt: skip


class _Handle:
    _ids = itertools.count(1)

    def __init__(self, value: int | None = None) -> None:
        self.value = next(self._ids) if value is None else value

    def __int__(self) -> int:
        return self.value

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.value:#x}>"


class CUdevice(_Handle): ...


class CUcontext(_Handle): ...


class CUstream(_Handle): ...


class CUmodule(_Handle): ...


class CUevent(_Handle): ...


class CUdeviceptr(_Handle):
    def __init__(self, value: int = 0) -> None:
        if not isinstance(value, int):
            raise TypeError(f"CUdeviceptr from {type(value)}")
        super().__init__(value)


class cuuint64_t:  # noqa: N801 - cuda.bindings spelling
    def __init__(self, v: int) -> None:
        if not isinstance(v, int) or not 0 <= v < 2**64:
            raise TypeError("cuuint64_t")
        self.v = v


class cuuint32_t:  # noqa: N801
    def __init__(self, v: int) -> None:
        if not isinstance(v, int) or not 0 <= v < 2**32:
            raise TypeError("cuuint32_t")
        self.v = v


class _TensorMapData(ctypes.Structure):
    _fields_ = [
        ("address", ctypes.c_uint64),
        ("rank", ctypes.c_uint32),
        ("esize", ctypes.c_uint32),
        ("dims", ctypes.c_uint64 * 5),
        ("strides", ctypes.c_uint64 * 4),
        ("box", ctypes.c_uint32 * 5),
        ("swizzle", ctypes.c_uint32),
    ]


class CUtensorMap:
    def __init__(self) -> None:
        self._buf = (ctypes.c_ubyte * 128)()

    def getPtr(self) -> int:  # noqa: N802
        return ctypes.addressof(self._buf)


class CUfunction(_Handle):
    def __init__(self, name: str, kernel: FakeKernel) -> None:
        super().__init__()
        self.name, self.kernel = name, kernel
        self.max_dynamic = 48 * 1024 - kernel.static_smem


class FakeKernel:
    def __init__(self, body: Callable[..., CUresult | None], params: str, *, static_smem: int = 0,
                 max_threads: int = 1024) -> None:  # fmt: skip
        self.body, self.params, self.static_smem, self.max_threads = body, params, static_smem, max_threads


def _read_params(address: int, layout: str) -> list[Any]:
    """Read kernel parameters as the driver would: ``layout`` letters p=pointer, i=i32, I=u32,
    l=i64, f=f32, d=f64, m=tensor map (its bytes)."""
    if not layout:
        return []
    ptrs = (ctypes.c_void_p * len(layout)).from_address(address)
    types = {"p": ctypes.c_uint64, "i": ctypes.c_int32, "I": ctypes.c_uint32, "l": ctypes.c_int64,
             "f": ctypes.c_float, "d": ctypes.c_double}  # fmt: skip
    out: list[Any] = []
    for code, ptr in zip(layout, ptrs, strict=True):
        if code == "m":
            out.append(_TensorMapData.from_buffer_copy(ctypes.string_at(ptr, ctypes.sizeof(_TensorMapData))))
        else:
            out.append(types[code].from_address(ptr).value)
    return out


def _view(address: int, dtype: Any, count: int) -> np.ndarray:
    return np.frombuffer((ctypes.c_char * (count * np.dtype(dtype).itemsize)).from_address(address), dtype=dtype)


class FakeDriver:
    """The fake module object: attribute access mirrors cuda.bindings.driver."""

    CUresult = CUresult
    CUdevice_attribute = CUdevice_attribute
    CUfunction_attribute = CUfunction_attribute
    CUtensorMapDataType = CUtensorMapDataType
    CUtensorMapInterleave = CUtensorMapInterleave
    CUtensorMapSwizzle = CUtensorMapSwizzle
    CUtensorMapL2promotion = CUtensorMapL2promotion
    CUtensorMapFloatOOBfill = CUtensorMapFloatOOBfill
    CUdeviceptr = CUdeviceptr
    CUtensorMap = CUtensorMap
    cuuint64_t = cuuint64_t
    cuuint32_t = cuuint32_t

    def __init__(self, *, init_error: CUresult = CUresult.CUDA_SUCCESS) -> None:
        self.init_error = init_error
        self.memory: dict[int, ctypes.Array] = {}
        self.sticky: CUresult | None = None
        self.pending: CUresult | None = None
        self.calls: list[str] = []
        self.launches: list[str] = []
        self.events_live: set[int] = set()
        self.clock = 0.0
        self.event_times: dict[int, float] = {}
        self.kernels: dict[str, FakeKernel] = {}
        self._register_kernels()

    # ---------------------------------------------------------------------------------- helpers

    def _r(self, *values: Any) -> tuple:
        return (self.sticky or CUresult.CUDA_SUCCESS, *values)

    def _log(self, name: str) -> None:
        self.calls.append(name)

    @staticmethod
    def _ptr(p: Any) -> int:
        if not isinstance(p, CUdeviceptr | int):
            raise TypeError(f"expected CUdeviceptr or int, got {type(p)}")
        return int(p)

    @staticmethod
    def _stream(s: Any) -> None:
        if not isinstance(s, CUstream):
            raise TypeError(f"expected CUstream, got {type(s)}")

    def _check_range(self, address: int, nbytes: int) -> None:
        for base, buf in self.memory.items():
            if base <= address and address + nbytes <= base + ctypes.sizeof(buf):
                return
        raise AssertionError(f"fake driver: access to {address:#x}+{nbytes} outside any allocation")

    # ---------------------------------------------------------------------------------- init/device

    def cuInit(self, flags: int) -> tuple:  # noqa: N802
        self._log("cuInit")
        return (self.init_error,)

    def cuDeviceGetCount(self) -> tuple:  # noqa: N802
        return (CUresult.CUDA_SUCCESS, 1)

    def cuDeviceGet(self, ordinal: int) -> tuple:  # noqa: N802
        return (CUresult.CUDA_SUCCESS, CUdevice(ordinal))

    def cuDevicePrimaryCtxRetain(self, dev: CUdevice) -> tuple:  # noqa: N802
        assert isinstance(dev, CUdevice)
        return (CUresult.CUDA_SUCCESS, CUcontext())

    def cuDevicePrimaryCtxRelease(self, dev: CUdevice) -> tuple:  # noqa: N802
        return (CUresult.CUDA_SUCCESS,)

    def cuCtxSetCurrent(self, ctx: CUcontext) -> tuple:  # noqa: N802
        assert isinstance(ctx, CUcontext)
        return (CUresult.CUDA_SUCCESS,)

    def cuStreamCreate(self, flags: int) -> tuple:  # noqa: N802
        assert isinstance(flags, int)
        return (CUresult.CUDA_SUCCESS, CUstream())

    def cuStreamDestroy(self, s: CUstream) -> tuple:  # noqa: N802
        return (CUresult.CUDA_SUCCESS,)

    def cuDeviceGetAttribute(self, attr: Any, dev: CUdevice) -> tuple:  # noqa: N802
        assert isinstance(attr, CUdevice_attribute) and isinstance(dev, CUdevice)
        key = attr.name.removeprefix("CU_DEVICE_ATTRIBUTE_")
        if key not in _DEVICE_ATTRIBUTES:
            return (CUresult.CUDA_ERROR_INVALID_VALUE, 0)
        return (CUresult.CUDA_SUCCESS, _DEVICE_ATTRIBUTES[key])

    def cuDeviceGetName(self, length: int, dev: CUdevice) -> tuple:  # noqa: N802
        return (CUresult.CUDA_SUCCESS, b"Fake H200" + b"\0" * (length - 9))

    def cuDeviceTotalMem(self, dev: CUdevice) -> tuple:  # noqa: N802
        return (CUresult.CUDA_SUCCESS, 141 * 2**30)

    def cuDriverGetVersion(self) -> tuple:  # noqa: N802
        return (CUresult.CUDA_SUCCESS, 13000)

    def cuDeviceGetPCIBusId(self, length: int, dev: CUdevice) -> tuple:  # noqa: N802
        return (CUresult.CUDA_SUCCESS, b"0000:19:00.0\0")

    def cuGetErrorString(self, err: CUresult) -> tuple:  # noqa: N802
        assert isinstance(err, CUresult)
        return (CUresult.CUDA_SUCCESS, f"fake text for {err.name}".encode())

    # ---------------------------------------------------------------------------------- modules

    def cuModuleLoadData(self, image: bytes) -> tuple:  # noqa: N802
        if not isinstance(image, bytes):
            raise TypeError("image")
        if self.sticky:
            return (self.sticky, None)
        head, _, names = image.partition(b":")
        if not head.startswith(b"FAKECUBIN-"):
            return (CUresult.CUDA_ERROR_INVALID_IMAGE, None)
        if head.removeprefix(b"FAKECUBIN-") not in (b"sm_90", b"sm_90a"):
            return (CUresult.CUDA_ERROR_NO_BINARY_FOR_GPU, None)
        module = CUmodule()
        module.names = names.decode().split(",")  # type: ignore[attr-defined]
        return (CUresult.CUDA_SUCCESS, module)

    def cuModuleUnload(self, module: CUmodule) -> tuple:  # noqa: N802
        return (CUresult.CUDA_SUCCESS,)

    def cuModuleGetFunction(self, module: CUmodule, name: bytes) -> tuple:  # noqa: N802
        if not isinstance(name, bytes):
            raise TypeError("name must be bytes")
        n = name.decode()
        if n not in module.names or n not in self.kernels:  # type: ignore[attr-defined]
            return (CUresult.CUDA_ERROR_NOT_FOUND, None)
        return (CUresult.CUDA_SUCCESS, CUfunction(n, self.kernels[n]))

    def cuFuncGetAttribute(self, attr: Any, f: CUfunction) -> tuple:  # noqa: N802
        assert isinstance(attr, CUfunction_attribute) and isinstance(f, CUfunction)
        key = attr.name.removeprefix("CU_FUNC_ATTRIBUTE_")
        values = {"MAX_THREADS_PER_BLOCK": f.kernel.max_threads, "SHARED_SIZE_BYTES": f.kernel.static_smem,
                  "NUM_REGS": 16, "MAX_DYNAMIC_SHARED_SIZE_BYTES": f.max_dynamic, "BINARY_VERSION": 90}  # fmt: skip
        if key not in values:
            return (CUresult.CUDA_ERROR_INVALID_VALUE, 0)
        return (CUresult.CUDA_SUCCESS, values[key])

    def cuFuncSetAttribute(self, f: CUfunction, attr: Any, value: int) -> tuple:  # noqa: N802
        assert isinstance(attr, CUfunction_attribute) and isinstance(value, int)
        if attr.name != "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES":
            return (CUresult.CUDA_ERROR_INVALID_VALUE,)
        if value + f.kernel.static_smem > _DEVICE_ATTRIBUTES["MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"]:
            return (CUresult.CUDA_ERROR_INVALID_VALUE,)
        f.max_dynamic = value
        return (CUresult.CUDA_SUCCESS,)

    # ---------------------------------------------------------------------------------- memory

    def cuMemAlloc(self, nbytes: int) -> tuple:  # noqa: N802
        if not isinstance(nbytes, int) or nbytes <= 0:
            return (CUresult.CUDA_ERROR_INVALID_VALUE, None)
        buf = (ctypes.c_ubyte * nbytes)()
        ctypes.memset(buf, 0x5A, nbytes)  # stale garbage, as fresh device memory may hold
        address = ctypes.addressof(buf)
        self.memory[address] = buf
        return (CUresult.CUDA_SUCCESS, CUdeviceptr(address))

    def cuMemFree(self, ptr: Any) -> tuple:  # noqa: N802
        del self.memory[self._ptr(ptr)]
        return (CUresult.CUDA_SUCCESS,)

    def cuMemcpyHtoDAsync(self, dst: Any, src: int, nbytes: int, stream: CUstream) -> tuple:  # noqa: N802
        self._stream(stream)
        assert isinstance(src, int)
        self._check_range(self._ptr(dst), nbytes)
        ctypes.memmove(self._ptr(dst), src, nbytes)
        self._log("HtoD")
        return self._r()

    def cuMemcpyDtoHAsync(self, dst: int, src: Any, nbytes: int, stream: CUstream) -> tuple:  # noqa: N802
        self._stream(stream)
        assert isinstance(dst, int)
        self._check_range(self._ptr(src), nbytes)
        ctypes.memmove(dst, self._ptr(src), nbytes)
        self._log("DtoH")
        return self._r()

    def _memset(self, kind: str, ptr: Any, value: int, count: int, stream: CUstream, bits: int) -> tuple:
        self._stream(stream)
        if not isinstance(value, int) or not 0 <= value < 2**bits:
            raise OverflowError(f"{kind}: value {value} out of range")
        dtype = {8: np.uint8, 16: np.uint16, 32: np.uint32}[bits]
        address = self._ptr(ptr)
        self._check_range(address, count * bits // 8)
        _view(address, dtype, count)[:] = value
        self._log(kind)
        return self._r()

    def cuMemsetD8Async(self, ptr: Any, value: int, count: int, stream: CUstream) -> tuple:  # noqa: N802
        return self._memset("memset8", ptr, value, count, stream, 8)

    def cuMemsetD16Async(self, ptr: Any, value: int, count: int, stream: CUstream) -> tuple:  # noqa: N802
        return self._memset("memset16", ptr, value, count, stream, 16)

    def cuMemsetD32Async(self, ptr: Any, value: int, count: int, stream: CUstream) -> tuple:  # noqa: N802
        return self._memset("memset32", ptr, value, count, stream, 32)

    # ---------------------------------------------------------------------------------- launch/sync

    def cuLaunchKernel(self, f: CUfunction, gx: int, gy: int, gz: int, bx: int, by: int, bz: int,  # noqa: N802
                       smem: int, stream: CUstream, params: int, extra: int) -> tuple:  # fmt: skip
        assert isinstance(f, CUfunction)
        for v in (gx, gy, gz, bx, by, bz, smem, params):
            if not isinstance(v, int):
                raise TypeError(f"launch argument {v!r}")
        self._stream(stream)
        assert extra in (0, None)
        if self.sticky:
            return (self.sticky,)
        if bx * by * bz > f.kernel.max_threads:
            return (CUresult.CUDA_ERROR_INVALID_VALUE,)
        if smem > f.max_dynamic:
            return (CUresult.CUDA_ERROR_INVALID_VALUE,)
        self.launches.append(f.name)
        self._log(f"launch:{f.name}")
        self.clock += 0.25
        outcome = f.kernel.body(self, (gx, gy, gz), (bx, by, bz), *_read_params(params, f.kernel.params))
        if outcome is not None:
            self.pending = outcome
        return (CUresult.CUDA_SUCCESS,)

    def _sync(self) -> tuple:
        if self.pending is not None:
            self.sticky, self.pending = self.pending, None
        return (self.sticky or CUresult.CUDA_SUCCESS,)

    def cuStreamSynchronize(self, stream: CUstream) -> tuple:  # noqa: N802
        self._stream(stream)
        return self._sync()

    def cuCtxSynchronize(self) -> tuple:  # noqa: N802
        return self._sync()

    def cuEventCreate(self, flags: int) -> tuple:  # noqa: N802
        ev = CUevent()
        self.events_live.add(ev.value)
        return (CUresult.CUDA_SUCCESS, ev)

    def cuEventRecord(self, ev: CUevent, stream: CUstream) -> tuple:  # noqa: N802
        assert isinstance(ev, CUevent)
        self._stream(stream)
        self.event_times[ev.value] = self.clock
        self._log("record")
        return self._r()

    def cuEventElapsedTime(self, start: CUevent, end: CUevent) -> tuple:  # noqa: N802
        return (CUresult.CUDA_SUCCESS, self.event_times[end.value] - self.event_times[start.value])

    def cuEventDestroy(self, ev: CUevent) -> tuple:  # noqa: N802
        self.events_live.discard(ev.value)
        return (CUresult.CUDA_SUCCESS,)

    # ---------------------------------------------------------------------------------- tensor maps

    def cuTensorMapEncodeTiled(self, dtype: Any, rank: int, address: Any, dims: list, strides: list,  # noqa: N802
                               box: list, element_strides: list, interleave: Any, swizzle: Any, l2: Any,
                               oob: Any) -> tuple:  # fmt: skip
        assert isinstance(dtype, CUtensorMapDataType) and isinstance(interleave, CUtensorMapInterleave)
        assert isinstance(swizzle, CUtensorMapSwizzle) and isinstance(l2, CUtensorMapL2promotion)
        assert isinstance(oob, CUtensorMapFloatOOBfill) and isinstance(rank, int)
        for seq, kind, n in ((dims, cuuint64_t, rank), (strides, cuuint64_t, rank - 1), (box, cuuint32_t, rank),
                             (element_strides, cuuint32_t, rank)):  # fmt: skip
            if not isinstance(seq, list | tuple) or not all(isinstance(x, kind) for x in seq):
                raise TypeError(f"expected a list of {kind.__name__}")
            assert len(seq) == n
        data = _TensorMapData()
        data.address = self._ptr(address)
        data.rank = rank
        data.esize = _ELEMENT_BYTES[dtype.name.removeprefix("CU_TENSOR_MAP_DATA_TYPE_")]
        for i, d in enumerate(dims):
            data.dims[i] = d.v
        for i, s in enumerate(strides):
            data.strides[i] = s.v
        for i, b in enumerate(box):
            data.box[i] = b.v
        data.swizzle = {"NONE": 0, "32B": 32, "64B": 64, "128B": 128}[
            swizzle.name.removeprefix("CU_TENSOR_MAP_SWIZZLE_")
        ]
        tmap = CUtensorMap()
        ctypes.memmove(tmap.getPtr(), ctypes.addressof(data), ctypes.sizeof(data))
        return (CUresult.CUDA_SUCCESS, tmap)

    # ---------------------------------------------------------------------------------- kernels

    def _register_kernels(self) -> None:
        def vadd(drv, grid, block, a, b, c, n):  # noqa: ANN001, ANN202
            assert grid[0] * block[0] >= n
            _view(c, np.float32, n)[:] = _view(a, np.float32, n) + _view(b, np.float32, n)

        def partial(drv, grid, block, y, z, h, e, count):  # noqa: ANN001, ANN202
            idx = np.arange(count)
            _view(y, np.float32, count)[:] = idx
            _view(z, np.int32, count)[:] = idx
            _view(h, np.uint16, count)[:] = idx & 0x7FFF
            _view(e, np.int32, count)[:] = -idx

        def scale2(drv, grid, block, a, s, n):  # noqa: ANN001, ANN202
            _view(s, np.float32, n)[:] = _view(a, np.float32, n) * np.float32(2)

        def plus1(drv, grid, block, s, o, n):  # noqa: ANN001, ANN202
            _view(o, np.float32, n)[:] = _view(s, np.float32, n) + np.float32(1)

        def scalars(drv, grid, block, a, b, c, d, oa, ob, oc, od):  # noqa: ANN001, ANN202
            _view(oa, np.int64, 1)[0] = a
            _view(ob, np.uint32, 1)[0] = b
            _view(oc, np.float32, 1)[0] = c
            _view(od, np.float64, 1)[0] = d

        def smem_reverse(drv, grid, block, x, y, per_block):  # noqa: ANN001, ANN202
            n = grid[0] * per_block
            _view(y, np.float32, n)[:] = _view(x, np.float32, n).reshape(grid[0], per_block)[:, ::-1].reshape(-1)

        def bounded(drv, grid, block, y):  # noqa: ANN001, ANN202
            _view(y, np.float32, block[0])[:] = 1.0

        def wild_write(drv, grid, block, out, offset):  # noqa: ANN001, ANN202
            return CUresult.CUDA_ERROR_ILLEGAL_ADDRESS

        def tma_box(drv, grid, block, tmap, out, x0, y0, x1, y1):  # noqa: ANN001, ANN202
            assert tmap.rank == 2 and tmap.swizzle == 0 and tmap.esize == 2
            cols, rows = tmap.dims[0], tmap.dims[1]
            assert tmap.strides[0] == cols * 2
            w, h = tmap.box[0], tmap.box[1]
            g = _view(tmap.address, np.uint16, rows * cols).reshape(rows, cols)
            for cta, (x, y) in enumerate(((x0, y0), (x1, y1))[: grid[0]]):
                tile = np.zeros((h, w), np.uint16)
                part = g[y : y + h, x : x + w]
                tile[: part.shape[0], : part.shape[1]] = part
                _view(out + cta * w * h * 2, np.uint16, w * h)[:] = tile.reshape(-1)

        self.kernels = {
            "vadd": FakeKernel(vadd, "pppi"),
            "partial": FakeKernel(partial, "ppppi"),
            "scale2": FakeKernel(scale2, "ppi"),
            "plus1": FakeKernel(plus1, "ppi"),
            "scalars": FakeKernel(scalars, "lIfdpppp"),
            "smem_reverse": FakeKernel(smem_reverse, "ppi", static_smem=16),
            "bounded": FakeKernel(bounded, "p", max_threads=128),
            "wild_write": FakeKernel(wild_write, "pl"),
            "tma_box": FakeKernel(tma_box, "mpiiii", static_smem=1032),
        }


def fake_cubin(*names: str, arch: str = "sm_90") -> bytes:
    return f"FAKECUBIN-{arch}:{','.join(names)}".encode()
