"""`plugins.module_from_file`: an in-process plugin from a file, imported once per process."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from cake_core import plugins


def test_a_file_is_imported_once_under_its_name(tmp_path: Path) -> None:
    path = tmp_path / "prims.py"
    path.write_text("LOADS = [1]\n")
    name = "cake_test_module_from_file_once"
    try:
        first = plugins.module_from_file(name, path)
        path.write_text("LOADS = [2]\n")
        assert plugins.module_from_file(name, path) is first and first.LOADS == [1]
        assert sys.modules[name] is first
    finally:
        sys.modules.pop(name, None)


def test_a_file_that_fails_to_import_leaves_nothing_behind(tmp_path: Path) -> None:
    path = tmp_path / "broken.py"
    path.write_text("raise RuntimeError('broken on purpose')\n")
    name = "cake_test_module_from_file_broken"
    with pytest.raises(RuntimeError, match="broken on purpose"):
        plugins.module_from_file(name, path)
    assert name not in sys.modules
