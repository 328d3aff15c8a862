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

#: one token and the spaces before it; applied to one line, less its comment. The alternatives are
#: ordered by frequency, and the last one takes any other character, so the matches tile the line (up to
#: trailing spaces) and a lexical error shows up as a token like any other.
_TOKEN = re.compile(
    r"""
    ([ \t]*)
    (
      [A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*                           # NAME, dotted ones included
    | [-+*/%()\[\]{},:] | [<>=!]= | <- | \.\. | \^T | [<>=]       # OP
    | \d+(?:B\b|\.\d*(?![.])(?:[eE][-+]?\d+)?|[eE][-+]?\d+)?      # NUMBER, or WORD: a swizzle width (128B)
    | [^ \t]                                                    # anything else: a lexical error
    )
    """,
    re.VERBOSE | re.ASCII,
)
_NAME_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_DIGITS = frozenset("0123456789")
_OPS = frozenset("<- .. ^T == != <= >= < > = - + * / % ( ) [ ] { } , :".split())
_DEPTH = {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}  # what a bracket does to the nesting depth
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
    """The tokens of ``text``; raises :class:`DiagnosticError` (``CK001``) on a lexical error.

    The text is read a line at a time: one ``findall`` gives a line's tokens with the spaces before
    each (so columns are running sums of lengths), and indentation is measured once, at the start of a
    logical line (a line entered outside brackets). Errors are raised in text order, as a character-by-
    character scan would meet them.
    """
    out: list[RawToken] = []
    add = out.append
    findall = _TOKEN.findall
    indents = [0]
    depth = 0  # open brackets: inside them a line break continues the logical line
    tabs = "\t" in text
    lines = text.split("\n")
    line = 0

    def fail(col: int, message: str) -> DiagnosticError:
        return DiagnosticError([SYNTAX.at(Loc(file, line, col, line, col + 1), message)])

    for full in lines:
        line += 1
        hash_at = full.find("#")
        code = full if hash_at < 0 else full[:hash_at]
        if depth == 0:
            # a new logical line: blank and comment-only lines do not count, others set the indentation
            body = code.lstrip(" \t")
            if not body:
                continue
            width = len(code) - len(body)
            if tabs and "\t" in code[:width]:
                raise fail(1, "indent with spaces, not tabs")
            if width != indents[-1]:
                if width > indents[-1]:
                    indents.append(width)
                    add(("", "INDENT", "", line, 1, width + 1))
                while width < indents[-1]:
                    indents.pop()
                    add(("", "DEDENT", "", line, width + 1, width + 1))
                if width != indents[-1]:
                    raise fail(width + 1, "this line's indentation matches no enclosing block")
            end = width + 1  # 1-based column where the previous token ended
            tokens = findall(code, width)
        else:
            end = 1
            tokens = findall(code)
        for spaces, t in tokens:
            start = end + len(spaces)
            end = start + len(t)
            c = t[0]
            if c in _NAME_START:
                add((t, "NAME", t, line, start, end))
            elif c in _DIGITS:
                if t[-1] == "B":
                    add((t, "WORD", t, line, start, end))
                else:
                    add(("", "NUMBER", t, line, start, end))
            elif t in _OPS:
                d = _DEPTH.get(t)
                if d:
                    depth += d
                    if depth < 0:
                        raise fail(start, f"unmatched `{t}`")
                add((t, "OP", t, line, start, end))
            else:
                raise fail(start, f"unexpected character `{t}`")
        if depth == 0:
            col = len(full) + 1  # where the line break is (or would be, on the last line)
            add(("", "NEWLINE", "", line, col, col))
    col = len(lines[-1]) + 1
    if depth:
        raise fail(col - 1, "unclosed bracket at end of file")
    while len(indents) > 1:
        indents.pop()
        add(("", "DEDENT", "", line, col, col))
    add(("", "EOF", "", line, col, col))
    return out


def tokenize(text: str, file: str) -> list[Token]:
    """The tokens of ``text`` as :class:`Token` objects (see :func:`scan`)."""
    return [Token(t[1], t[2], loc_of(file, t)) for t in scan(text, file)]
