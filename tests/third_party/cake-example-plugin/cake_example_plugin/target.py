"""The ``example-gpu`` target: a fictional sm_89 part whose figures live in ``example_gpu.toml``.

Targets are data. This module only reads the bundled file and turns its ``[target]`` table into a
:class:`cake_core.target.Target`; the record's own validators check the figures.
"""

from __future__ import annotations

import importlib.resources
import tomllib

from cake_core.target import Target

DATA_FILE = "example_gpu.toml"


def load_target() -> Target:
    """The ``example-gpu`` record, read from the bundled data file."""
    text = importlib.resources.files(__package__).joinpath(DATA_FILE).read_text(encoding="utf-8")
    doc = tomllib.loads(text)
    return Target(**doc["target"], data_version=doc["data_version"])


__all__ = ["DATA_FILE", "load_target"]
