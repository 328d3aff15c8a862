"""The verifier-rule contract (*provisional* until the verifier lands)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class Rule(Protocol):
    name: str  # the stable rule id, e.g. CR101
