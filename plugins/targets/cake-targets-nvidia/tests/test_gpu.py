"""The h200 target against the driver of a real H200 (device 0).

CUDA is initialised only in a child process, never in the test process: the probe prints what the
driver reports as JSON, or why there is nothing to check. Without libcuda, without a device, or on a
device that is not an H200, the test is skipped with that reason.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from cake_core import plugins
from cake_core.target import Target

pytestmark = pytest.mark.gpu

_PROBE = r"""
import json, sys

def say(**kw):
    print(json.dumps(kw))
    sys.exit(0)

try:
    from cuda.bindings import driver
    (err,) = driver.cuInit(0)
except Exception as exc:  # no libcuda here: cuda.bindings raises while loading it
    say(skip=f"no NVIDIA driver here ({type(exc).__name__}: {exc})")
if err != driver.CUresult.CUDA_SUCCESS:
    say(skip=f"cuInit failed: {err.name}")
err, count = driver.cuDeviceGetCount()
if err != driver.CUresult.CUDA_SUCCESS or count == 0:
    say(skip="no CUDA device visible")
err, dev = driver.cuDeviceGet(0)
assert err == driver.CUresult.CUDA_SUCCESS, err
err, raw = driver.cuDeviceGetName(256, dev)
assert err == driver.CUresult.CUDA_SUCCESS, err
name = raw.split(b"\0", 1)[0].decode()
A = driver.CUdevice_attribute
attrs = {}
for key, attr in {
    "cc_major": A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
    "cc_minor": A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
    "sm_count": A.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
    "smem_per_block_optin": A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
    "smem_per_sm": A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
    "smem_reserved_per_block": A.CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK,
    "l2_bytes": A.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE,
    "regs_per_sm": A.CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR,
    "regs_per_block": A.CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK,
    "max_threads_per_sm": A.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
    "max_ctas_per_sm": A.CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR,
}.items():
    err, value = driver.cuDeviceGetAttribute(attr, dev)
    assert err == driver.CUresult.CUDA_SUCCESS, (key, err)
    attrs[key] = value
err, total = driver.cuDeviceTotalMem(dev)
assert err == driver.CUresult.CUDA_SUCCESS, err
say(name=name, attrs=attrs, dram_bytes=int(total))
"""

# Target fields that must equal the driver's attribute of the same key exactly.
_EXACT = (
    "sm_count",
    "smem_per_block_optin",
    "smem_per_sm",
    "l2_bytes",
    "regs_per_sm",
    "regs_per_block",
    "smem_reserved_per_block",
    "max_threads_per_sm",
    "max_ctas_per_sm",
)


def _probe() -> dict:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, f"the driver probe crashed:\n{done.stderr}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_h200_target_matches_the_driver() -> None:
    report = _probe()
    if "skip" in report:
        pytest.skip(report["skip"])
    if "H200" not in report["name"]:
        pytest.skip(f"device 0 is a {report['name']}, not an H200")

    h200: Target = plugins.load().get("targets", "h200")
    got = report["attrs"]
    mismatches = [
        f"{field}: target {getattr(h200, field)}, driver {got[field]}"
        for field in _EXACT
        if getattr(h200, field) != got[field]
    ]
    if (got["cc_major"], got["cc_minor"]) != h200.compute_capability:
        mismatches.append(f"compute capability: target {h200.compute_capability}, driver {got}")
    if abs(report["dram_bytes"] - h200.dram_bytes) > 0.01 * h200.dram_bytes:
        mismatches.append(f"dram_bytes: target {h200.dram_bytes}, driver {report['dram_bytes']}")
    assert not mismatches, f"{report['name']}: " + "; ".join(mismatches)
