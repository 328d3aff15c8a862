"""Fixtures shared by every test directory: a live GPU runner (skipped cleanly without a driver), a
recorder that keeps GPU measurements when ``CAKE_RESULTS_DIR`` is set, and the registered primitives
with ways to type-check Cake text and to plant a bug in it."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cake_core import plugins
from cake_core.convert import unstructure
from cake_core.ir.model import CheckedModule
from cake_core.ir.parser import parse
from cake_core.ir.primitive import Primitive
from cake_core.ir.sema import check_module


@pytest.fixture(scope="session")
def gpu_runner() -> Iterator[object]:
    """A GPU worker shared by the session's tests (CUDA is never initialised in this process)."""
    from cake_core.runtime.device import driver_status
    from cake_core.runtime.worker import GpuRunner

    ok, reason = driver_status()
    if not ok:
        pytest.skip(f"no NVIDIA driver here: {reason}")
    with GpuRunner() as runner:
        yield runner


@pytest.fixture(scope="session")
def record() -> Iterator[object]:
    """``record(section, measurement_or_dict)``: appended to $CAKE_RESULTS_DIR/gpu_tests.jsonl if set."""
    directory = os.environ.get("CAKE_RESULTS_DIR")
    path = Path(directory) / "gpu_tests.jsonl" if directory else None
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)

    def write(section: str, item: object) -> None:
        if path is None:
            return
        data = dict(unstructure(item))
        data["section"] = section
        with path.open("a") as f:
            f.write(json.dumps(data) + "\n")

    yield write


@pytest.fixture(scope="session")
def primitives() -> dict[str, Primitive]:
    reg = plugins.registry()
    return {name: reg.get("primitives", name) for name in reg.names("primitives")}


@pytest.fixture(scope="session")
def check(primitives: dict[str, Primitive]) -> Callable[..., CheckedModule]:
    """Parse and type-check Cake text with the registered primitives (no target)."""

    def check_(text: str, file: str = "test.cake", extra: dict[str, Primitive] | None = None) -> CheckedModule:
        prims = {**primitives, **(extra or {})}
        return check_module(parse(text, file), prims)

    return check_


@pytest.fixture(scope="session")
def compile_cake(check: Callable[..., CheckedModule]) -> Callable[..., CheckedModule]:
    """:func:`check`, asserting that the module is free of errors."""

    def compile_(text: str, file: str = "test.cake", extra: dict[str, Primitive] | None = None) -> CheckedModule:
        checked = check(text, file, extra)
        assert checked.ok, [f"{d.code}: {d.message}" for d in checked.diagnostics]
        return checked

    return compile_


@pytest.fixture(scope="session")
def plant() -> Callable[[str, str, str], str]:
    """``plant(text, old, new)``: ``text`` with the single ``old`` replaced (a planted bug that surely landed)."""

    def plant_(text: str, old: str, new: str) -> str:
        assert text.count(old) == 1, f"expected one `{old}` in the schedule"
        return text.replace(old, new)

    return plant_
