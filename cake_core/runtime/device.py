"""Is there a usable NVIDIA driver and GPU here? Decided without initializing CUDA in this process.

The parent process of Cake never initializes CUDA (GPU work happens in spawned workers, see
:mod:`cake_core.runtime.worker`), so :func:`driver_status` first looks for ``libcuda`` on disk and,
only where one exists, asks a short-lived probe process (a fresh interpreter running ``cuInit`` and
``cuDeviceGetCount``). The answer is cached for the life of the process. ``CAKE_NO_GPU=1`` forces
"no GPU" (for testing the GPU-free paths on a machine that has one).

Also here: :class:`DeviceInfo` (what a worker reports about its GPU), :func:`arch_runs_on` (whether
a cubin for an architecture runs on a compute capability) and :func:`requires_gpu`, a pytest
decorator that marks a test ``gpu`` and skips it cleanly where :func:`driver_status` says no.
"""

from __future__ import annotations

import ctypes.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TypeVar

import attrs

from cake_core.errors import NoGpuError

__all__ = [
    "DeviceInfo",
    "arch_runs_on",
    "driver_status",
    "find_libcuda",
    "require_driver",
    "requires_gpu",
]

_T = TypeVar("_T")

_LIBCUDA_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/nvidia/lib64",
    "/usr/local/nvidia/lib",
    "/usr/lib/wsl/lib",
    "/run/nvidia/driver/usr/lib/x86_64-linux-gnu",
)

_PROBE = r"""
import json, sys
out = {"ok": False, "reason": "", "devices": [], "driver_version": None}
try:
    from cuda.bindings import driver as cu
    (err,) = cu.cuInit(0)
    if err != cu.CUresult.CUDA_SUCCESS:
        out["reason"] = "cuInit failed: " + getattr(err, "name", str(err))
    else:
        err, version = cu.cuDriverGetVersion()
        out["driver_version"] = int(version) if err == cu.CUresult.CUDA_SUCCESS else None
        err, count = cu.cuDeviceGetCount()
        if err != cu.CUresult.CUDA_SUCCESS:
            out["reason"] = "cuDeviceGetCount failed: " + getattr(err, "name", str(err))
        elif count == 0:
            out["reason"] = "the driver sees no CUDA device"
        else:
            for i in range(count):
                err, dev = cu.cuDeviceGet(i)
                err, name = cu.cuDeviceGetName(256, dev)
                out["devices"].append(name.split(b"\0", 1)[0].decode(errors="replace"))
            out["ok"] = True
except Exception as e:
    out["reason"] = (type(e).__name__ + ": " + str(e)).strip()
sys.stdout.write(json.dumps(out))
"""


def find_libcuda() -> str | None:
    """Path or soname of the driver library ``libcuda`` if one is installed, else None (no loading)."""
    found = ctypes.util.find_library("cuda")
    if found:
        return found
    dirs = list(_LIBCUDA_DIRS)
    dirs += [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if d]
    for d in dirs:
        for name in ("libcuda.so.1", "libcuda.so"):
            p = Path(d) / name
            if p.exists():
                return str(p)
    return None


def _probe(timeout_s: float) -> tuple[bool, str]:
    try:
        out = subprocess.run(
            [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=timeout_s, env=dict(os.environ)
        )
    except subprocess.TimeoutExpired:
        return False, f"the driver probe did not answer within {timeout_s:.0f} s"
    except OSError as e:
        return False, f"the driver probe could not start: {e}"
    try:
        data = json.loads(out.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        tail = (out.stderr.strip().splitlines() or [f"exit status {out.returncode}"])[-1]
        return False, f"the driver probe failed: {tail}"
    if not data.get("ok"):
        return False, str(data.get("reason") or "unknown reason")
    v = data.get("driver_version")
    version = f"CUDA {v // 1000}.{(v % 1000) // 10}" if isinstance(v, int) else "unknown version"
    devices = data.get("devices") or []
    return True, f"NVIDIA driver ({version}) with {len(devices)} device(s): {', '.join(devices)}"


@cache
def _status(timeout_s: float) -> tuple[bool, str]:
    if os.environ.get("CAKE_NO_GPU", "").strip() not in ("", "0"):
        return False, "GPU use disabled by CAKE_NO_GPU"
    lib = find_libcuda()
    if lib is None:
        return False, "libcuda (the NVIDIA driver library) is not installed"
    return _probe(timeout_s)


def driver_status(*, refresh: bool = False, timeout_s: float = 60.0) -> tuple[bool, str]:
    """``(ok, reason)``: whether a usable NVIDIA driver with at least one device exists here.

    Never initializes CUDA in the calling process. The first call may take about a second (a probe
    process) where libcuda exists; later calls return the cached answer unless ``refresh``.
    """
    if refresh:
        _status.cache_clear()
    return _status(timeout_s)


def require_driver() -> None:
    """Raise :class:`~cake_core.errors.NoGpuError` (one clear line) unless a driver and GPU are usable."""
    ok, reason = driver_status()
    if not ok:
        raise NoGpuError(f"no NVIDIA driver here: {reason}")


def requires_gpu(obj: _T) -> _T:
    """Pytest decorator: mark a test (or class) ``gpu`` and skip it where no driver/GPU is usable.

    Usage: ``@requires_gpu`` on a test, or ``pytestmark = requires_gpu_marks()`` in a module.
    """
    for mark in requires_gpu_marks():
        obj = mark(obj)
    return obj


def requires_gpu_marks() -> list[Callable]:
    """The pytest marks behind :func:`requires_gpu` (``gpu`` plus a ``skipif`` without a driver)."""
    import pytest  # only tests call this; the core does not depend on pytest

    ok, reason = driver_status()
    return [pytest.mark.gpu, pytest.mark.skipif(not ok, reason=f"no NVIDIA driver here: {reason}")]


_ARCH = re.compile(r"^sm_(?P<major>\d+?)(?P<minor>\d)(?P<suffix>[af]?)$")


def arch_runs_on(arch: str, compute_capability: tuple[int, int]) -> bool:
    """Whether a cubin compiled for ``arch`` (``sm_90a``) runs on a GPU of ``compute_capability``.

    SASS runs on the same major version with an equal or higher minor; ``a`` (architecture-specific)
    cubins only on exactly that capability; ``f`` (family) cubins on the same major, minor at least.
    """
    m = _ARCH.match(arch)
    if not m:
        raise ValueError(f"not a GPU architecture: {arch!r}")
    major, minor = int(m["major"]), int(m["minor"])
    cmaj, cmin = compute_capability
    if m["suffix"] == "a":
        return (cmaj, cmin) == (major, minor)
    return cmaj == major and cmin >= minor


@attrs.frozen
class DeviceInfo:
    """What a GPU worker found: the device, its limits and the driver (plain, picklable data).

    Sizes are bytes. ``max_shared_per_block_optin`` is the dynamic shared memory a kernel may opt in
    to; ``max_shared_per_block`` the default 48 KiB limit. ``attributes`` holds every raw attribute
    queried (CU_DEVICE_ATTRIBUTE_* names without the prefix), ``driver_version`` is e.g. 13000.
    """

    ordinal: int
    name: str
    compute_capability: tuple[int, int] = attrs.field(converter=tuple)
    sm_count: int
    max_threads_per_block: int
    max_threads_per_sm: int
    warp_size: int
    max_shared_per_block: int
    max_shared_per_block_optin: int
    max_shared_per_sm: int
    reserved_shared_per_block: int
    l2_bytes: int
    regs_per_sm: int
    regs_per_block: int
    max_blocks_per_sm: int
    total_memory_bytes: int
    driver_version: int
    pci_bus_id: str = ""
    attributes: dict[str, int] = attrs.field(factory=dict, eq=False)

    @property
    def arch(self) -> str:
        """The plain architecture name of this GPU, e.g. ``sm_90``."""
        major, minor = self.compute_capability
        return f"sm_{major}{minor}"

    def can_run(self, arch: str) -> bool:
        """Whether a cubin compiled for ``arch`` runs on this GPU (see :func:`arch_runs_on`)."""
        return arch_runs_on(arch, self.compute_capability)

