"""The primitive contract (*provisional* until the IR vocabulary lands)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class Primitive(Protocol):
    name: str
