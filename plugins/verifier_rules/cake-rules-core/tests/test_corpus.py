"""Every corpus file verifies with exactly the diagnostics its inline expectations name.

Files live in ``corpus/<RULE>/``: ``invalid_*.cake`` carry ``# expect-error[<RULE>]`` on each offending
line; ``valid_*.cake`` are near misses that must verify clean. The first line names the target.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cake_core.verify.expectations import assert_file, corpus

CORPUS = Path(__file__).parent / "corpus"


@pytest.mark.parametrize("path", corpus(CORPUS), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_corpus_file(path: Path, registry) -> None:
    assert_file(path, registry)
