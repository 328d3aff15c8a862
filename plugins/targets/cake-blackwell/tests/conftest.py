"""Shared fixtures of cake-blackwell's tests: the registry with the plugin loaded, the b200 target,
and the hand-written test kernel ``mma.cake`` type-checked for it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cake_core import plugins
from cake_core.ir.parser import parse
from cake_core.ir.sema import check_module

HERE = Path(__file__).parent
MMA = HERE / "mma.cake"


@pytest.fixture(scope="session")
def registry():
    return plugins.registry()


@pytest.fixture(scope="session")
def pack_registry():
    """This plugin and the NVIDIA targets alone (``CAKE_PLUGINS``): the corpus and mutation tests see no
    other pack's findings."""
    before = os.environ.get(plugins.ALLOW_ENV)
    os.environ[plugins.ALLOW_ENV] = "nvidia-targets,blackwell"
    try:
        return plugins.load()
    finally:
        if before is None:
            del os.environ[plugins.ALLOW_ENV]
        else:
            os.environ[plugins.ALLOW_ENV] = before


@pytest.fixture(scope="session")
def b200(registry):
    return registry.by_name("targets")["b200"]


def check(registry, target, text: str, name: str = "mma.cake"):
    """Parse and type-check ``text`` with every loaded primitive and layout."""
    return check_module(parse(text, name), registry.by_name("primitives"), target,
                        layouts=registry.by_name("layouts"))  # fmt: skip


def checked_file(registry, target, path: Path):
    """The file at ``path`` type-checked for ``target``, which must accept it."""
    checked = check(registry, target, path.read_text(), str(path))
    assert checked.ok, [str(d) for d in checked.diagnostics]
    return checked


@pytest.fixture(scope="session")
def mma_text() -> str:
    return MMA.read_text()


@pytest.fixture(scope="session")
def checker(registry, b200):
    """Type-checks a variant of the test kernel for b200."""
    return lambda text: check(registry, b200, text)


@pytest.fixture(scope="session")
def mma_checked(registry, b200):
    return checked_file(registry, b200, MMA)
