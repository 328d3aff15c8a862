"""Bad input is one clear line on stderr and exit status 2, never a traceback; ``cake bench`` without an
NVIDIA driver says so in one line."""

from __future__ import annotations

import pytest
from cake_core import cli
from cake_core.runtime.device import driver_status

from .conftest import SCHEDULES, Cake, one_error_line

AMPERE = str(SCHEDULES / "ampere.cake")
UNKNOWN_TARGET = ("error: unknown target `z80` (known: a10, a100, ", "example-gpu", "h200")
UNKNOWN_PROBLEM = ("error: unknown problem `nope` (known: ", "kmeans-assign", "scale-rows")
NO_FILE = ("error: no such file: /no/such/file.cake",)

#: (arguments, fragments the one line must contain; the first is where it starts)
BAD_INPUT: dict[str, tuple[list[str], tuple[str, ...]]] = {
    "unknown-subcommand": (["frobnicate"], ("error: cake: argument COMMAND: invalid choice: 'frobnicate'",)),
    "unknown-target-compile": (["compile", AMPERE, "--target", "z80"], UNKNOWN_TARGET),
    "unknown-target-lower": (["lower", AMPERE, "--target", "z80"], UNKNOWN_TARGET),
    "unknown-target-export": (["export", AMPERE, "--target", "z80"], UNKNOWN_TARGET),
    "unknown-problem": (["bench", AMPERE, "--problem", "nope"], UNKNOWN_PROBLEM),
    "missing-file-compile": (["compile", "/no/such/file.cake", "--target", "h200"], NO_FILE),
    "missing-file-lower": (["lower", "/no/such/file.cake", "--target", "h200"], NO_FILE),
    "missing-file-export": (["export", "/no/such/file.cake", "--target", "h200"], NO_FILE),
    "missing-file-bench": (["bench", "/no/such/file.cake", "--problem", "kmeans-assign"], NO_FILE),
    "missing-option": (["compile", AMPERE], ("error: cake compile: the following arguments are required: --target",)),
    "bad-shape": (
        ["compile", AMPERE, "--target", "a100", "--shape", "D"],
        ("error: bad --shape item `D`: write NAME=VALUE pairs",),
    ),
    "bad-log-format": (
        ["--log-format", "xml", "targets"],
        ("error: cake: argument --log-format: invalid choice: 'xml'",),
    ),
}


def _assert_line(line: str, fragments: tuple[str, ...]) -> None:
    assert line.startswith(fragments[0]), line
    for fragment in fragments[1:]:
        assert fragment in line, (fragment, line)


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_bad_input_in_process(case: str, capsys: pytest.CaptureFixture[str]) -> None:
    args, fragments = BAD_INPUT[case]
    assert cli.main(args) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    _assert_line(one_error_line(captured.err), fragments)


@pytest.mark.parametrize(
    "case", ["unknown-subcommand", "unknown-target-compile", "unknown-problem", "missing-file-compile"]
)
def test_bad_input_from_the_console_script(cake: Cake, case: str) -> None:
    args, fragments = BAD_INPUT[case]
    done = cake(*args)
    assert done.returncode == 2 and done.stdout == ""
    _assert_line(one_error_line(done.stderr), fragments)


def test_bench_without_a_driver_is_one_line(cake: Cake) -> None:
    """``CAKE_NO_GPU=1`` makes any machine one without a usable driver."""
    done = cake("bench", AMPERE, "--problem", "kmeans-assign", env={"CAKE_NO_GPU": "1"})
    assert done.returncode == 2 and done.stdout == ""
    assert one_error_line(done.stderr) == "error: no NVIDIA driver here: GPU use disabled by CAKE_NO_GPU"


@pytest.mark.skipif(driver_status()[0], reason="this machine has an NVIDIA driver")
def test_bench_on_this_machine_without_a_driver(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", AMPERE, "--problem", "kmeans-assign"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert one_error_line(captured.err).startswith("error: no NVIDIA driver here: ")


def test_no_command_prints_usage_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: cake ") and "Traceback" not in err
