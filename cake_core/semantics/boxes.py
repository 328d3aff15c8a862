"""Boxes: the part of a store one access covers, as ``[lo, hi)`` per dimension, and how boxes meet.

The interpreter's regions and the protocol replay's shared-memory accesses are boxes in the store's
coordinates (the stage first, for a staged buffer); races are overlaps of boxes, and an access record
stands in for the earlier records its box contains.
"""

from __future__ import annotations

Box = tuple[tuple[int, int], ...]


def overlaps(a: Box, b: Box) -> bool:
    """Whether two boxes of one store (of one rank) share an element."""
    for (a0, a1), (b0, b1) in zip(a, b):  # noqa: B905 - asked for every pair of accesses: no length check
        if a0 >= b1 or b0 >= a1:
            return False
    return True


def contains(outer: Box, inner: Box) -> bool:
    """Whether ``inner`` lies inside ``outer`` (boxes of one store)."""
    for (o0, o1), (i0, i1) in zip(outer, inner):  # noqa: B905 - as in overlaps
        if i0 < o0 or o1 < i1:
            return False
    return True


def meet(a: Box, b: Box) -> Box:
    """The box two overlapping boxes share."""
    return tuple((max(a0, b0), min(a1, b1)) for (a0, a1), (b0, b1) in zip(a, b, strict=True))
