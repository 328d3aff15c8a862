"""Driver detection without initializing CUDA, architecture compatibility, the GPU test marker."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cake_core.convert import unstructure
from cake_core.errors import CakeUserError, NoGpuError
from cake_core.runtime import device
from cake_core.runtime.device import arch_runs_on, driver_status, require_driver, requires_gpu_marks


@pytest.fixture
def fresh_status():  # noqa: ANN201
    device.driver_status(refresh=True)
    yield
    device.driver_status(refresh=True)


def test_status_is_a_bool_and_a_reason() -> None:
    ok, reason = driver_status()
    assert isinstance(ok, bool) and isinstance(reason, str) and reason
    assert driver_status() == (ok, reason)  # cached


def test_status_does_not_load_the_driver_into_the_caller() -> None:
    """driver_status() leaves libcuda out of the calling process (checked in a fresh interpreter)."""
    code = (
        "from cake_core.runtime.device import driver_status; driver_status(); "
        "print('libcuda' in open('/proc/self/maps').read())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_cake_no_gpu_forces_no_driver(monkeypatch: pytest.MonkeyPatch, fresh_status: None) -> None:
    monkeypatch.setenv("CAKE_NO_GPU", "1")
    ok, reason = driver_status(refresh=True)
    assert not ok and "CAKE_NO_GPU" in reason
    with pytest.raises(NoGpuError) as info:
        require_driver()
    assert isinstance(info.value, CakeUserError)
    assert str(info.value).startswith("no NVIDIA driver here: ")
    assert "\n" not in str(info.value)


def test_missing_libcuda_is_reported(monkeypatch: pytest.MonkeyPatch, fresh_status: None) -> None:
    monkeypatch.setattr(device, "find_libcuda", lambda: None)
    monkeypatch.delenv("CAKE_NO_GPU", raising=False)
    ok, reason = driver_status(refresh=True)
    assert not ok and "libcuda" in reason


def test_probe_failure_is_reported(monkeypatch: pytest.MonkeyPatch, fresh_status: None) -> None:
    monkeypatch.setattr(device, "find_libcuda", lambda: "libcuda.so.1")
    monkeypatch.setattr(device, "_PROBE", 'import sys; sys.stdout.write(\'{"ok": false, "reason": "fake"}\')')
    monkeypatch.delenv("CAKE_NO_GPU", raising=False)
    assert driver_status(refresh=True) == (False, "fake")
    monkeypatch.setattr(device, "_PROBE", "raise SystemExit('probe broke')")
    ok, reason = driver_status(refresh=True)
    assert not ok and "probe broke" in reason


@pytest.mark.skipif(driver_status()[0], reason="this machine has a driver")
def test_without_driver_the_reason_names_it() -> None:
    ok, reason = driver_status()
    assert not ok
    assert any(word in reason for word in ("libcuda", "cuInit", "driver", "device"))


def test_arch_runs_on() -> None:
    assert arch_runs_on("sm_90a", (9, 0))
    assert arch_runs_on("sm_90", (9, 0))
    assert not arch_runs_on("sm_80", (9, 0))  # SASS does not cross major versions
    assert arch_runs_on("sm_80", (8, 6)) and arch_runs_on("sm_86", (8, 9))
    assert not arch_runs_on("sm_89", (8, 6))
    assert not arch_runs_on("sm_90a", (10, 0)) and arch_runs_on("sm_100a", (10, 0))
    assert not arch_runs_on("sm_100a", (10, 3))
    assert arch_runs_on("sm_100f", (10, 3))
    with pytest.raises(ValueError):
        arch_runs_on("hopper", (9, 0))


def test_requires_gpu_marks() -> None:
    marks = requires_gpu_marks()
    names = [m.mark.name for m in marks]
    assert names == ["gpu", "skipif"]
    ok, _ = driver_status()
    assert marks[1].mark.args[0] is (not ok)

    @device.requires_gpu
    def probe() -> None: ...

    assert {m.name for m in probe.pytestmark} == {"gpu", "skipif"}


def test_device_info_helpers() -> None:
    info = device.DeviceInfo(
        ordinal=0, name="X", compute_capability=[9, 0], sm_count=132, max_threads_per_block=1024,
        max_threads_per_sm=2048, warp_size=32, max_shared_per_block=49152, max_shared_per_block_optin=232448,
        max_shared_per_sm=233472, reserved_shared_per_block=1024, l2_bytes=52428800, regs_per_sm=65536,
        regs_per_block=65536, max_blocks_per_sm=32, total_memory_bytes=1, driver_version=13000,
    )  # fmt: skip
    assert info.compute_capability == (9, 0) and info.arch == "sm_90"
    assert info.can_run("sm_90a") and not info.can_run("sm_80")
    assert unstructure(info)["arch"] == "sm_90"
