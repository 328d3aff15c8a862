"""The GPU worker machinery without a GPU: spawned workers hosting a fake backend (fake_backend.py).

These exercise the real process handling — spawn, the pipe protocol, large arrays, the timeout
kill, replacement after a fault or a crash, start-up failures — everything but CUDA itself.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from cake_core.convert import unstructure
from cake_core.errors import CakeUserError, NoGpuError
from cake_core.runtime.device import driver_status
from cake_core.runtime.plan import KernelLaunch, Plan, ScalarArg, TensorArg, TensorSpec, Timing
from cake_core.runtime.worker import GpuRunner, WorkerStartError


def _plan(label: str, n: int = 16) -> Plan:
    return Plan(
        label=label,
        cubins={"main": b"fake cubin"},
        tensors=[TensorSpec("x", "f32", (n,)), TensorSpec("y", "f32", (n,), kind="output")],
        launches=[KernelLaunch("k", (1, 1, 1), (32, 1, 1), [TensorArg("x"), TensorArg("y"), ScalarArg(n)])],
    )


def _x(n: int = 16) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(n, dtype=np.float32)


def test_round_trip_and_device_info(fake_backend: str) -> None:
    with GpuRunner(backend=fake_backend, check_driver=False) as runner:
        info = runner.device_info()
        assert info.name == "Fake GPU" and info.compute_capability == (9, 0)
        x = _x()
        r = runner.run(_plan("echo"), {"x": x}, timeout_s=30)
        assert r.ok and r.status == "ok" and r.error is None
        assert set(r.outputs) == {"y"}  # default fetch: every output
        np.testing.assert_array_equal(r.outputs["y"], x * 2)
        assert r.gpu_name == "Fake GPU" and r.driver_version == 13000
        assert r.worker_pid == runner.worker_pid
        assert r.samples_ms == () and r.median_ms is None
        r = runner.run(_plan("echo"), {"x": x}, fetch=("x", "y"), timing=Timing(reps=5), timeout_s=30)
        assert set(r.outputs) == {"x", "y"}
        assert r.samples_ms == (1.0, 2.0, 3.0, 4.0, 5.0) and r.median_ms == 3.0
        assert runner.workers_started == 1
        assert unstructure(r)["outputs"]["y"] == {"shape": [16], "dtype": "float32"}


def test_large_arrays_cross_the_pipe(fake_backend: str) -> None:
    n = 64 * 1024 * 1024  # 256 MB of float32 each way
    x = np.arange(n, dtype=np.float32)
    with GpuRunner(backend=fake_backend, check_driver=False) as runner:
        r = runner.run(_plan("echo", n), {"x": x}, fetch=("x",), timeout_s=120)
        assert r.ok, r.error
        assert r.outputs["x"].shape == (n,) and np.array_equal(r.outputs["x"], x)


def test_bad_plan_is_an_error_without_touching_the_worker(fake_backend: str) -> None:
    with GpuRunner(backend=fake_backend, check_driver=False) as runner:
        pid = runner.worker_pid
        r = runner.run(_plan("echo"), {"x": np.zeros(3, np.float32)}, timeout_s=30)
        assert r.status == "error" and "bad plan" in (r.error or "") and "shape (3,)" in (r.error or "")
        assert r.worker_pid is None and runner.worker_pid == pid


def test_timeout_kills_and_replaces_the_worker(fake_backend: str) -> None:
    with GpuRunner(backend=fake_backend, check_driver=False) as runner:
        first = runner.worker_pid
        t0 = time.monotonic()
        r = runner.run(_plan("sleep"), {"x": _x()}, timeout_s=2.0)
        elapsed = time.monotonic() - t0
        assert r.status == "timeout" and "2 s" in (r.error or "")
        assert 2.0 <= elapsed < 2.0 + 15.0
        assert r.worker_pid == first and runner.worker_pid is None
        r = runner.run(_plan("echo"), {"x": _x()}, timeout_s=30)
        assert r.ok and r.worker_pid not in (None, first)
        assert runner.workers_started == 2


def test_fault_replaces_the_worker(fake_backend: str) -> None:
    with GpuRunner(backend=fake_backend, check_driver=False) as runner:
        first = runner.worker_pid
        r = runner.run(_plan("fault"), {"x": _x()}, timeout_s=30)
        assert r.status == "fault" and r.cuda_error == "CUDA_ERROR_ILLEGAL_ADDRESS"
        assert runner.worker_pid is None
        r = runner.run(_plan("echo"), {"x": _x()}, timeout_s=30)
        assert r.ok and r.worker_pid != first and runner.workers_started == 2


@pytest.mark.parametrize("label", ["crash", "raise"])
def test_crash_or_backend_bug_is_a_fault(fake_backend: str, label: str) -> None:
    with GpuRunner(backend=fake_backend, check_driver=False) as runner:
        first = runner.worker_pid
        r = runner.run(_plan(label), {"x": _x()}, timeout_s=30)
        assert r.status == "fault"
        if label == "crash":
            assert "exit code 7" in (r.error or "")
        else:
            assert "fake backend bug" in (r.error or "")
        r = runner.run(_plan("echo"), {"x": _x()}, timeout_s=30)
        assert r.ok and r.worker_pid != first


def test_start_failure_is_one_clean_line(
    fake_backend: str, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FAKE_BACKEND_NO_GPU", "1")
    with pytest.raises(NoGpuError) as info:
        with GpuRunner(backend=fake_backend, check_driver=False):
            pass
    msg = str(info.value)
    assert msg.startswith("no NVIDIA driver here: ") and "CUDA_ERROR_NO_DEVICE" in msg and "\n" not in msg
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err


def test_unloadable_backend_is_a_worker_start_error(capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(WorkerStartError, match="cannot load backend"):
        GpuRunner(backend="no_such_module_anywhere:Nope", check_driver=False).start()
    assert isinstance(WorkerStartError("x"), CakeUserError)
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err


def test_runner_without_driver_raises_no_gpu_error(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """The real CUDA backend, on a machine (or environment) without a usable driver."""
    # The in-parent check: no worker is even started.
    monkeypatch.setenv("CAKE_NO_GPU", "1")
    driver_status(refresh=True)
    try:
        with pytest.raises(NoGpuError, match="^no NVIDIA driver here: "):
            with GpuRunner():
                pass
    finally:
        monkeypatch.delenv("CAKE_NO_GPU")
        driver_status(refresh=True)
    # The worker's own discovery: cuInit fails in the worker (no libcuda here, or no visible
    # device on a GPU machine) and comes back as one line, with no traceback from the worker.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(NoGpuError) as info:
        with GpuRunner(check_driver=False):
            pass
    msg = str(info.value)
    assert msg.startswith("no NVIDIA driver here: ") and "\n" not in msg
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err


def test_closed_runner_restarts_on_demand(fake_backend: str) -> None:
    runner = GpuRunner(backend=fake_backend, check_driver=False)
    try:
        assert runner.worker_pid is None
        r = runner.run(_plan("echo"), {"x": _x()}, timeout_s=30)  # starts lazily
        assert r.ok
        runner.close()
        assert runner.worker_pid is None
        assert runner.run(_plan("echo"), {"x": _x()}, timeout_s=30).ok
        assert runner.workers_started == 2
    finally:
        runner.close()
