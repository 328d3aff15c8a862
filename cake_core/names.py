"""Open sets of names: the base of names that plugins extend (memory kinds, target features).

A closed enumeration decides in the core what a plugin may add; a name does not. Each subclass keeps
one object per name, so a built-in constant and the same name read from a data file are the same
object (``Feature("tma") is Feature.TMA``), compare equal to the plain string and hash like it.
"""

from __future__ import annotations

from typing import ClassVar, Self


class OpenName(str):
    """A name from an open set. Subclasses get their own table of the names made so far."""

    __slots__ = ()
    _made: ClassVar[dict[str, OpenName]]

    def __init_subclass__(cls, **kw: object) -> None:
        super().__init_subclass__(**kw)
        cls._made = {}

    def __new__(cls, name: str) -> Self:
        made = cls._made.get(name)
        if made is None:
            if not isinstance(name, str) or not name:
                raise ValueError(f"a {cls.__name__} is named by a non-empty string, not {name!r}")
            made = cls._made[name] = super().__new__(cls, name)
        return made  # type: ignore[return-value]

    @property
    def value(self) -> str:
        """The name as a plain string."""
        return str.__str__(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str.__repr__(self)})"

    def __reduce__(self) -> tuple[type[Self], tuple[str]]:
        return type(self), (self.value,)
