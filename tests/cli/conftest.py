"""Fixtures of the command-line tests: a fresh registry and plugin environment per test, the committed
schedules, and the real console script for the tests where its exit status and stderr matter."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cake_core import plugins

ROOT = Path(__file__).resolve().parents[2]
SCHEDULES = ROOT / "cake_core" / "problems" / "kmeans_assign" / "schedules"

Cake = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(plugins.ALLOW_ENV, raising=False)
    monkeypatch.delenv(plugins.TRACE_ENV, raising=False)
    monkeypatch.delenv("CAKE_DEBUG", raising=False)
    plugins.reset()
    yield
    plugins.reset()


def console_script() -> list[str]:
    """The installed ``cake`` script beside this interpreter (``python -m cake_core.cli`` without one)."""
    script = shutil.which("cake", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "cake_core.cli"]


@pytest.fixture
def cake() -> Cake:
    """``cake(*args, env={...})``: run the console script, return the completed process."""

    def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        full = {k: v for k, v in os.environ.items() if k not in (plugins.ALLOW_ENV, plugins.TRACE_ENV, "CAKE_DEBUG")}
        full.update(env or {})
        return subprocess.run(
            [*console_script(), *args], capture_output=True, text=True, timeout=300, env=full, check=False
        )

    return run


def one_error_line(err: str) -> str:
    """The single line a bad-input error prints (exactly one, no traceback)."""
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: "), lines[0]
    return lines[0]
