"""Rewriting frozen IR trees by identity: the edits mutation operators are made of.

IR nodes are frozen and compare structurally, so two occurrences of ``s`` in a kernel are equal;
an edit must name *which* occurrence it changes. Every function here finds nodes by identity
(``is``) and rebuilds only the path from the root to the edited node with :func:`attrs.evolve`;
everything else is shared with the original tree.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeVar

import attrs

from cake_core.ir import nodes as n
from cake_core.location import Loc

T = TypeVar("T")

#: statement containers: (node type, field holding a statement tuple)
_BLOCK_FIELDS: dict[type, tuple[str, ...]] = {n.Role: ("body",), n.For: ("body",), n.If: ("then", "orelse")}


def replace(root: T, old: object, new: object) -> T:
    """``root`` with the node ``old`` (found by identity) replaced by ``new``.

    Raises :class:`LookupError` when ``old`` is not inside ``root``.
    """
    out = _replace(root, old, new)
    if out is _MISSING:
        raise LookupError(f"{type(old).__name__} is not part of the tree")
    return out  # type: ignore[return-value]


_MISSING = object()


def _replace(obj: object, old: object, new: object) -> object:
    """The rebuilt ``obj``, or :data:`_MISSING` when ``old`` is not inside it."""
    if obj is old:
        return new
    if isinstance(obj, tuple):
        for i, item in enumerate(obj):
            if item is not old and isinstance(item, (str, int, float, bool)):
                continue
            got = _replace(item, old, new)
            if got is not _MISSING:
                return obj[:i] + (got,) + obj[i + 1 :]
        return _MISSING
    if isinstance(obj, Loc) or not attrs.has(type(obj)):
        return _MISSING
    for f in attrs.fields(type(obj)):
        value = getattr(obj, f.name)
        if value is None or isinstance(value, (str, int, float, bool, Loc)):
            continue
        got = _replace(value, old, new)
        if got is not _MISSING:
            return attrs.evolve(obj, **{f.name: got})
    return _MISSING


@attrs.frozen
class Block:
    """A statement tuple and the node that holds it (a role, a loop, or one arm of an ``if``)."""

    owner: n.Role | n.For | n.If
    field: str
    body: tuple[n.Stmt, ...]

    def with_body(self, body: tuple[n.Stmt, ...]) -> n.Role | n.For | n.If:
        """The owner with this block's statements replaced."""
        return attrs.evolve(self.owner, **{self.field: body})


def blocks(kernel: n.Kernel) -> Iterator[Block]:
    """Every statement block of ``kernel``, outermost first, in source order."""

    def visit(owner: n.Role | n.For | n.If) -> Iterator[Block]:
        for name in _BLOCK_FIELDS[type(owner)]:
            body = getattr(owner, name)
            yield Block(owner, name, body)
            for s in body:
                if isinstance(s, (n.For, n.If)):
                    yield from visit(s)

    for role in kernel.roles:
        yield from visit(role)


def replace_block(module: n.Module, block: Block, body: tuple[n.Stmt, ...]) -> n.Module:
    """``module`` with ``block``'s statements replaced by ``body``."""
    return replace(module, block.owner, block.with_body(body))


def ops_in(kernel: n.Kernel) -> Iterator[tuple[n.Role, n.Op]]:
    """Every operation of ``kernel`` with its role, in source order."""
    yield from n.walk_ops(kernel)
