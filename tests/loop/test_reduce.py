"""The reducer (``cake_core.loop.reduce``) and ``cake reduce``: planted bugs from the rule corpora and
the Hopper schedule shrink to strictly smaller modules that still parse, type-check and fire the same
code; the answer always satisfies the predicate; the deadline holds."""

from __future__ import annotations

import time
import zlib
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cake_core import cli, plugins
from cake_core.diagnostics.diagnostic import DiagnosticError
from cake_core.ir.parser import parse
from cake_core.ir.printer import print_module
from cake_core.loop.reduce import NotReproduced, reduce, size
from cake_core.loop.reproduces import gate_reports, predicate_for, verifier_reports
from cake_core.verify.expectations import named_target
from cake_core.verify.runner import check_registered, verify_source

ROOT = Path(__file__).resolve().parents[2]
RULES_CORE = ROOT / "plugins" / "verifier_rules" / "cake-rules-core" / "tests"
CORPORA = sorted((ROOT / "plugins" / "verifier_rules").glob("*/tests/corpus"))
#: the first planted bug of each rule
PLANTED = [sorted(d.glob("invalid_*.cake"))[0] for c in CORPORA for d in sorted(c.iterdir()) if d.is_dir()]
HOPPER = ROOT / "cake_core" / "problems" / "kmeans_assign" / "schedules" / "explicit" / "hopper.cake"
SEMANTIC = ROOT / "tests" / "corpus_semantic"
#: planted in the explicit Hopper schedule, as the protocol rules' tests plant them: (old, new, code)
HOPPER_BUGS = {
    "tx-bytes": ("bytes=BN * D * 2 + BN * 4", "bytes=BN * D * 2", "CR112"),
    "consumer-offset": ("mbarrier.wait cfull[s], parity=(g / S) % 2",
                        "mbarrier.wait cfull[s], parity=(g / S + 1) % 2", "CR113"),
    "producer-offset": ("mbarrier.wait cempty[s], parity=(g / S + 1) % 2",
                        "mbarrier.wait cempty[s], parity=(g / S) % 2", "CR114"),
}  # fmt: skip


@pytest.fixture(scope="module")
def registry() -> plugins.Registry:
    """Everything installed, and the fixture primitives the core rules' corpus uses."""
    fixture = plugins.module_from_file("cake_reduce_test_primitives", RULES_CORE / "fixture_primitives.py")
    return plugins.load(extra=[fixture])


def _errors(text: str, target, registry) -> set[str]:
    return {d.code for d in verify_source(text, "t.cake", target, registry).diagnostics if d.is_error}


def _assert_reproduces(original: str, reduced: str, code: str, target, registry) -> None:
    """``reduced`` parses, type-checks, fires ``code`` with no error code ``original`` lacks, and is
    strictly smaller than ``original`` printed canonically."""
    report = verify_source(reduced, "reduced.cake", target, registry)
    assert code in {d.code for d in report.diagnostics}, report.diagnostics
    assert _errors(reduced, target, registry) <= _errors(original, target, registry)
    assert check_registered(parse(reduced), target, registry).ok
    assert size(reduced) < size(print_module(parse(original)))


@pytest.mark.parametrize("path", PLANTED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_planted_bug_of_the_corpus_shrinks_and_still_fires(path: Path, registry) -> None:
    text, code = path.read_text(), path.parent.name
    target = registry.get("targets", named_target(text))
    result = reduce(text, verifier_reports(code, target, registry, baseline=text), deadline_s=60)
    assert result.method == "structural" and not result.hit_deadline and result.errors == 0 and result.smaller
    _assert_reproduces(text, result.text, code, target, registry)
    assert (result.lines_before, result.lines_after) == (size(text)[0], size(result.text)[0])


@pytest.mark.parametrize("bug", sorted(HOPPER_BUGS))
def test_a_planted_bug_in_the_hopper_schedule_shrinks_to_under_half(bug: str, registry) -> None:
    old, new, code = HOPPER_BUGS[bug]
    text = HOPPER.read_text()
    assert old in text
    mutant = text.replace(old, new)
    target = registry.get("targets", "h200")
    result = reduce(mutant, verifier_reports(code, target, registry, baseline=mutant), deadline_s=120)
    assert not result.hit_deadline
    _assert_reproduces(mutant, result.text, code, target, registry)
    canonical = size(print_module(parse(mutant)))[0]
    assert result.lines_after * 2 <= canonical, result.text
    module = parse(result.text)
    assert module.program is None and len(module.kernels) == 1  # the norms kernel and the program went


def test_the_gate_predicate_shrinks_a_race_the_interpreter_finds(registry) -> None:
    wrong = (SEMANTIC / "ampere_wrong_stage" / "wrong.cake").read_text()
    problem = registry.get("problems", "kmeans-assign")
    still = gate_reports("CS003", problem, registry, baseline=wrong)
    result = reduce(wrong, still, deadline_s=10)
    assert result.errors == 0 and size(result.text) < size(print_module(parse(wrong)))
    assert gate_reports("CS003", problem, registry, baseline=wrong)(result.text)
    assert "store out[" in result.text  # a reproducer keeps writing the problem's outputs
    # with a target the static rules come first, as in `cake verify --problem`: they refuse this one
    assert not gate_reports("CS003", problem, registry, target=registry.get("targets", "h200"))(wrong)


def test_the_predicate_for_a_code_is_the_verifier_s_else_the_gate_s(registry) -> None:
    h200, problem = registry.get("targets", "h200"), registry.get("problems", "kmeans-assign")
    wrong = (SEMANTIC / "naive_argmin_base" / "wrong.cake").read_text()  # clean statically, wrong in the gate
    assert predicate_for(wrong, "CS009", h200, registry) is None
    still = predicate_for(wrong, "CS009", h200, registry, problem)
    assert still is not None and still(wrong)
    assert not still(print_module(parse(wrong)).replace("launch assign(x, c, c_sq, out)\n", ""))  # no store
    planted = SMALL.read_text()
    assert predicate_for(planted, "CR110", h200, registry, problem)(planted)  # type: ignore[misc]


def test_text_that_does_not_parse_is_reduced_line_by_line(registry) -> None:
    text = HOPPER.read_text().replace("  cta warps 4 + 4 * WG occupancy 1\n", "  cta warps 4 + * WG occupancy 1\n")
    target = registry.get("targets", "h200")
    result = reduce(text, verifier_reports("CK001", target, registry, baseline=text), deadline_s=30)
    assert result.method == "lines" and result.lines_after < result.lines_before
    assert "CK001" in {d.code for d in verify_source(result.text, "r.cake", target, registry).diagnostics}
    assert "cta warps 4 + * WG" in result.text


def _words(path: Path) -> list[str]:
    return sorted(set(print_module(parse(path.read_text())).split()))


SMALL = RULES_CORE / "corpus" / "CR110" / "invalid_increase_beyond_release.cake"


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keep=st.lists(st.sampled_from(_words(SMALL)), max_size=4), salt=st.integers(0, 2**16))
def test_the_answer_always_satisfies_the_predicate(keep: list[str], salt: int) -> None:
    text = SMALL.read_text()

    def still(t: str) -> bool:  # some words kept, and an arbitrary verdict on every other text
        return all(w in t for w in keep) and (t == text or zlib.crc32(f"{salt}{t}".encode()) % 3 != 0)

    result = reduce(text, still, deadline_s=10)
    assert still(result.text)
    assert size(result.text) <= size(text) and (result.text == text) == (result.kept == 0)


def test_every_cake_file_of_the_repository_goes_through_every_pass() -> None:
    """An arbitrary verdict on every text that parses (half of them hold): each pass meets every
    construct the repository's files use, and the answer still satisfies the predicate."""
    files = sorted(p for top in ("cake_core", "plugins", "tests") for p in (ROOT / top).rglob("*.cake"))
    assert len(files) > 100
    for path in files:
        text = path.read_text()

        def still(t: str) -> bool:
            try:
                parse(t)
            except DiagnosticError:
                return False
            return t == text or zlib.crc32(t.encode()) % 2 == 0

        result = reduce(text, still, deadline_s=20)
        assert still(result.text) and result.errors == 0 and not result.hit_deadline, path


def test_no_test_begins_after_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a clock that only the predicate moves (each call takes 0.02 s of it): the calls begin at 0,
    0.02, ..., 0.28, and none at the deadline, 0.3."""
    from cake_core.loop import reduce as module

    clock = [0.0]
    monkeypatch.setattr(module, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    began: list[float] = []

    def slow(t: str) -> bool:
        began.append(clock[0])
        clock[0] += 0.02
        return "mbarrier.wait" in t

    result = module.reduce(HOPPER.read_text(), slow, deadline_s=0.3)
    assert result.hit_deadline and "mbarrier.wait" in result.text
    assert result.tests == len(began) == 15 and max(began) < 0.3
    assert result.seconds == pytest.approx(0.3)


def test_the_deadline_holds_with_the_verifier(registry) -> None:
    old, new, code = HOPPER_BUGS["consumer-offset"]
    mutant = HOPPER.read_text().replace(old, new)
    still = verifier_reports(code, registry.get("targets", "h200"), registry, baseline=mutant)
    began = time.monotonic()
    result = reduce(mutant, still, deadline_s=1.0)
    assert result.hit_deadline and still(result.text) and result.smaller
    assert time.monotonic() - began < 1.0 + 2.0  # one verification of the schedule takes well under 2 s


def test_a_predicate_that_does_not_hold_or_raises() -> None:
    text = SMALL.read_text()
    with pytest.raises(NotReproduced):
        reduce(text, lambda t: False, deadline_s=5)

    def fragile(t: str) -> bool:
        if t != text:
            raise RuntimeError("cannot judge")
        return True

    result = reduce(text, fragile, deadline_s=5)
    assert result.text == text and result.kept == 0 and result.errors >= 1
    assert result.first_error == "RuntimeError: cannot judge"


# ---------------------------------------------------------------------------------------------------
# cake reduce
# ---------------------------------------------------------------------------------------------------


def test_cake_reduce_writes_a_smaller_file_that_cake_verify_refuses(tmp_path: Path, capsys) -> None:
    old, new, code = HOPPER_BUGS["tx-bytes"]
    mutant = tmp_path / "mutant.cake"
    mutant.write_text(HOPPER.read_text().replace(old, new))
    out = tmp_path / "min.cake"
    assert cli.main(["reduce", str(mutant), "--target", "h200", "--code", code.lower(), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert err.startswith(f"{mutant}: {code}: 87 -> ") and "(structural)" in err
    assert len(out.read_text().splitlines()) < 40
    assert cli.main(["verify", str(out), "--target", "h200"]) == 1
    assert f"error[{code}]" in capsys.readouterr().out


def test_cake_reduce_to_stdout(capsys) -> None:
    path = SMALL
    assert cli.main(["reduce", str(path), "--target", "h200", "--code", "CR110", "--deadline", "20"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("kernel budgets(") and size(out) < size(path.read_text())


@pytest.mark.parametrize(
    ("argv", "status", "words"),
    [
        (["--code", "CR113"], 1, "CR113 does not fire: verifying"),
        (["--code", "CS009", "--problem", "kmeans-assign"], 1, "or running it in the interpreter"),
        (["--code", "XX999"], 2, "unknown diagnostic code `XX999`"),
        (["--code", "CR110", "--deadline", "0"], 2, "--deadline must be a positive number"),
        (["--code", "CR110", "-o", "{tmp}/no/such/x.cake"], 2, "no such directory"),
        (["--code", "CR110", "--problem", "nope"], 2, "unknown problem `nope`"),
    ],
)  # fmt: skip
def test_cake_reduce_refuses_in_one_line(argv: list[str], status: int, words: str, tmp_path: Path, capsys) -> None:
    args = ["reduce", str(SMALL), "--target", "h200", *[a.format(tmp=tmp_path) for a in argv]]
    assert cli.main(args) == status
    (line,) = capsys.readouterr().err.splitlines()
    assert words in line


def test_cake_reduce_of_a_missing_file(tmp_path: Path, capsys) -> None:
    assert cli.main(["reduce", str(tmp_path / "none.cake"), "--target", "h200", "--code", "CR110"]) == 2
    assert "no such file" in capsys.readouterr().err
