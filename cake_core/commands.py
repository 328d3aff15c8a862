"""``cake problems``, ``cake lower``, ``cake compile``, ``cake bench``: the build and GPU commands."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import attrs

from cake_core.console import print_diagnostics, print_json, print_table
from cake_core.diagnostics.diagnostic import DiagnosticError
from cake_core.errors import CakeUserError
from cake_core.logs import get_logger
from cake_core.paths import output_dir, output_file, write_text
from cake_core.runtime.ptxas import CompileWarning, FunctionResources


def _verified(path: str, target_name: str, as_json: bool):
    """The file as a pipeline candidate for the target, parsed, type-checked and verified: the gates
    any build passes first. On errors, print them and return None (the caller exits 1); warnings are
    printed and kept going."""
    from cake_core import pipeline, plugins

    reg = plugins.registry()
    tgt = reg.get("targets", target_name)
    try:
        cand = pipeline.Candidate.load(path, tgt, reg)
    except DiagnosticError as exc:
        print_diagnostics(exc.diagnostics, _sources(path), as_json=as_json)
        return None
    report = cand.verify()
    if report.diagnostics:
        # with --json, stdout carries one document: the diagnostics when they stop the build, else the
        # command's own result (warnings then go to stderr as text)
        print_diagnostics(report.diagnostics, cand.source.sources, as_json=as_json and not report.ok)
    return cand if report.ok else None


def _sources(path: str) -> dict[str, str]:
    p = Path(path)
    return {path: p.read_text() if p.exists() else ""}


def parse_shape(text: str | None) -> dict[str, int | str]:
    """``B=32,N=65536,T=bf16`` -> {"B": 32, "N": 65536, "T": "bf16"}."""
    out: dict[str, int | str] = {}
    if not text:
        return out
    for item in text.split(","):
        if not item.strip():
            continue
        k, eq, v = (s.strip() for s in item.partition("="))
        if not eq or not k.isidentifier() or not v:
            raise CakeUserError(f"bad --shape item `{item.strip()}`: write NAME=VALUE pairs, e.g. B=32,N=65536,T=bf16")
        if k in out:
            raise CakeUserError(f"bad --shape: `{k}` is given twice")
        if v.lstrip("-").isdigit():
            out[k] = int(v)
        elif v.isidentifier():
            out[k] = v  # an element type (T=bf16)
        else:
            raise CakeUserError(f"bad --shape item `{item.strip()}`: `{v}` is neither an integer nor a type name")
    return out


def parse_sizes(text: str | None) -> dict[str, int]:
    """:func:`parse_shape` where every value must be an integer size (``cake bench``'s ``--shape``)."""
    out: dict[str, int] = {}
    for k, v in parse_shape(text).items():
        if not isinstance(v, int):
            raise CakeUserError(f"bad --shape: `{k}={v}` is not an integer size (give the type with --dtype)")
        out[k] = v
    return out


def problem_cell(problem, shape_text: str | None, dtype: str | None) -> tuple[dict[str, int], str]:  # type: ignore[no-untyped-def]
    """The cell ``--shape``/``--dtype`` ask for: the problem's default cell with the sizes given replaced,
    checked against the problem's domain."""
    from cake_core.problems.problem import validate_cell

    values = parse_shape(shape_text)
    dt = str(values.pop("dtype", dtype or problem.default_cell.dtype))
    shape = dict(problem.default_cell.shape)
    shape.update(parse_sizes(",".join(f"{k}={v}" for k, v in values.items())))
    return validate_cell(problem, shape, dt), dt


def _specs(cand, shape_text: str | None):
    values = parse_shape(shape_text)
    if values:
        return [cand.spec(values)]
    return cand.specs()


def cmd_problems(args: argparse.Namespace) -> int:
    from cake_core import plugins

    reg = plugins.registry()
    records = []
    for p in reg.values("problems"):
        records.append({
            "name": p.name, "summary": p.summary, "dtypes": list(p.dtypes),
            "tensors": [t.describe() for t in p.tensors],
            "default_cell": {"shape": p.default_cell.shape, "dtype": p.default_cell.dtype},
            "cells": [{"shape": c.shape, "dtype": c.dtype} for c in p.cells],
            "plugin": reg.registration("problems", p.name).plugin.distribution,
        })  # fmt: skip
    if args.json:
        print_json(records)
        return 0
    for r in records:
        print(f"{r['name']}: {r['summary']}")
        for t in r["tensors"]:
            print(f"  {t}")
        print(f"  default cell: {r['default_cell']['shape']} {r['default_cell']['dtype']}")
    return 0


def cmd_lower(args: argparse.Namespace) -> int:
    if args.output:
        output_file(args.output)
    cand = _verified(args.file, args.target, False)
    if cand is None:
        return 1
    sources = [cand.build(spec).source for spec in _specs(cand, args.shape)]
    text = "\n".join(sources)
    if args.output:
        write_text(output_file(args.output), text)
    else:
        sys.stdout.write(text)
    return 0


@attrs.frozen
class CompiledSpec:
    """One specialization as ``cake compile`` reports it, compiled."""

    specialization: str
    ok: bool
    target: str
    arch: str
    nvrtc: str
    cubin_bytes: int
    cache: str
    compile_s: float
    kernels: dict[str, FunctionResources]
    warnings: tuple[CompileWarning, ...]
    smem_bytes: dict[str, int]


@attrs.frozen
class FailedSpec:
    """One specialization as ``cake compile`` reports it, rejected by NVRTC."""

    specialization: str
    ok: bool
    error: str
    log: str


def cmd_compile(args: argparse.Namespace) -> int:
    from cake_core.runtime.nvrtc import CompileError

    cand = _verified(args.file, args.target, args.json)
    if cand is None:
        return 1
    tgt = cand.target
    log = get_logger("cake.compile")
    results: list[CompiledSpec | FailedSpec] = []
    for spec in _specs(cand, args.shape):
        try:
            c = cand.compile(spec, cache=not args.no_cache)
        except CompileError as exc:
            log.info("nvrtc compile", file=args.file, target=tgt.name, arch=tgt.nvrtc_arch,
                     specialization=spec.label, ok=False, error=str(exc))  # fmt: skip
            results.append(FailedSpec(spec.label, False, str(exc), exc.log))
            continue
        log.info("nvrtc compile", file=args.file, target=tgt.name, arch=tgt.nvrtc_arch, specialization=spec.label,
                 ok=True, cache=c.cache_status, compile_s=round(c.compile_s, 4), wall_s=round(c.wall_s, 4),
                 cubin_bytes=len(c.cubin))  # fmt: skip
        results.append(CompiledSpec(
            spec.label, True, tgt.name, tgt.nvrtc_arch, ".".join(map(str, c.nvrtc_version)), len(c.cubin),
            c.cache_status, round(c.compile_s, 3), c.kernels, c.warnings,
            {lk.function: lk.model.smem_bytes for lk in cand.lowered[spec].kernels},
        ))  # fmt: skip
    if args.json:
        print_json(results)
    else:
        for r in results:
            if isinstance(r, FailedSpec):
                print(f"{r.specialization}: compile failed: {r.error}")
                continue
            print(f"{r.specialization}: {r.arch} cubin {r.cubin_bytes} bytes (NVRTC {r.nvrtc}, cache {r.cache})")
            for name, k in r.kernels.items():
                print(f"  {name}: {k.registers} registers, {k.spill_stores} B spill stores, "
                      f"{k.spill_loads} B spill loads, {k.stack_frame} B stack, "
                      f"{r.smem_bytes.get(name, 0)} B dynamic shared")  # fmt: skip
            for w in r.warnings:
                print(f"  warning: {w.message}")
    return 1 if any(isinstance(r, FailedSpec) for r in results) else 0


def _target_for_gpu(info, requested: str | None):
    """The target of the GPU found: by name, or the requested one if its architecture matches."""
    from cake_core import plugins
    from cake_core.runtime.device import arch_runs_on

    targets = plugins.registry().values("targets")
    cc = tuple(info.compute_capability)
    if requested:
        tgt = plugins.registry().get("targets", requested)
        if not arch_runs_on(tgt.nvrtc_arch, cc):
            raise CakeUserError(
                f"target `{tgt.name}` ({tgt.nvrtc_arch}) does not run on this GPU ({info.name}, compute "
                f"capability {cc[0]}.{cc[1]}); no silent fallback to another architecture"
            )
        return tgt
    name = info.name.lower()
    for t in targets:
        if t.name in name.replace(" ", "").replace("-", "") and t.compute_capability == cc:
            return t
    raise CakeUserError(f"no target matches this GPU ({info.name}); pass --target")


def cmd_bench(args: argparse.Namespace) -> int:
    from cake_core import pipeline, plugins
    from cake_core.loop.benchmark import bench_candidate
    from cake_core.runtime.device import require_driver
    from cake_core.runtime.plan import Timing
    from cake_core.runtime.worker import GpuRunner

    problem = plugins.registry().get("problems", args.problem)
    shape, dtype = problem_cell(problem, args.shape, args.dtype)
    source = pipeline.load(args.file)
    require_driver()
    with GpuRunner() as runner:
        cand = pipeline.Candidate(source, _target_for_gpu(runner.device_info(), args.target))
        checked = cand.check()
        if not checked.ok:
            print_diagnostics([d for d in checked.diagnostics if d.is_error], source.sources, as_json=False)
            return 1
        m = bench_candidate(cand, problem, shape, dtype, runner, impl=f"cake:{Path(args.file).stem}",
                            timing=Timing(warmup=args.warmup, reps=args.reps))  # fmt: skip
    if args.json:
        print_json(m)
    else:
        print(f"{m.impl} on {m.gpu} (target {m.target}), {m.shape} {m.dtype}: {m.status}")
        if m.median_ms:
            print(f"  median {m.median_ms:.4f} ms over {len(m.samples)} runs, {m.tflops:.1f} TFLOP/s")
        for line in m.oracle:
            print(f"  oracle {line}")
        if m.sass:
            print(f"  SASS claims {', '.join(m.sass['claims'])}: missing {', '.join(m.sass['missing']) or 'none'}")
        if m.error:
            print(f"  error: {m.error}")
    return 0 if m.correct else 1


def cmd_export(args: argparse.Namespace) -> int:
    from cake_core.lower.export import export_program, write_export

    if args.torch is not None:
        if args.output is not None:
            raise CakeUserError("give --torch DIR or -o DIR, not both: --torch writes the .cu and .h into DIR too")
        return _export_torch(args.file, args.target, args.shape, args.problem, args.torch)
    if args.problem is not None:
        raise CakeUserError("--problem names the contract of a --torch operator; plain export takes none")
    out_dir = output_dir(args.output or ".")
    cand = _verified(args.file, args.target, False)
    if cand is None:
        return 1
    tgt = cand.target
    stem = Path(args.file).stem
    exported = export_program([cand.build(s) for s in _specs(cand, args.shape)], stem)
    cu, h = write_export(exported, out_dir, stem)
    arch = tgt.nvrtc_arch.removeprefix("sm_")
    print(f"wrote {cu} and {h}: {len(exported.functions)} launcher(s): {', '.join(exported.functions)}")
    print(f"build: nvcc -O3 -std=c++17 -gencode=arch=compute_{arch},code=sm_{arch} -shared -Xcompiler -fPIC "
          f"-o lib{stem}.so {cu.name}")  # fmt: skip
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    import datetime as dt

    from cake_core.loop.records import Budgets
    from cake_core.loop.run import RunOptions, run

    if args.resume and not args.out:
        raise CakeUserError("--resume needs --out: the run directory to resume")
    out = output_dir(args.out) if args.out else Path("runs") / (
        f"{args.problem}-{args.target}-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"
    )
    budgets = Budgets(args.budget, args.gpu_benchmarks, args.gpu_seconds, args.wall_seconds, args.agent_tokens,
                      args.benchmark_top)  # fmt: skip
    cell = None
    if args.shape or args.dtype:
        from cake_core import plugins

        cell = problem_cell(plugins.registry().get("problems", args.problem), args.shape, args.dtype)
    opts = RunOptions(args.problem, args.target, out, args.seed, args.agent, tuple(Path(p) for p in args.sources),
                      budgets, args.resume, args.bench_rejected, args.gpu_timeout, args.workers,
                      tuple(sys.argv[1:]), cell, args.feedback)  # fmt: skip
    from rich.console import Console

    from cake_core.loop.progress import Progress

    try:
        with Progress(Console(stderr=True)) as progress:
            summary = run(opts, observers=[progress], log=progress.note)
    except KeyboardInterrupt:
        if (out / "ledger.sqlite").exists():
            sys.stderr.write(f"interrupted: what was recorded stays in {out}; continue with "
                             f"`cake run {args.problem} --target {args.target} --out {out} --resume`\n")  # fmt: skip
            return 130
        raise
    _print_run(out, summary)
    return 0 if summary.best is not None else 1


def _print_run(out: Path, summary) -> None:  # type: ignore[no-untyped-def]
    """The run's end as a kernel engineer reads it: every candidate in a table, the stages, the best kernel
    against the baseline, and each rejected candidate's first diagnostic in one line."""
    from cake_core.loop.report import no_best_text

    record = json.loads((out / "run.json").read_text())
    rows = []
    ranked = sorted(record["candidates"], key=lambda c: (c["status"] != "measured", c["measured_ms"] or 0.0,
                                                         c["predicted_ms"] is None, c["predicted_ms"] or 0.0))  # fmt: skip
    for c in ranked:
        pred, ms = c["predicted_ms"], c["measured_ms"]
        rows.append((c["name"], c["origin"], c["status"], "-" if pred is None else f"{pred:.3f}",
                     "-" if ms is None else f"{ms:.3f}"))  # fmt: skip
    print()
    print_table(None, ["candidate", "origin", "status", ">predicted ms", ">measured ms"], rows)
    for name, text in summary.stages.items():
        print(f"{name}: {text}")
    rejected = [c for c in record["candidates"] if c["status"] == "rejected"]
    if rejected:
        print("\nrejected:")
        for c in rejected:
            print(f"  {c['name']}: {c['reason']}")
    print()
    if summary.best is None:
        print(no_best_text(summary))
    elif summary.measured:
        base = (f"; baseline {summary.baseline} {summary.baseline_ms:.4f} ms: {summary.speedup:.2f}x"
                if summary.baseline_ms else "; no baseline was measured")  # fmt: skip
        print(f"best: {summary.best} {summary.best_ms:.4f} ms (measured){base}")
    else:
        print(f"best: {summary.best} {summary.best_predicted_ms:.4f} ms predicted; nothing was benchmarked "
              "(no GPU of the target's architecture), so this ranking is the cost model's alone")  # fmt: skip
    print(f"run directory: {out} (ledger.sqlite, run.json, report.md" +
          (", best.cake, best.cu, best.h" if summary.best else "") + ")")


def cmd_cost(args: argparse.Namespace) -> int:
    from cake_core import plugins
    from cake_core.ir.resolve import names_in
    from cake_core.ir.types import DTYPE_NAMES
    from cake_core.loop.benchmark import program_values

    cand = _verified(args.file, args.target, args.json)
    if cand is None:
        return 1
    reg = plugins.registry()
    names = reg.names("cost_models")
    if not names:
        raise CakeUserError("no cost model is installed (the roofline model: pip install cake-cost-roofline)")
    model = reg.get("cost_models", args.model or names[0])
    checked = cand.check()
    values: dict[str, int | str] = {}
    if args.problem:
        problem = reg.get("problems", args.problem)
        cell = problem.default_cell
        values.update(program_values(checked, problem, cell.shape, cell.dtype))
    values.update(parse_shape(args.shape))
    prog = checked.module.entry
    needed = {x for p in prog.params for e in p.shape for x in names_in(e)}
    needed |= {p.dtype for p in prog.params if p.dtype not in DTYPE_NAMES}
    missing = sorted(needed - set(values))
    if missing:
        raise CakeUserError(
            f"`cake cost` needs every size and type of program `{prog.name}`: give {', '.join(missing)} with "
            "--shape (e.g. --shape B=32,N=65536,T=bf16) or take a problem's default cell with --problem"
        )
    try:
        est = model.estimate(checked, cand.target, values)
    except ValueError as exc:
        raise CakeUserError(f"cannot estimate {args.file}: {exc}") from None
    if args.json:
        print_json(est)
        return 0
    shape = ",".join(f"{k}={v}" for k, v in values.items())
    calibrated = "calibrated" if est.calibrated else "uncalibrated"
    print(f"{args.file} on {cand.target.name} at {shape}: {est.ms:.4f} ms, {est.bound}-bound "
          f"({est.model} {est.version}, {calibrated})")  # fmt: skip
    for x in est.launches:
        terms = sorted(x.terms.items(), key=lambda kv: -kv[1])
        rows = [[name, f"{ms:.4f}"] for name, ms in terms]
        print(f"launch {x.kernel}: {x.ms:.4f} ms, {x.bound}-bound, {x.ctas} CTAs in {x.waves} wave(s)")
        print_table(None, ["term", ">ms"], rows)
    return 0


def add_commands(sub) -> None:
    s = sub.add_parser("problems", help="list problems")
    s.add_argument("--json", action="store_true")
    s.set_defaults(handler=cmd_problems)

    s = sub.add_parser("lower", help="lower a .cake file to standalone CUDA C++")
    s.add_argument("file")
    s.add_argument("--target", required=True)
    s.add_argument("--shape", help="select one specialization, e.g. D=128,T=bf16 (default: all)")
    s.add_argument("-o", "--output")
    s.set_defaults(handler=cmd_lower)

    s = sub.add_parser("compile", help="compile with NVRTC for the target (no GPU needed)")
    s.add_argument("file")
    s.add_argument("--target", required=True)
    s.add_argument("--shape", help="select one specialization, e.g. D=128,T=bf16 (default: all)")
    s.add_argument("--json", action="store_true")
    s.add_argument("--no-cache", action="store_true")
    s.set_defaults(handler=cmd_compile)

    s = sub.add_parser("run", help="the four stages over a problem's candidates (GPU stages only with a GPU)")
    s.add_argument("problem")
    s.add_argument("--target", required=True)
    s.add_argument("--from", dest="sources", nargs="+", default=[], metavar="FILE.cake",
                   help="start from these schedules instead of the problem's committed ones")
    s.add_argument("--agent", help="agent plugin that proposes candidates round after round")
    s.add_argument("--seed", type=int, default=0, help="seeds the agent and the benchmark inputs")
    s.add_argument("--shape", help="the cell's sizes, e.g. B=1,N=1048576 (default: the problem's default cell)")
    s.add_argument("--dtype", help="the cell's element type (default: the default cell's)")
    s.add_argument("--budget", type=int, metavar="N", help="at most N candidates")
    s.add_argument("--gpu-benchmarks", type=int, metavar="N", help="at most N stage-3 dispatches of candidates")
    s.add_argument("--gpu-seconds", type=float, metavar="S", help="at most S seconds of stage-3 dispatches")
    s.add_argument("--wall-seconds", type=float, metavar="S", help="stop starting new work after S seconds")
    s.add_argument("--agent-tokens", type=int, metavar="N", help="at most N tokens spent by the agent")
    s.add_argument("--benchmark-top", type=int, metavar="K", help="benchmark the K best-predicted candidates "
                   "of each round (default 8)")
    s.add_argument("--bench-rejected", action="store_true", help="also benchmark candidates a verifier rule or "
                   "the interpreter gate refused (their rejection stays recorded)")
    s.add_argument("--gpu-timeout", type=float, default=120.0, metavar="S", help="per-dispatch timeout")
    s.add_argument("--no-feedback", dest="feedback", action="store_false", help="do not hand the agent the "
                   "routed findings (they are still routed and recorded): the ablation of steering by feedback")
    s.add_argument("--workers", type=int, metavar="N", help="stage-2 processes (default: the CPUs available)")
    s.add_argument("--out", help="run directory (default: runs/PROBLEM-TARGET-TIME)")
    s.add_argument("--resume", action="store_true", help="continue the run in --out, redoing nothing recorded")
    s.set_defaults(handler=cmd_run)

    s = sub.add_parser("export", help="write a standalone .cu with host launchers and a C header")
    s.add_argument("file", metavar="FILE|PROBLEM", help="a .cake file; with --torch also a problem (its best schedule)")
    s.add_argument("--target", required=True)
    s.add_argument("--shape", help="select specializations, e.g. D=128,T=bf16 (default: all)")
    s.add_argument("-o", "--output", help="directory (default: current)")
    s.add_argument("--torch", metavar="DIR", help="also write DIR/<problem>_op.py: the torch.library operator "
                   "cake::<problem> over the exported kernels (no Cake needed to run it)")
    s.add_argument("--problem", help="with --torch and a FILE: the problem whose contract the operator checks")
    s.set_defaults(handler=cmd_export)

    s = sub.add_parser("bench", help="check and time a .cake program on this machine's GPU")
    s.add_argument("file")
    s.add_argument("--problem", required=True)
    s.add_argument("--shape", help="sizes, e.g. B=32,N=65536,K=1024,D=128 (default: the problem's default cell)")
    s.add_argument("--dtype")
    s.add_argument("--target", help="default: the target matching the GPU found")
    s.add_argument("--reps", type=int, default=50)
    s.add_argument("--warmup", type=int, default=5)
    s.add_argument("--json", action="store_true")
    s.set_defaults(handler=cmd_bench)

    s = sub.add_parser("cost", help="estimate a .cake program's time with a cost model (no GPU needed)")
    s.add_argument("file")
    s.add_argument("--target", required=True)
    s.add_argument("--shape", help="program sizes and types, e.g. B=32,N=65536,K=1024,D=128,T=bf16")
    s.add_argument("--problem", help="start from this problem's default cell (--shape overrides)")
    s.add_argument("--model", help="cost model (default: the first installed, `cake plugins` lists them)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(handler=cmd_cost)


def _export_torch(file: str, target: str, shape_text: str | None, problem_name: str | None, out: str) -> int:
    """``cake export PROBLEM|FILE --target T --torch DIR``: the .cu, .h and ``<op>_op.py`` in ``DIR``."""
    from cake_core import plugins
    from cake_core.lower.export import export_program, runtime_sizes, write_export
    from cake_core.lower.torch_op import best_schedule, op_name, plan, select_specs, write_torch_op
    from cake_core.paths import make_dir

    reg = plugins.registry()
    out_dir = output_dir(out)
    problems = reg.values("problems")
    names = {p.name for p in problems}
    if not Path(file).exists() and file in names:
        if problem_name not in (None, file):
            raise CakeUserError(f"--problem {problem_name} contradicts the problem `{file}` exported")
        path, basis = best_schedule(file, target)
        problem = reg.get("problems", file)
        print(f"{file} on {target}: {path.name}, {basis}")
    elif not Path(file).exists():
        raise CakeUserError(f"`{file}` is neither a file nor a problem (problems: {', '.join(sorted(names))})")
    else:
        path = Path(file)
        problem = reg.get("problems", problem_name) if problem_name else _problem_of_file(path, problems)
    cand = _verified(str(path), target, False)
    if cand is None:
        return 1
    lowered = [cand.build(s) for s in select_specs(cand, parse_shape(shape_text))]
    stem = op_name(problem.name)
    exported = export_program(lowered, stem)
    make_dir(out_dir)
    cu, h = write_export(exported, out_dir, stem)
    p = plan(problem, lowered, exported.functions, exported.workspace_functions, runtime_sizes(lowered[0].checked),
             cu.name, cu.read_bytes(), path.name)  # fmt: skip
    module = write_torch_op(p, out_dir)
    print(f"wrote {cu}, {h} and {module}: torch.ops.cake.{p.op} over {len(p.specs)} specialization(s)")
    return 0


def _problem_of_file(path: Path, problems: Sequence[object]) -> object:
    """The problem whose committed ``schedules/`` holds ``path``: what ``--torch`` checks a file against
    when no ``--problem`` is given."""
    from cake_core.loop.run import seed_schedules

    resolved = path.resolve()
    for p in problems:
        if resolved in {s.resolve() for s in seed_schedules(p)}:
            return p
    raise CakeUserError(f"{path} is not a committed schedule of any problem: name the contract the "
                        f"operator checks with --problem")  # fmt: skip
