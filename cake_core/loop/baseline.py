"""Stage 3's baseline: time a problem's baseline in the GPU worker the candidates run in, and judge it.

:func:`bench_baseline` is :func:`~cake_core.loop.benchmark.bench_candidate`'s counterpart for the
implementation a problem names as its baseline (:class:`~cake_core.problems.problem.Baseline`): the
same inputs (``make_inputs`` with the same seeds), the same worker and :class:`Timing` (warm-up, CUDA
events, L2 flushed, median of many; the baseline prepared and autotuned before), and the same oracle
before and after timing. So every speed-up a run reports is against a baseline measured in that run.

A problem that names no baseline, or whose baseline needs a module not installed here, gets a
:class:`~cake_core.loop.benchmark.Measurement` with status ``unavailable`` and the reason in one line
(``error``); so does a worker that cannot import it. Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cake_core.loop.benchmark import Measurement, git_commit, today
from cake_core.problems.problem import Problem, baseline_of, validate_cell
from cake_core.runtime.plan import TensorSpec, Timing
from cake_core.runtime.protocol import BaselineRequest

__all__ = ["bench_baseline"]


def bench_baseline(
    problem: Problem,
    shape: Mapping[str, int],
    dtype: str,
    runner: Any,
    *,
    seed: int = 0,
    run: int = 0,
    timing: Timing = Timing(),
    commit: str | None = None,
    target: str | None = None,
    timeout_s: float = 600.0,
) -> Measurement:
    """Check, time and check again the problem's baseline at one cell, in ``runner``'s worker.

    The record's ``impl`` is ``baseline:NAME`` (``baseline`` where the problem names none) and
    ``target`` is ``target`` as given (the run's target: the baseline is not compiled for it).
    ``timeout_s`` bounds each of the two requests, imports and autotuning included. Never raises for
    a failing or missing baseline (statuses ``unavailable``, ``error``, ``fault``, ``timeout``,
    ``wrong``); raises :class:`~cake_core.errors.CakeUserError` for a cell outside the problem's
    domain and :class:`~cake_core.errors.NoGpuError` when no worker can be started.
    """
    cell = validate_cell(problem, shape, dtype)
    baseline = baseline_of(problem)
    base = dict(problem=problem.name, shape=cell, dtype=dtype, target=target, date=today(),
                commit=commit or git_commit(), impl=f"baseline:{baseline.name}" if baseline else "baseline",
                run=run)  # fmt: skip
    oracle: list[str] = []

    def fail(status: str, error: str | None, gpu: str | None = None) -> Measurement:
        return Measurement(**base, gpu=gpu, median_ms=None, samples=[], correct=False, status=status, error=error,
                           oracle=oracle)  # fmt: skip

    if baseline is None:
        return fail("unavailable", f"problem `{problem.name}` names no baseline")
    missing = baseline.missing()
    if missing:
        return fail("unavailable", f"baseline `{baseline.name}` needs {', '.join(missing)}, not installed here")
    tensors = tuple(TensorSpec(t.name, t.dtype_for(dtype), t.shape_for(cell), t.role) for t in problem.tensors)
    outputs = tuple(t.name for t in tensors if t.kind == "output")

    def request(seed: int, timing: Timing | None) -> tuple[dict[str, Any], Any]:
        inputs = problem.make_inputs(cell, dtype, seed)
        req = BaselineRequest(name=baseline.name, entry=baseline.entry, tensors=tensors, inputs=inputs,
                              fetch=outputs, shape=cell, dtype=dtype, timing=timing)  # fmt: skip
        return inputs, runner.run_baseline(req, timeout_s=timeout_s)

    inputs, first = request(seed, None)
    if not first.ok:
        return fail(first.status, first.error, first.gpu_name)
    report = problem.check(inputs, first.outputs, cell, dtype, runner=runner)
    oracle.append("before timing: " + report.summary())
    if not report.passed:
        return fail("wrong", report.summary(), first.gpu_name)
    inputs, timed = request(seed + 1, timing)
    if not timed.ok:
        return fail(timed.status, timed.error, timed.gpu_name)
    report = problem.check(inputs, timed.outputs, cell, dtype, runner=runner)
    oracle.append("after timing: " + report.summary())
    median = timed.median_ms
    tflops = problem.flops(cell) / (median * 1e-3) / 1e12 if median else None
    return Measurement(**base, gpu=timed.gpu_name, median_ms=median, samples=list(timed.samples_ms),
                       correct=report.passed, status="ok" if report.passed else "wrong",
                       error=None if report.passed else report.summary(), oracle=oracle, tflops=tflops)  # fmt: skip
