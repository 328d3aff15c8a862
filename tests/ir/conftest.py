"""Fixtures of the IR tests: the registered primitives by name."""

from __future__ import annotations

import pytest
from cake_core import plugins


@pytest.fixture(scope="module")
def primitives() -> dict:
    return plugins.load().by_name("primitives")
