"""What the ``cake`` commands write: one JSON printer (through :mod:`cake_core.convert`), rich tables,
and diagnostics rendered as rustc renders them."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence

from cake_core.convert import dumps
from cake_core.diagnostics.diagnostic import Diagnostic
from cake_core.diagnostics.render import render_all


def print_json(obj: object) -> None:
    """Write ``obj`` (any record or plain data) to stdout as one JSON document: every ``--json``."""
    sys.stdout.write(dumps(obj) + "\n")


def print_table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
    """A table on stdout; a column whose name starts with ``>`` is right-aligned (the ``>`` is dropped)."""
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title, title_justify="left", show_lines=False)
    for c in columns:
        t.add_column(c.removeprefix(">"), justify="right" if c.startswith(">") else "left")
    for r in rows:
        t.add_row(*[str(x) for x in r])
    Console(width=max(100, len(columns) * 14)).print(t)


def print_diagnostics(diags: Iterable[Diagnostic], sources: Mapping[str, str], *, as_json: bool) -> None:
    """Diagnostics as a JSON list on stdout, or rendered on stderr."""
    if as_json:
        print_json(list(diags))
    else:
        sys.stderr.write(render_all(diags, sources) + "\n")
