"""Every corpus file verifies with exactly the warnings its inline expectations name; with the hard
gates installed too, the corpus kernels pass them (the warnings are about speed, not correctness)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cake_core.diagnostics.diagnostic import Severity
from cake_core.verify.expectations import assert_file, corpus, parse_expectations
from cake_core.verify.runner import verify_source

CORPUS = Path(__file__).parent / "corpus"


@pytest.mark.parametrize("path", corpus(CORPUS), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_corpus_file(path: Path, registry) -> None:
    assert_file(path, registry)


@pytest.mark.parametrize("path", corpus(CORPUS), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_corpus_kernels_pass_the_hard_gates(path: Path, plain_registry) -> None:
    if "CR101" not in plain_registry.names("rules"):
        pytest.skip("cake-rules-core is not installed")
    text = path.read_text()
    target, _ = parse_expectations(text, str(path))
    report = verify_source(text, str(path), plain_registry.get("targets", target), plain_registry)
    errors = [d for d in report.diagnostics if d.severity is Severity.ERROR]
    assert errors == [], errors
