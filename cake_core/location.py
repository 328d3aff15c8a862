"""Source locations: where a token, an IR node or a diagnostic comes from.

Every IR node carries one; nodes built by passes point at what they came from. Both the IR and the
diagnostics read it, so it belongs to neither package. A location is a plain immutable value (a named
tuple: ordered, hashed and compared field by field); the parser makes one for nearly every token, so it
is the cheapest record Python builds."""

from __future__ import annotations

from typing import NamedTuple


class Loc(NamedTuple):
    """A span in a source file: 1-based lines and columns, end exclusive."""

    file: str
    line: int
    col: int
    end_line: int
    end_col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"

    def to(self, other: Loc) -> Loc:
        """The span from the start of ``self`` to the end of ``other``."""
        return Loc(self.file, self.line, self.col, other.end_line, other.end_col)


UNKNOWN = Loc("<generated>", 0, 0, 0, 0)
