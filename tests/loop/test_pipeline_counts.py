"""Each step of the pipeline runs once for what it makes: through ``cake run`` and ``cake bench``, one
parse and one type check per candidate, one lowering per (candidate, specialization); ``cake run``'s
interpreter gate adds one type check without a target per candidate (each run chooses ``SMS``)."""

from __future__ import annotations

import collections
import json
import sqlite3
from pathlib import Path

import pytest
from cake_core import cli

ROOT = Path(__file__).resolve().parents[2]
SCHEDULES = ROOT / "cake_core" / "problems" / "kmeans_assign" / "schedules"
FILES = sorted(p.name for p in SCHEDULES.glob("*.cake"))


def _once_each(steps: dict[str, collections.Counter], files: list[str], spec: str, gate: bool = True) -> None:
    assert steps["parse"] == collections.Counter(files)
    assert steps["check"] == collections.Counter(files + ([(f, "no target") for f in files] if gate else []))
    assert steps["build"] == collections.Counter((f, spec) for f in files)


def test_cake_run_without_a_gpu(steps, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from cake_core.runtime import device

    monkeypatch.setattr(device, "driver_status", lambda **_: (False, "the CPU path, by the test"))
    assert cli.main(["run", "kmeans-assign", "--target", "h200", "--out", str(tmp_path), "--workers", "1"]) == 0
    _once_each(steps, FILES, "T=bf16,D=128")


def test_cake_run_with_a_gpu(steps, fake_gpu, small_cell, tmp_path: Path, capsys) -> None:
    rc = cli.main(["run", "kmeans-assign", "--target", "h200", "--out", str(tmp_path), "--workers", "1"])
    assert rc == 1  # all wrong: no best kernel
    _once_each(steps, FILES, "T=bf16,D=128")
    record = json.loads((tmp_path / "run.json").read_text())
    assert {c["status"] for c in record["candidates"]} == {"failed-on-gpu (wrong)"}
    db = sqlite3.connect(tmp_path / "ledger.sqlite")
    rows = db.execute("SELECT status, gpu, measurement FROM dispatches WHERE candidate IS NOT NULL").fetchall()
    assert len(rows) == len(FILES) and {(s, g) for s, g, _ in rows} == {("wrong", "Fake GPU")}
    assert {json.loads(m)["shape"]["N"] for _, _, m in rows} == {small_cell["N"]}


def test_cake_bench(steps, fake_gpu, capsys) -> None:
    path = SCHEDULES / "ampere.cake"
    rc = cli.main(["bench", str(path), "--problem", "kmeans-assign", "--shape", "B=2,N=1000,K=100,D=64",
                   "--target", "h200", "--reps", "2", "--warmup", "1", "--json"])  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert rc == 1 and out["status"] == "wrong" and out["gpu"] == "Fake GPU" and out["impl"] == "cake:ampere"
    _once_each(steps, ["ampere.cake"], "T=bf16,D=64", gate=False)
