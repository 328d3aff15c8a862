"""The C scanner (cake_core/ir/_scan.c) against the Python one (lexer.scan_python), which defines the
token grammar: wherever the C scanner gives tokens they are the Python scanner's, to the column; it
gives up (None) on every text with a lexical error; and it does not give up on the kernels people write.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cake_core.diagnostics.diagnostic import DiagnosticError
from cake_core.ir import lexer

ROOT = Path(__file__).resolve().parents[2]
KERNELS = sorted(p for p in ROOT.rglob("*.cake") if ".venv" not in p.parts)

pytestmark = pytest.mark.skipif(lexer._scan_c is None, reason="the C scanner was not built (no C compiler at install)")


def _python(text: str) -> tuple[list, ...] | None:
    try:
        return tuple(map(list, lexer.scan_python(text, "t.cake")))
    except DiagnosticError:
        return None


def _agrees(text: str) -> bool:
    """The C scanner gives the Python scanner's tokens, or gives up; True when it gave tokens."""
    fast = lexer._scan_c(text)
    if fast is None:
        return False
    assert _python(text) == tuple(fast), repr(text)
    return True


def test_every_kernel_of_the_repository_is_scanned_in_c_as_in_python() -> None:
    assert len(KERNELS) > 100
    for path in KERNELS:
        text = path.read_text()
        if text.isascii() and _python(text) is not None:
            assert _agrees(text), f"the C scanner gave up on {path.relative_to(ROOT)}"


def test_random_edits_of_kernels_scan_alike() -> None:
    rng = random.Random(4)
    texts = [p.read_text() for p in KERNELS]
    alphabet = "()[]{}\t #\n:,.-+*/^T<>=!@$'a1eEB_"
    accepted = 0
    for _ in range(3000):
        chars = list(rng.choice(texts))
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(chars))
            roll = rng.random()
            if roll < 0.4:
                chars.insert(at, rng.choice(alphabet))
            elif roll < 0.8:
                del chars[at]
            else:
                chars[at] = rng.choice(alphabet)
        accepted += _agrees("".join(chars))
    assert accepted > 500  # both kinds were exercised: texts it scans and texts it leaves


# fragments that meet the grammar's corners: numbers next to dots, exponents and the swizzle suffix,
# dotted names, two-character operators and their prefixes, indentation and brackets across lines
FRAGMENTS = list("0123456789.eEB+-_aT^<>=!()[]{},:*/% \t#") + ["\n", "\n  ", "\n    ", "128B", "1.5", "1e3", "x.y", ".."]


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=14).map("".join))
def test_token_soup_scans_alike(text: str) -> None:
    _agrees(text)


@pytest.mark.parametrize(
    "text",
    ["a @ b\n", "x = 1 ! 2\n", "a.\n", "y ^ 2\n", "f(a))\n", "f(a\n", "k\n\tx\n", "  a\n b\n", "1.5.2\n", "café\n"],
)  # fmt: skip
def test_it_gives_up_where_python_must_decide(text: str) -> None:
    assert lexer._scan_c(text) is None


def test_scan_is_the_same_with_and_without_the_c_scanner(monkeypatch: pytest.MonkeyPatch) -> None:
    text = (ROOT / "cake_core/problems/kmeans_assign/schedules/hopper.cake").read_text()
    fast = lexer.scan(text, "h.cake")
    monkeypatch.setattr(lexer, "_scan_c", None)
    assert lexer.scan(text, "h.cake") == fast


def test_it_takes_only_str() -> None:
    with pytest.raises(TypeError):
        lexer._scan_c(b"kernel")  # type: ignore[arg-type]
