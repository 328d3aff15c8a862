"""``cake problems``, ``cake lower``, ``cake compile``, ``cake bench``: the build and GPU commands."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import attrs

from cake_core.diagnostics.diagnostic import DiagnosticError
from cake_core.diagnostics.render import render_all, to_json
from cake_core.errors import CakeUserError
from cake_core.logs import get_logger


def _print_json(obj: object) -> None:
    sys.stdout.write(json.dumps(obj, indent=2) + "\n")


def _load_checked(path: str, target_name: str, as_json: bool):
    """Parse, type-check and run every verifier rule for the target: the gates any build passes first.
    On errors, print them and return None (the caller exits 1); warnings are printed and kept going."""
    from cake_core.lower import build as b
    from cake_core.verify.runner import verify

    tgt = b.target(target_name)
    try:
        src = b.load(path)
    except DiagnosticError as exc:
        _show(exc.diagnostics, path, as_json)
        return None
    diags = verify(src.module, tgt)
    errors = any(d.is_error for d in diags)
    if diags:
        # with --json, stdout carries one document: the diagnostics when they stop the build, else the
        # command's own result (warnings then go to stderr as text)
        _show(diags, path, as_json and errors)
    if errors:
        return None
    return src, tgt, b.check(src, tgt)


def _show(diags, path: str, as_json: bool) -> None:
    text = Path(path).read_text() if Path(path).exists() else ""
    if as_json:
        sys.stdout.write(to_json(diags) + "\n")
    else:
        sys.stderr.write(render_all(diags, {path: text}) + "\n")


def parse_shape(text: str | None) -> dict[str, int | str]:
    """``B=32,N=65536,T=bf16`` -> {"B": 32, "N": 65536, "T": "bf16"}."""
    out: dict[str, int | str] = {}
    if not text:
        return out
    for item in text.split(","):
        if not item.strip():
            continue
        if "=" not in item:
            raise CakeUserError(f"bad --shape item `{item}`: write NAME=VALUE pairs, e.g. B=32,N=65536")
        k, v = (s.strip() for s in item.split("=", 1))
        out[k] = int(v) if v.lstrip("-").isdigit() else v
    return out


def _specs(checked, shape_text: str | None):
    from cake_core.lower import build as b

    values = parse_shape(shape_text)
    if values:
        return [b.spec_for(checked, values)]
    return b.all_specs(checked)


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
        _print_json(records)
        return 0
    for r in records:
        print(f"{r['name']}: {r['summary']}")
        for t in r["tensors"]:
            print(f"  {t}")
        print(f"  default cell: {r['default_cell']['shape']} {r['default_cell']['dtype']}")
    return 0


def cmd_lower(args: argparse.Namespace) -> int:
    from cake_core.lower.program import lower_program

    loaded = _load_checked(args.file, args.target, False)
    if loaded is None:
        return 1
    _, tgt, checked = loaded
    sources = [lower_program(checked, tgt, spec).source for spec in _specs(checked, args.shape)]
    text = "\n".join(sources)
    if args.output:
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def cmd_compile(args: argparse.Namespace) -> int:
    from cake_core.lower import build as b
    from cake_core.runtime.nvrtc import CompileError

    loaded = _load_checked(args.file, args.target, args.json)
    if loaded is None:
        return 1
    _, tgt, checked = loaded
    log = get_logger("cake.compile")
    results = []
    failed = False
    for spec in _specs(checked, args.shape):
        try:
            built = b.build(checked, tgt, spec, cache=not args.no_cache)
        except CompileError as exc:
            failed = True
            log.info("nvrtc compile", file=args.file, target=tgt.name, arch=tgt.nvrtc_arch,
                     specialization=spec.label, ok=False, error=str(exc))  # fmt: skip
            results.append({"specialization": spec.label, "ok": False, "error": str(exc), "log": exc.log})
            continue
        c = built.compiled
        log.info("nvrtc compile", file=args.file, target=tgt.name, arch=tgt.nvrtc_arch, specialization=spec.label,
                 ok=True, cache=c.cache_status, compile_s=round(c.compile_s, 4), wall_s=round(c.wall_s, 4),
                 cubin_bytes=len(c.cubin))  # fmt: skip
        results.append({
            "specialization": spec.label, "ok": True, "target": tgt.name, "arch": tgt.nvrtc_arch,
            "nvrtc": ".".join(map(str, c.nvrtc_version)), "cubin_bytes": len(c.cubin), "cache": c.cache_status,
            "compile_s": round(c.compile_s, 3),
            "kernels": {k: attrs.asdict(r) for k, r in c.kernels.items()},
            "warnings": [attrs.asdict(w) for w in c.warnings],
            "smem_bytes": {lk.function: lk.model.smem_bytes for lk in built.lowered.kernels},
        })  # fmt: skip
    if args.json:
        _print_json(results)
    else:
        for r in results:
            if not r["ok"]:
                print(f"{r['specialization']}: compile failed: {r['error']}")
                continue
            print(f"{r['specialization']}: {r['arch']} cubin {r['cubin_bytes']} bytes (NVRTC {r['nvrtc']}, "
                  f"cache {r['cache']})")  # fmt: skip
            for name, k in r["kernels"].items():
                print(f"  {name}: {k['registers']} registers, {k['spill_stores']} B spill stores, "
                      f"{k['spill_loads']} B spill loads, {k['stack_frame']} B stack, "
                      f"{r['smem_bytes'].get(name, 0)} B dynamic shared")  # fmt: skip
            for w in r["warnings"]:
                print(f"  warning: {w.get('message', w)}")
    return 1 if failed else 0


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
    from cake_core import plugins
    from cake_core.lower import build as b
    from cake_core.loop.benchmark import bench_candidate
    from cake_core.runtime.device import require_driver
    from cake_core.runtime.plan import Timing
    from cake_core.runtime.worker import GpuRunner

    problem = plugins.registry().get("problems", args.problem)
    values = parse_shape(args.shape)
    dtype = str(values.pop("dtype", args.dtype or problem.default_cell.dtype))
    shape = dict(problem.default_cell.shape)
    shape.update({k: int(v) for k, v in values.items()})
    src = b.load(args.file)
    require_driver()
    with GpuRunner() as runner:
        tgt = _target_for_gpu(runner.device_info(), args.target)
        try:
            checked = b.check(src, tgt)
        except DiagnosticError as exc:
            sys.stderr.write(render_all(exc.diagnostics, src.sources) + "\n")
            return 1
        m = bench_candidate(checked, problem, tgt, shape, dtype, runner, impl=f"cake:{Path(args.file).stem}",
                            timing=Timing(warmup=args.warmup, reps=args.reps))  # fmt: skip
    if args.json:
        _print_json(m.to_json())
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

    loaded = _load_checked(args.file, args.target, False)
    if loaded is None:
        return 1
    _, tgt, checked = loaded
    stem = Path(args.file).stem
    exported = export_program(checked, tgt, _specs(checked, args.shape), stem)
    cu, h = write_export(exported, Path(args.output), stem)
    arch = tgt.nvrtc_arch.removeprefix("sm_")
    print(f"wrote {cu} and {h}: {len(exported.functions)} launcher(s): {', '.join(exported.functions)}")
    print(f"build: nvcc -O3 -std=c++17 -gencode=arch=compute_{arch},code=sm_{arch} -shared -Xcompiler -fPIC "
          f"-o lib{stem}.so {cu.name}")  # fmt: skip
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    import datetime as dt

    from cake_core.loop.run import run

    out = Path(args.out) if args.out else Path("runs") / (
        f"{args.problem}-{args.target}-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"
    )
    record = run(args.problem, args.target, budget=args.budget, agent=args.agent, out=out, resume=args.resume)
    print()
    print(f"{'candidate':18} {'status':14} {'regs':>5} {'smem KiB':>9} {'ms':>9} {'TFLOP/s':>8}  findings")
    for c in record["candidates"]:
        regs = max((k["registers"] or 0 for k in (c["compile"] or {}).get("kernels", {}).values()), default=0)
        smem = max((c["compile"] or {}).get("smem_bytes", {}).values(), default=0)
        ms = c["bench"]["median_ms"] if c["bench"] and c["bench"]["median_ms"] else None
        tf = c["bench"]["tflops"] if c["bench"] and c["bench"]["tflops"] else None
        print(f"{c['name']:18} {c['status']:14} {regs:5} {smem / 1024:9.1f} {ms or float('nan'):9.3f} "
              f"{tf or float('nan'):8.1f}  {len(c['findings'])}")  # fmt: skip
    print(f"\nrecord: {out / 'run.json'}")
    return 0 if any(c["status"] in ("compiled", "measured") for c in record["candidates"]) else 1


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
    s.add_argument("--budget", type=int, help="at most this many candidates")
    s.add_argument("--agent", help="agent plugin that proposes candidates (none is registered yet)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", help="run directory (default: runs/PROBLEM-TARGET-TIME)")
    s.add_argument("--resume", action="store_true", help="keep candidates already measured in --out")
    s.set_defaults(handler=cmd_run)

    s = sub.add_parser("export", help="write a standalone .cu with host launchers and a C header")
    s.add_argument("file")
    s.add_argument("--target", required=True)
    s.add_argument("--shape", help="select specializations, e.g. D=128,T=bf16 (default: all)")
    s.add_argument("-o", "--output", default=".", help="directory (default: current)")
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
