"""`cake verify` and `cake explain`: output, JSON fields and exit codes (0 clean, 1 errors, 2 bad input).

Run in-process through ``cli.main``; the console script's one-line-on-stderr contract as a real process is
tests/cli/test_errors.py's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cake_core import cli, plugins

SCHEDULES = Path(cli.__file__).parent / "problems" / "kmeans_assign" / "schedules"
NAIVE = SCHEDULES / "naive.cake"

CLEAN = """\
kernel k(x: global f32[N, 64], out: global f32[N])
  domain N >= 1
  grid (t) over (cdiv(N, 128))
  cta warps 4
  role all warps 0..4:
    reg s: f32[128] layout rows
    sumsq s <- x[t * 128 : +128, :], oob=zero
    store out[t * 128 : +128] <- s, oob=skip
"""
# a type error: `M` is declared nowhere
TYPE_ERROR = CLEAN.replace("cdiv(N, 128)", "cdiv(M, 128)")
JSON_FIELDS = {"code", "slug", "severity", "message", "file", "line", "column", "end_line", "end_column",
               "plugin", "notes", "help"}  # fmt: skip


@pytest.fixture(autouse=True)
def _fresh_registry():
    plugins.reset()
    yield
    plugins.reset()


def _write(tmp_path: Path, text: str, name: str = "k.cake") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_clean_file_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["verify", str(_write(tmp_path, CLEAN)), "--target", "h200"]) == 0
    out = capsys.readouterr().out
    assert "clean on `h200` (sm_90a)" in out and "1 kernel(s), 1 specialization(s)" in out


def test_clean_json_is_an_empty_list(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["verify", str(_write(tmp_path, CLEAN)), "--target", "a100", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_errors_exit_1_and_render_like_rustc(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = _write(tmp_path, TYPE_ERROR)
    assert cli.main(["verify", str(path), "--target", "h200"]) == 1
    out = capsys.readouterr().out
    assert "error[CK002]: `M` is not declared" in out
    assert f"--> {path}:3:" in out
    assert "3 |   grid (t) over (cdiv(M, 128))" in out
    assert "1 error emitted" in out


def test_json_has_the_contract_fields(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = _write(tmp_path, TYPE_ERROR)
    assert cli.main(["verify", str(path), "--target", "h200", "--json"]) == 1
    (d,) = json.loads(capsys.readouterr().out)
    assert JSON_FIELDS <= set(d)
    assert (d["code"], d["slug"], d["severity"], d["file"], d["line"], d["plugin"]) == (
        "CK002", "unknown-name", "error", str(path), 3, "cake-core",
    )  # fmt: skip
    assert d["column"] < d["end_column"] and d["end_line"] == 3
    assert isinstance(d["notes"], list)


def test_a_syntax_error_is_ck001_and_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = _write(tmp_path, CLEAN.replace("role all warps 0..4:", "role all warps 0..4"))
    assert cli.main(["verify", str(path), "--target", "h200", "--json"]) == 1
    (d,) = json.loads(capsys.readouterr().out)
    assert d["code"] == "CK001" and d["line"] == 5


def test_a_rule_finding_carries_its_pack(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """With the installed rule pack: an unmasked tail store is CR108 from cake-rules-core."""
    if "CR108" not in plugins.registry().names("rules"):
        pytest.skip("cake-rules-core is not installed")
    path = _write(tmp_path, CLEAN.replace("<- s, oob=skip", "<- s"))
    assert cli.main(["verify", str(path), "--target", "h200", "--json"]) == 1
    (d,) = json.loads(capsys.readouterr().out)
    assert (d["code"], d["plugin"], d["line"]) == ("CR108", "cake-rules-core", 8)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["verify", str(NAIVE), "--target", "z80"], "error: unknown target `z80` (known: "),
        (["verify", "/no/such/file.cake", "--target", "h200"], "error: no such file: /no/such/file.cake"),
        (["verify", str(NAIVE)], "the following arguments are required: --target"),
        # the known codes are listed sorted: an installed pack may sort before the core's (CA101 < CK001)
        (["explain", "XX999"], "error: unknown diagnostic code `XX999` (known: "),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str, capsys: pytest.CaptureFixture) -> None:
    """In process (the console script's own path is tests/cli/test_errors.py's): an exception would fail it."""
    assert cli.main(args) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in captured.err
    if args[0] == "explain":
        assert " CK001, " in lines[0] or "(known: CK001, " in lines[0]


def test_a_directory_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["verify", str(tmp_path), "--target", "h200"]) == 2
    assert capsys.readouterr().err.startswith("error: cannot read")


@pytest.mark.parametrize("target", ["h200", "h100", "a100"])
def test_the_naive_schedule_verifies_clean(target: str, capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["verify", str(NAIVE), "--target", target]) == 0


def test_explain_a_core_code(capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["explain", "ck006"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("CK006 (type-mismatch, error, cake-core): element types or shapes")
    assert "## Example" in out


def test_explain_a_registered_rule(capsys: pytest.CaptureFixture, registry_with) -> None:
    from .test_runner import EveryFill

    plugins._REGISTRY = registry_with(EveryFill())  # the process-wide registry, with a test rule
    assert cli.main(["explain", "TS901"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("TS901 (every-fill, error, (in-process) 0): flags fills")
    assert "## What it does" in out and "## Use instead" in out


def test_explain_a_semantics_code_when_present(capsys: pytest.CaptureFixture) -> None:
    codes = pytest.importorskip("cake_core.semantics.codes")
    first = min(c.code for c in vars(codes).values() if hasattr(c, "code") and str(c.code).startswith("CS"))
    assert cli.main(["explain", first.lower()]) == 0
    assert capsys.readouterr().out.startswith(f"{first} (")
