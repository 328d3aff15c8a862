"""The one converter: the JSON contract of diagnostics (DESIGN.md section 6), records read back as
they were written, and what a compile result and a run result leave out."""

from __future__ import annotations

import json

from pathlib import Path

import attrs
import numpy as np
import pytest
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError
from cake_core.convert import structure, unstructure
from cake_core.diagnostics.diagnostic import Diagnostic, Label, Severity
from cake_core.location import Loc
from cake_core.loop.benchmark import Measurement
from cake_core.loop.records import CompileSummary, EstimateSummary, FilterOutcome, Finding, KernelResources
from cake_core.runtime.worker import RunResult

ROOT = Path(__file__).resolve().parents[1]
DIAGNOSTIC = Diagnostic(
    "CR102", "smem-over-limit", Severity.ERROR, "`xs` needs 300 KiB", Loc("k.cake", 3, 5, 3, 9), "here",
    (Label(Loc("k.cake", 1, 1, 1, 4), "declared"), Label(Loc("other.cake", 2, 2, 2, 3), "used")),
    ("a note",), "shrink `xs`", "cake-rules-core",
)  # fmt: skip


def test_a_diagnostic_has_the_fields_of_the_contract() -> None:
    data = unstructure(DIAGNOSTIC)
    assert list(data) == ["code", "slug", "severity", "message", "file", "line", "column", "end_line",
                          "end_column", "label", "secondary", "plugin", "notes", "help"]  # fmt: skip
    assert (data["severity"], data["file"], data["line"], data["column"], data["end_line"], data["end_column"]) == (
        "error", "k.cake", 3, 5, 3, 9,
    )  # fmt: skip
    assert data["secondary"][1] == {"file": "other.cake", "line": 2, "column": 2, "end_line": 2, "end_column": 3,
                                    "message": "used"}  # fmt: skip
    assert (data["plugin"], data["notes"], data["help"]) == ("cake-rules-core", ["a note"], "shrink `xs`")
    json.dumps(data)


def test_a_diagnostic_reads_back_as_it_was() -> None:
    assert structure(json.loads(json.dumps(unstructure(DIAGNOSTIC))), Diagnostic) == DIAGNOSTIC


def test_every_verifier_diagnostic_of_the_corpus_reads_back() -> None:
    from cake_core.verify.expectations import check_file, corpus

    files = corpus(ROOT / "plugins" / "verifier_rules" / "cake-rules-core" / "tests" / "corpus")[::3]
    seen = 0
    for path in files:
        for d in check_file(path).diagnostics:
            assert structure(unstructure(d), Diagnostic) == d
            seen += 1
    assert seen > 10


def test_the_loop_records_read_back_as_the_ledger_stores_them() -> None:
    measurement = Measurement("kmeans-assign", {"B": 1}, "bf16", "GPU", "h200", "today", "abc", "cake:x", 0, 1.5,
                              [1.5], True, sass={"claims": ["HMMA"]}, resources={"k": {"registers": 40}})  # fmt: skip
    outcome = FilterOutcome(
        "compiled", None, None, [DIAGNOSTIC], [], 0.1,
        CompileSummary("sm_90a", {"k": KernelResources(40, 0, 0)}, {"k": 0}, ["spill: 8 bytes"]),
        EstimateSummary("roofline 0.1", False, 0.5, "dram", {"dram": 0.5}), 1.0,
    )  # fmt: skip
    finding = Finding("cost-model", "misranked", "m", 0, 3, None, {"predicted_ms": 0.5}, "kernel k ...")
    for value in (measurement, outcome, finding):
        data = json.loads(json.dumps(unstructure(value)))
        assert structure(data, type(value)) == value


def test_a_run_result_leaves_out_its_arrays() -> None:
    r = RunResult("ok", "plan", outputs={"y": np.zeros((4, 2), np.float32)}, samples_ms=(1.0, 2.0))
    data = unstructure(r)
    assert list(data)[:4] == ["status", "plan", "error", "outputs"]
    assert data["outputs"] == {"y": {"shape": [4, 2], "dtype": "float32"}} and data["samples_ms"] == [1.0, 2.0]


def test_a_record_with_a_field_it_does_not_have_is_refused() -> None:
    data = unstructure(Finding("candidate", "x", "m", 0))
    with pytest.raises(ClassValidationError) as caught:
        structure({**data, "colour": "red"}, Finding)
    assert any(isinstance(e, ForbiddenExtraKeysError) for e in caught.value.exceptions)
