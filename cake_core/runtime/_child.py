"""The body of a GPU worker process (started with multiprocessing's *spawn* context).

The worker builds its backend (``module:attribute``, called with the device ordinal), reports
``ready`` with the device's :class:`~cake_core.runtime.device.DeviceInfo` or ``start_failed`` with
one line of text, then serves :class:`~cake_core.runtime.protocol.RunRequest` and
:class:`~cake_core.runtime.protocol.BaselineRequest` messages until told to stop or until its parent
goes away (a backend without ``run_baseline`` answers baseline requests ``unavailable``). After a ``fault`` reply it exits at once: a CUDA context that
saw a sticky error cannot be trusted again, and the runner replaces the worker.

A message may carry ``keep`` (arrays by key) and ``drop`` (keys): the worker holds the kept arrays, read-only,
until dropped, and replaces each :class:`~cake_core.runtime.protocol.Kept` input of a request by its array
before the backend sees it (so the runner sends a 512 MiB input once per worker, not once per run). Each run
still uploads its inputs to fresh device memory: a kernel that writes its inputs changes nothing kept.

Nothing here prints a traceback: every failure travels to the parent as a message. SIGINT is
ignored (a Ctrl-C at the terminal reaches the whole process group; the parent decides), and a
watchdog thread ends the worker if its parent process dies.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

import attrs

from cake_core.runtime.protocol import BackendStartError, BaselineRequest, Kept, NOT_HELD, RunReply, RunRequest, load_object


def _load_backend(spec: str) -> Any:
    try:
        return load_object(spec)
    except ValueError:
        raise BackendStartError(f"bad backend spec `{spec}` (expected module:attribute)", no_gpu=False) from None
    except (ImportError, AttributeError) as e:
        raise BackendStartError(f"cannot load backend `{spec}`: {e}", no_gpu=False) from None


def _serve(backend: Any, kind: str | None, request: Any) -> RunReply:
    """The reply to one ``run`` or ``baseline`` message (a malformed one is an ``error``)."""
    if kind == "run" and isinstance(request, RunRequest):
        return backend.run(request)
    if kind == "baseline" and isinstance(request, BaselineRequest):
        run_baseline = getattr(backend, "run_baseline", None)
        if run_baseline is None:
            return RunReply(status="unavailable", error=f"this GPU worker's backend runs no baselines "
                            f"({type(backend).__name__})")  # fmt: skip
        return run_baseline(request)
    return RunReply(status="error", error=f"unknown message to the worker: {kind!r}")


def _with_kept(request: Any, held: dict[str, Any]) -> Any:
    """``request`` with every :class:`Kept` input replaced by the array held under its key; raises KeyError
    naming a key this worker does not hold."""
    inputs = getattr(request, "inputs", None)
    if not isinstance(inputs, dict) or not any(isinstance(v, Kept) for v in inputs.values()):
        return request
    return attrs.evolve(request, inputs={k: held[v.key] if isinstance(v, Kept) else v for k, v in inputs.items()})


def _watch_parent(parent_pid: int) -> None:
    while True:
        time.sleep(0.5)
        if os.getppid() != parent_pid:
            os._exit(0)


def main(conn: Connection, ordinal: int, backend_spec: str, parent_pid: int) -> None:
    """Worker entry point (the target of the spawned process)."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except (ValueError, OSError):
        pass
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True, name="cake-parent-watch").start()
    try:
        backend = _load_backend(backend_spec)(ordinal)
        info = backend.device_info()
    except BackendStartError as e:
        _send_quietly(conn, {"type": "start_failed", "no_gpu": e.no_gpu, "message": str(e)})
        _exit(conn, 0)
    except BaseException as e:  # noqa: BLE001 - report, never print a traceback
        _send_quietly(conn, {"type": "start_failed", "no_gpu": False, "message": f"{type(e).__name__}: {e}"})
        _exit(conn, 0)
    _send_quietly(conn, {"type": "ready", "device": info, "pid": os.getpid()})
    held: dict[str, Any] = {}  # arrays kept by key (see the module docstring)
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            break
        except Exception as e:  # noqa: BLE001 - an unpicklable request
            _send_quietly(conn, RunReply(status="error", error=f"the worker could not read the request: {e}"))
            continue
        kind = message.get("type") if isinstance(message, dict) else None
        if kind == "stop":
            break
        if kind == "ping":
            _send_quietly(conn, {"type": "pong"})
            continue
        request = message.get("request") if isinstance(message, dict) else None
        if isinstance(message, dict):
            for key in message.get("drop", ()):
                held.pop(key, None)
            for key, array in message.get("keep", {}).items():
                array.flags.writeable = False  # held for later runs: nobody here may change it
                held[key] = array
        try:
            request = _with_kept(request, held)
        except KeyError as e:
            _send_quietly(conn, RunReply(status="error", error=f"{NOT_HELD} {e}"))
            continue
        try:
            reply = _serve(backend, kind, request)
        except BaseException as e:  # noqa: BLE001 - a backend bug: report it as a fault and leave
            reply = RunReply(status="fault", error=f"the worker's backend raised {type(e).__name__}: {e}")
        if not _send_quietly(conn, reply):
            break
        if reply.status == "fault":
            _exit(conn, 0)  # the context may be broken: never reuse it
    try:
        backend.close()
    except BaseException:  # noqa: BLE001
        pass
    _exit(conn, 0)


def _send_quietly(conn: Connection, message: Any) -> bool:
    try:
        conn.send(message)
        return True
    except Exception as e:  # noqa: BLE001
        if isinstance(message, RunReply):  # e.g. an output that cannot be pickled: say so instead
            try:
                conn.send(RunReply(status="error", error=f"the worker could not send its reply: {e}"))
                return True
            except Exception:  # noqa: BLE001
                return False
        return False


def _exit(conn: Connection, code: int) -> None:
    try:
        conn.close()
    except OSError:
        pass
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
