"""The pipeline of values: each step takes the product of the one before it, and a candidate keeps
every product, so asking twice runs a step once."""

from __future__ import annotations

from pathlib import Path

import pytest
from cake_core import pipeline, plugins
from cake_core.diagnostics.diagnostic import DiagnosticError
from cake_core.errors import CakeUserError

ROOT = Path(__file__).resolve().parents[1]
AMPERE = ROOT / "cake_core" / "problems" / "kmeans_assign" / "schedules" / "ampere.cake"

TYPE_ERROR = """\
kernel k(x: global f32[N, 64], out: global f32[N, 64])
  domain N >= 1
  grid (t) over (cdiv(N, 64))
  cta warps 4
  role all warps 0..4:
    no.such.op out[t * 64 : +64, :] <- x[t * 64 : +64, :]
"""


@pytest.fixture
def h200():
    return plugins.registry().get("targets", "h200")


def test_a_candidate_keeps_every_product(h200) -> None:
    cand = pipeline.Candidate.load(AMPERE, h200)
    assert cand.checked is None and cand.report is None and not cand.lowered and not cand.compiled
    checked = cand.check()
    report = cand.verify()
    assert cand.checked is checked and cand.check() is checked and cand.verify() is report
    assert report.ok and report.specializations == len(checked.models)
    spec = cand.spec({"T": "bf16", "D": 128})
    assert spec in cand.specs() and spec.label == "T=bf16,D=128"
    lowered = cand.build(spec)
    assert cand.build(spec) is lowered and lowered.checked is checked
    assert "__global__" in lowered.source
    assert cand.sass_claims() == ("HMMA", "LDGSTS", "LDSM")  # mma, cp.async, ldmatrix


def test_the_verifier_reports_a_type_error_and_runs_no_rule(h200) -> None:
    cand = pipeline.Candidate(pipeline.load_text(TYPE_ERROR, "bad.cake"), h200)
    report = cand.verify()
    assert not report.ok and report.rules == () and report.kernels == 1
    assert {d.code for d in report.diagnostics if d.is_error} <= {d.code for d in cand.check().diagnostics}
    with pytest.raises(CakeUserError, match="has errors"):
        cand.build(cand.specs()[0])


def test_a_syntax_error_raises_from_load() -> None:
    with pytest.raises(DiagnosticError) as caught:
        pipeline.load_text("kernel (", "broken.cake")
    assert caught.value.diagnostics[0].code == "CK001"


def test_a_missing_file_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(CakeUserError, match="no such file"):
        pipeline.load(tmp_path / "nothing.cake")
