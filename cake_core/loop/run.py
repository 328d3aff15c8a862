"""``cake run``: the four stages over a problem's candidate pool, as far as this machine allows.

1. **Generate**: the candidates are the problem's committed schedules, deduplicated by structural
   hash; a search agent plugin would add more (none is registered yet, and the run says so).
2. **Filter** (no GPU needed): type check and every verifier rule for the target, then an NVRTC
   compile of the specialization the problem's default cell needs, with the resource report and the
   compiler's findings (spills, serialized wgmma, ignored setmaxnreg).
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

from cake_core.diagnostics.diagnostic import DiagnosticError
from cake_core.errors import CakeUserError
from cake_core.ir.hashing import structural_hash


@attrs.define
class Candidate:
    name: str
    path: str
    hash: str
    verify: list[dict] = attrs.field(factory=list)
    compile: dict[str, Any] | None = None
    bench: dict[str, Any] | None = None
    findings: list[dict] = attrs.field(factory=list)
    status: str = "new"  # rejected, compiled, measured, failed-on-gpu

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


def seed_schedules(problem: object) -> list[Path]:
    """The problem's committed schedules: ``schedules/*.cake`` beside the module that defines it."""
    import importlib

    module = importlib.import_module(type(problem).__module__)
    base = Path(module.__file__).resolve().parent  # type: ignore[arg-type]
    return sorted((base / "schedules").glob("*.cake"))


def run(problem_name: str, target_name: str, *, budget: int | None, agent: str | None, out: Path,
        resume: bool, log=print) -> dict[str, Any]:  # fmt: skip
    from cake_core import plugins
    from cake_core.lower import build as b
    from cake_core.loop.benchmark import bench_candidate, program_values
    from cake_core.runtime.device import arch_runs_on, driver_status
    from cake_core.runtime.nvrtc import CompileError
    from cake_core.verify.runner import verify

    reg = plugins.registry()
    problem = reg.get("problems", problem_name)
    tgt = reg.get("targets", target_name)
    if agent is not None:
        reg.get("agents", agent)  # an unknown agent is a user error naming the known ones
    out.mkdir(parents=True, exist_ok=True)
    record_path = out / "run.json"
    previous: dict[str, dict] = {}
    if resume and record_path.exists():
        try:
            previous = {c["hash"]: c for c in json.loads(record_path.read_text())["candidates"]}
        except (ValueError, KeyError) as exc:
            raise CakeUserError(f"cannot resume from {record_path}: {exc}") from None

    record: dict[str, Any] = {
        "problem": problem.name, "target": tgt.name, "started": _dt.datetime.now(_dt.UTC).isoformat(),
        "cell": {"shape": problem.default_cell.shape, "dtype": problem.default_cell.dtype},
        "agent": agent or "seed (committed schedules; no search agent registered)", "stages": {}, "candidates": [],
    }  # fmt: skip

    def save() -> None:
        tmp = record_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(record, indent=1))
        tmp.replace(record_path)  # never leaves a half-written record behind

    # 1. generate
    pool: dict[str, Candidate] = {}
    for path in seed_schedules(problem):
        src = b.load(path)
        h = structural_hash(src.module)
        if h in pool:
            log(f"  {path.name}: same structure as {pool[h].name}, skipped")
            continue
        pool[h] = Candidate(path.stem, str(path), h)
        if budget is not None and len(pool) >= budget:
            break
    record["stages"]["generate"] = f"{len(pool)} distinct candidate(s) from the committed schedules"
    log(f"1 generate: {record['stages']['generate']}")

    # 2. filter
    shape, dtype = problem.default_cell.shape, problem.default_cell.dtype
    for cand in pool.values():
        if cand.hash in previous and previous[cand.hash].get("status") == "measured":
            prior = previous[cand.hash]
            cand.verify, cand.compile, cand.bench = prior["verify"], prior["compile"], prior["bench"]
            cand.findings, cand.status = prior["findings"], "measured"
            continue
        src = b.load(cand.path)
        diags = verify(src.module, tgt)
        cand.verify = [d.to_json() for d in diags]
        errors = [d for d in diags if d.is_error]
        if errors:
            cand.status = "rejected"
            cand.findings = [{"route": "candidate", "what": f"{d.code} {d.message}", "where": str(d.primary)}
                             for d in errors]  # fmt: skip
            continue
        try:
            checked = b.check(src, tgt)
            values = program_values(checked, problem, shape, dtype)
            built = b.build(checked, tgt, b.spec_for(checked, values))
        except (CompileError, DiagnosticError, CakeUserError) as exc:
            cand.status = "rejected"
            cand.findings = [{"route": "candidate", "what": f"does not compile for {tgt.name}: {exc}"}]
            continue
        c = built.compiled
        cand.compile = {
            "arch": tgt.nvrtc_arch, "cache": c.cache_status,
            "kernels": {k: {"registers": r.registers, "spill_stores": r.spill_stores, "stack": r.stack_frame}
                        for k, r in c.kernels.items()},
            "smem_bytes": {lk.function: lk.model.smem_bytes for lk in built.lowered.kernels},
        }  # fmt: skip
        for w in c.warnings:
            cand.findings.append({"route": "candidate", "what": f"compiler: {w.kind}: {w.message}"})
        cand.status = "compiled"
    rejected = sum(c.status == "rejected" for c in pool.values())
    record["stages"]["filter"] = f"{len(pool) - rejected} of {len(pool)} pass the verifier and compile for {tgt.name}"
    log(f"2 filter: {record['stages']['filter']}")
    save()

    # 3. benchmark
    ok, reason = driver_status()
    survivors = [c for c in pool.values() if c.status == "compiled"]
    if not ok:
        record["stages"]["benchmark"] = (
            f"skipped: no GPU here ({reason}); candidates are ranked by static checks only, and no cost "
            "model is installed, so there is no ranking by predicted time"
        )
    else:
        from cake_core.runtime.worker import GpuRunner

        with GpuRunner() as runner:
            info = runner.device_info()
            if not arch_runs_on(tgt.nvrtc_arch, tuple(info.compute_capability)):
                record["stages"]["benchmark"] = (
                    f"skipped: this GPU ({info.name}) is not a {tgt.name} ({tgt.nvrtc_arch}); no silent fallback"
                )
            else:
                for cand in survivors:
                    checked = b.check(b.load(cand.path), tgt)
                    m = bench_candidate(checked, problem, tgt, shape, dtype, runner, impl=f"cake:{cand.name}")
                    cand.bench = m.to_json()
                    if m.correct:
                        cand.status = "measured"
                    else:
                        cand.status = "failed-on-gpu"
                        cand.findings.append({"route": "verifier", "what": f"verified clean but {m.status} on "
                                              f"{m.gpu}: {m.error}"})  # fmt: skip
                    save()
                record["stages"]["benchmark"] = f"{len(survivors)} candidate(s) measured on {info.name}"
    log(f"3 benchmark: {record['stages']['benchmark']}")

    # 4. route
    routed: dict[str, int] = {}
    for cand in pool.values():
        for f in cand.findings:
            routed[f["route"]] = routed.get(f["route"], 0) + 1
    record["stages"]["route"] = ", ".join(f"{n} to the {k}" for k, n in sorted(routed.items())) or "no findings"
    log(f"4 route: {record['stages']['route']}")
    record["candidates"] = [c.to_json() for c in pool.values()]
    record["finished"] = _dt.datetime.now(_dt.UTC).isoformat()
    save()
    return record
