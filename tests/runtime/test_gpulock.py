"""GPU requests take turns across processes (``cake_core.runtime.gpulock``), and a slow kernel's timing is
bounded (``Timing.bounded``).

The lock is held by another process (a child python that takes it and sleeps): a runner's request waits for
it and reports the wait; the wait is this process's own, not the device's (``waited_s``).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from cake_core.runtime.gpulock import GpuLock, lock_path
from cake_core.runtime.plan import KernelLaunch, Plan, ScalarArg, TensorArg, TensorSpec, Timing
from cake_core.runtime.worker import GpuRunner


def _hold_elsewhere(path: Path, seconds: float) -> subprocess.Popen:
    """A child process that holds the lock file ``path`` for ``seconds`` once it prints ``held``."""
    code = textwrap.dedent(f"""
        import fcntl, os, sys, time
        fd = os.open({str(path)!r}, os.O_RDWR | os.O_CREAT, 0o666)
        fcntl.flock(fd, fcntl.LOCK_EX)
        print("held", flush=True)
        time.sleep({seconds})
    """)
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "held"
    return child


def test_a_request_waits_while_another_process_holds_the_device(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  fake_backend: str) -> None:  # fmt: skip
    monkeypatch.setenv("CAKE_GPU_LOCK_DIR", str(tmp_path))
    n = 1024
    plan = Plan("echo", {"main": b"fake cubin"}, [TensorSpec("x", "f32", (n,)), TensorSpec("y", "f32", (n,), "output")],
                [KernelLaunch("k", (1, 1, 1), (32, 1, 1), [TensorArg("x"), TensorArg("y"), ScalarArg(n)])])  # fmt: skip
    x = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    with GpuRunner(backend=fake_backend, check_driver=False) as runner:
        alone = runner.run(plan, {"x": x}, timeout_s=60)
        assert alone.ok and "wait_s" not in alone.phases_s and runner.waited_s < 0.05
        child = _hold_elsewhere(lock_path("ordinal0"), 0.6)
        try:
            start = time.monotonic()
            queued = runner.run(plan, {"x": x}, timeout_s=60)
            took = time.monotonic() - start
        finally:
            child.wait(10)
    assert queued.ok, queued.error
    np.testing.assert_array_equal(queued.outputs["y"], x * 2)
    assert took >= 0.4 and queued.phases_s["wait_s"] >= 0.4 and runner.waited_s >= 0.4


def test_the_lock_is_reentrant_and_released(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAKE_GPU_LOCK_DIR", str(tmp_path))
    lock = GpuLock("0000:19:00.0")
    assert lock.path == tmp_path / "cake-gpu-0000_19_00.0.lock"
    with lock.held(), lock.held() as inner:
        assert inner == 0.0
    child = _hold_elsewhere(lock.path, 0.0)  # takes it at once: released by this process
    child.wait(10)
    lock.close()


def test_an_unwritable_lock_directory_leaves_requests_unlocked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("CAKE_GPU_LOCK_DIR", str(blocker / "below"))  # a directory under a plain file
    lock = GpuLock("ordinal0")
    with lock.held() as waited:
        assert waited == 0.0
    assert lock.error and "no GPU lock file" in lock.error


@pytest.mark.parametrize(
    ("first_ms", "expected"),
    [
        (0.5, (4, 50)),  # a fast kernel keeps every warm-up and repetition
        (50.0, (2, 20)),  # 20 calls fit a 1 s budget
        (216.0, (0, 5)),  # a naive kernel: the floor of 5 repetitions, no more warm-ups
    ],
)
def test_a_slow_kernel_gets_fewer_repetitions(first_ms: float, expected: tuple[int, int]) -> None:
    assert Timing(budget_ms=1000.0).bounded(first_ms) == expected


def test_without_a_budget_every_repetition_runs() -> None:
    assert Timing().bounded(1e4) == (4, 50)
