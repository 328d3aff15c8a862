"""Baselines without a GPU: the record a problem names, and ``bench_baseline`` through a real worker
process whose backend runs baselines with numpy (numpy_baseline.NumpyGpu), or runs none (ZeroGpu)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from cake_core import plugins
from cake_core.errors import CakeUserError
from cake_core.loop.baseline import bench_baseline
from cake_core.problems.kmeans_assign.baseline import FLASH_KMEANS
from cake_core.problems.kmeans_assign.problem import KMEANS_ASSIGN, KMeansAssign
from cake_core.problems.problem import Baseline, baseline_of
from cake_core.runtime.plan import Timing
from cake_core.runtime.worker import GpuRunner

HERE = Path(__file__).resolve().parent
CELL = {"B": 2, "N": 300, "K": 37, "D": 64}
TIMING = Timing(warmup=1, reps=4)


def _problem_naming_none() -> KMeansAssign:
    return type("KMeansAssignNone", (KMeansAssign,), {"baseline": None})()


def _problem(entry: str, requires: tuple[str, ...] = ("numpy",)) -> KMeansAssign:
    """kmeans-assign naming a numpy baseline ``numpy_baseline:ENTRY``."""
    baseline = Baseline("numpy-" + entry, "kmeans-assign in numpy", f"numpy_baseline:{entry}", requires)
    return type("KMeansAssignNumpy", (KMeansAssign,), {"baseline": baseline})()


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(HERE))  # spawned workers inherit it
    with GpuRunner(backend="numpy_baseline:NumpyGpu", check_driver=False) as r:
        yield r


class _NoRunner:
    """A runner that must not be used."""

    def __getattr__(self, name: str):
        raise AssertionError(f"the runner was used ({name})")


def test_kmeans_assign_names_flash_kmeans() -> None:
    b = baseline_of(plugins.registry().get("problems", "kmeans-assign"))
    assert b is FLASH_KMEANS and b.name == "flash-kmeans" and "x||^2 given" in b.summary
    assert b.entry == "cake_core.problems.kmeans_assign.baseline:flash_kmeans_x_sq_given"
    assert b.requires == ("torch", "triton", "flash_kmeans")


class _Old:
    """A problem written before the member."""

    name = "old"


def test_problems_without_a_baseline() -> None:
    assert baseline_of(_Old()) is None
    assert baseline_of(_problem_naming_none()) is None

    class Bad(KMeansAssign):
        baseline = "flash-kmeans"

    with pytest.raises(CakeUserError, match="type str"):
        baseline_of(Bad())


def test_baseline_record_validates() -> None:
    with pytest.raises(ValueError, match="not `package.module:function`"):
        Baseline("b", "s", "no_colon")
    with pytest.raises(ValueError, match="top-level module names"):
        Baseline("b", "s", "m:f", ("flash-kmeans",))
    assert Baseline("b", "s", "m:f", ("numpy", "cake_no_such_module")).missing() == ("cake_no_such_module",)


def test_the_core_does_not_import_torch() -> None:
    """Nor does loading every registered problem's baseline entry (their imports are in the calls)."""
    code = ("import sys, cake_core.loop.baseline, cake_core.problems.kmeans_assign, cake_core.runtime.worker; "
            "from cake_core import plugins; from cake_core.problems.problem import baseline_of; "
            "from cake_core.runtime.protocol import load_object; reg = plugins.registry(); "
            "bs = [baseline_of(reg.get('problems', n)) for n in reg.names('problems')]; "
            "entries = [load_object(b.entry) for b in bs if b is not None]; "
            "assert len(entries) >= 5 and all(map(callable, entries)), entries; "
            "assert not {'torch', 'triton', 'flash_kmeans'} & set(sys.modules)")  # fmt: skip
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_baseline_through_the_worker(runner: GpuRunner) -> None:
    m = bench_baseline(_problem("nearest"), CELL, "bf16", runner, seed=3, run=2, timing=TIMING, commit="c0",
                       target="h200")  # fmt: skip
    assert (m.status, m.correct, m.error) == ("ok", True, None)
    assert m.impl == "baseline:numpy-nearest" and m.run == 2 and m.commit == "c0" and m.target == "h200"
    assert m.gpu == "Fake GPU" and len(m.samples) == TIMING.reps and m.median_ms is not None and m.median_ms > 0
    assert [line.split(":")[0] for line in m.oracle] == ["before timing", "after timing"]
    assert all("passed" in line for line in m.oracle)


def test_a_wrong_baseline_is_recorded_wrong(runner: GpuRunner) -> None:
    m = bench_baseline(_problem("off_by_one"), CELL, "f16", runner, timing=TIMING, commit="c0")
    assert m.status == "wrong" and not m.correct and m.median_ms is None
    assert "FAILED" in m.error and m.oracle[0].startswith("before timing: FAILED")
    assert runner.workers_started == 1


def test_a_baseline_wrong_only_when_timed_is_caught_after_timing(runner: GpuRunner) -> None:
    m = bench_baseline(_problem("right_once"), CELL, "bf16", runner, timing=TIMING, commit="c0")
    assert m.status == "wrong" and not m.correct and len(m.samples) == TIMING.reps  # the samples are kept
    assert m.oracle[0].startswith("before timing: passed") and m.oracle[1].startswith("after timing: FAILED")


@pytest.mark.parametrize("entry", ["lazy_import", "no_such_entry"])
def test_a_baseline_the_worker_cannot_import_is_unavailable(runner: GpuRunner, entry: str) -> None:
    m = bench_baseline(_problem(entry), CELL, "bf16", runner, timing=TIMING, commit="c0")
    assert m.status == "unavailable" and not m.correct and "\n" not in m.error
    assert ("cake_no_such_module" if entry == "lazy_import" else "no_such_entry") in m.error
    ok = bench_baseline(_problem("nearest"), CELL, "bf16", runner, timing=TIMING, commit="c0")
    assert ok.status == "ok" and runner.workers_started == 1  # the worker was kept


def test_unavailable_before_any_worker() -> None:
    m = bench_baseline(_problem("nearest", ("cake_no_such_module",)), CELL, "bf16", _NoRunner(), commit="c0")
    assert (m.status, m.impl) == ("unavailable", "baseline:numpy-nearest")
    assert m.error == "baseline `numpy-nearest` needs cake_no_such_module, not installed here"
    m = bench_baseline(_problem_naming_none(), CELL, "bf16", _NoRunner(), commit="c0")
    assert (m.status, m.impl, m.error) == ("unavailable", "baseline", "problem `kmeans-assign` names no baseline")
    if FLASH_KMEANS.missing():  # this machine lacks torch, triton or flash_kmeans
        m = bench_baseline(KMEANS_ASSIGN, CELL, "bf16", _NoRunner(), commit="c0")
        assert m.status == "unavailable" and m.impl == "baseline:flash-kmeans"
        assert m.error.startswith("baseline `flash-kmeans` needs ")


@pytest.mark.parametrize(("name", "hidden", "error"), [
    ("knn", ("torch",), "baseline `torch-fp32` needs torch, not installed here"),
    ("knn-ip", ("torch",), "baseline `torch-fp32` needs torch, not installed here"),
    ("kmeans-update", ("flash_kmeans",), "baseline `flash-kmeans` needs flash_kmeans, not installed here"),
    ("kmeans-update", ("torch", "triton"), "baseline `flash-kmeans` needs torch, triton, not installed here"),
])  # fmt: skip
def test_a_missing_module_of_a_baseline_is_reported_before_any_worker(
    monkeypatch: pytest.MonkeyPatch, name: str, hidden: tuple[str, ...], error: str
) -> None:
    """Whatever is installed here: the modules hidden are missing, the others are taken as found."""
    real = importlib.util.find_spec

    def find_spec(module: str, *args: object) -> object:
        return None if module in hidden else real(module, *args) or "found"  # type: ignore[arg-type]

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    problem = plugins.registry().get("problems", name)
    baseline = baseline_of(problem)
    assert baseline is not None and baseline.missing() == hidden
    m = bench_baseline(problem, problem.cells[1].shape, problem.cells[1].dtype, _NoRunner(), commit="c0")
    assert (m.status, m.impl, m.error, m.correct) == ("unavailable", f"baseline:{baseline.name}", error, False)


def test_a_backend_without_baselines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))
    with GpuRunner(backend="fake_gpu:ZeroGpu", check_driver=False) as runner:
        m = bench_baseline(_problem("nearest"), CELL, "bf16", runner, commit="c0")
    assert m.status == "unavailable" and "runs no baselines (ZeroGpu)" in m.error


def test_a_cell_outside_the_domain_is_a_user_error() -> None:
    with pytest.raises(CakeUserError, match="D=65"):
        bench_baseline(KMEANS_ASSIGN, {**CELL, "D": 65}, "bf16", _NoRunner(), commit="c0")
