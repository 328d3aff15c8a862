"""cake-example-plugin: a third-party Cake plugin in one package and one entry-point line.

``pyproject.toml`` declares ``[project.entry-points.cake] example = "cake_example_plugin"``; Cake's
plugin manager imports this module and calls the hooks below, each with a ``register`` callback:

* ``cake_register_targets``: ``example-gpu``, a fictional sm_89 part (:mod:`.target`);
* ``cake_register_primitives``: ``scale.rows`` (:mod:`.primitive`);
* ``cake_register_problems``: ``scale-rows`` (:mod:`.problem`), with a schedule in
  ``schedules/scale_rows.cake``.
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Callable
from pathlib import Path

from cake_core.hookspecs import hookimpl
from cake_core.ir.primitive import Primitive
from cake_core.problems.problem import Problem
from cake_core.target import Target

from cake_example_plugin.primitive import ScaleRows
from cake_example_plugin.problem import SCALE_ROWS
from cake_example_plugin.target import load_target

__version__ = "0.3.1"


def schedule_path(name: str = "scale_rows") -> Path:
    """The path of a bundled ``.cake`` schedule."""
    return Path(str(importlib.resources.files(__name__).joinpath("schedules", f"{name}.cake")))


@hookimpl
def cake_register_targets(register: Callable[[Target], None]) -> None:
    """Register ``example-gpu``."""
    register(load_target())


@hookimpl
def cake_register_primitives(register: Callable[[Primitive], None]) -> None:
    """Register ``scale.rows``."""
    register(ScaleRows())


@hookimpl
def cake_register_problems(register: Callable[[Problem], None]) -> None:
    """Register ``scale-rows``."""
    register(SCALE_ROWS)


__all__ = [
    "SCALE_ROWS",
    "ScaleRows",
    "__version__",
    "cake_register_primitives",
    "cake_register_problems",
    "cake_register_targets",
    "load_target",
    "schedule_path",
]
