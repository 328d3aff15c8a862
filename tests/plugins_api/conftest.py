"""Fixtures of the plugin-contract tests: a clean plugin environment, and fake installed distributions.

A fake distribution is real to ``importlib.metadata``: a module and a ``*.dist-info`` directory (its
``METADATA`` and ``entry_points.txt``) in a directory put on ``sys.path`` — what pip leaves behind.
Subprocesses see it through ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import pytest
from cake_core import plugins


@pytest.fixture(autouse=True)
def _clean_plugin_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No allow-list, no tracing, and a registry loaded afresh by each test."""
    monkeypatch.delenv(plugins.ALLOW_ENV, raising=False)
    monkeypatch.delenv(plugins.TRACE_ENV, raising=False)
    plugins.reset()
    yield
    plugins.reset()


@attrs.frozen
class FakeDistribution:
    """A distribution installed into ``root`` for one test."""

    root: Path
    name: str
    version: str
    entry_point: str
    module: str

    def env(self) -> dict[str, str]:
        """The environment of a subprocess that sees this distribution (and the rest of the venv)."""
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(self.root), env.get("PYTHONPATH", "")) if p)
        env.pop(plugins.ALLOW_ENV, None)
        env.pop(plugins.TRACE_ENV, None)
        return env


InstallFake = Callable[..., FakeDistribution]


@pytest.fixture
def install_fake(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> InstallFake:
    """``install_fake(name, version, entry_point, module, source)``: install a one-module distribution
    registering ``[cake] entry_point = module`` and put it on ``sys.path`` for this test (its module
    is forgotten afterwards, so the next test imports its own)."""

    def install(name: str, version: str, entry_point: str, module: str, source: str) -> FakeDistribution:
        root = tmp_path / "site"
        root.mkdir(exist_ok=True)
        (root / f"{module}.py").write_text(textwrap.dedent(source))
        info = root / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (info / "entry_points.txt").write_text(f"[cake]\n{entry_point} = {module}\n")
        (info / "top_level.txt").write_text(f"{module}\n")
        monkeypatch.syspath_prepend(str(root))
        request.addfinalizer(lambda: sys.modules.pop(module, None))
        return FakeDistribution(root, name, version, entry_point, module)

    return install
