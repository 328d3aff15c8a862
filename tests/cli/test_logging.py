"""Structured logs on stderr: ``--log-format json`` gives one JSON object per line, ``console`` a readable
line; ``--log-level`` filters. ``cake compile`` logs every NVRTC compile (duration, cache status) at info."""

from __future__ import annotations

import io
import json

import pytest
from cake_core import cli, logs

from .conftest import SCHEDULES, Cake

AMPERE = str(SCHEDULES / "ampere.cake")
COMPILE = ["compile", AMPERE, "--target", "a100", "--shape", "T=bf16,D=64", "--no-cache"]


def _events(err: str) -> list[dict]:
    return [json.loads(line) for line in err.splitlines()]  # every line is a JSON object


def test_json_logs_of_a_compile(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--log-level", "info", "--log-format", "json", *COMPILE, "--json"]) == 0
    captured = capsys.readouterr()
    (record,) = json.loads(captured.out)  # stdout keeps the report; the log stays on stderr
    (event,) = [e for e in _events(captured.err) if e["event"] == "nvrtc compile"]
    assert event["level"] == "info" and event["timestamp"].endswith("Z")
    assert (event["target"], event["arch"], event["specialization"]) == ("a100", "sm_80", "T=bf16,D=64")
    assert event["ok"] is True
    assert event["cache"] == "off" == record["cache"]  # --no-cache
    assert event["compile_s"] > 0 and event["wall_s"] >= event["compile_s"] * 0.5
    assert event["cubin_bytes"] == record["cubin_bytes"] and event["file"] == AMPERE


def test_the_cache_status_is_logged(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    monkeypatch.setenv("CAKE_CACHE_DIR", str(tmp_path))
    args = ["--log-level", "info", "--log-format", "json", *COMPILE[:-1]]
    statuses = []
    for _ in range(2):
        assert cli.main(args) == 0
        statuses += [e["cache"] for e in _events(capsys.readouterr().err) if e["event"] == "nvrtc compile"]
    assert statuses == ["miss", "hit"]


def test_console_logs_are_readable(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--log-level", "info", *COMPILE]) == 0
    (line,) = [ln for ln in capsys.readouterr().err.splitlines() if "nvrtc compile" in ln]
    assert "[info" in line and "cache=off" in line and "target=a100" in line
    with pytest.raises(json.JSONDecodeError):
        json.loads(line)


def test_info_is_filtered_at_the_default_level(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(COMPILE) == 0
    assert capsys.readouterr().err == ""


def test_json_logs_from_the_console_script(cake: Cake) -> None:
    done = cake("--log-level", "info", "--log-format", "json", *COMPILE)
    assert done.returncode == 0, done.stderr
    (event,) = _events(done.stderr)
    assert event["event"] == "nvrtc compile" and event["level"] == "info"


def test_events_go_to_stderr_as_it_is_when_logged(monkeypatch: pytest.MonkeyPatch) -> None:
    """Logging configured once keeps working when stderr is replaced later (as pytest's capture does)."""
    logs.configure("json", "info")
    later = io.StringIO()
    monkeypatch.setattr("sys.stderr", later)
    logs.get_logger("cake.test").info("after the swap", n=1)
    (event,) = _events(later.getvalue())
    assert (event["event"], event["n"], event["level"]) == ("after the swap", 1, "info")
