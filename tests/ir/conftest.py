"""The IR tests' helpers live beside them (``cake_kernel_strategies``, the property tests' strategies):
put this directory on ``sys.path`` so the test modules import them by name. The registered primitives
come from the fixture in tests/conftest.py."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = str(Path(__file__).parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
