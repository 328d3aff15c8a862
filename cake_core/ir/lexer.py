"""Tokens of the ``.cake`` text format, with Python-style INDENT / DEDENT for blocks.

Newlines inside brackets continue the logical line, so long parameter lists may wrap.
"""

from __future__ import annotations

import re

import attrs

from cake_core.diagnostics.codes import SYNTAX
from cake_core.diagnostics.diagnostic import DiagnosticError
from cake_core.ir.location import Loc


@attrs.frozen
class Token:
    kind: str  # NAME NUMBER WORD OP NEWLINE INDENT DEDENT EOF
    text: str
    loc: Loc

    def __str__(self) -> str:
        return {"NEWLINE": "end of line", "INDENT": "indent", "DEDENT": "dedent", "EOF": "end of file"}.get(
            self.kind, f"`{self.text}`"
        )


_TOKEN = re.compile(
    r"""
    (?P<ws>[ \t]+)
  | (?P<comment>\#[^\n]*)
  | (?P<word>\d+B\b)                                   # swizzle widths: 128B
  | (?P<number>(?:\d+\.\d*(?![.])(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|\d+))
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
  | (?P<op><-|\.\.|\^T|==|!=|<=|>=|[-+*/%<>()\[\]{},:=])
  | (?P<newline>\n)
    """,
    re.VERBOSE,
)
_OPEN, _CLOSE = "([{", ")]}"


def tokenize(text: str, file: str) -> list[Token]:
    tokens: list[Token] = []
    indents = [0]
    depth = 0
    line, line_start, pos = 1, 0, 0
    at_line_start = True

    def loc(start: int, end: int) -> Loc:
        return Loc(file, line, start - line_start + 1, line, end - line_start + 1)

    def fail(start: int, message: str) -> DiagnosticError:
        return DiagnosticError([SYNTAX.at(loc(start, start + 1), message)])

    while pos < len(text):
        if at_line_start and depth == 0:
            # measure indentation; blank and comment-only lines do not count
            m = re.compile(r"[ \t]*").match(text, pos)
            assert m is not None
            rest = text[m.end() : m.end() + 1]
            if rest in ("\n", "#", ""):
                nl = text.find("\n", m.end())
                if nl < 0:
                    pos = len(text)
                    break
                pos = nl + 1
                line += 1
                line_start = pos
                continue
            indent_text = m.group()
            if "\t" in indent_text:
                raise fail(pos, "indent with spaces, not tabs")
            width = len(indent_text)
            if width > indents[-1]:
                indents.append(width)
                tokens.append(Token("INDENT", "", loc(pos, m.end())))
            while width < indents[-1]:
                indents.pop()
                tokens.append(Token("DEDENT", "", loc(m.end(), m.end())))
            if width != indents[-1]:
                raise fail(m.end(), "this line's indentation matches no enclosing block")
            pos = m.end()
            at_line_start = False
        m = _TOKEN.match(text, pos)
        if m is None:
            raise fail(pos, f"unexpected character `{text[pos]}`")
        kind = m.lastgroup
        start, end = m.start(), m.end()
        if kind == "newline":
            if depth == 0:
                tokens.append(Token("NEWLINE", "", loc(start, start)))
                at_line_start = True
            line += 1
            line_start = end
        elif kind in ("ws", "comment"):
            pass
        else:
            t = m.group()
            if kind == "op":
                if t in _OPEN:
                    depth += 1
                elif t in _CLOSE:
                    if depth == 0:
                        raise fail(start, f"unmatched `{t}`")
                    depth -= 1
            tokens.append(Token(kind.upper(), t, loc(start, end)))
        pos = end
    if depth:
        raise fail(max(pos - 1, 0), "unclosed bracket at end of file")
    end_loc = Loc(file, line, pos - line_start + 1, line, pos - line_start + 1)
    if tokens and tokens[-1].kind not in ("NEWLINE", "DEDENT"):
        tokens.append(Token("NEWLINE", "", end_loc))
    while len(indents) > 1:
        indents.pop()
        tokens.append(Token("DEDENT", "", end_loc))
    tokens.append(Token("EOF", "", end_loc))
    return tokens
