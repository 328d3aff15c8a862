"""Kernels the verifier cannot refuse but that compute the wrong thing, and the interpreter that can.

``tests/corpus_semantic/<case>/`` holds a pair of K-Means schedules: ``wrong.cake`` carries one
semantic bug that passes every installed hard gate (a stage index, a tile offset, an argmin base),
``right.cake`` is its twin with the bug fixed. Each file's header says how to run it::

    # target: h200                              the target the verifier checks it for
    # problem: kmeans-assign                    whose oracle judges the output
    # shape: B=2 N=130 K=37 D=64 T=bf16 SMS=1   the interpreter's sizes (SMS: persistent grids)
    # finds: CS003 wrong-answer                 what the interpreter must find (`nothing` for the twin)
    # refused: CR127                            optional: the rules that have since learnt to refuse it

``CSnnn`` is an interpreter finding that must appear; ``wrong-answer`` means the oracle must reject the
output. The twin must run clean and pass the oracle, so each case shows the bug is what fails. A case
that a rule has since learnt to refuse names the rule (``refused:``): the verifier must find exactly
those, and the interpreter still its bug.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cake_core import plugins
from cake_core.ir.parser import parse
from cake_core.ir.sema import check_module
from cake_core.problems.kmeans_assign import KMEANS_ASSIGN
from cake_core.semantics import run_program
from cake_core.verify.runner import verify_source

CORPUS = Path(__file__).parents[1] / "corpus_semantic"
HEADER = re.compile(r"#\s*(?P<key>target|problem|shape|finds|refused):\s*(?P<value>.*?)\s*$")
CASES = sorted(p.name for p in CORPUS.iterdir() if p.is_dir())


def _header(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        m = HEADER.match(line)
        if m:
            out[m["key"]] = m["value"]
    return out


def _shape(words: str) -> tuple[dict[str, int], str, int | None]:
    sizes: dict[str, int] = {}
    dtype, sms = "bf16", None
    for word in words.split():
        key, value = word.split("=")
        if key == "T":
            dtype = value
        elif key == "SMS":
            sms = int(value)
        else:
            sizes[key] = int(value)
    return sizes, dtype, sms


def _run(path: Path):
    text = path.read_text()
    head = _header(text)
    assert text.startswith("# target: ") and head["problem"] == "kmeans-assign", path
    reg = plugins.registry()
    report = verify_source(text, str(path), reg.get("targets", head["target"]), reg)
    errors = [d for d in report.diagnostics if d.is_error]
    refused = set(head.get("refused", "").split())
    assert {d.code for d in errors} == refused, f"{path}: {[f'{d.code} {d.message}' for d in errors]}"
    sizes, dtype, sms = _shape(head["shape"])
    checked = check_module(parse(text, str(path)), {p.name: p for p in reg.values("primitives")})
    inputs = KMEANS_ASSIGN.make_inputs(sizes, dtype, 3)
    result = run_program(checked, inputs, {**sizes, "T": dtype}, policy="sequential", sms=sms)
    oracle = KMEANS_ASSIGN.check(inputs, {"out": result.outputs["out"]}, sizes, dtype)
    return head, result, oracle


def test_every_case_has_a_wrong_kernel_and_its_twin() -> None:
    assert len(CASES) >= 4
    for case in CASES:
        wrong, right = CORPUS / case / "wrong.cake", CORPUS / case / "right.cake"
        assert wrong.exists() and right.exists(), case
        assert _header(wrong.read_text())["finds"] != "nothing"
        assert _header(right.read_text())["finds"] == "nothing"
        # the twins differ in the bug only (and their header comments)
        body = [[ln for ln in p.read_text().splitlines() if not ln.startswith("#")] for p in (wrong, right)]
        assert sum(a != b for a, b in zip(*body, strict=True)) == 1, case


@pytest.mark.parametrize("case", CASES)
def test_the_interpreter_catches_what_the_verifier_lets_through(case: str) -> None:
    head, result, oracle = _run(CORPUS / case / "wrong.cake")
    expected = head["finds"].split()
    for code in (c for c in expected if c.startswith("CS")):
        assert code in result.codes, (code, [str(f) for f in result.findings])
    if "wrong-answer" in expected:
        assert not oracle.passed, "the oracle accepted the wrong kernel's output"
    assert not result.ok or not oracle.passed


@pytest.mark.parametrize("case", CASES)
def test_the_fixed_twin_passes_the_interpreter_and_the_oracle(case: str) -> None:
    _, result, oracle = _run(CORPUS / case / "right.cake")
    assert result.ok, [str(f) for f in result.findings]
    assert not result.stopped and oracle.passed, oracle.first
