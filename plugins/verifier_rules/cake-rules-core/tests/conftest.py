"""Fixtures of the cake-rules-core tests: a registry loaded the way `cake` loads it (entry points),
plus the in-process fixture primitives the corpus uses."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from cake_core import plugins

HERE = Path(__file__).parent
CORPUS = HERE / "corpus"


def _fixture_module():
    name = "cake_rules_core_fixture_primitives"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, HERE / "fixture_primitives.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture(scope="session")
def registry() -> plugins.Registry:
    """Every installed plugin, through entry-point discovery, and the fixture primitives."""
    return plugins.load(extra=[_fixture_module()])


@pytest.fixture(scope="session")
def plain_registry() -> plugins.Registry:
    """Every installed plugin, through entry-point discovery, nothing else."""
    return plugins.load()
