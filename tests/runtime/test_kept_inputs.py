"""Kept inputs (``GpuRunner.keep``): a read-only array many runs share crosses the pipe once per worker.

Through a real spawned worker hosting the fake backend (fake_backend.py): the bytes each message puts on the
pipe, the outputs the backend computes from the array it was handed back, a new worker after a fault, and
the worker told to drop what the caller no longer holds.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

from cake_core.runtime.plan import KernelLaunch, Plan, ScalarArg, TensorArg, TensorSpec
from cake_core.runtime.worker import GpuRunner


def _plan(label: str, n: int) -> Plan:
    return Plan(label, {"main": b"fake cubin"}, [TensorSpec("x", "f32", (n,)), TensorSpec("y", "f32", (n,), "output")],
                [KernelLaunch("k", (1, 1, 1), (32, 1, 1), [TensorArg("x"), TensorArg("y"), ScalarArg(n)])])  # fmt: skip


def _read_only(n: int, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal(n, dtype=np.float32)
    x.flags.writeable = False
    return x


class _Sent:
    """Records the size of every message the runner puts on its worker's pipe."""

    def __init__(self, runner: GpuRunner, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sizes: list[int] = []
        self.runner, self.monkeypatch = runner, monkeypatch

    def watch(self) -> None:
        conn = self.runner._worker.conn  # type: ignore[union-attr]
        real = conn.send_bytes

        def send_bytes(payload: bytes) -> None:
            self.sizes.append(len(payload))
            real(payload)

        self.monkeypatch.setattr(conn, "send_bytes", send_bytes)


def test_a_kept_array_crosses_once_and_every_run_gets_it(fake_backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    n = 1 << 20  # 4 MiB
    x = _read_only(n)
    with GpuRunner(backend=fake_backend, check_driver=False) as runner:
        runner.keep({"x": x})
        sent = _Sent(runner, monkeypatch)
        sent.watch()
        for _ in range(3):
            r = runner.run(_plan("echo", n), {"x": x}, fetch=("x", "y"), timeout_s=60)
            assert r.ok, r.error
            np.testing.assert_array_equal(r.outputs["x"], x)
            np.testing.assert_array_equal(r.outputs["y"], x * 2)
        assert sent.sizes[0] > 4 * n and all(s < 4096 for s in sent.sizes[1:]), sent.sizes
        other = np.array(x)  # equal, but not the kept object: sent whole
        assert runner.run(_plan("echo", n), {"x": other}, fetch=("y",), timeout_s=60).ok
        assert sent.sizes[-1] > 4 * n


def test_a_new_worker_gets_the_kept_array_again(fake_backend: str) -> None:
    n = 4096
    x = _read_only(n)
    with GpuRunner(backend=fake_backend, check_driver=False) as runner:
        runner.keep({"x": x})
        assert runner.run(_plan("echo", n), {"x": x}, timeout_s=30).ok
        assert runner.run(_plan("fault", n), {"x": x}, timeout_s=30).status == "fault"
        r = runner.run(_plan("echo", n), {"x": x}, timeout_s=30)
        assert r.ok, r.error
        np.testing.assert_array_equal(r.outputs["y"], x * 2)
        assert runner.workers_started == 2


def test_the_worker_drops_what_the_caller_let_go(fake_backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    n = 4096
    with GpuRunner(backend=fake_backend, check_driver=False) as runner:
        x = _read_only(n)
        runner.keep({"x": x})
        assert runner.run(_plan("echo", n), {"x": x}, timeout_s=30).ok
        held = set(runner._worker.held)  # type: ignore[union-attr]
        assert len(held) == 1
        del x
        gc.collect()
        y = _read_only(n, seed=1)
        runner.keep({"x": y})
        r = runner.run(_plan("echo", n), {"x": y}, timeout_s=30)
        assert r.ok and np.array_equal(r.outputs["y"], y * 2)
        assert runner._worker.held.isdisjoint(held) and len(runner._worker.held) == 1  # type: ignore[union-attr]


def test_only_read_only_arrays_are_kept(fake_backend: str) -> None:
    with GpuRunner(backend=fake_backend, check_driver=False) as runner, pytest.raises(ValueError, match="read-only"):
        runner.keep({"x": np.zeros(4, np.float32)})
