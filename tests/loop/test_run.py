"""``cake run`` without a GPU, end to end through the command: its exit status, table and ``run.json``,
a rejected candidate, ``--resume``, and bad input (one line on stderr, exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cake_core import cli
from cake_core.runtime import device

SCHEDULES = ["ampere", "hopper", "hopper_overlap", "naive"]


@pytest.fixture(autouse=True)
def _no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CPU path, also on a machine with a GPU."""
    monkeypatch.setattr(device, "driver_status", lambda **_: (False, "the CPU path, by the test"))


def _run(capsys, out: Path, *args: str, target: str = "h200") -> tuple[int, str, str]:
    rc = cli.main(["run", "kmeans-assign", "--target", target, "--out", str(out), *args])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def test_every_schedule_passes_the_filter_on_h200(tmp_path: Path, capsys) -> None:
    rc, out, _ = _run(capsys, tmp_path)
    assert rc == 0
    record = json.loads((tmp_path / "run.json").read_text())
    assert list(record) == ["problem", "target", "started", "cell", "agent", "stages", "candidates", "finished"]
    assert (record["problem"], record["target"]) == ("kmeans-assign", "h200")
    assert record["cell"] == {"shape": {"B": 32, "N": 65536, "K": 1024, "D": 128}, "dtype": "bf16"}
    assert record["stages"]["generate"] == "4 distinct candidate(s) from the committed schedules"
    assert record["stages"]["filter"] == "4 of 4 pass the verifier, the interpreter gate and compile for h200"
    assert record["stages"]["benchmark"].startswith("skipped: no GPU here (the CPU path, by the test)")
    assert "Ranked by the roofline cost model's predicted time (uncalibrated)" in record["stages"]["benchmark"]
    assert record["stages"]["route"] == "no findings"
    assert [c["name"] for c in record["candidates"]] == SCHEDULES
    for c in record["candidates"]:
        assert list(c) == ["name", "path", "hash", "verify", "compile", "bench", "findings", "status", "interp",
                           "interp_seconds", "estimate"]  # fmt: skip
        assert (c["status"], c["verify"], c["interp"], c["bench"], c["findings"]) == ("compiled", [], [], None, [])
        assert c["interp_seconds"] > 0
        # without a GPU, the roofline model (installed with the tests) ranks what compiled, and says it is uncalibrated
        est = c["estimate"]
        assert est["model"].startswith("roofline ") and est["calibrated"] is False and est["ms"] > 0 and est["bound"]
        assert c["compile"]["arch"] == "sm_90a" and c["compile"]["kernels"]
        assert set(c["compile"]["kernels"]) == set(c["compile"]["smem_bytes"])
        for k in c["compile"]["kernels"].values():
            assert k["registers"] > 0 and k["spill_stores"] == 0
    by_name = {c["name"]: c for c in record["candidates"]}
    assert max(by_name["hopper"]["compile"]["smem_bytes"].values()) > 190 * 1024  # the TMA rings
    # the table: one row per candidate, from the same record
    rows = [line for line in out.splitlines() if "compiled" in line]
    assert [row.split()[1] for row in rows] == SCHEDULES
    assert f"record: {tmp_path / 'run.json'}" in out


def test_a_rejected_candidate_is_routed_to_the_candidate(tmp_path: Path, capsys) -> None:
    rc, _, _ = _run(capsys, tmp_path, target="a100")
    assert rc == 0  # the Ampere-path schedules compile
    record = json.loads((tmp_path / "run.json").read_text())
    status = {c["name"]: c["status"] for c in record["candidates"]}
    assert status == {"ampere": "compiled", "hopper": "rejected", "hopper_overlap": "rejected", "naive": "compiled"}
    hopper = next(c for c in record["candidates"] if c["name"] == "hopper")
    assert hopper["compile"] is None and {d["code"] for d in hopper["verify"]} == {"CR101", "CR102"}  # sm_90a only
    assert hopper["interp"] == [] and hopper["interp_seconds"] is None  # the interpreter runs after the rules pass
    assert {d["severity"] for d in hopper["verify"]} == {"error"}
    (first, *_) = hopper["findings"]
    assert first["route"] == "candidate" and first["what"].startswith(("CR101 ", "CR102 "))
    assert first["where"].startswith(hopper["path"] + ":")
    assert record["stages"]["filter"] == "2 of 4 pass the verifier, the interpreter gate and compile for a100"
    assert record["stages"]["route"] == f"{sum(len(c['findings']) for c in record['candidates'])} to the candidate"


def test_resume_keeps_what_was_measured(steps, tmp_path: Path, capsys) -> None:
    _run(capsys, tmp_path)
    path = tmp_path / "run.json"
    record = json.loads(path.read_text())
    naive = next(c for c in record["candidates"] if c["name"] == "naive")
    measured = {"problem": "kmeans-assign", "shape": {"B": 32, "N": 65536, "K": 1024, "D": 128}, "dtype": "bf16",
                "gpu": "NVIDIA H200", "target": "h200", "date": "2026-12-01T00:00:00Z", "commit": "abc",
                "impl": "cake:naive", "run": 0, "median_ms": 12.5, "samples": [12.5], "correct": True,
                "status": "ok", "error": None, "oracle": ["before timing: ok"], "sass": None, "resources": None,
                "hash": "h", "tflops": 44.0, "floor_ms": None, "differing": None}  # fmt: skip
    naive.update(status="measured", bench=measured, compile=None)
    path.write_text(json.dumps(record))
    for counter in steps.values():
        counter.clear()
    rc, out, _ = _run(capsys, tmp_path, "--resume")
    assert rc == 0
    again = {c["name"]: c for c in json.loads(path.read_text())["candidates"]}
    assert again["naive"]["status"] == "measured" and again["naive"]["bench"] == measured
    assert again["naive"]["compile"] is None
    assert {again[n]["status"] for n in ("ampere", "hopper", "hopper_overlap")} == {"compiled"}
    # the measured candidate is parsed (to know its hash) and goes no further
    assert steps["parse"]["naive.cake"] == 1 and "naive.cake" not in steps["check"]
    assert "12.500" in out and "44.0" in out  # its time and rate in the table


def test_a_candidate_the_interpreter_gate_fails_is_rejected(tmp_path: Path, capsys, monkeypatch) -> None:
    """A schedule every static rule passes, with a wrong argmin base: the gate's oracle rejects it, the
    record keeps the gate's findings and the candidate's first finding is the first of them."""
    from cake_core.loop import run as run_module

    corpus = Path(__file__).resolve().parents[1] / "corpus_semantic" / "naive_argmin_base"
    monkeypatch.setattr(run_module, "seed_schedules", lambda _p: [corpus / "right.cake", corpus / "wrong.cake"])
    rc, _, _ = _run(capsys, tmp_path, "--budget", "2")
    assert rc == 0
    record = json.loads((tmp_path / "run.json").read_text())
    right, wrong = record["candidates"]
    assert (right["status"], right["interp"]) == ("compiled", [])
    assert wrong["status"] == "rejected" and wrong["verify"] == [] and wrong["compile"] is None
    assert [d["code"] for d in wrong["interp"]] == ["CS009"]
    (finding,) = wrong["findings"]
    assert finding["route"] == "candidate" and finding["what"].startswith("CS009 the problem's oracle rejects `out`")
    assert finding["where"].startswith(str(corpus / "wrong.cake") + ":")
    assert record["stages"]["filter"] == "1 of 2 pass the verifier, the interpreter gate and compile for h200"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["run", "no-such-problem", "--target", "h200"], "no-such-problem"),
        (["run", "kmeans-assign", "--target", "no-such-gpu"], "no-such-gpu"),
        (["run", "kmeans-assign", "--target", "h200", "--budget", "two"], "--budget"),
        (["run", "kmeans-assign"], "--target"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], says: str, tmp_path: Path, capsys) -> None:
    rc = cli.main([*args, "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: ") and says in err and err.count("\n") == 1, err
    assert not (tmp_path / "run.json").exists()


@pytest.mark.parametrize("text", ["{not json", json.dumps({"candidates": [{"name": "x"}]})])
def test_resume_from_an_unreadable_record_is_one_line_and_exit_2(text: str, tmp_path: Path, capsys) -> None:
    (tmp_path / "run.json").write_text(text)
    rc, _, err = _run(capsys, tmp_path, "--resume")
    assert rc == 2 and err.startswith(f"error: cannot resume from {tmp_path / 'run.json'}: ") and err.count("\n") == 1
