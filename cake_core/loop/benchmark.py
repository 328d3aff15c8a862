"""Stage 3: run a candidate on the GPU with evidence.

For one problem cell: the candidate's compiled specialization (built and compiled once, by the
:class:`~cake_core.pipeline.Candidate`), run on fresh random inputs with poisoned outputs and
check every output element with the problem's oracle; time it (warm-up, CUDA events, L2 flushed
between repetitions, median of many) on other fresh inputs and check that run's outputs again;
check the cubin's SASS for every instruction the schedule claims. Every outcome, failures included,
becomes a :class:`Measurement` record (the JSON format of ``bench/results/``).
"""

from __future__ import annotations

import datetime as _dt
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from cake_core.ir.model import CheckedModule
from cake_core.ir.types import DTYPE_NAMES
from cake_core.lower.program import build_plan
from cake_core.pipeline import Candidate
from cake_core.problems.problem import Problem
from cake_core.runtime.plan import Timing


@attrs.frozen
class Measurement:
    """One implementation at one cell in one run: the record format of ``bench/results/*.json``."""

    problem: str
    shape: dict[str, int]
    dtype: str
    gpu: str | None
    target: str
    date: str
    commit: str
    impl: str
    run: int
    median_ms: float | None
    samples: list[float]
    correct: bool
    status: str = "ok"  # ok, wrong, fault, timeout, error, compile-error
    error: str | None = None
    oracle: list[str] = attrs.field(factory=list)
    sass: dict[str, Any] | None = None
    resources: dict[str, Any] | None = None
    hash: str | None = None
    tflops: float | None = None


def git_commit(path: str | Path = ".") -> str:
    """The checked-out commit (with ``-dirty`` when the tree has changes), ``$CAKE_COMMIT`` where the
    tree carries no git metadata (a copy sent to a GPU machine), or ``unknown``."""
    import os

    if os.environ.get("CAKE_COMMIT"):
        return os.environ["CAKE_COMMIT"]
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=path, capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()  # fmt: skip
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=path,
                               capture_output=True, text=True, timeout=10).stdout.strip()  # fmt: skip
        return head + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def today() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def program_values(checked: CheckedModule, problem: Problem, shape: Mapping[str, int], dtype: str) -> dict:
    """Sizes and type variables of the program for a problem cell: type variables bind through the
    problem tensors of the same names."""
    values: dict[str, int | str] = dict(shape)
    decls = {t.name: t for t in problem.tensors}
    for p in checked.module.entry.params:
        if p.dtype not in DTYPE_NAMES and p.name in decls:
            values[p.dtype] = decls[p.name].dtype_for(dtype)
    return values


def bench_candidate(
    candidate: Candidate,
    problem: Problem,
    shape: Mapping[str, int],
    dtype: str,
    runner: Any,
    *,
    impl: str,
    timing: Timing | None = Timing(),
    seed: int = 0,
    run: int = 0,
    timeout_s: float = 120.0,
    commit: str | None = None,
) -> Measurement:
    """Check, time and check again one well-typed candidate at one cell; the measurement is also kept
    in ``candidate.measurements``. Never raises for a failing candidate: a compile error, fault,
    timeout or wrong answer is a record with its status."""
    base = dict(problem=problem.name, shape=dict(shape), dtype=dtype, target=candidate.target.name, date=today(),
                commit=commit or git_commit(), impl=impl, run=run)  # fmt: skip
    m = _measure(candidate, problem, shape, dtype, runner, base, timing, seed, timeout_s)
    candidate.measurements.append(m)
    return m


def _measure(candidate: Candidate, problem: Problem, shape: Mapping[str, int], dtype: str, runner: Any,
             base: dict[str, Any], timing: Timing | None, seed: int, timeout_s: float) -> Measurement:  # fmt: skip
    """:func:`bench_candidate`'s measurement; ``base`` holds the fields that say what was measured."""
    from cake_core.convert import unstructure
    from cake_core.runtime.nvrtc import CompileError
    from cake_core.runtime.sass import check_claims

    values = program_values(candidate.check(), problem, shape, dtype)
    spec = candidate.spec(values)
    try:
        compiled = candidate.compile(spec)
    except CompileError as exc:
        return Measurement(**base, gpu=None, median_ms=None, samples=[], correct=False, status="compile-error",
                           error=str(exc))  # fmt: skip
    lowered = candidate.build(spec)
    plan = build_plan(lowered, compiled.cubin, values)
    outputs = tuple(t.name for t in problem.tensors if t.role == "output")
    resources = unstructure(compiled.kernels)
    finding = check_claims(compiled.cubin, candidate.sass_claims())
    sass = {"claims": list(finding.claims), "present": list(finding.present), "missing": list(finding.missing),
            "counts": finding.counts, "available": finding.available, "tool": finding.tool_version,
            "error": finding.error}  # fmt: skip
    oracle: list[str] = []

    def fail(status: str, error: str | None, gpu: str | None) -> Measurement:
        return Measurement(**base, gpu=gpu, median_ms=None, samples=[], correct=False, status=status, error=error,
                           oracle=oracle, sass=sass, resources=resources, hash=lowered.hash)  # fmt: skip

    inputs = problem.make_inputs(shape, dtype, seed)
    first = runner.run(plan, inputs, fetch=outputs, timeout_s=timeout_s)
    if not first.ok:
        return fail(first.status, first.error, first.gpu_name)
    report = problem.check(inputs, first.outputs, shape, dtype, runner=runner)
    oracle.append("before timing: " + report.summary())
    if not report.passed:
        return fail("wrong", report.summary(), first.gpu_name)
    if timing is None:
        return Measurement(**base, gpu=first.gpu_name, median_ms=None, samples=[], correct=True, oracle=oracle,
                           sass=sass, resources=resources, hash=lowered.hash)  # fmt: skip
    inputs = problem.make_inputs(shape, dtype, seed + 1)
    timed = runner.run(plan, inputs, fetch=outputs, timing=timing, timeout_s=timeout_s)
    if not timed.ok:
        return fail(timed.status, timed.error, timed.gpu_name)
    report = problem.check(inputs, timed.outputs, shape, dtype, runner=runner)
    oracle.append("after timing: " + report.summary())
    correct = report.passed
    median = timed.median_ms
    tflops = problem.flops(shape) / (median * 1e-3) / 1e12 if median else None
    return Measurement(**base, gpu=timed.gpu_name, median_ms=median, samples=list(timed.samples_ms),
                       correct=correct, status="ok" if correct else "wrong", oracle=oracle, sass=sass,
                       resources=resources, hash=lowered.hash, tflops=tflops)  # fmt: skip
