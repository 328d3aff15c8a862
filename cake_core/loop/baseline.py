"""Stage 3's baseline: time a problem's baseline in the GPU worker the candidates run in, and judge it.

:func:`bench_baseline` is :func:`~cake_core.loop.benchmark.bench_candidate`'s counterpart for the
implementation a problem names as its baseline (:class:`~cake_core.problems.problem.Baseline`): the
same inputs (``make_inputs`` with the same seeds), the same worker and :class:`Timing` (warm-up, CUDA
events, L2 flushed, median of many; the baseline prepared and autotuned before), and the same oracle
before and after timing. So every speed-up a run reports is against a baseline measured in that run.

The CUDA events enclose one call of the baseline's Python callable, so its host-side work (for
flash-kmeans: Triton's launcher and the torch ops computing ``||c||^2``) is inside the timed region
wherever the GPU outpaces it. Measured on an H200: at B=16 N=4096 K=1024 D=128 the samples ran from
0.08 to 0.39 ms (medians 0.089 and 0.225 ms in two runs); at the reference cell 1.554 to 1.991 ms,
median 1.557 ms. Speed-ups at cells of a few tens of microseconds say as much about launch overhead.

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

    def record(status: str, error: str | None, result: Any = None) -> Measurement:
        samples = list(result.samples_ms) if result is not None else []
        median = result.median_ms if result is not None else None
        tflops = problem.flops(cell) / (median * 1e-3) / 1e12 if median else None
        return Measurement(**base, gpu=result.gpu_name if result is not None else None, median_ms=median,
                           samples=samples, correct=status == "ok", status=status, error=error, oracle=oracle,
                           tflops=tflops)  # fmt: skip

    if baseline is None:
        return record("unavailable", f"problem `{problem.name}` names no baseline")
    missing = baseline.missing()
    if missing:
        return record("unavailable", f"baseline `{baseline.name}` needs {', '.join(missing)}, not installed here")
    tensors = tuple(TensorSpec(t.name, t.dtype_for(dtype), t.shape_for(cell), t.role) for t in problem.tensors)
    outputs = tuple(t.name for t in tensors if t.kind == "output")
    result = None
    for phase, phase_seed, phase_timing in (("before timing", seed, None), ("after timing", seed + 1, timing)):
        inputs = problem.make_inputs(cell, dtype, phase_seed)
        request = BaselineRequest(name=baseline.name, entry=baseline.entry, tensors=tensors, inputs=inputs,
                                  fetch=outputs, shape=cell, dtype=dtype, timing=phase_timing)  # fmt: skip
        result = runner.run_baseline(request, timeout_s=timeout_s)
        if not result.ok:
            return record(result.status, result.error, result)
        report = problem.check(inputs, result.outputs, cell, dtype, runner=runner)
        oracle.append(f"{phase}: {report.summary()}")
        if not report.passed:  # the timed samples, if any, stay in the record
            return record("wrong", report.summary(), result)
    return record("ok", None, result)
