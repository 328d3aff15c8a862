"""``cake run``: the four stages over a problem's candidate pool, as far as this machine allows.

1. **Generate**: the candidates are the problem's committed schedules, deduplicated by structural
   hash; a search agent plugin would add more (none is registered yet, and the run says so).
2. **Filter** (no GPU needed): type check and every verifier rule for the target, then the
   interpreter gate (:mod:`cake_core.verify.interp_gate`: the CPU interpreter on ragged shapes and
   shapes where every ring wraps, with the problem's oracle), then an NVRTC compile of the
   specialization the problem's default cell needs, with the resource report and the compiler's
   findings (spills, serialized wgmma, ignored setmaxnreg).
3. **Benchmark**: only where a GPU of the target's architecture is present: the full oracle before and
   after timing, CUDA-event timing with the L2 flushed. Elsewhere the stage is skipped and the run
   says that ranking is by static checks only (no cost model is installed yet).
4. **Route**: each finding goes to the candidate (it failed a gate), to the verifier (the GPU found a
   fault or a wrong answer the verifier let through) or to the compiler notes.

Everything lands in ``OUT/run.json``; ``--resume`` keeps candidates already measured.
"""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path
from typing import Any

import attrs

from cake_core import pipeline
from cake_core.diagnostics.diagnostic import Diagnostic
from cake_core.errors import CakeUserError
from cake_core.ir.hashing import structural_hash
from cake_core.loop.benchmark import Measurement


@attrs.frozen
class Finding:
    """Where one finding goes (``candidate``, ``verifier``), what it is, and where in the source."""

    route: str
    what: str
    where: str | None = None


@attrs.frozen
class KernelResources:
    """What ptxas reported for one kernel of a compiled candidate (bytes)."""

    registers: int | None
    spill_stores: int
    stack: int


@attrs.frozen
class CompileSummary:
    """The compile of the default cell's specialization: architecture, NVRTC cache, resources."""

    arch: str
    cache: str
    kernels: dict[str, KernelResources]
    smem_bytes: dict[str, int]


@attrs.frozen
class EstimateSummary:
    """A cost model's estimate of a candidate at the run's cell, as ``run.json`` keeps it."""

    model: str  # name and version
    calibrated: bool
    ms: float
    bound: str


@attrs.define
class Entry:
    """One candidate of a run: its record in ``run.json`` and, while the run goes, its pipeline
    products (``candidate``, never written: a resumed entry has none)."""

    name: str
    path: str
    hash: str
    verify: list[Diagnostic] = attrs.field(factory=list)
    compile: CompileSummary | None = None
    bench: Measurement | None = None
    findings: list[Finding] = attrs.field(factory=list)
    status: str = "new"  # rejected, compiled, measured, failed-on-gpu
    interp: list[Diagnostic] = attrs.field(factory=list)  # the interpreter gate's findings
    interp_seconds: float | None = None  # what the gate took (None: it did not run)
    estimate: EstimateSummary | None = None  # the cost model's, for a compiled candidate
    candidate: pipeline.Candidate | None = attrs.field(default=None, eq=False, repr=False)


@attrs.define
class RunRecord:
    """``run.json``: what ran, each stage in a sentence, and every candidate."""

    problem: str
    target: str
    started: str
    cell: dict[str, Any]
    agent: str
    stages: dict[str, str] = attrs.field(factory=dict)
    candidates: list[Entry] = attrs.field(factory=list)
    finished: str | None = None


def seed_schedules(problem: object) -> list[Path]:
    """The problem's committed schedules: ``schedules/*.cake`` beside the module that defines it."""
    import importlib

    module = importlib.import_module(type(problem).__module__)
    base = Path(module.__file__).resolve().parent  # type: ignore[arg-type]
    return sorted((base / "schedules").glob("*.cake"))


def read_record(path: Path) -> RunRecord:
    """A run's record, as :func:`run` wrote it (a user error when it cannot be read back)."""
    from cattrs.errors import BaseValidationError

    from cake_core.convert import structure

    try:
        return structure(json.loads(path.read_text()), RunRecord)  # type: ignore[no-any-return]
    except (OSError, ValueError, BaseValidationError) as exc:
        raise CakeUserError(f"cannot resume from {path}: {type(exc).__name__}: {exc}") from None


def compile_summary(candidate: pipeline.Candidate, spec: Any) -> CompileSummary:
    """What ``run.json`` keeps of a compiled specialization."""
    c = candidate.compiled[spec]
    return CompileSummary(
        candidate.target.nvrtc_arch, c.cache_status,
        {k: KernelResources(r.registers, r.spill_stores, r.stack_frame) for k, r in c.kernels.items()},
        {lk.function: lk.model.smem_bytes for lk in candidate.lowered[spec].kernels},
    )  # fmt: skip


def run(problem_name: str, target_name: str, *, budget: int | None, agent: str | None, out: Path,
        resume: bool, log=print) -> RunRecord:  # fmt: skip
    from cake_core import plugins
    from cake_core.convert import unstructure
    from cake_core.loop.benchmark import bench_candidate, program_values
    from cake_core.runtime.device import arch_runs_on, driver_status
    from cake_core.runtime.nvrtc import CompileError

    reg = plugins.registry()
    problem = reg.get("problems", problem_name)
    tgt = reg.get("targets", target_name)
    if agent is not None:
        reg.get("agents", agent)  # an unknown agent is a user error naming the known ones
    out.mkdir(parents=True, exist_ok=True)
    record_path = out / "run.json"
    previous: dict[str, Entry] = {}
    if resume and record_path.exists():
        previous = {e.hash: e for e in read_record(record_path).candidates}

    record = RunRecord(
        problem.name, tgt.name, _dt.datetime.now(_dt.UTC).isoformat(),
        {"shape": problem.default_cell.shape, "dtype": problem.default_cell.dtype},
        agent or "seed (committed schedules; no search agent registered)",
    )  # fmt: skip

    def save() -> None:
        tmp = record_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(unstructure(record), indent=1))
        tmp.replace(record_path)  # never leaves a half-written record behind

    # 1. generate
    pool: dict[str, Entry] = {}
    for path in seed_schedules(problem):
        cand = pipeline.Candidate.load(path, tgt, reg)
        h = structural_hash(cand.source.module)
        if h in pool:
            log(f"  {path.name}: same structure as {pool[h].name}, skipped")
            continue
        pool[h] = Entry(path.stem, str(path), h, candidate=cand)
        if budget is not None and len(pool) >= budget:
            break
    record.candidates = list(pool.values())
    record.stages["generate"] = f"{len(pool)} distinct candidate(s) from the committed schedules"
    log(f"1 generate: {record.stages['generate']}")

    # 2. filter
    shape, dtype = problem.default_cell.shape, problem.default_cell.dtype
    models = reg.names("cost_models")
    model = reg.get("cost_models", models[0]) if models else None
    for i, entry in enumerate(record.candidates):
        prior = previous.get(entry.hash)
        if prior is not None and prior.status == "measured":
            record.candidates[i] = attrs.evolve(
                entry, verify=prior.verify, interp=prior.interp, interp_seconds=prior.interp_seconds,
                compile=prior.compile, bench=prior.bench, findings=prior.findings,
                status=prior.status, estimate=prior.estimate,
            )  # fmt: skip
            continue
        cand = entry.candidate
        assert cand is not None
        report = cand.verify()
        entry.verify = list(report.diagnostics)
        errors = [d for d in report.diagnostics if d.is_error]
        if errors:
            entry.status = "rejected"
            entry.findings = [Finding("candidate", f"{d.code} {d.message}", str(d.primary)) for d in errors]
            continue
        try:
            gate = cand.interp_gate(problem)
        except CakeUserError as exc:
            entry.status = "rejected"
            entry.findings = [Finding("candidate", f"the interpreter cannot run it: {exc}")]
            continue
        entry.interp, entry.interp_seconds = list(gate.diagnostics), round(gate.seconds, 4)
        if not gate.ok:
            first = gate.diagnostics[0]
            entry.status = "rejected"
            entry.findings = [Finding("candidate", f"{first.code} {first.message}", str(first.primary))]
            continue
        try:
            spec = cand.spec(program_values(cand.check(), problem, shape, dtype))
            compiled = cand.compile(spec)
        except (CompileError, CakeUserError) as exc:
            entry.status = "rejected"
            entry.findings = [Finding("candidate", f"does not compile for {tgt.name}: {exc}")]
            continue
        entry.compile = compile_summary(cand, spec)
        entry.findings += [Finding("candidate", f"compiler: {w.kind}: {w.message}") for w in compiled.warnings]
        entry.status = "compiled"
        if model is not None:
            est = model.estimate(cand.check(), tgt, program_values(cand.check(), problem, shape, dtype))
            entry.estimate = EstimateSummary(f"{model.name} {model.version}", est.calibrated, round(est.ms, 4),
                                             est.bound)  # fmt: skip
    rejected = sum(e.status == "rejected" for e in record.candidates)
    total = len(record.candidates)
    record.stages["filter"] = (
        f"{total - rejected} of {total} pass the verifier, the interpreter gate and compile for {tgt.name}"
    )
    log(f"2 filter: {record.stages['filter']}")
    save()

    # 3. benchmark
    ok, reason = driver_status()
    survivors = [e for e in record.candidates if e.status == "compiled"]
    if not ok:
        if model is not None:
            survivors.sort(key=lambda e: e.estimate.ms if e.estimate is not None else float("inf"))
            ranked = ", ".join(f"{e.name} {e.estimate.ms:.3f} ms" for e in survivors if e.estimate is not None)
            kind = "calibrated" if model.calibrated else "uncalibrated"
            record.stages["benchmark"] = (
                f"skipped: no GPU here ({reason}); nothing was measured. Ranked by the {model.name} cost model's "
                f"predicted time ({kind}) at the cell: {ranked or 'none compiled'}"
            )
        else:
            record.stages["benchmark"] = (
                f"skipped: no GPU here ({reason}); candidates are ranked by static checks only, and no cost "
                "model is installed, so there is no ranking by predicted time"
            )
    else:
        from cake_core.runtime.worker import GpuRunner

        with GpuRunner() as runner:
            info = runner.device_info()
            if not arch_runs_on(tgt.nvrtc_arch, tuple(info.compute_capability)):
                record.stages["benchmark"] = (
                    f"skipped: this GPU ({info.name}) is not a {tgt.name} ({tgt.nvrtc_arch}); no silent fallback"
                )
            else:
                for entry in survivors:
                    assert entry.candidate is not None
                    m = bench_candidate(entry.candidate, problem, shape, dtype, runner, impl=f"cake:{entry.name}")
                    entry.bench = m
                    if m.correct:
                        entry.status = "measured"
                    else:
                        entry.status = "failed-on-gpu"
                        entry.findings.append(
                            Finding("verifier", f"verified clean but {m.status} on {m.gpu}: {m.error}")
                        )
                    save()
                record.stages["benchmark"] = f"{len(survivors)} candidate(s) measured on {info.name}"
    log(f"3 benchmark: {record.stages['benchmark']}")

    # 4. route
    routed: dict[str, int] = {}
    for entry in record.candidates:
        for f in entry.findings:
            routed[f.route] = routed.get(f.route, 0) + 1
    record.stages["route"] = ", ".join(f"{n} to the {k}" for k, n in sorted(routed.items())) or "no findings"
    log(f"4 route: {record.stages['route']}")
    record.finished = _dt.datetime.now(_dt.UTC).isoformat()
    save()
    return record
