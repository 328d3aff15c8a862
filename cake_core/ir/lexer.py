"""Tokens of the ``.cake`` text format, with Python-style INDENT / DEDENT for blocks.

Newlines inside brackets continue the logical line, so long parameter lists may wrap.

:func:`scan` is what the parser reads: one tuple per token, ``(key, kind, text, line, col, end_col)``,
where ``key`` is the token's text for names, words and operators (what the grammar matches on) and
``""`` for the others; source locations are made only for the tokens a node or a diagnostic needs
(:func:`loc_of`). :func:`tokenize` gives the same tokens as :class:`Token` objects.
"""

from __future__ import annotations

import re

import attrs

from cake_core.diagnostics.codes import SYNTAX
from cake_core.diagnostics.diagnostic import DiagnosticError
from cake_core.ir.location import Loc

#: one token: (key, kind, text, line, col, end_col); a token never spans lines
RawToken = tuple[str, str, str, int, int, int]

_TOKEN = re.compile(
    r"""
    [ \t]*
    (?:
      (?P<comment>\#[^\n]*)
    | (?P<word>\d+B\b)                                   # swizzle widths: 128B
    | (?P<number>(?:\d+\.\d*(?![.])(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|\d+))
    | (?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
    | (?P<op><-|\.\.|\^T|==|!=|<=|>=|[-+*/%<>()\[\]{},:=])
    | (?P<newline>\n)
    | (?P<end>\Z)
    )
    """,
    re.VERBOSE,
)
_INDENT = re.compile(r"[ \t]*")
_OPEN, _CLOSE = "([{", ")]}"
_KINDS = {"word": "WORD", "number": "NUMBER", "name": "NAME", "op": "OP"}
_DESCRIBE = {"NEWLINE": "end of line", "INDENT": "indent", "DEDENT": "dedent", "EOF": "end of file"}


@attrs.frozen
class Token:
    kind: str  # NAME NUMBER WORD OP NEWLINE INDENT DEDENT EOF
    text: str
    loc: Loc

    def __str__(self) -> str:
        return describe(self.kind, self.text)


def describe(kind: str, text: str) -> str:
    """A token in words, for messages: ``end of line``, `` `(` ``."""
    return _DESCRIBE.get(kind, f"`{text}`")


def loc_of(file: str, tok: RawToken) -> Loc:
    """The source location of one scanned token."""
    return Loc(file, tok[3], tok[4], tok[3], tok[5])


def scan(text: str, file: str) -> list[RawToken]:
    """The tokens of ``text``; raises :class:`DiagnosticError` (``CK001``) on a lexical error."""
    out: list[RawToken] = []
    add = out.append
    indents = [0]
    depth = 0
    line, line_start, pos = 1, 0, 0
    size = len(text)
    at_line_start = True
    match = _TOKEN.match

    def fail(start: int, message: str) -> DiagnosticError:
        col = start - line_start + 1
        return DiagnosticError([SYNTAX.at(Loc(file, line, col, line, col + 1), message)])

    while pos < size:
        if at_line_start and depth == 0:
            # measure indentation; blank and comment-only lines do not count
            m = _INDENT.match(text, pos)
            assert m is not None
            e = m.end()
            rest = text[e : e + 1]
            if rest in ("\n", "#", ""):
                nl = text.find("\n", e)
                if nl < 0:
                    pos = size
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
                add(("", "INDENT", "", line, pos - line_start + 1, e - line_start + 1))
            while width < indents[-1]:
                indents.pop()
                add(("", "DEDENT", "", line, e - line_start + 1, e - line_start + 1))
            if width != indents[-1]:
                raise fail(e, "this line's indentation matches no enclosing block")
            pos = e
            at_line_start = False
        m = match(text, pos)
        if m is None:
            while text[pos] in " \t":  # the spaces before the character the pattern stopped at
                pos += 1
            raise fail(pos, f"unexpected character `{text[pos]}`")
        group = m.lastgroup
        end = m.end()
        if group == "newline":
            if depth == 0:
                col = end - 1 - line_start + 1
                add(("", "NEWLINE", "", line, col, col))
                at_line_start = True
            line += 1
            line_start = end
        elif group == "end":
            pos = end
            break
        elif group != "comment":
            start = m.start(group)
            t = m.group(group)
            if group == "op":
                if t in _OPEN:
                    depth += 1
                elif t in _CLOSE:
                    if depth == 0:
                        raise fail(start, f"unmatched `{t}`")
                    depth -= 1
            add((t if group != "number" else "", _KINDS[group], t, line, start - line_start + 1, end - line_start + 1))
        pos = end
    if depth:
        raise fail(max(pos - 1, 0), "unclosed bracket at end of file")
    col = pos - line_start + 1
    if out and out[-1][1] not in ("NEWLINE", "DEDENT"):
        add(("", "NEWLINE", "", line, col, col))
    while len(indents) > 1:
        indents.pop()
        add(("", "DEDENT", "", line, col, col))
    add(("", "EOF", "", line, col, col))
    return out


def tokenize(text: str, file: str) -> list[Token]:
    """The tokens of ``text`` as :class:`Token` objects (see :func:`scan`)."""
    return [Token(t[1], t[2], loc_of(file, t)) for t in scan(text, file)]
