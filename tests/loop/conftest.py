"""Fixtures of the loop tests: a count of every parse, type check and lowering; a GPU that is a worker
process with a fake backend (``fake_gpu.ZeroGpu``); a small default cell for kmeans-assign."""

from __future__ import annotations

import collections
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest
from cake_core import plugins

HERE = Path(__file__).resolve().parent
SMALL = {"B": 2, "N": 1000, "K": 100, "D": 128}


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(plugins.ALLOW_ENV, raising=False)
    monkeypatch.delenv("CAKE_DEBUG", raising=False)
    plugins.reset()
    yield
    plugins.reset()


@pytest.fixture
def steps(monkeypatch: pytest.MonkeyPatch) -> dict[str, collections.Counter]:
    """Every parse (by file), type check (by file, and ``(file, "no target")`` for a check without a
    target: the interpreter gate's) and lowering (by file and specialization) from now on, counted at
    the engines themselves: whoever calls them, through the pipeline or not."""
    from cake_core.ir import parser, sema
    from cake_core.lower import program

    seen: dict[str, collections.Counter] = {"parse": collections.Counter(), "check": collections.Counter(),
                                            "build": collections.Counter()}  # fmt: skip

    def counted(step, fn, key):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            seen[step][key(*args)] += 1
            return fn(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(parser, "parse", counted("parse", parser.parse, lambda text, file="<string>": Path(file).name))
    def check_key(module, _primitives, target=None, *_):
        return Path(module.path).name if target is not None else (Path(module.path).name, "no target")

    monkeypatch.setattr(sema, "check_module", counted("check", sema.check_module, check_key))
    monkeypatch.setattr(program, "lower_program", counted("build", program.lower_program,
                                                          lambda checked, _t, spec: (Path(checked.module.path).name,
                                                                                     spec.label)))  # fmt: skip
    return seen


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """A usable "GPU" (``Fake GPU``, compute capability 9.0) behind the real worker machinery."""
    from cake_core.runtime import device, worker

    monkeypatch.syspath_prepend(str(HERE))  # spawned workers inherit it
    monkeypatch.setattr(device, "driver_status", lambda **_: (True, "fake"))
    monkeypatch.setattr(device, "require_driver", lambda: None)
    monkeypatch.setattr(worker, "GpuRunner", functools.partial(worker.GpuRunner, backend="fake_gpu:ZeroGpu",
                                                               check_driver=False))  # fmt: skip


@pytest.fixture
def reference_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Like :func:`fake_gpu`, with a backend that answers right (``fake_gpu.ReferenceGpu``)."""
    from cake_core.runtime import device, worker

    monkeypatch.syspath_prepend(str(HERE))
    monkeypatch.setattr(device, "driver_status", lambda **_: (True, "fake"))
    monkeypatch.setattr(device, "require_driver", lambda: None)
    monkeypatch.setattr(worker, "GpuRunner", functools.partial(worker.GpuRunner, backend="fake_gpu:ReferenceGpu",
                                                               check_driver=False))  # fmt: skip


@pytest.fixture
def small_cell(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """kmeans-assign's default cell made small (the fake GPU's inputs are made on the host)."""
    from cake_core.problems.kmeans_assign.problem import KMeansAssign
    from cake_core.problems.problem import Cell

    monkeypatch.setattr(KMeansAssign, "default_cell", Cell(SMALL, "bf16"))
    return SMALL
