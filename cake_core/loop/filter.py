"""Stage 2 for one candidate, in a worker process: type check and verifier rules, the interpreter gate, an
NVRTC compile of the specialization the run's cell needs, and the cost model's estimate, which must not be
below the floor (:mod:`cake_core.cost.floor`): a kernel predicted faster than the cell's bytes and FLOPs allow
skips work that the interpreter gate's small shapes did not show.

:func:`filter_candidate` takes and returns plain data (the source text in, a
:class:`~cake_core.loop.records.FilterOutcome` out), so :func:`filter_all` can run candidates in a process
pool: they are independent. A gate that refuses a candidate ends its stage 2 there; nothing here raises for a
bad candidate.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from cake_core.diagnostics.diagnostic import Diagnostic, DiagnosticError
from cake_core.errors import CakeUserError, NotLoweredError
from cake_core.loop.records import CompileSummary, EstimateSummary, FilterOutcome, KernelResources

if TYPE_CHECKING:
    from cake_core.pipeline import Candidate


@attrs.frozen
class FilterJob:
    """What a worker needs to filter one candidate: the text, and the run's problem, target and cell."""

    key: int  # the candidate's ledger id
    source: str
    path: str
    problem: str
    target: str
    shape: dict[str, int]
    dtype: str
    floor_ms: float | None = None  # the least time the cell can take on the target (cake_core.cost.floor)


def _first(diags: Sequence[Diagnostic]) -> str:
    d = next(d for d in diags if d.is_error)
    return f"{d.primary}: {d.code} {d.message}"


def filter_candidate(job: FilterJob, cand: Candidate | None = None) -> FilterOutcome:
    """Stage 2 for one candidate; the outcome names the first gate that refused it, if one did. ``cand`` is
    the candidate already loaded in this process, if any (its products are then kept in it)."""
    from cake_core import pipeline, plugins
    from cake_core.loop.benchmark import program_values
    from cake_core.runtime.nvrtc import CompileError

    start = time.perf_counter()
    reg = plugins.registry()
    problem, tgt = reg.get("problems", job.problem), reg.get("targets", job.target)

    def done(**fields: Any) -> FilterOutcome:
        return FilterOutcome(**fields, seconds=round(time.perf_counter() - start, 4))

    if cand is None:
        try:
            cand = pipeline.Candidate(pipeline.load_text(job.source, job.path), tgt, reg)
        except DiagnosticError as exc:
            return done(status="rejected", gate="verify", reason=_first(exc.diagnostics), verify=exc.diagnostics)
    report = cand.verify()
    verify = list(report.diagnostics)
    if any(d.is_error for d in verify):
        return done(status="rejected", gate="verify", reason=_first(verify), verify=verify)
    try:
        gate = cand.interp_gate(problem)
    except CakeUserError as exc:
        return done(status="rejected", gate="interp", reason=f"the interpreter cannot run it: {exc}", verify=verify)
    interp, interp_s = list(gate.diagnostics), round(gate.seconds, 4)
    if not gate.ok:
        return done(status="rejected", gate="interp", reason=_first(interp), verify=verify, interp=interp,
                    interp_seconds=interp_s)  # fmt: skip
    values = program_values(cand.check(), problem, job.shape, job.dtype)
    try:
        spec = cand.spec(values)
    except CakeUserError as exc:  # a schedule written for other sizes (knn's K in {64, 100, 128}): no fault of it
        return done(status="rejected", gate="domain", reason=f"its domain does not take the run's cell: {exc}",
                    verify=verify, interp=interp, interp_seconds=interp_s)  # fmt: skip
    try:
        compiled = cand.compile(spec)
    except NotLoweredError as exc:
        return done(status="rejected", gate="lower", reason=str(exc), verify=verify, interp=interp,
                    interp_seconds=interp_s)  # fmt: skip
    except (CompileError, CakeUserError) as exc:
        return done(status="rejected", gate="compile", reason=f"does not compile for {tgt.name}: {exc}",
                    verify=verify, interp=interp, interp_seconds=interp_s)  # fmt: skip
    summary = CompileSummary(
        tgt.nvrtc_arch,
        {k: KernelResources(r.registers, r.spill_stores, r.stack_frame) for k, r in compiled.kernels.items()},
        {lk.function: lk.model.smem_bytes for lk in cand.lowered[spec].kernels},
        [f"{w.kind}: {w.message}" for w in compiled.warnings],
    )  # fmt: skip
    estimate = None
    models = reg.names("cost_models")
    if models:
        model = reg.get("cost_models", models[0])
        est = model.estimate(cand.check(), tgt, values)
        longest = max(est.launches, key=lambda x: x.ms) if est.launches else None
        terms = {k: round(v, 6) for k, v in longest.terms.items()} if longest is not None else {}
        estimate = EstimateSummary(f"{model.name} {model.version}", est.calibrated, round(est.ms, 6), est.bound,
                                   terms)  # fmt: skip
    if estimate is not None and job.floor_ms is not None and estimate.ms < job.floor_ms:
        return done(status="rejected", gate="floor", verify=verify, interp=interp, interp_seconds=interp_s,
                    compile=summary, estimate=estimate,
                    reason=f"predicted {estimate.ms:.4g} ms, below the {job.floor_ms:.4g} ms the cell's bytes and "
                           f"FLOPs take at the target's peak rates: it cannot be doing all the problem's work "
                           f"(or {estimate.model} undercounts it)")  # fmt: skip
    return done(status="compiled", verify=verify, interp=interp, interp_seconds=interp_s, compile=summary,
                estimate=estimate)  # fmt: skip


def filter_all(jobs: Sequence[FilterJob], *, workers: int | None = None,
               local: Mapping[int, Candidate] | None = None) -> Iterator[tuple[FilterJob, FilterOutcome]]:  # fmt: skip
    """Filter ``jobs`` in a process pool (``workers``: default the CPUs this process may use, at most one per
    job), yielding each outcome as it is ready. With one worker they run here, in order, on the candidates
    already loaded (``local``, by job key), which keep their products for stage 3."""
    if workers is None:
        workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    workers = max(1, min(workers, len(jobs)))
    if workers == 1:
        for job in jobs:
            yield job, filter_candidate(job, (local or {}).get(job.key))
        return
    # fork where there is one: the workers inherit the loaded plugins instead of loading them again
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        futures = {pool.submit(filter_candidate, job): job for job in jobs}
        for fut in concurrent.futures.as_completed(futures):
            yield futures[fut], fut.result()
