"""The plugin registry and its primitives, loaded once for every mutation test module."""

from __future__ import annotations

import functools

from cake_core import plugins


@functools.cache
def registry() -> plugins.Registry:
    return plugins.registry()


def prims() -> dict:
    """The registered primitives by name."""
    return {p.name: p for p in registry().values("primitives")}
