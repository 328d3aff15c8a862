"""Shared fixtures of the runtime tests.

GPU tests use ``pytestmark = requires_gpu_marks()`` (from :mod:`cake_core.runtime.device`): they are
marked ``gpu`` and skipped with the driver's reason where no NVIDIA driver is usable. The
``fake_backend`` fixture puts this directory on ``sys.path`` (spawned workers inherit it) so that a
worker can host ``fake_backend:FakeBackend`` and the process machinery is tested without a GPU.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def kernels() -> ModuleType:
    """The header-free CUDA sources of kernels.py."""
    spec = importlib.util.spec_from_file_location("cake_runtime_test_kernels", HERE / "kernels.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private, empty NVRTC cache (``$CAKE_CACHE_DIR``), with the cache enabled."""
    root = tmp_path / "cake-cache"
    monkeypatch.setenv("CAKE_CACHE_DIR", str(root))
    monkeypatch.delenv("CAKE_NO_CACHE", raising=False)
    return root / "nvrtc"


@pytest.fixture
def fake_backend(monkeypatch: pytest.MonkeyPatch) -> str:
    """The backend spec of the fake worker backend, importable in spawned workers."""
    monkeypatch.syspath_prepend(str(HERE))
    return "fake_backend:FakeBackend"


@pytest.fixture
def fake_driver(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """fake_driver.py: a host-memory stand-in for cuda.bindings.driver."""
    monkeypatch.syspath_prepend(str(HERE))
    import fake_driver as module

    return module
