"""Where a syntax error is reported: on the offending token, with one line that says what is wrong."""

from __future__ import annotations

import pytest

from cake_core.diagnostics.diagnostic import DiagnosticError
from cake_core.ir.parser import parse


def _error(text: str) -> tuple[int, int, int, str]:
    with pytest.raises(DiagnosticError) as info:
        parse(text, "bad.cake")
    (d,) = info.value.diagnostics
    assert d.code == "CK001"
    return d.primary.line, d.primary.col, d.primary.end_col, d.message


@pytest.mark.parametrize("ending", ["", "\n", "\n\n# a comment\n"])
def test_an_unclosed_bracket_is_reported_on_the_bracket(ending: str) -> None:
    text = "kernel k(x: global f32[N]\n  cta warps 4" + ending
    assert _error(text) == (1, 9, 10, "`(` is never closed: the file ends inside it")


def test_the_innermost_unclosed_bracket_is_the_one_named() -> None:
    text = "kernel k(x: global f32[N, (M)\n"
    line, col, _, message = _error(text)
    assert (line, col) == (1, 23) and message.startswith("`[` is never closed")


def test_a_closing_bracket_with_nothing_open_is_reported_where_it_is() -> None:
    assert _error("kernel k())\n")[:3] == (1, 11, 12)
