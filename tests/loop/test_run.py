"""``cake run`` without a GPU, end to end through the command: its exit status, its summary, the run directory
(ledger, ``run.json``, ``best.cake``, the exported kernel), rejected candidates and their routed findings,
``--from``, budgets, and bad input (one line on stderr, exit 2, nothing recorded lost)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from cake_core import cli
from cake_core.runtime import device

ROOT = Path(__file__).resolve().parents[2]
SCHEDULES = ROOT / "cake_core" / "problems" / "kmeans_assign" / "schedules"
NAMES = ["ampere", "hopper", "hopper_cluster", "hopper_overlap", "naive"]
CORPUS = ROOT / "tests" / "corpus_semantic" / "naive_argmin_base"


@pytest.fixture(autouse=True)
def _no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CPU path, also on a machine with a GPU."""
    monkeypatch.setattr(device, "driver_status", lambda **_: (False, "the CPU path, by the test"))


def _run(capsys, out: Path, *args: str, target: str = "h200") -> tuple[int, str, str]:
    rc = cli.main(["run", "kmeans-assign", "--target", target, "--out", str(out), "--workers", "1", *args])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def _db(out: Path) -> sqlite3.Connection:
    db = sqlite3.connect(out / "ledger.sqlite")
    db.row_factory = sqlite3.Row
    return db


def test_every_schedule_passes_the_filter_on_h200_and_the_best_predicted_is_exported(tmp_path: Path, capsys) -> None:
    rc, out, _ = _run(capsys, tmp_path)
    assert rc == 0
    record = json.loads((tmp_path / "run.json").read_text())
    assert (record["problem"], record["target"], record["seed"]) == ("kmeans-assign", "h200", 0)
    assert record["cell"] == {"shape": {"B": 32, "N": 65536, "K": 1024, "D": 128}, "dtype": "bf16"}
    stages = record["summary"]["stages"]
    assert stages["generate"] == "5 distinct candidate(s) over 1 round(s) (5 seed)"
    assert stages["filter"] == "5 of 5 pass every gate and compile for h200"
    assert stages["benchmark"].startswith("skipped: no GPU here (the CPU path, by the test); nothing was measured")
    assert "Ranked by the roofline cost model's predicted time (uncalibrated)" in stages["benchmark"]
    assert stages["route"] == "no findings"
    assert [c["name"] for c in record["candidates"]] == NAMES
    assert {c["status"] for c in record["candidates"]} == {"compiled"}
    summary = record["summary"]
    assert summary["measured"] is False and summary["best_ms"] is None and summary["speedup"] is None
    best = min(record["candidates"], key=lambda c: c["predicted_ms"])
    assert summary["best"] == best["name"] and summary["best_predicted_ms"] == best["predicted_ms"]
    # the run directory: the best kernel's source and its standalone export
    assert (tmp_path / "best.cake").read_text() == (SCHEDULES / f"{best['name']}.cake").read_text()
    assert "cudaError_t" in (tmp_path / "best.h").read_text() and "__global__" in (tmp_path / "best.cu").read_text()
    # the ledger: WAL mode, every candidate with its text, stage 2's outcome and estimate, the versions in use
    db = _db(tmp_path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    rows = db.execute("SELECT c.name, c.origin, c.source, f.status, f.estimate FROM candidates c JOIN filtered f "
                      "ON f.candidate = c.id ORDER BY c.id").fetchall()  # fmt: skip
    assert [r["name"] for r in rows] == NAMES and {r["origin"] for r in rows} == {"seed"}
    for r in rows:
        assert r["source"] == (SCHEDULES / f"{r['name']}.cake").read_text() and r["status"] == "compiled"
        est = json.loads(r["estimate"])
        assert est["model"].startswith("roofline ") and est["calibrated"] is False and est["ms"] > 0
        assert {"dram", "tensor", "launch"} <= set(est["terms"])
    versions = {(k, n) for k, n, _ in db.execute("SELECT * FROM versions")}
    assert {("distribution", "cake-core"), ("distribution", "cake-cost-roofline"), ("target-data", "h200"),
            ("calibration", "roofline")} <= versions  # fmt: skip
    # what the user reads
    assert "nothing was benchmarked" in out and f"best: {best['name']} " in out
    assert f"run directory: {tmp_path}" in out


def test_a_rejected_candidate_is_routed_with_its_first_diagnostic(tmp_path: Path, capsys) -> None:
    rc, out, _ = _run(capsys, tmp_path, target="a100")
    assert rc == 0  # the Ampere-path schedules compile
    record = json.loads((tmp_path / "run.json").read_text())
    status = {c["name"]: c["status"] for c in record["candidates"]}
    assert status == {"ampere": "compiled", "hopper": "rejected", "hopper_cluster": "rejected",
                      "hopper_overlap": "rejected", "naive": "compiled"}
    hopper = next(c for c in record["candidates"] if c["name"] == "hopper")
    assert hopper["gate"] == "verify" and hopper["reason"].startswith(str(SCHEDULES / "hopper.cake") + ":")
    assert hopper["reason"].split(": ")[1].startswith(("CR101 ", "CR102 "))
    # each rejected candidate's first diagnostic, one line each
    assert f"  hopper: {hopper['reason']}" in out.splitlines()
    db = _db(tmp_path)
    found = db.execute("SELECT f.destination, f.kind, f.message, f.location, f.evidence, f.reproducer FROM findings f "
                       "JOIN candidates c ON c.id = f.candidate WHERE c.name = 'hopper' ORDER BY f.id").fetchall()  # fmt: skip
    assert {(r["destination"], r["kind"]) for r in found} == {("candidate", "rejected-verify")}
    assert {json.loads(r["evidence"])["code"] for r in found} == {"CR101", "CR102"}  # one finding per code
    assert all(r["location"].startswith(str(SCHEDULES / "hopper.cake") + ":") for r in found)
    # each reproducer: hopper.cake reduced while verifying for a100 still reports the same code
    from cake_core import plugins
    from cake_core.verify.runner import verify_source

    reg = plugins.registry()
    for r in found:
        code, how = json.loads(r["evidence"])["code"], json.loads(r["evidence"])["reproducer"]
        assert how["reduced"] and how["lines"][1] < how["lines"][0]
        report = verify_source(r["reproducer"], "r.cake", reg.get("targets", "a100"), reg)
        assert code in {d.code for d in report.diagnostics if d.is_error}
    n = db.execute("SELECT COUNT(*) FROM findings").fetchone()[0]
    assert record["summary"]["stages"]["route"] == f"{n} to the candidate"
    assert record["summary"]["stages"]["filter"] == "2 of 5 pass every gate and compile for a100; rejected 3 by the verify gate"


def test_from_files_the_interpreter_gate_rejects_one(tmp_path: Path, capsys) -> None:
    """A schedule every static rule passes, with a wrong argmin base, given with --from as a user would: the
    gate's oracle rejects it, the ledger keeps the gate's diagnostics, the finding goes to the candidate."""
    rc, out, _ = _run(capsys, tmp_path, "--from", str(CORPUS / "right.cake"), str(CORPUS / "wrong.cake"))
    assert rc == 0
    record = json.loads((tmp_path / "run.json").read_text())
    right, wrong = record["candidates"]
    assert (right["name"], right["origin"], right["status"]) == ("right", "from", "compiled")
    assert (wrong["status"], wrong["gate"]) == ("rejected", "interp")
    db = _db(tmp_path)
    assert [r[0] for r in db.execute("SELECT code FROM diagnostics WHERE candidate = ? AND stage = 'interp'",
                                     (wrong["id"],))] == ["CS009"]  # fmt: skip
    (finding,) = db.execute("SELECT * FROM findings").fetchall()
    assert (finding["destination"], finding["kind"]) == ("candidate", "rejected-interp")
    assert finding["message"].startswith("CS009 ") and finding["location"].startswith(str(CORPUS / "wrong.cake"))
    assert record["summary"]["best"] == "right"


def test_a_file_that_does_not_parse_is_a_rejected_candidate_not_an_error(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.cake"
    bad.write_text("kernel k(\n")
    rc, out, _ = _run(capsys, tmp_path / "run", "--from", str(bad), str(SCHEDULES / "naive.cake"))
    assert rc == 0
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert [(c["name"], c["status"]) for c in record["candidates"]] == [("bad", "rejected"), ("naive", "compiled")]
    assert record["candidates"][0]["hash"].startswith("text:")


def test_the_candidate_budget_stops_generation_and_says_so(tmp_path: Path, capsys) -> None:
    rc, out, _ = _run(capsys, tmp_path, "--budget", "2")
    assert rc == 0
    record = json.loads((tmp_path / "run.json").read_text())
    assert [c["name"] for c in record["candidates"]] == NAMES[:2]
    assert record["summary"]["stopped"] == "candidates budget (2) spent"
    assert record["summary"]["spent"]["candidates"] == 2


def test_resume_redoes_nothing_recorded(tmp_path: Path, capsys) -> None:
    _run(capsys, tmp_path)
    before = _db(tmp_path).execute("SELECT COUNT(*) FROM attempts").fetchone()[0]
    rc, out, _ = _run(capsys, tmp_path, "--resume")
    assert rc == 0
    db = _db(tmp_path)
    assert db.execute("SELECT COUNT(*) FROM attempts").fetchone()[0] == before  # no work started again
    assert db.execute("SELECT COUNT(*) FROM sessions").fetchone()[0] == 2
    assert "best: " in out


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["run", "no-such-problem", "--target", "h200"], "no-such-problem"),
        (["run", "kmeans-assign", "--target", "no-such-gpu"], "no-such-gpu"),
        (["run", "kmeans-assign", "--target", "h200", "--budget", "two"], "--budget"),
        (["run", "kmeans-assign"], "--target"),
        (["run", "kmeans-assign", "--target", "h200", "--from", "/no/such.cake"], "/no/such.cake"),
        (["run", "kmeans-assign", "--target", "h200", "--agent", "nobody"], "nobody"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], says: str, tmp_path: Path, capsys) -> None:
    rc = cli.main([*args, "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: ") and says in err and err.count("\n") == 1, err
    assert not (tmp_path / "run" / "ledger.sqlite").exists()


def test_resume_refuses_what_it_cannot_continue(tmp_path: Path, capsys) -> None:
    rc = cli.main(["run", "kmeans-assign", "--target", "h200", "--resume"])
    err = capsys.readouterr().err
    assert rc == 2 and err == "error: --resume needs --out: the run directory to resume\n"
    rc, _, err = _run(capsys, tmp_path / "empty", "--resume")
    assert rc == 2 and err == f"error: cannot resume: {tmp_path / 'empty'} holds no run ledger (ledger.sqlite)\n"
    _run(capsys, tmp_path / "run", "--budget", "1")
    ledger = (tmp_path / "run" / "ledger.sqlite").read_bytes()
    rc, _, err = _run(capsys, tmp_path / "run", "--resume", target="a100")
    assert rc == 2 and err == f"error: cannot resume: {tmp_path / 'run'} is a run of target `h200`, not `a100`\n"
    rc = cli.main(["run", "knn", "--target", "h200", "--out", str(tmp_path / "run"), "--resume"])
    err = capsys.readouterr().err
    assert rc == 2 and err == f"error: cannot resume: {tmp_path / 'run'} is a run of problem `kmeans-assign`, not `knn`\n"
    # a new run into a directory that holds one is refused too, and the recorded run is untouched
    rc, _, err = _run(capsys, tmp_path / "run")
    assert rc == 2 and "already holds a run" in err and err.count("\n") == 1
    assert (tmp_path / "run" / "ledger.sqlite").read_bytes() == ledger


def test_the_cell_can_be_chosen(tmp_path: Path, capsys) -> None:
    rc, _, _ = _run(capsys, tmp_path, "--shape", "B=1,N=4099", "--dtype", "f16", "--budget", "1")
    assert rc == 0
    record = json.loads((tmp_path / "run.json").read_text())
    assert record["cell"] == {"shape": {"B": 1, "N": 4099, "K": 1024, "D": 128}, "dtype": "f16"}
    rc, _, err = _run(capsys, tmp_path / "bad", "--shape", "Q=3")
    assert rc == 2 and "has no size `Q`" in err and err.count("\n") == 1
