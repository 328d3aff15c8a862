"""Stage 3: run a candidate on the GPU with evidence, and keep what cheats out of the ranking.

For one problem cell: the candidate's compiled specialization (built and compiled once, by the
:class:`~cake_core.pipeline.Candidate`) is

1. run twice on the same fresh random inputs, outputs poisoned before each run; the two runs' outputs
   must agree bit for bit (a kernel that reads uninitialized memory, or races, differs: status
   ``nondeterministic``), except outputs the problem declares not ``reproducible`` (float sums by
   atomics), which the oracle judges in both runs; every output element must pass the problem's
   oracle (``wrong``);
2. timed (warm-up, CUDA events, L2 flushed between repetitions, median of many) on other fresh inputs;
   a median below the floor (:func:`cake_core.cost.floor.floor_ms`, when given) is a measurement not to
   trust: status ``quarantined``, whatever the oracle says of that run;
3. checked again on the timed run's outputs.

The cubin's SASS is checked for every instruction the schedule claims (cuobjdump, in a thread beside the
GPU work). A failing verdict names the outputs that hold NaN or Inf. ``phases`` records the wall seconds of
each step in this process (what a dispatch's device time goes to). Every outcome, failures included,
becomes a :class:`Measurement` record (the JSON format of ``bench/results/``); only status ``ok`` with
``correct`` may be ranked.
"""

from __future__ import annotations

import datetime as _dt
import subprocess
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from cake_core.hostdata import decode
from cake_core.ir.model import CheckedModule
from cake_core.ir.types import DTYPE_NAMES, DType
from cake_core.lower.program import build_plan
from cake_core.pipeline import Candidate
from cake_core.problems.problem import Problem
from cake_core.runtime.plan import Plan, Timing


#: what a :class:`Measurement`'s ``status`` may be; only ``ok`` with ``correct`` may be ranked
STATUSES = ("ok", "wrong", "nondeterministic", "quarantined", "fault", "timeout", "error", "compile-error")


@attrs.frozen
class Measurement:
    """One implementation at one cell in one run: the record format of ``bench/results/*.json``.

    ``status`` is one of :data:`STATUSES`: ``ok`` (checked, timed and checked again, every verdict passed:
    ``correct``), ``wrong`` (a verdict failed), ``nondeterministic`` (two runs on the same inputs
    gave different outputs; ``differing`` counts the elements), ``quarantined`` (the median beat
    ``floor_ms``, the least time the target allows: the timing is not to be trusted), or a failure of
    the run itself (``fault``, ``timeout``, ``error``, ``compile-error``). ``error`` says why in one line.
    ``oracle`` holds each verdict in order. ``median_ms`` and ``samples`` are kept for a quarantined
    candidate too (they are the evidence). ``phases`` holds the wall seconds of each step of the dispatch
    it reached (``prepare``, ``run``, ``again``, ``oracle``, ``timed``, ``oracle-after``, then ``sass``: the
    wait for the SASS check, which runs beside them) and the worker's own steps of the first and the timed
    run (``run.upload``, ``timed.run``, ...).
    """

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
    status: str = "ok"  # one of STATUSES
    error: str | None = None
    oracle: list[str] = attrs.field(factory=list)
    sass: dict[str, Any] | None = None
    resources: dict[str, Any] | None = None
    hash: str | None = None
    tflops: float | None = None
    floor_ms: float | None = None
    differing: int | None = None
    phases: dict[str, float] | None = None


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
    floor_ms: float | None = None,
) -> Measurement:
    """Check (twice, for determinism), time and check again one well-typed candidate at one cell; the
    measurement is also kept in ``candidate.measurements``. ``timeout_s`` bounds each run (a kernel that
    never finishes ends as ``timeout``; the runner replaces its worker and serves the next candidate);
    ``floor_ms`` is the least time the cell can take on the target (:func:`cake_core.cost.floor.floor_ms`),
    a median below it ends as ``quarantined``. Never raises for a failing candidate: a compile error,
    fault, timeout, nondeterminism, wrong answer or impossible time is a record with its status."""
    base = dict(problem=problem.name, shape=dict(shape), dtype=dtype, target=candidate.target.name, date=today(),
                commit=commit or git_commit(), impl=impl, run=run, floor_ms=floor_ms)  # fmt: skip
    m = _measure(candidate, problem, shape, dtype, runner, base, timing, seed, timeout_s)
    candidate.measurements.append(m)
    return m


def differing_elements(first: Mapping[str, np.ndarray], second: Mapping[str, np.ndarray]) -> dict[str, int]:
    """For every tensor of ``first``: how many elements differ bit for bit from ``second`` (0 if none)."""
    out = {}
    for name, a in first.items():
        b = second.get(name)
        if b is None or a.shape != b.shape or a.dtype != b.dtype:
            out[name] = a.size
            continue
        bits = np.dtype(f"u{a.dtype.itemsize}") if a.dtype.itemsize in (1, 2, 4, 8) else None
        av, bv = (a.view(bits), b.view(bits)) if bits is not None else (a, b)
        out[name] = int(np.count_nonzero(av != bv))
    return out


def nonfinite_text(plan: Plan, arrays: Mapping[str, np.ndarray]) -> str | None:
    """``"`out` holds 3 NaN and 1 Inf of 4096 elements; ..."`` for every floating tensor of ``arrays``
    (named in ``plan``) holding NaN or Inf; ``None`` if none does."""
    parts = []
    for name, arr in arrays.items():
        dt = DType(plan.tensor(name).dtype)
        if not dt.is_float or dt in (DType.FP8E4M3, DType.FP8E5M2):
            continue
        values = decode(arr, dt)
        nan, inf = int(np.isnan(values).sum()), int(np.isinf(values).sum())
        if nan or inf:
            parts.append(f"`{name}` holds {nan} NaN and {inf} Inf of {values.size} elements")
    return "; ".join(parts) or None


def _measure(candidate: Candidate, problem: Problem, shape: Mapping[str, int], dtype: str, runner: Any,
             base: dict[str, Any], timing: Timing | None, seed: int, timeout_s: float) -> Measurement:  # fmt: skip
    """:func:`bench_candidate`'s measurement; ``base`` holds the fields that say what was measured."""
    from cake_core.convert import unstructure
    from cake_core.runtime.nvrtc import CompileError
    from cake_core.runtime.sass import check_claims

    phases: dict[str, float] = {}
    clock = [time.perf_counter()]

    def lap(name: str, result: Any = None) -> None:
        now = time.perf_counter()
        phases[name] = round(now - clock[0], 4)
        clock[0] = now
        for step, seconds in (getattr(result, "phases_s", None) or {}).items():  # the worker's own steps
            phases[f"{name}.{step.removesuffix('_s')}"] = round(seconds, 4)

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
    lap("prepare")
    # cuobjdump (about half a second at the reference cell) runs beside the GPU work; its finding is awaited
    # where the record is made
    disassembly = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cake-sass")
    claimed = disassembly.submit(check_claims, compiled.cubin, candidate.sass_claims())
    disassembly.shutdown(wait=False)
    oracle: list[str] = []

    def kept() -> dict[str, Any]:
        """The fields every record of a compiled candidate has (the SASS finding awaited: ``sass`` phase)."""
        finding = claimed.result()
        lap("sass")
        sass = {"claims": list(finding.claims), "present": list(finding.present), "missing": list(finding.missing),
                "counts": finding.counts, "available": finding.available, "tool": finding.tool_version,
                "error": finding.error}  # fmt: skip
        return dict(sass=sass, resources=resources, hash=lowered.hash, phases=phases)

    def fail(status: str, error: str | None, gpu: str | None, **more: Any) -> Measurement:
        return Measurement(**base, gpu=gpu, median_ms=more.pop("median_ms", None), samples=more.pop("samples", []),
                           correct=False, status=status, error=error, oracle=oracle, **kept(), **more)  # fmt: skip

    def judge(when: str, inputs: Mapping[str, np.ndarray], result: Any) -> str | None:
        """The oracle's verdict on ``result`` (kept in ``oracle``); its summary, with NaN and Inf named, if
        it fails, else ``None``."""
        report = problem.check(inputs, result.outputs, shape, dtype, runner=runner)
        oracle.append(f"{when}: " + report.summary())
        if report.passed:
            return None
        named = nonfinite_text(plan, result.outputs)
        return report.summary() + (f"; {named}" if named else "")

    inputs = problem.make_inputs(shape, dtype, seed)
    first = runner.run(plan, inputs, fetch=outputs, timeout_s=timeout_s)
    lap("run", first)
    if not first.ok:
        return fail(first.status, first.error, first.gpu_name)
    again = runner.run(plan, inputs, fetch=outputs, timeout_s=timeout_s)
    lap("again")
    if not again.ok:
        return fail(again.status, again.error, again.gpu_name)
    exact = {t.name for t in problem.tensors if t.role == "output" and t.reproducible}
    differ = differing_elements({k: v for k, v in first.outputs.items() if k in exact}, again.outputs)
    wrong = judge("before timing", inputs, first)
    if wrong is None and exact != set(outputs):  # what may differ by rounding is judged in both runs
        wrong = judge("again", inputs, again)
    lap("oracle")
    if any(differ.values()):
        text = ", ".join(f"{n} of {first.outputs[k].size} elements of `{k}`" for k, n in differ.items() if n)
        return fail("nondeterministic", f"two runs on the same inputs differ bit for bit: {text}", again.gpu_name,
                    differing=sum(differ.values()))  # fmt: skip
    if wrong:
        return fail("wrong", wrong, first.gpu_name, differing=0)
    if timing is None:
        return Measurement(**base, gpu=first.gpu_name, median_ms=None, samples=[], correct=True, oracle=oracle,
                           differing=0, **kept())  # fmt: skip
    inputs = problem.make_inputs(shape, dtype, seed + 1)
    timed = runner.run(plan, inputs, fetch=outputs, timing=timing, timeout_s=timeout_s)
    lap("timed", timed)
    if not timed.ok:
        return fail(timed.status, timed.error, timed.gpu_name)
    median = timed.median_ms
    samples = list(timed.samples_ms)
    wrong = judge("after timing", inputs, timed)
    lap("oracle-after")
    floor = base["floor_ms"]
    if floor is not None and median is not None and median < floor:
        return fail("quarantined", f"quarantined: beats the floor: measured {median:.4g} ms, the least this cell "
                    f"can take on {base['target']} is {floor:.4g} ms", timed.gpu_name, median_ms=median,
                    samples=samples, differing=0)  # fmt: skip
    tflops = problem.flops(shape) / (median * 1e-3) / 1e12 if median else None
    return Measurement(**base, gpu=timed.gpu_name, median_ms=median, samples=samples, correct=wrong is None,
                       status="ok" if wrong is None else "wrong", error=wrong, oracle=oracle, tflops=tflops,
                       differing=0, **kept())  # fmt: skip
