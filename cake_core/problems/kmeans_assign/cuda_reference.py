"""The independent float64 CUDA reference of the kmeans-assign oracle, for shapes too large for numpy.

``reference.cu`` (header-free CUDA C++, beside this module) holds three kernels, launched in order by
one :class:`~cake_core.runtime.plan.Plan`:

1. ``cake_ref_sqnorm``: ``||c[b, k]||^2`` in float64, one warp per centroid.
2. ``cake_ref_argmin``: the float64 argmin of ``||c||^2 - 2 x.c`` per point. A block of 256 threads owns
   64 points and sweeps all centroids in tiles of 64, staging 16-deep slices of both operands in shared
   memory as float64; each thread accumulates a 4 x 4 block of dot products in registers (16 float64
   FMAs per four 16-byte shared-memory loads), folds each tile into running minima, and the 16 threads
   sharing a point combine theirs with shuffles (ties to the smallest index).
3. ``cake_ref_verdict``: one warp per point sums ``(x - c[out])^2``, ``(x - c[ref])^2``, ``x^2`` and
   ``c[ref]^2`` directly in float64 and writes the point's code and ``rel_gap``.

The host then applies the tolerance exactly as for the numpy path (:func:`oracle.make_report`).

At the reference cell (B=32, N=65536, K=1024, D=128) kernel 2 does 2.75e11 float64 FMAs: 16 ms at the
H100/H200 float64 vector peak (34 TFLOP/s); with one 16-byte shared load per four FMAs and no software
pipelining, expect 25-35 ms. Kernels 1 and 3 read about 2 GB, mostly from L2 (about 1 ms). The wall
time of one assessment is dominated by moving x (512 MiB) to the worker process and the device: about
a second.
"""

from __future__ import annotations

import functools
import importlib.resources
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from cake_core.errors import CakeInternalError, CakeUserError
from cake_core.problems.kmeans_assign.oracle import Assessment
from cake_core.runtime.plan import KernelLaunch, Plan, ScalarArg, TensorArg, TensorSpec

if TYPE_CHECKING:
    from cake_core.runtime.worker import GpuRunner

SOURCE_NAME = "reference.cu"
SQNORM, ARGMIN, VERDICT = "cake_ref_sqnorm", "cake_ref_argmin", "cake_ref_verdict"
THREADS = 256
POINTS_PER_BLOCK = 64  # TP in reference.cu
WARPS_PER_BLOCK = THREADS // 32


@functools.cache
def reference_source() -> str:
    """The CUDA C++ text of the reference (no ``#include``: NVRTC compiles it as is)."""
    return importlib.resources.files(__package__).joinpath(SOURCE_NAME).read_text(encoding="utf-8")


def arch_from_capability(major: int, minor: int) -> str:
    """NVRTC's architecture for a device of compute capability ``major.minor`` (``sm_90`` for 9.0).

    The reference uses no architecture-specific instruction, so the plain ``sm_XY`` target is exact.
    """
    return f"sm_{int(major)}{int(minor)}"


def arch_of(runner: object) -> str:
    """The architecture to compile for: that of the GPU ``runner`` drives.

    Read from ``runner.device_info()`` (a :class:`~cake_core.runtime.device.DeviceInfo`, whose ``arch``
    is the plain ``sm_XY``: the reference needs nothing architecture-specific), else from an ``arch``
    (``"sm_90a"``) or ``compute_capability`` (``(9, 0)``) attribute of the runner. Raises
    :class:`CakeUserError` when none is there.
    """
    holders: list[object] = [runner]
    info = getattr(runner, "device_info", None)
    if callable(info):
        holders.insert(0, info())
    for holder in holders:
        arch = getattr(holder, "arch", None)
        if isinstance(arch, str) and arch.startswith("sm_"):
            return arch
        cc = getattr(holder, "compute_capability", None)
        if isinstance(cc, tuple | list) and len(cc) == 2:
            return arch_from_capability(*cc)
    raise CakeUserError(
        "cannot tell which GPU architecture the runner drives; pass the oracle an explicit arch "
        "(e.g. arch='sm_90a')"
    )


@functools.cache
def compiled_reference(arch: str) -> bytes:
    """The reference compiled by NVRTC for ``arch`` (cached per process)."""
    from cake_core.runtime.nvrtc import compile_cuda

    return compile_cuda(reference_source(), arch, name="kmeans_assign_reference.cu").cubin


def build_plan(shape: Mapping[str, int], dtype: str, cubin: bytes) -> Plan:
    """The launch plan of one assessment at ``shape``.

    Inputs ``x``, ``c`` (``dtype``) and ``cand`` (i32 [B, N], the candidate's output); scratch ``cc``;
    outputs ``ref_idx`` (i32), ``rel_gap`` (f64) and ``code`` (i32), each [B, N].
    """
    b, n, k, d = (int(shape[s]) for s in ("B", "N", "K", "D"))
    is_f16 = ScalarArg(1 if dtype == "f16" else 0, "i32")
    rows, points = b * k, b * n
    tensors = (
        TensorSpec("x", dtype, (b, n, d), "input"),
        TensorSpec("c", dtype, (b, k, d), "input"),
        TensorSpec("cand", "i32", (b, n), "input"),
        TensorSpec("cc", "f64", (b, k), "scratch"),
        TensorSpec("ref_idx", "i32", (b, n), "output"),
        TensorSpec("rel_gap", "f64", (b, n), "output"),
        TensorSpec("code", "i32", (b, n), "output", poison=-1),
    )
    block = (THREADS, 1, 1)
    launches = (
        KernelLaunch(
            SQNORM,
            (-(-rows // WARPS_PER_BLOCK), 1, 1),
            block,
            (TensorArg("c"), TensorArg("cc"), ScalarArg(rows, "i64"), ScalarArg(d), is_f16),
        ),
        KernelLaunch(
            ARGMIN,
            (-(-n // POINTS_PER_BLOCK), b, 1),
            block,
            (
                TensorArg("x"), TensorArg("c"), TensorArg("cc"), TensorArg("ref_idx"),
                ScalarArg(n), ScalarArg(k), ScalarArg(d), is_f16,
            ),
        ),  # fmt: skip
        KernelLaunch(
            VERDICT,
            (-(-points // WARPS_PER_BLOCK), 1, 1),
            block,
            (
                TensorArg("x"), TensorArg("c"), TensorArg("cand"), TensorArg("ref_idx"),
                TensorArg("rel_gap"), TensorArg("code"),
                ScalarArg(points, "i64"), ScalarArg(n), ScalarArg(k), ScalarArg(d), is_f16,
            ),
        ),  # fmt: skip
    )
    return Plan(f"kmeans-assign oracle B={b} N={n} K={k} D={d} {dtype}", {"main": cubin}, tensors, launches)


def timeout_for(shape: Mapping[str, int]) -> float:
    """A generous wall-clock limit for one assessment: a minute plus 1 s per 10 GFLOP (float64)."""
    macs = int(shape["B"]) * int(shape["N"]) * int(shape["K"]) * int(shape["D"])
    return 60.0 + 2.0 * macs / 1e10


def assess_cuda(
    runner: GpuRunner,
    x: np.ndarray,
    c: np.ndarray,
    cand: np.ndarray,
    shape: Mapping[str, int],
    dtype: str,
    *,
    arch: str | None = None,
    timeout_s: float | None = None,
) -> Assessment:
    """The assessment of ``cand`` computed by the CUDA reference through ``runner``.

    Raises :class:`CakeInternalError` if the reference itself does not complete (it never reads out of
    bounds whatever ``cand`` holds, so a fault or a timeout is not the candidate's doing).
    """
    cubin = compiled_reference(arch or arch_of(runner))
    plan = build_plan(shape, dtype, cubin)
    inputs = {"x": x, "c": c, "cand": np.ascontiguousarray(cand, dtype=np.int32)}
    result: Any = runner.run(
        plan,
        inputs,
        fetch=("ref_idx", "rel_gap", "code"),
        timeout_s=timeout_s if timeout_s is not None else timeout_for(shape),
    )
    if result.status != "ok":
        raise CakeInternalError(f"the kmeans-assign CUDA reference ended with {result.status}: {result.error}")
    out_shape = (int(shape["B"]), int(shape["N"]))
    return Assessment(
        ref_idx=np.asarray(result.outputs["ref_idx"], dtype=np.int32).reshape(out_shape),
        rel_gap=np.asarray(result.outputs["rel_gap"], dtype=np.float64).reshape(out_shape),
        code=np.asarray(result.outputs["code"], dtype=np.int32).reshape(out_shape),
        device_seconds=getattr(result, "phases_s", {}).get("run_s"),
    )
