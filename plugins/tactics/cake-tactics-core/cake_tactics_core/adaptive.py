"""Values that follow the shape domain: a larger tile or a deeper ring where the domain's sizes leave room,
the current one where they do not.

A kernel specializes for every value of a size its domain lists (``D in {64, 128, 256}``), and a rewrite is
offered only if it fits every specialization. Doubling a tile that fits at D=64 and 128 but not at 256
would then never be offered, though the shapes most runs use have room for it. Written in the size,
``min(256, 32768 / D)`` is 256 at D <= 128 and 128 at D=256: one kernel, each specialization with the
tile it has room for (``hopper.cake`` declares its rows per CTA and its x ring this way).
"""

from __future__ import annotations

from cake_core.ir import nodes as n


def listed_sizes(kernel: n.Kernel) -> dict[str, list[int]]:
    """The kernel's sizes whose domain lists their values (``D in {64, 128, 256}``), each with its values
    in increasing order, where every value is a power of two (so the scaled values below stay whole)."""
    out: dict[str, list[int]] = {}
    for c in kernel.domain:
        if c.op != "in" or not c.values or not all(isinstance(v, n.Num) and type(v.value) is int for v in c.values):
            continue
        values = sorted(v.value for v in c.values)  # type: ignore[attr-defined]
        if all(v > 0 and v & (v - 1) == 0 for v in values):
            out[c.var] = values
    return out


def value(new: int, size: str | None = None, upto: int | None = None) -> n.Expr:
    """``new``, or with a size ``X`` and a value ``upto`` of it, ``min(new, new * upto / X)``: ``new`` wherever
    ``X <= upto``, shrinking in proportion as ``X`` grows past it."""
    if size is None or upto is None:
        return n.Num(new)
    return n.Call("min", (n.Num(new), n.Bin("/", n.Num(new * upto), n.Name(size))))


def scalings(kernel: n.Kernel) -> list[dict[str, str | int]]:
    """The ``{"size": X, "upto": v}`` choices for :func:`value`: each listed size and each of its values but
    the largest. The caller offers those whose rewrite fits (a value below 1, or a division that is not
    exact, does not)."""
    return [{"size": size, "upto": v} for size, values in listed_sizes(kernel).items() for v in values[:-1]]
