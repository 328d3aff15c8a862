"""Fixtures of the cake-rules-core tests: registries loaded the way `cake` loads them (entry points),
plus the in-process fixture primitives the corpus uses.

The corpus and the schedule tests see this pack alone (``CAKE_PLUGINS`` allows the NVIDIA targets and
this pack's entry point), so another installed rule pack's findings never leak into them;
``plain_registry`` is everything installed, for the tests of discovery itself.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from cake_core import plugins

HERE = Path(__file__).parent
CORPUS = HERE / "corpus"
#: entry points of the targets and of this pack
PACK_ONLY = "nvidia-targets,core-rules"


def _fixture_module():
    return plugins.module_from_file("cake_rules_core_fixture_primitives", HERE / "fixture_primitives.py")


@contextmanager
def _allow(entry_points: str) -> Iterator[None]:
    before = os.environ.get(plugins.ALLOW_ENV)
    os.environ[plugins.ALLOW_ENV] = entry_points
    try:
        yield
    finally:
        if before is None:
            del os.environ[plugins.ALLOW_ENV]
        else:
            os.environ[plugins.ALLOW_ENV] = before


@pytest.fixture(scope="session")
def registry() -> plugins.Registry:
    """The targets and this pack, through entry-point discovery, and the fixture primitives."""
    with _allow(PACK_ONLY):
        return plugins.load(extra=[_fixture_module()])


@pytest.fixture(scope="session")
def pack_registry() -> plugins.Registry:
    """The targets and this pack, through entry-point discovery, nothing else."""
    with _allow(PACK_ONLY):
        return plugins.load()


@pytest.fixture(scope="session")
def plain_registry() -> plugins.Registry:
    """Every installed plugin, through entry-point discovery, nothing else."""
    return plugins.load()
