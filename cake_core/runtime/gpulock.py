"""One GPU, one request at a time across processes: :class:`GpuLock`.

Two ``cake run`` or ``cake bench`` processes on one machine each own a GPU worker. Left alone, their
kernels would overlap on the device and every timing taken meanwhile would measure the other's work too.
Each request a :class:`~cake_core.runtime.worker.GpuRunner` sends to its worker (a run, its timing, a
baseline, an oracle) therefore holds an exclusive advisory lock (``flock``) on a file named after the
device: its PCI bus id, which every process sees the same whatever ``CUDA_VISIBLE_DEVICES`` says. Work on
the CPU (building, compiling, the interpreter) goes on in parallel; GPU work takes turns.

The files live in ``$CAKE_GPU_LOCK_DIR`` (default: the system's temporary directory). ``waited_s`` sums the
seconds spent waiting for other processes, so that what a dispatch cost the device can be told apart from
the time it queued. A lock is released when its holder closes the file or dies. Where the file cannot be
made (a read-only temporary directory), requests go unlocked and ``error`` says why.
"""

from __future__ import annotations

import fcntl
import os
import re
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def lock_path(device_key: str) -> Path:
    """The lock file for the device named by ``device_key`` (a PCI bus id, or an ordinal as text)."""
    root = Path(os.environ.get("CAKE_GPU_LOCK_DIR") or tempfile.gettempdir())
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", device_key)
    return root / f"cake-gpu-{safe}.lock"


class GpuLock:
    """An exclusive, re-entrant (within this process) lock on one device, held by :meth:`held`."""

    def __init__(self, device_key: str) -> None:
        self.path = lock_path(device_key)
        self.waited_s = 0.0
        self.error: str | None = None
        self._fd: int | None = None
        self._depth = 0
        self._mutex = threading.RLock()

    @contextmanager
    def held(self) -> Iterator[float]:
        """Hold the lock for the ``with`` block; yields the seconds this entry waited for it."""
        with self._mutex:
            waited = self._acquire()
            try:
                yield waited
            finally:
                self._release()

    def close(self) -> None:
        with self._mutex:
            if self._fd is not None and self._depth == 0:
                os.close(self._fd)
                self._fd = None

    def _acquire(self) -> float:
        self._depth += 1
        if self._depth > 1:
            return 0.0
        try:
            if self._fd is None and self.error is None:
                try:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
                except OSError as exc:
                    self.error = f"no GPU lock file {self.path}: {exc.strerror or exc}"
            if self._fd is None:
                return 0.0
            start = time.monotonic()
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        except BaseException:
            self._depth -= 1
            raise
        waited = time.monotonic() - start
        self.waited_s += waited
        return waited

    def _release(self) -> None:
        self._depth -= 1
        if self._depth == 0 and self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
