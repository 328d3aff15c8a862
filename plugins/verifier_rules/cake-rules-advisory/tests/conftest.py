"""Fixtures of the cake-rules-advisory tests: registries loaded the way `cake` loads them (entry points).

``registry`` holds the NVIDIA targets and this pack alone (``CAKE_PLUGINS``), so the corpus shows what
this pack says whatever else is installed; ``plain_registry`` is everything installed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from cake_core import plugins

CORPUS = Path(__file__).parent / "corpus"
PACK_ONLY = "nvidia-targets,advisory-rules"


@contextmanager
def allow(entry_points: str) -> Iterator[None]:
    """Load only the named entry points while the block runs."""
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
    with allow(PACK_ONLY):
        return plugins.load()


@pytest.fixture(scope="session")
def plain_registry() -> plugins.Registry:
    return plugins.load()
