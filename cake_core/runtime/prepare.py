"""Checks and conversions between a launch :class:`~cake_core.runtime.plan.Plan` and the CUDA driver.

Everything here is pure Python and numpy (no CUDA), so it runs and is tested without a GPU:

- :func:`validate_run` checks a plan with its inputs before any worker sees it and returns a list
  of problems (an empty list means the plan is runnable as far as the host can tell);
- :func:`host_dtype` gives the numpy storage of a Cake dtype (bf16 and fp8 as bit patterns);
- :func:`scalar_value` turns a :class:`~cake_core.runtime.plan.ScalarArg` into a range-checked ctypes
  value (the bytes ``cuLaunchKernel`` copies);
- :func:`poison_fill` decides how to poison a tensor before each run: which ``cuMemsetD8/D16/D32``
  and value, or a host pattern to copy where no memset width fits (8-byte non-repeating values).
  The default poison is all-ones bytes: a NaN for every float type and -1 for every signed integer.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping

import attrs
import numpy as np

from cake_core.hostdata import encode, storage_dtype
from cake_core.ir.swizzle import SWIZZLE_BYTES as SWIZZLE_WIDTHS
from cake_core.ir.types import DTYPE_NAMES, DType
from cake_core.runtime.plan import Plan, ScalarArg, TensorArg, TensorMapArg, TensorSpec, Timing

__all__ = [
    "MAX_STATIC_SMEM",
    "SCALAR_CTYPES",
    "SWIZZLE_BYTES",
    "TENSOR_KINDS",
    "PoisonFill",
    "element_bytes",
    "host_dtype",
    "poison_fill",
    "scalar_value",
    "tensor_nbytes",
    "validate_run",
]

#: Dynamic shared memory above this needs the kernel's maximum raised.
MAX_STATIC_SMEM = 48 * 1024

TENSOR_KINDS = ("input", "output", "scratch")

SCALAR_CTYPES: dict[str, type[ctypes._SimpleCData]] = {
    "i32": ctypes.c_int32,
    "u32": ctypes.c_uint32,
    "i64": ctypes.c_int64,
    "u64": ctypes.c_uint64,
    "f32": ctypes.c_float,
    "f64": ctypes.c_double,
}

_INT_RANGES = {
    "i32": (-(2**31), 2**31 - 1),
    "u32": (0, 2**32 - 1),
    "i64": (-(2**63), 2**63 - 1),
    "u64": (0, 2**64 - 1),
}

#: The swizzle span in bytes of each TensorMapArg swizzle mode (the inner box may not exceed it).
SWIZZLE_BYTES = {"none": None, **SWIZZLE_WIDTHS}
L2_PROMOTIONS = (0, 64, 128, 256)

_BIT_PATTERN_STORAGE = {
    DType.TF32: np.float32,
    DType.FP8E4M3: np.uint8,
    DType.FP8E5M2: np.uint8,
}


def host_dtype(dtype: str) -> np.dtype:
    """The numpy dtype holding elements of Cake dtype ``dtype`` on the host (bf16 -> uint16 bits)."""
    d = DType(dtype)
    if d in _BIT_PATTERN_STORAGE:
        return np.dtype(_BIT_PATTERN_STORAGE[d])
    return storage_dtype(d)


def element_bytes(dtype: str) -> int:
    return DType(dtype).bytes


def tensor_nbytes(spec: TensorSpec) -> int:
    return spec.numel * element_bytes(spec.dtype)


def scalar_value(arg: ScalarArg) -> ctypes._SimpleCData:
    """The ctypes value of a scalar kernel argument; ValueError if out of range or mistyped."""
    if arg.ctype not in SCALAR_CTYPES:
        raise ValueError(f"unknown scalar ctype `{arg.ctype}` (known: {', '.join(SCALAR_CTYPES)})")
    ct = SCALAR_CTYPES[arg.ctype]
    value = arg.value
    if isinstance(value, np.generic):
        value = value.item()
    if arg.ctype in _INT_RANGES:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"scalar {value!r} is not an integer but its ctype is {arg.ctype}")
        lo, hi = _INT_RANGES[arg.ctype]
        if not lo <= value <= hi:
            raise ValueError(f"scalar {value} does not fit {arg.ctype}")
        return ct(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"scalar {value!r} is not a number")
    return ct(float(value))


@attrs.frozen
class PoisonFill:
    """How to poison one tensor: ``memset`` width 8/16/32 with ``value`` over ``count`` units, or
    (``width`` 0) copy ``pattern`` (a host array of the tensor's size) into it."""

    width: int
    value: int
    count: int
    pattern: np.ndarray | None = attrs.field(default=None, eq=False)


def poison_fill(spec: TensorSpec) -> PoisonFill:
    """The poison of a tensor (before every run): ``spec.poison`` or the dtype's default (all ones)."""
    nbytes = tensor_nbytes(spec)
    if spec.poison is None:
        return PoisonFill(width=8, value=0xFF, count=nbytes)
    d = DType(spec.dtype)
    value = spec.poison
    if d in (DType.FP8E4M3, DType.FP8E5M2):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 255:
            raise ValueError(f"poison of fp8 tensor `{spec.name}` must be a byte pattern 0..255, got {value!r}")
        element = np.array([value], dtype=np.uint8)
    elif d.is_float:
        element = encode(np.array([value], dtype=np.float64), d if d is not DType.TF32 else DType.F32)
    else:
        if isinstance(value, float) and not float(value).is_integer():
            raise ValueError(f"poison {value!r} of integer tensor `{spec.name}` is not an integer")
        info_dtype = host_dtype(spec.dtype)
        if info_dtype != np.bool_:
            info = np.iinfo(info_dtype)
            if not info.min <= int(value) <= info.max:
                raise ValueError(f"poison {value!r} does not fit tensor `{spec.name}` of {spec.dtype}")
        element = np.array([int(value)], dtype=info_dtype)
    raw = element.view(np.uint8).tobytes()
    size = len(raw)
    if len(set(raw)) == 1:
        return PoisonFill(width=8, value=raw[0], count=nbytes)
    if size == 2:
        return PoisonFill(width=16, value=int.from_bytes(raw, "little"), count=nbytes // 2)
    if size == 4:
        return PoisonFill(width=32, value=int.from_bytes(raw, "little"), count=nbytes // 4)
    if size == 8 and raw[:4] == raw[4:]:
        return PoisonFill(width=32, value=int.from_bytes(raw[:4], "little"), count=nbytes // 4)
    pattern = np.frombuffer(raw * spec.numel, dtype=np.uint8) if spec.numel else np.zeros(0, np.uint8)
    return PoisonFill(width=0, value=0, count=nbytes, pattern=pattern)


def _check_tensor_map(arg: TensorMapArg, spec: TensorSpec, where: str) -> list[str]:
    problems: list[str] = []
    rank = len(arg.dims)
    if arg.dtype not in DTYPE_NAMES or DType(arg.dtype) is DType.PRED:
        return [f"{where}: tensor map dtype `{arg.dtype}` is not supported"]
    esize = element_bytes(arg.dtype)
    if esize != element_bytes(spec.dtype):
        problems.append(
            f"{where}: tensor map dtype {arg.dtype} has another element size than `{spec.name}` ({spec.dtype})"
        )
    if not 1 <= rank <= 5:
        return [*problems, f"{where}: tensor map rank {rank} is not in 1..5"]
    if len(arg.box) != rank:
        problems.append(f"{where}: box has {len(arg.box)} sizes for a rank-{rank} tensor map")
    if len(arg.strides) != rank - 1:
        problems.append(f"{where}: strides list {len(arg.strides)} entries; a rank-{rank} map needs {rank - 1}")
    if problems:
        return problems
    for i, d in enumerate(arg.dims):
        if not 1 <= d <= 2**32:
            problems.append(f"{where}: dims[{i}] = {d} is not in 1..2^32")
    for i, b in enumerate(arg.box):
        if not 1 <= b <= 256:
            problems.append(f"{where}: box[{i}] = {b} is not in 1..256")
    for i, s in enumerate(arg.strides):
        if s <= 0 or s % 16 or s >= 2**40:
            problems.append(f"{where}: stride[{i + 1}] = {s} bytes is not a positive multiple of 16 below 2^40")
    inner_bytes = arg.box[0] * esize
    if inner_bytes % 16:
        problems.append(f"{where}: the inner box is {inner_bytes} bytes, not a multiple of 16")
    if arg.swizzle not in SWIZZLE_BYTES:
        problems.append(f"{where}: swizzle `{arg.swizzle}` is not one of {', '.join(SWIZZLE_BYTES)}")
    elif (span := SWIZZLE_BYTES[arg.swizzle]) is not None and inner_bytes > span:
        problems.append(f"{where}: the inner box is {inner_bytes} bytes, more than the {arg.swizzle} swizzle span")
    if arg.l2_promotion not in L2_PROMOTIONS:
        problems.append(f"{where}: l2_promotion {arg.l2_promotion} is not one of {L2_PROMOTIONS}")
    if not problems:
        extent = (
            (arg.dims[0] - 1) * esize + esize + sum((d - 1) * s for d, s in zip(arg.dims[1:], arg.strides, strict=True))
        )
        if extent > tensor_nbytes(spec):
            problems.append(
                f"{where}: the tensor map spans {extent} bytes but `{spec.name}` has only {tensor_nbytes(spec)}"
            )
    return problems


def validate_run(
    plan: Plan,
    inputs: Mapping[str, np.ndarray],
    fetch: tuple[str, ...],
    timing: Timing | None,
) -> list[str]:
    """Every problem the host can see in running ``plan`` on ``inputs``; [] if none."""
    problems: list[str] = []
    specs: dict[str, TensorSpec] = {}
    if not plan.launches:
        problems.append("the plan has no launches")
    for spec in plan.tensors:
        if spec.name in specs:
            problems.append(f"tensor `{spec.name}` is declared twice")
            continue
        specs[spec.name] = spec
        if spec.kind not in TENSOR_KINDS:
            problems.append(f"tensor `{spec.name}` has kind `{spec.kind}` (expected one of {', '.join(TENSOR_KINDS)})")
        if spec.dtype not in DTYPE_NAMES:
            problems.append(f"tensor `{spec.name}` has unknown dtype `{spec.dtype}`")
            continue
        if any((not isinstance(s, int | np.integer)) or s < 0 for s in spec.shape):
            problems.append(f"tensor `{spec.name}` has a bad shape {spec.shape}")
            continue
        if spec.kind != "input":
            try:
                poison_fill(spec)
            except ValueError as e:
                problems.append(str(e))
    for name, array in inputs.items():
        spec = specs.get(name)
        if spec is None:
            problems.append(f"input `{name}` is not a tensor of the plan")
            continue
        if spec.kind != "input":
            problems.append(f"`{name}` is given as an input but the plan declares it {spec.kind}")
            continue
        if spec.dtype not in DTYPE_NAMES:
            continue
        want = host_dtype(spec.dtype)
        arr = np.asarray(array)
        if arr.dtype != want:
            problems.append(f"input `{name}` has dtype {arr.dtype}; {spec.dtype} is stored as {want}")
        if tuple(arr.shape) != tuple(spec.shape):
            problems.append(f"input `{name}` has shape {tuple(arr.shape)}; the plan says {tuple(spec.shape)}")
    for spec in specs.values():
        if spec.kind == "input" and spec.name not in inputs:
            problems.append(f"input `{spec.name}` is missing")
    for name in fetch:
        if name not in specs:
            problems.append(f"cannot fetch `{name}`: no such tensor in the plan")
    for i, launch in enumerate(plan.launches):
        where = f"launch {i} (`{launch.function}`)"
        if launch.cubin not in plan.cubins:
            problems.append(f"{where}: no cubin `{launch.cubin}` in the plan")
        elif not isinstance(plan.cubins[launch.cubin], bytes | bytearray) or not plan.cubins[launch.cubin]:
            problems.append(f"{where}: cubin `{launch.cubin}` is empty or not bytes")
        if len(launch.grid) != 3 or any((not isinstance(g, int | np.integer)) or g < 1 for g in launch.grid):
            problems.append(f"{where}: grid {launch.grid} must be three positive integers")
        if len(launch.block) != 3 or any((not isinstance(b, int | np.integer)) or b < 1 for b in launch.block):
            problems.append(f"{where}: block {launch.block} must be three positive integers")
        elif launch.block[0] * launch.block[1] * launch.block[2] > 1024:
            problems.append(f"{where}: block {launch.block} has more than 1024 threads")
        if launch.smem_bytes < 0:
            problems.append(f"{where}: negative dynamic shared memory {launch.smem_bytes}")
        for j, arg in enumerate(launch.args):
            at = f"{where} argument {j}"
            if isinstance(arg, ScalarArg):
                try:
                    scalar_value(arg)
                except ValueError as e:
                    problems.append(f"{at}: {e}")
            elif isinstance(arg, TensorMapArg):
                if arg.name not in specs:
                    problems.append(f"{at}: no tensor `{arg.name}`")
                elif specs[arg.name].dtype in DTYPE_NAMES:
                    problems.extend(_check_tensor_map(arg, specs[arg.name], at))
            elif isinstance(arg, TensorArg):
                if arg.name not in specs:
                    problems.append(f"{at}: no tensor `{arg.name}`")
            else:
                problems.append(f"{at}: not a TensorArg, ScalarArg or TensorMapArg: {arg!r}")
    if timing is not None:
        if timing.reps < 1 or timing.warmup < 0:
            problems.append(f"timing needs reps >= 1 and warmup >= 0 (got reps={timing.reps}, warmup={timing.warmup})")
        if timing.budget_ms is not None and (timing.budget_ms <= 0 or timing.min_reps < 1):
            problems.append(f"a timing budget needs budget_ms > 0 and min_reps >= 1 (got {timing.budget_ms}, "
                            f"{timing.min_reps})")  # fmt: skip
        if timing.flush_l2 and timing.flush_bytes < 4:
            problems.append(f"timing flush_bytes {timing.flush_bytes} is too small")
    return problems
