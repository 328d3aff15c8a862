"""Fixtures of the vocabulary tests: the registered primitives and problems, and the new schedules."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from cake_core import plugins
from cake_core.ir.parser import parse
from cake_core.ir.primitive import Primitive
from cake_core.ir.model import CheckedModule
from cake_core.ir.sema import check_module
from cake_core.problems import kmeans_update, knn

SCHEDULES = {
    "atomic": Path(kmeans_update.__file__).parent / "schedules" / "atomic.cake",
    "fused_topk": Path(knn.__file__).parent / "schedules" / "fused_topk.cake",
}


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
def schedule_text() -> Callable[[str], str]:
    return lambda name: SCHEDULES[name].read_text()


@pytest.fixture(scope="session")
def plant() -> Callable[[str, str, str], str]:
    """``plant(text, old, new)``: ``text`` with the single ``old`` replaced (a planted bug that surely landed)."""

    def plant_(text: str, old: str, new: str) -> str:
        assert text.count(old) == 1, f"expected one `{old}` in the schedule"
        return text.replace(old, new)

    return plant_
