"""Run launch plans on a GPU in an isolated worker process: :class:`GpuRunner`.

The calling process never initializes CUDA. A :class:`GpuRunner` owns one worker process started
with multiprocessing's *spawn* context (never fork); the worker initializes CUDA, executes
:class:`~cake_core.runtime.plan.Plan` objects with the driver API
(:mod:`cake_core.runtime.executor`) and sends numpy arrays back over a pipe. Every run ends in a
:class:`RunResult` whose ``status`` is

- ``ok``: the outputs (and, with ``timing``, every sample and the median) are in the result;
- ``fault``: a sticky CUDA error (illegal address, launch failure, ...) or a crashed worker; the
  worker is gone and the next run starts a fresh one;
- ``timeout``: no answer within ``timeout_s`` (a kernel that never finishes); the runner killed the
  worker, and the next run starts a fresh one;
- ``error``: a bad plan or a CUDA error that left the context usable (the worker is kept);
- ``unavailable``: (baselines only) the worker cannot import the baseline, or its backend runs none.

:meth:`GpuRunner.run_baseline` runs a problem's baseline (a torch function, see
:class:`~cake_core.runtime.protocol.BaselineRequest`) in the same worker, timed as plans are.

:meth:`GpuRunner.keep` names read-only input arrays that many runs share (a run's fixed inputs: 512 MiB of
points at kmeans-assign's reference cell): each crosses the pipe once per worker, with the first run that
uses it, and later runs refer to it by key (:class:`~cake_core.runtime.protocol.Kept`). Pickling and piping
such an array cost about a second per run; the upload to fresh device memory stays per run.

Usage::

    with GpuRunner() as runner:
        info = runner.device_info()
        result = runner.run(plan, {"x": x}, fetch=("y",), timing=Timing(reps=100), timeout_s=30)

Spawn starts a fresh interpreter that imports the caller's ``__main__`` module: a script that
creates a runner must keep its top-level work under ``if __name__ == "__main__":``.
"""

from __future__ import annotations

import multiprocessing
import os
import statistics
import threading
import time
import weakref
from collections.abc import Mapping
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from types import TracebackType
from typing import Any

import attrs
import numpy as np

from cake_core.errors import CakeInternalError, NoGpuError
from cake_core.runtime import _child
from cake_core.runtime.device import DeviceInfo, require_driver
from cake_core.runtime.gpulock import GpuLock
from cake_core.runtime.plan import Plan, Timing
from cake_core.runtime.prepare import validate_run
from cake_core.runtime.protocol import NOT_HELD, BaselineRequest, Kept, RunReply, RunRequest

__all__ = ["DEFAULT_BACKEND", "GpuRunner", "RunResult", "WorkerStartError"]

#: The backend a worker hosts unless told otherwise.
DEFAULT_BACKEND = "cake_core.runtime.executor:CudaExecutor"


class WorkerStartError(NoGpuError):
    """A GPU worker process could not be started (the message says why, on one line)."""


@attrs.frozen
class RunResult:
    """The outcome of :meth:`GpuRunner.run` (see the module docstring for ``status``).

    ``device`` is the GPU the worker ran on (name, compute capability, driver version, limits);
    ``functions`` the driver's attributes of each launched kernel (registers, local and static
    shared bytes, ...); ``phases_s`` the worker's time in load/upload/run/download; ``wall_s`` this
    call's time in the caller; ``cuda_error`` the CUresult name where one caused the failure.
    """

    status: str
    plan: str
    error: str | None = None
    outputs: dict[str, np.ndarray] = attrs.field(factory=dict, eq=False, repr=False)
    samples_ms: tuple[float, ...] = ()
    median_ms: float | None = None
    timing: Timing | None = None
    device: DeviceInfo | None = None
    functions: dict[str, dict[str, int]] = attrs.field(factory=dict, eq=False)
    phases_s: dict[str, float] = attrs.field(factory=dict, eq=False)
    notes: tuple[str, ...] = ()
    cuda_error: str | None = None
    worker_pid: int | None = None
    wall_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def gpu_name(self) -> str | None:
        return self.device.name if self.device else None

    @property
    def driver_version(self) -> int | None:
        return self.device.driver_version if self.device else None


@attrs.define
class _Worker:
    process: Any  # multiprocessing.context.SpawnProcess
    conn: Connection
    pid: int
    info: DeviceInfo
    held: set[str] = attrs.field(factory=set)  # keys of the kept arrays this worker holds


class GpuRunner:
    """Owns one GPU worker process and runs plans in it (a context manager).

    ``device`` is the CUDA device ordinal. ``backend`` (``module:attribute``) is what the worker
    hosts; tests of the process machinery pass a fake. ``check_driver=False`` skips the in-parent
    driver check and lets the worker itself discover that CUDA is unusable. A worker that does not
    report ready within ``start_timeout_s`` is killed. After a fault or timeout, starting the
    replacement is retried ``start_retries`` times (the killed context may take a moment to go).
    """

    def __init__(
        self,
        device: int = 0,
        *,
        backend: str = DEFAULT_BACKEND,
        check_driver: bool = True,
        start_timeout_s: float = 180.0,
        start_retries: int = 2,
    ) -> None:
        self.device = device
        self.backend = backend
        self.check_driver = check_driver
        self.start_timeout_s = start_timeout_s
        self.start_retries = start_retries
        self._worker: _Worker | None = None
        self._info: DeviceInfo | None = None
        self._lock = threading.RLock()
        self._workers_started = 0
        self._closed = False
        self._kept: dict[int, tuple[weakref.ref[np.ndarray], str]] = {}  # by id(array): (the array, its key)
        self._gone: list[str] = []  # keys of kept arrays collected since: the worker may drop them
        self._keys = 0
        self._gpu_lock: GpuLock | None = None

    # -------------------------------------------------------------------------------- lifecycle

    def __enter__(self) -> GpuRunner:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def start(self) -> DeviceInfo:
        """Start the worker now (if none is running); returns its device. Raises NoGpuError."""
        with self._lock:
            return self._ensure().info

    @property
    def workers_started(self) -> int:
        """How many worker processes this runner has started (faults and timeouts start new ones)."""
        return self._workers_started

    @property
    def worker_pid(self) -> int | None:
        """The pid of the live worker, if any."""
        w = self._worker
        return w.pid if w is not None and w.process.is_alive() else None

    def device_info(self) -> DeviceInfo:
        """The worker's GPU: name, SM count, shared-memory limits, L2, registers, compute capability."""
        with self._lock:
            if self._info is not None:
                return self._info
            return self._ensure().info

    def close(self) -> None:
        """Stop the worker (politely, then by force). The runner can be started again."""
        with self._lock:
            if self._gpu_lock is not None:
                self._gpu_lock.close()  # its file; a later request opens it again
            w, self._worker = self._worker, None
            if w is None:
                return
            try:
                w.conn.send({"type": "stop"})
            except (OSError, ValueError):
                pass
            w.process.join(10)
            if w.process.is_alive():
                w.process.kill()
                w.process.join(10)
            w.conn.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def _ensure(self) -> _Worker:
        w = self._worker
        if w is not None and w.process.is_alive():
            return w
        if w is not None:
            self._discard(w)
        if self.check_driver:
            require_driver()
        attempts = 1 + (self.start_retries if self._workers_started else 0)
        last: NoGpuError | None = None
        for attempt in range(attempts):
            if attempt:
                time.sleep(2.0 * attempt)
            try:
                w = self._spawn()
            except WorkerStartError as e:
                last = e
                continue
            except NoGpuError as e:
                last = e
                if not self._workers_started:
                    raise
                continue
            self._worker = w
            self._info = w.info
            self._workers_started += 1
            return w
        assert last is not None
        raise last

    def _spawn(self) -> _Worker:
        ctx = multiprocessing.get_context("spawn")
        parent_conn, child_conn = ctx.Pipe(duplex=True)
        process = ctx.Process(
            target=_child.main,
            args=(child_conn, self.device, self.backend, os.getpid()),
            name=f"cake-gpu-worker-{self.device}",
            daemon=True,
        )
        process.start()
        child_conn.close()
        try:
            ready = parent_conn.poll(self.start_timeout_s)
        except BaseException:
            self._kill(process, parent_conn)
            raise
        if not ready:
            self._kill(process, parent_conn)
            raise WorkerStartError(f"the GPU worker did not start within {self.start_timeout_s:g} s")
        try:
            message = parent_conn.recv()
        except (EOFError, OSError):
            process.join(10)
            parent_conn.close()
            raise WorkerStartError(f"the GPU worker exited before it started (exit code {process.exitcode})") from None
        if not isinstance(message, dict) or message.get("type") not in ("ready", "start_failed"):
            self._kill(process, parent_conn)
            raise CakeInternalError(f"unexpected first message from the GPU worker: {message!r}")
        if message["type"] == "start_failed":
            process.join(10)
            if process.is_alive():
                process.kill()
            parent_conn.close()
            text = str(message.get("message", "unknown reason"))
            if message.get("no_gpu"):
                raise NoGpuError(f"no NVIDIA driver here: {text}")
            raise WorkerStartError(f"the GPU worker could not start: {text}")
        return _Worker(process=process, conn=parent_conn, pid=int(message["pid"]), info=message["device"])

    @staticmethod
    def _kill(process: Any, conn: Connection) -> int | None:
        if process.is_alive():
            process.kill()
        process.join(15)
        try:
            conn.close()
        except OSError:
            pass
        return process.exitcode

    def _discard(self, w: _Worker, *, kill: bool = False) -> int | None:
        """Forget worker ``w``; wait briefly for it to exit (kill it first if ``kill``)."""
        if self._worker is w:
            self._worker = None
        if kill:
            return self._kill(w.process, w.conn)
        w.process.join(10)
        if w.process.is_alive():
            return self._kill(w.process, w.conn)
        try:
            w.conn.close()
        except OSError:
            pass
        return w.process.exitcode

    # -------------------------------------------------------------------------------- running

    def keep(self, arrays: Mapping[str, np.ndarray]) -> None:
        """Send these read-only arrays to the worker once, not with every run that takes them as inputs.

        While an array lives, a run (or baseline) given that very object as an input sends a reference the
        worker resolves; a new worker (after a fault or timeout) gets the array again with its first run.
        An array that can be written is refused (ValueError): what the worker holds must stay what the
        caller holds. Nothing is sent until a run needs it.
        """
        for array in arrays.values():
            if not isinstance(array, np.ndarray) or array.flags.writeable:
                raise ValueError("only read-only numpy arrays can be kept (set `flags.writeable = False`)")
            entry = self._kept.get(id(array))
            if entry is not None and entry[0]() is array:
                continue
            self._keys += 1
            key = f"kept-{self._keys}"
            self._kept[id(array)] = (weakref.ref(array, self._forget_callback(id(array), key)), key)

    def _forget_callback(self, ident: int, key: str) -> Any:
        kept, gone = self._kept, self._gone  # not self: a kept array must not keep the runner alive

        def forget(_: object) -> None:
            entry = kept.get(ident)
            if entry is not None and entry[1] == key:
                del kept[ident]
            gone.append(key)

        return forget

    def _by_reference(self, inputs: Mapping[str, Any], worker: _Worker) -> tuple[dict[str, Any], dict[str, Any]]:
        """``inputs`` with every kept array replaced by its :class:`Kept` key, and the kept arrays ``worker``
        does not hold yet (to send with this message)."""
        out: dict[str, Any] = {}
        send: dict[str, Any] = {}
        for name, value in inputs.items():
            entry = self._kept.get(id(value))
            if entry is None or entry[0]() is not value:
                out[name] = value
                continue
            out[name] = Kept(entry[1])
            if entry[1] not in worker.held:
                send[entry[1]] = value
        return out, send

    def run(
        self,
        plan: Plan,
        inputs: Mapping[str, np.ndarray],
        *,
        fetch: tuple[str, ...] | None = None,
        timing: Timing | None = None,
        timeout_s: float = 60.0,
        sync_each_launch: bool = True,
    ) -> RunResult:
        """Run ``plan`` on ``inputs`` and return the ``fetch`` tensors (default: every output).

        With ``timing``: warm-up runs, then ``timing.reps`` timed repetitions (see
        :class:`~cake_core.runtime.plan.Timing`); the result has every sample and the median in ms.
        ``timeout_s`` bounds the whole request once the worker is up; a worker that exceeds it is
        killed. Raises :class:`~cake_core.errors.NoGpuError` only when no worker can be started;
        every other failure is a result with a non-``ok`` status.
        """
        t0 = time.monotonic()
        fetch_names = tuple(fetch) if fetch is not None else tuple(t.name for t in plan.tensors if t.kind == "output")
        arrays = {k: np.ascontiguousarray(v) for k, v in inputs.items()}
        problems = validate_run(plan, arrays, fetch_names, timing)
        if problems:
            reply = RunReply(status="error", error="bad plan: " + "; ".join(problems))
            return self._result(plan.label, timing, t0, reply, None)
        request = RunRequest(
            plan=plan, inputs=arrays, fetch=fetch_names, timing=timing, sync_each_launch=sync_each_launch
        )
        return self._exchange("run", request, plan.label, timing, timeout_s, t0)

    def run_baseline(self, request: BaselineRequest, *, timeout_s: float = 600.0) -> RunResult:
        """Run a problem's baseline in the worker (see :class:`~cake_core.runtime.protocol.BaselineRequest`).

        The same contract as :meth:`run`: the result's ``plan`` is ``baseline:NAME``, its status one
        of :data:`~cake_core.runtime.protocol.STATUSES` (``unavailable`` where the worker cannot import
        the baseline or its backend runs none). ``timeout_s`` covers the first request's imports and
        autotuning too.
        """
        t0 = time.monotonic()
        request = attrs.evolve(request, inputs={k: np.ascontiguousarray(v) for k, v in request.inputs.items()})
        return self._exchange("baseline", request, request.label, request.timing, timeout_s, t0)

    def _result(
        self, label: str, timing: Timing | None, t0: float, reply: RunReply, worker: _Worker | None
    ) -> RunResult:
        samples = tuple(reply.samples_ms)
        return RunResult(
            status=reply.status,
            plan=label,
            error=reply.error,
            outputs=dict(reply.outputs),
            samples_ms=samples,
            median_ms=statistics.median(samples) if samples else None,
            timing=timing,
            device=worker.info if worker else self._info,
            functions=dict(reply.functions),
            phases_s=dict(reply.phases_s),
            notes=tuple(reply.notes),
            cuda_error=reply.cuda_error,
            worker_pid=worker.pid if worker else None,
            wall_s=time.monotonic() - t0,
        )

    def _exchange(
        self, kind: str, request: RunRequest | BaselineRequest, label: str, timing: Timing | None,
        timeout_s: float, t0: float,
    ) -> RunResult:  # fmt: skip
        """Send one request of ``kind`` to the worker and turn whatever happens into a RunResult."""

        def result(reply: RunReply, worker: _Worker | None) -> RunResult:
            return self._result(label, timing, t0, reply, worker)

        with self._lock:
            worker = self._ensure()
            lock = self._device_lock(worker)
            with lock.held() as waited:
                reply, worker = self._send(kind, request, timeout_s, worker)
            phases = dict(reply.phases_s, wait_s=waited) if waited > 0.0005 else reply.phases_s
            return result(attrs.evolve(reply, phases_s=phases), worker)

    @property
    def waited_s(self) -> float:
        """Seconds this runner's requests spent waiting for other processes' GPU work (see
        :mod:`~cake_core.runtime.gpulock`)."""
        return self._gpu_lock.waited_s if self._gpu_lock is not None else 0.0

    def _device_lock(self, worker: _Worker) -> GpuLock:
        if self._gpu_lock is None:
            self._gpu_lock = GpuLock(worker.info.pci_bus_id or f"ordinal{worker.info.ordinal}")
        return self._gpu_lock

    def _send(
        self, kind: str, request: RunRequest | BaselineRequest, timeout_s: float, worker: _Worker
    ) -> tuple[RunReply, _Worker | None]:
        """One request to ``worker`` and its reply; every failure is a reply (the worker it concerns, or
        ``None`` where the request never left)."""
        inputs, send = self._by_reference(request.inputs, worker)
        drop, self._gone[:] = [k for k in self._gone if k in worker.held], []
        message = {"type": kind, "request": attrs.evolve(request, inputs=inputs), "keep": send, "drop": drop}
        try:
            payload = ForkingPickler.dumps(message)
        except Exception as e:  # noqa: BLE001 - e.g. an unpicklable value in the plan
            return RunReply(status="error", error=f"the request cannot be sent to a worker: {e}"), None
        del message
        try:
            worker.conn.send_bytes(payload)
        except (OSError, ValueError):
            code = self._discard(worker)
            return RunReply(status="fault", error=f"the GPU worker died before the run (exit code {code})"), worker
        del payload
        deadline = time.monotonic() + timeout_s
        try:
            answered = worker.conn.poll(max(0.0, deadline - time.monotonic()))
        except BaseException:
            self._discard(worker, kill=True)
            raise
        if not answered:
            self._discard(worker, kill=True)
            return (
                RunReply(
                    status="timeout",
                    error=f"no result within {timeout_s:g} s (a kernel that does not finish?); "
                    "the worker was killed and will be replaced",
                ),
                worker,
            )
        try:
            reply = worker.conn.recv()
        except (EOFError, OSError):
            code = self._discard(worker)
            return RunReply(status="fault", error=f"the GPU worker died during the run (exit code {code})"), worker
        worker.held.difference_update(drop)
        worker.held.update(send)  # it read the message: it holds them, whatever the reply says
        if isinstance(reply, RunReply) and (reply.error or "").startswith(NOT_HELD):
            worker.held.clear()  # out of step: the next message sends every kept array again
        if not isinstance(reply, RunReply):
            self._discard(worker, kill=True)
            return RunReply(status="fault", error=f"unexpected reply from the GPU worker: {reply!r}"), worker
        if reply.status == "fault":
            self._discard(worker)  # it exits by itself after a fault
        return reply, worker
