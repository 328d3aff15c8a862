"""bench/campaign_record.py: the record of a campaign is read from its run directory, the committed one reads back
as recorded, and a directory that is not a run is one error line."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "bench" / "results" / "2026-12-01-h200-campaign-naive-s0"


def _tool():
    spec = importlib.util.spec_from_file_location("campaign_record", ROOT / "bench" / "campaign_record.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def test_the_committed_campaign_reads_back_as_recorded() -> None:
    recorded = json.loads((RUN / "record.json").read_text(encoding="utf-8"))
    again = _tool().record(RUN, recorded["label"])
    assert again == recorded
    # every stage-3 dispatch of a candidate counts, failures included; the baseline's is counted apart; the figures
    # agree with run.json's summary
    assert again["gpu_benchmarks"] == again["spent"]["gpu_benchmarks"] and again["baseline_dispatches"] == 1
    assert again["speedup"] == round(again["baseline_ms"] / again["best_ms"], 4)


def test_a_directory_that_is_not_a_run_is_one_error_line(tmp_path: Path, capsys) -> None:
    assert _tool().main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:")
