"""Helpers of the mutation tests live beside them (``verifier_snapshot``): put this directory on
``sys.path`` so the test modules import them by name."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = str(Path(__file__).parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
