"""``cake verify FILE --target T --problem P``: the static rules, then the interpreter gate with the
problem's oracle; findings as diagnostics (human and ``--json``), exit codes, and a bad ``--problem``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cake_core import cli

from .conftest import SCHEDULES, one_error_line

SEMANTIC = Path(__file__).resolve().parents[1] / "corpus_semantic"
FINDS = re.compile(r"#\s*finds:\s*(.*)")


def _verify(capsys: pytest.CaptureFixture[str], path: Path, *args: str) -> tuple[int, str]:
    rc = cli.main(["verify", str(path), *args])
    return rc, capsys.readouterr().out


@pytest.mark.parametrize(
    ("name", "target"),
    [("naive", "h200"), ("ampere", "h200"), ("hopper", "h200"), ("hopper_overlap", "h200"),
     ("explicit/hopper", "h200"), ("explicit/hopper_overlap", "h200"), ("ampere", "a100"), ("naive", "a100")],
)  # fmt: skip
def test_every_committed_schedule_is_clean_in_the_interpreter(name: str, target: str, capsys) -> None:
    path = SCHEDULES / f"{name}.cake"
    rc, out = _verify(capsys, path, "--target", target, "--problem", "kmeans-assign")
    assert rc == 0, out
    static, gate = out.splitlines()
    assert static.startswith(f"{path}: clean on `{target}`")
    assert gate.startswith(f"{path}: clean in the interpreter with the oracle of `kmeans-assign` (")
    assert "SMS=2, sequential" in gate and "SMS=1, random schedule, seed 1" in gate


@pytest.mark.parametrize("case", sorted(p.name for p in SEMANTIC.iterdir()))
def test_a_planted_bug_the_static_rules_miss_is_caught_with_the_problem(case: str, capsys) -> None:
    wrong = SEMANTIC / case / "wrong.cake"
    refused = re.search(r"^# refused: (.*)$", wrong.read_text(), re.M)
    rc, out = _verify(capsys, wrong, "--target", "h200", "--json")
    if refused:  # a rule added since refuses it: the gate then does not need to run
        assert rc == 1 and {d["code"] for d in json.loads(out)} == set(refused.group(1).split())
        return
    assert rc == 0 and json.loads(out) == []  # the static rules let it through
    rc, out = _verify(capsys, wrong, "--target", "h200", "--problem", "kmeans-assign", "--json")
    assert rc == 1
    found = json.loads(out)
    codes = [d["code"] for d in found]
    expected = FINDS.search(wrong.read_text()).group(1).split()  # type: ignore[union-attr]
    assert set(codes) & ({c for c in expected if c.startswith("CS")} | {"CS009"}), codes
    for d in found:
        assert d["severity"] == "error" and d["file"] == str(wrong) and d["line"] > 0 and d["slug"]
    rc, out = _verify(capsys, SEMANTIC / case / "right.cake", "--target", "h200", "--problem", "kmeans-assign")
    assert rc == 0, out


def test_the_human_form_renders_the_finding_at_its_line(capsys) -> None:
    path = SEMANTIC / "naive_argmin_base" / "wrong.cake"
    rc, out = _verify(capsys, path, "--target", "h200", "--problem", "kmeans-assign")
    assert rc == 1
    assert out.startswith("error[CS009]: the problem's oracle rejects `out` computed by `kmeans_assign`")
    assert f"--> {path}:8:1" in out and "computes a wrong answer" in out
    assert "= note: seen in the interpreter at B=2, N=129, K=129, D=64, T=bf16, SMS=2, sequential" in out


def test_the_interpreter_runs_only_after_the_static_rules_pass(capsys) -> None:
    path = SCHEDULES / "hopper.cake"
    rc, out = _verify(capsys, path, "--target", "a100", "--problem", "kmeans-assign")
    assert rc == 1 and "error[CR101]" in out
    said = f"{path}: the interpreter did not run for `kmeans-assign`: the static rules found errors"
    assert out.rstrip().endswith(said)
    rc, out = _verify(capsys, path, "--target", "a100", "--problem", "kmeans-assign", "--json")
    assert rc == 1 and {d["code"] for d in json.loads(out)} == {"CR101", "CR102"}


def test_cs009_has_an_explain_page(capsys) -> None:
    assert cli.main(["explain", "CS009"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("CS009 (wrong-answer, error, cake-core): the problem's oracle rejects what the run computed")
    assert "## What it checks" in out and "## Use instead" in out


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--problem", "no-such-problem"], "unknown problem `no-such-problem` (known: "),
        (["--problem", "knn"], "program `kmeans_assign` does not compute problem `knn`: it has no parameter `q`"),
        (["--problem"], "--problem"),
    ],
)
def test_a_bad_problem_is_one_line_and_exit_2(args: list[str], says: str, capsys) -> None:
    """In process (the console script's path for bad input is test_errors.py's)."""
    assert cli.main(["verify", str(SCHEDULES / "naive.cake"), "--target", "h200", *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert says in one_error_line(captured.err)


def test_a_planted_floor_division_is_caught_only_on_a_ragged_shape(tmp_path: Path, capsys) -> None:
    # the centroid tiles counted with floor division: the last, partial tile is never compared, which only
    # a K that is not a multiple of the tile shows
    text = (SCHEDULES / "ampere.cake").read_text()
    planted = tmp_path / "floor_cols.cake"
    planted.write_text(text.replace("let NT = cdiv(K, BN) * KC", "let NT = K / BN * KC", 1))
    assert planted.read_text() != text
    rc, out = _verify(capsys, planted, "--target", "h200")
    assert rc == 0 and "clean on `h200`" in out
    rc, out = _verify(capsys, planted, "--target", "h200", "--problem", "kmeans-assign", "--json")
    assert rc == 1
    (d,) = json.loads(out)
    assert (d["code"], d["slug"]) == ("CS009", "wrong-answer")
    assert d["message"].startswith("the problem's oracle rejects `out` computed by `kmeans_assign`: FAILED: ")
