"""Bad output paths and malformed ``--shape`` values are the user's mistakes: one line on stderr, exit 2,
before any work is done — never an internal error (exit 3) and never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from cake_core import cli
from cake_core.problems import kmeans_assign

HOPPER = str(Path(kmeans_assign.__file__).parent / "schedules" / "hopper.cake")


@pytest.fixture
def places(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "afile").write_text("x")
    (tmp_path / "adir").mkdir()
    return {"file": str(tmp_path / "afile"), "dir": str(tmp_path / "adir"), "missing": str(tmp_path / "no" / "dir")}


CASES = {
    "lower -o under a file": (["lower", HOPPER, "--target", "h200", "--shape", "D=128,T=bf16", "-o", "{file}/x.cu"],
                              "is a file, not a directory"),
    "lower -o a directory": (["lower", HOPPER, "--target", "h200", "--shape", "D=128,T=bf16", "-o", "{dir}"],
                             "it is a directory"),
    "lower -o in a missing directory": (["lower", HOPPER, "--target", "h200", "-o", "{missing}/x.cu"],
                                        "no such directory"),
    "export -o a file": (["export", HOPPER, "--target", "h200", "-o", "{file}"], "it is a file"),
    "export -o under a file": (["export", HOPPER, "--target", "h200", "-o", "{file}/sub"], "is a file, not a directory"),
    "run --out a file": (["run", "kmeans-assign", "--target", "h200", "--out", "{file}"], "it is a file"),
    "run --out under a file": (["run", "kmeans-assign", "--target", "h200", "--out", "{file}/x"],
                               "is a file, not a directory"),
    "shape without a value": (["lower", HOPPER, "--target", "h200", "--shape", "D"], "write NAME=VALUE pairs"),
    "shape without a name": (["lower", HOPPER, "--target", "h200", "--shape", "=3"], "write NAME=VALUE pairs"),
    "shape with a bad value": (["compile", HOPPER, "--target", "h200", "--shape", "D=12x"], "neither an integer"),
    "shape given twice": (["lower", HOPPER, "--target", "h200", "--shape", "D=128,D=64"], "given twice"),
    "bench shape not a size": (["bench", HOPPER, "--problem", "kmeans-assign", "--shape", "B=x"],
                               "not an integer size"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_path_or_shape_is_one_line_and_exit_2(case: str, places, capsys: pytest.CaptureFixture) -> None:
    argv, words = CASES[case]
    assert cli.main([a.format(**places) for a in argv]) == 2
    err = capsys.readouterr().err
    (line,) = err.splitlines()
    assert words in line and "Traceback" not in err
