"""Tokens of the ``.cake`` text format, with Python-style INDENT / DEDENT for blocks.

Newlines inside brackets continue the logical line, so long parameter lists may wrap.

:func:`scan` is what the parser reads: the tokens as four parallel lists (:class:`Scanned`), each
token's text and where it lies (line, first column, column after its end). The structural tokens have
texts no source token can have (:data:`NEWLINE`, :data:`INDENT`, :data:`DEDENT`, :data:`EOF`, which
start with a space), so the parser matches on the text alone; a token's kind follows from its text
(:func:`kind_of`). Source locations are made only for the tokens a node or a diagnostic needs
(:func:`loc_of`). :func:`tokenize` gives the same tokens as :class:`Token` objects.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple, NoReturn

import attrs

from cake_core.diagnostics.codes import SYNTAX
from cake_core.diagnostics.diagnostic import DiagnosticError
from cake_core.location import Loc

#: the texts of the structural tokens; a source token never contains a space
NEWLINE, INDENT, DEDENT, EOF = " NEWLINE", " INDENT", " DEDENT", " EOF"

#: one valid token. The alternatives are ordered by frequency.
_VALID = r"""
      [A-Za-z_]\w*+(?!\.[A-Za-z_])                              # NAME
    | [A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+                           # NAME, a dotted one
    | <- | -> | [-+*/%()\[\]{},:] | [<>=!]= | \.\. | \^T | [<>=]       # OP
    | \d+(?:B\b|\.\d*(?![.])(?:[eE][-+]?\d+)?|[eE][-+]?\d+)?      # NUMBER, or WORD: a swizzle width (128B)
"""
#: a valid token and the spaces before it; applied with ``findall`` to one line, less its comment. On a
#: line without lexical errors the matches tile the line, up to trailing spaces; a character no token
#: starts with is skipped, so a line with one is told by the length its matches cover.
_TOKEN = re.compile(rf"([ \t]*)({_VALID})", re.VERBOSE | re.ASCII)
#: the same, and any other character as a token of its own (a lexical error), so that the matches always
#: tile the line: what the search for a line's first error reads
_TOKEN_OR_ERROR = re.compile(rf"([ \t]*)({_VALID} | [^ \t])", re.VERBOSE | re.ASCII)

_NAME_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_DIGITS = frozenset("0123456789")
_OPS = frozenset("<- -> .. ^T == != <= >= < > = - + * / % ( ) [ ] { } , :".split())
_DEPTH = {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}  # what a bracket does to the nesting depth
_STRUCTURAL = {NEWLINE: "NEWLINE", INDENT: "INDENT", DEDENT: "DEDENT", EOF: "EOF"}
_DESCRIBE = {NEWLINE: "end of line", INDENT: "indent", DEDENT: "dedent", EOF: "end of file"}
_DESCRIBE_KIND = {_STRUCTURAL[text]: words for text, words in _DESCRIBE.items()}

class Scanned(NamedTuple):
    """The tokens of a text: token ``i`` is ``texts[i]``, on line ``lines[i]`` from column ``cols[i]`` up
    to (not including) column ``ends[i]``; a token never spans lines."""

    texts: list[str]
    lines: list[int]
    cols: list[int]
    ends: list[int]


@attrs.frozen
class Token:
    kind: str  # NAME NUMBER WORD OP NEWLINE INDENT DEDENT EOF
    text: str
    loc: Loc

    def __str__(self) -> str:
        return _DESCRIBE_KIND.get(self.kind, f"`{self.text}`")


def kind_of(text: str) -> str:
    """The kind of a scanned token: NAME NUMBER WORD OP, or NEWLINE INDENT DEDENT EOF."""
    c = text[0]
    if c in _NAME_START:
        return "NAME"
    if c in _DIGITS:
        return "WORD" if text[-1] == "B" else "NUMBER"
    return _STRUCTURAL.get(text, "OP")


def describe(text: str) -> str:
    """A scanned token in words, for messages: ``end of line``, `` `(` ``."""
    return _DESCRIBE.get(text, f"`{text}`")


def loc_of(file: str, toks: Scanned, i: int) -> Loc:
    """The source location of the ``i``-th scanned token."""
    return Loc(file, toks.lines[i], toks.cols[i], toks.lines[i], toks.ends[i])


def scan(text: str, file: str) -> Scanned:
    """The tokens of ``text``; raises :class:`DiagnosticError` (``CK001``) on a lexical error.

    The text is read a line at a time: one ``findall`` gives a line's tokens with the spaces before
    each (so columns are running sums of lengths), and indentation is measured once, at the start of a
    logical line (a line entered outside brackets). A line whose tokens do not cover it, or where a
    closing bracket has nothing open, is read again token by token (:func:`_raise_first`) for its first
    error, so that errors are raised in text order, as a character-by-character scan would meet them.
    """
    texts: list[str] = []
    lines: list[int] = []
    cols: list[int] = []
    ends: list[int] = []
    findall = _TOKEN.findall
    add_text, add_line, add_col, add_end = texts.append, lines.append, cols.append, ends.append
    indents = [0]
    depth = 0  # open brackets: inside them a line break continues the logical line
    tabs = "\t" in text
    rows = text.split("\n")
    line = 0

    def fail(col: int, message: str) -> DiagnosticError:
        return DiagnosticError([SYNTAX.at(Loc(file, line, col, line, col + 1), message)])

    def structural(tok: str, col: int, end: int) -> None:
        texts.append(tok)
        lines.append(line)
        cols.append(col)
        ends.append(end)

    for full in rows:
        line += 1
        hash_at = full.find("#")
        code = full if hash_at < 0 else full[:hash_at]
        width = 0  # where the tokens start: after the indentation, on a new logical line
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
                    structural(INDENT, 1, width + 1)
                while width < indents[-1]:
                    indents.pop()
                    structural(DEDENT, width + 1, width + 1)
                if width != indents[-1]:
                    raise fail(width + 1, "this line's indentation matches no enclosing block")
        end = width + 1  # 1-based column where the previous token ended
        before = depth
        for spaces, t in findall(code, width):
            start = end + len(spaces)
            end = start + len(t)
            if t in _DEPTH:
                depth += _DEPTH[t]
                if depth < 0:
                    _raise_first(code, width, before, fail)
            add_text(t)
            add_line(line)
            add_col(start)
            add_end(end)
        if end != len(code.rstrip(" \t")) + 1:  # the tokens skipped a character
            _raise_first(code, width, before, fail)
        if depth == 0:
            col = len(full) + 1  # where the line break is (or would be, on the last line)
            structural(NEWLINE, col, col)
    col = len(rows[-1]) + 1
    if depth:
        i = _unclosed(texts)
        where = Loc(file, lines[i], cols[i], lines[i], ends[i])
        raise DiagnosticError([SYNTAX.at(where, f"`{texts[i]}` is never closed: the file ends inside it")])
    while len(indents) > 1:
        indents.pop()
        structural(DEDENT, col, col)
    structural(EOF, col, col)
    return Scanned(texts, lines, cols, ends)


def _raise_first(code: str, width: int, depth: int, fail: Callable[[int, str], DiagnosticError]) -> NoReturn:
    """Raise the first lexical error of a line (``code``, its tokens starting at ``width``): an unexpected
    character or a closing bracket with nothing open (``depth`` is the nesting depth at the line's start)."""
    end = width + 1
    for spaces, t in _TOKEN_OR_ERROR.findall(code, width):
        start = end + len(spaces)
        end = start + len(t)
        if t in _OPS:
            depth += _DEPTH.get(t, 0)
            if depth < 0:
                raise fail(start, f"unmatched `{t}`")
        elif t[0] not in _NAME_START and t[0] not in _DIGITS:
            raise fail(start, f"unexpected character `{t}`")
    raise AssertionError("no lexical error on this line")


def _unclosed(texts: list[str]) -> int:
    """The index of the last opening bracket of ``texts`` that no later bracket closes (one exists)."""
    closers = 0
    for i in range(len(texts) - 1, -1, -1):
        d = _DEPTH.get(texts[i], 0)
        if d < 0:
            closers += 1
        elif d > 0:
            if not closers:
                return i
            closers -= 1
    raise AssertionError("no unclosed bracket")  # scan counted one


def tokenize(text: str, file: str) -> list[Token]:
    """The tokens of ``text`` as :class:`Token` objects (see :func:`scan`)."""
    toks = scan(text, file)
    return [
        Token(kind_of(t), "" if t in _STRUCTURAL else t, loc_of(file, toks, i)) for i, t in enumerate(toks.texts)
    ]
