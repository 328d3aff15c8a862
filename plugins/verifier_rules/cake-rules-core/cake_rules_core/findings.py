"""A finding of a protocol or pipe rule, ready to become a diagnostic."""

from __future__ import annotations

import attrs

from cake_core.diagnostics.diagnostic import Label
from cake_core.location import Loc


@attrs.frozen
class Finding:
    """One finding of one rule, ready to become a diagnostic."""

    rule: str
    loc: Loc
    message: str
    label: str = ""
    secondary: tuple[Label, ...] = ()
    notes: tuple[str, ...] = ()
    help: str | None = None
