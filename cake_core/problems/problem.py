"""The problem contract (*provisional* until the first problem lands)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class Problem(Protocol):
    name: str
