"""The interpreter gate (:mod:`cake_core.verify.interp_gate`): the shapes it samples (ragged in every
tiled dimension; every ring wrapping on one CTA), the findings it reports as diagnostics, and the wrong
answers the problem's oracle finds."""

from __future__ import annotations

from pathlib import Path

import pytest
from cake_core import plugins
from cake_core.errors import CakeUserError
from cake_core.ir.parser import parse
from cake_core.verify import interp_gate

ROOT = Path(__file__).resolve().parents[2]
SCHEDULES = ROOT / "cake_core" / "problems" / "kmeans_assign" / "schedules"
SEMANTIC = ROOT / "tests" / "corpus_semantic"
KMEANS = sorted(SCHEDULES.rglob("*.cake"))


@pytest.fixture(scope="module")
def reg():
    plugins.reset()
    yield plugins.registry()
    plugins.reset()


def _module(path: Path):
    return parse(path.read_text(), str(path))


@pytest.mark.parametrize("path", KMEANS, ids=lambda p: str(p.relative_to(SCHEDULES)))
def test_the_sample_is_ragged_and_wraps_every_ring(path: Path, reg) -> None:
    problem = reg.get("problems", "kmeans-assign")
    checked = interp_gate.interp_checked(_module(path), reg)
    ragged, wrap = interp_gate.sample(problem, checked)
    for run in (ragged, wrap):
        shape = dict(run.shape)
        t = interp_gate.tiling(checked, {"D": shape["D"]})
        tiled = {k: v for k, v in t.tiles.items() if k in shape and v > 1}
        assert {"N", "K"} <= set(tiled)  # the rows and the centroids are tiled in every schedule
        for name, tile in tiled.items():
            assert shape[name] % tile != 0 and shape[name] > tile, (run, name, tile)  # floor != ceil, two tiles+
    assert (ragged.sms, ragged.policy, dict(ragged.shape)["B"]) == (2, "sequential", 2)
    assert (wrap.sms, wrap.policy) == (1, "random")  # one CTA walks every tile: persistent loops loop
    t = interp_gate.tiling(checked, {"D": dict(wrap.shape)["D"]})
    for name, tile in t.tiles.items():
        if tile > 1 and name in dict(wrap.shape):
            assert dict(wrap.shape)[name] // tile >= t.depth  # more tiles than any ring has stages


def test_the_wrap_run_takes_the_specialization_with_the_shallowest_rings(reg) -> None:
    problem = reg.get("problems", "kmeans-assign")
    checked = interp_gate.interp_checked(_module(SCHEDULES / "hopper_overlap.cake"), reg)
    depths = {d: interp_gate.tiling(checked, {"D": d}).depth for d in (64, 128, 256)}
    assert depths == {64: 8, 128: 4, 256: 2}  # S = 512 / D
    _, wrap = interp_gate.sample(problem, checked)
    assert dict(wrap.shape) == {"B": 1, "N": 257, "K": 257, "D": 256}


def test_the_sample_keeps_to_the_kernels_domain(reg) -> None:
    # `K % 4 == 0`: K is snapped up to a multiple of 4, and stays ragged
    problem = reg.get("problems", "kmeans-assign")
    checked = interp_gate.interp_checked(_module(SEMANTIC / "hopper_rows_swapped" / "right.cake"), reg)
    for run in interp_gate.sample(problem, checked):
        k = dict(run.shape)["K"]
        assert k % 4 == 0 and k % 128 != 0, run


@pytest.mark.parametrize("path", KMEANS, ids=lambda p: str(p.relative_to(SCHEDULES)))
def test_every_committed_schedule_passes_the_gate(path: Path, reg) -> None:
    report = interp_gate.run_gate(reg.get("problems", "kmeans-assign"), _module(path), reg)
    assert report.ok, [d.message for d in report.diagnostics]
    assert len(report.runs) == len(report.run_seconds) == 2 and report.seconds >= sum(report.run_seconds)


def test_a_race_is_a_diagnostic_with_its_span_and_the_run_that_saw_it(reg) -> None:
    path = SEMANTIC / "ampere_wrong_stage" / "wrong.cake"
    report = interp_gate.run_gate(reg.get("problems", "kmeans-assign"), _module(path), reg)
    codes = [d.code for d in report.diagnostics]
    assert codes[0] == "CS003" and len(codes) == len(set(codes))  # each finding once over both runs
    race = report.diagnostics[0]
    assert race.primary.file == str(path) and race.primary.line == 63  # `ldmatrix bt <- cs[(i + 1) % S]`
    assert race.secondary and race.secondary[0].loc.line == 55  # the copy still in flight
    assert any(n.startswith("interpreter run at B=2, N=129, K=129, D=64, T=bf16, SMS=2") for n in race.notes)


def test_a_wrong_answer_is_cs009_at_the_program(reg) -> None:
    path = SEMANTIC / "naive_argmin_base" / "wrong.cake"
    report = interp_gate.run_gate(reg.get("problems", "kmeans-assign"), _module(path), reg)
    (d,) = report.diagnostics
    assert (d.code, d.slug, d.primary.line) == ("CS009", "wrong-answer", 8)
    assert d.message.startswith("the problem's oracle rejects `out` computed by `kmeans_assign`: FAILED: ")
    assert d.notes == ("seen in the interpreter at B=2, N=129, K=129, D=64, T=bf16, SMS=2, sequential",)


def test_the_right_twins_pass_the_gate(reg) -> None:
    for case in sorted(SEMANTIC.iterdir()):
        report = interp_gate.run_gate(reg.get("problems", "kmeans-assign"), _module(case / "right.cake"), reg)
        assert report.ok, (case.name, [d.message for d in report.diagnostics])


@pytest.mark.parametrize(
    ("problem", "says"),
    [("knn", "it has no parameter `q`"), ("kmeans-update", "no parameter `assign`")],
)
def test_a_program_of_another_problem_is_a_user_error(problem: str, says: str, reg) -> None:
    with pytest.raises(CakeUserError, match=says):
        interp_gate.run_gate(reg.get("problems", problem), _module(SCHEDULES / "naive.cake"), reg)


def test_a_parameter_of_another_shape_is_a_user_error(reg) -> None:
    text = (SCHEDULES / "naive.cake").read_text().replace("out: global i32[B, N])", "out: global i32[N, B])", 1)
    with pytest.raises(CakeUserError, match=r"parameter `out` is not shaped \[B, N\]"):
        interp_gate.run_gate(reg.get("problems", "kmeans-assign"), parse(text, "swapped.cake"), reg)
