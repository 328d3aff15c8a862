"""Paths a command writes to, checked before any work is done: a bad ``-o``/``--out`` is a user's
mistake (one line, exit 2), never an internal error after minutes of compiling."""

from __future__ import annotations

import os
from pathlib import Path

from cake_core.errors import CakeUserError


def output_file(path: str | Path) -> Path:
    """``path`` as a file to write: not a directory, in a directory that exists and can be written."""
    p = Path(path)
    if p.is_dir():
        raise CakeUserError(f"cannot write {p}: it is a directory")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.exists():
        raise CakeUserError(f"cannot write {p}: no such directory {parent}")
    if not parent.is_dir():
        raise CakeUserError(f"cannot write {p}: {parent} is a file, not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise CakeUserError(f"cannot write {p}: permission denied in {parent}")
    return p


def output_dir(path: str | Path) -> Path:
    """``path`` as a directory to create or write into: not a file, under a writable directory."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise CakeUserError(f"cannot use {p} as an output directory: it is a file")
    ancestor = p
    while not ancestor.exists():
        if ancestor.parent == ancestor:
            break
        ancestor = ancestor.parent
    if ancestor.exists() and not ancestor.is_dir():
        raise CakeUserError(f"cannot create {p}: {ancestor} is a file, not a directory")
    if ancestor.exists() and not os.access(ancestor, os.W_OK | os.X_OK):
        raise CakeUserError(f"cannot create {p}: permission denied in {ancestor}")
    return p


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (a killed process leaves the old file, never half a new
    one); an operating-system refusal is the user's error, in one line."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(text)
        tmp.replace(path)
    except OSError as exc:
        raise CakeUserError(f"cannot write {path}: {exc.strerror or exc}") from None


def make_dir(path: Path) -> None:
    """Create ``path`` and its parents; an operating-system refusal is the user's error, in one line."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CakeUserError(f"cannot create {path}: {exc.strerror or exc}") from None
