"""Side-by-side benchmark of knn and knn-ip on one GPU: Cake schedules and torch's ``q @ x.T`` + ``topk``.

Every implementation is timed the same way, in one process, on one stream (bench/benchlib.py): from q and
x in to the int32 indices out with every norm it needs, warm-up first, CUDA events around each repetition,
the L2 flushed before each repetition outside the timed region, median of the samples. Runs are
interleaved (run 0 of every implementation, then run 1, ...), each run on fresh standard-normal inputs
(the problem's distribution, drawn on the GPU), every output poisoned before timing and judged after by the
problem's full oracle (its float64 CUDA reference above the numpy limit).

The torch baselines (``torch_topk`` of cake_core/problems/knn/baseline.py, the very call ``cake run``
times as the problems' baseline ``torch-fp32``): ``torch`` scores in the input type (``baddbmm`` of the
squared norms and ``-2 q @ x.T`` for L2, ``q @ x.T`` for the inner product; cuBLAS accumulates in fp32
and rounds the scores to f16/bf16), ``torch-fp32`` the same in fp32 (the inputs converted inside the
timed region), then ``topk``. Cake schedules are named by their file under the problem's schedules/ or
by path (fused_topk, hopper, naive, hopper_split, hopper_split_big), or ``auto`` (the default): per cell,
the first of hopper_split (K <= 16, register lists) and hopper_split_big (K in {64, 100, 128}, shared
lists) whose domain takes it, recorded under that schedule's name. A cell outside a named schedule's
domain (fused_topk and hopper take K <= 32) is recorded as ``unsupported``.

The cells are knn's BENCH_CELLS (cake_core/problems/knn/cells.py), both metrics. Every Cake
specialization the cells need is compiled first, ``--compile-workers`` at a time (NVRTC takes tens of
seconds per unrolled specialization). ``--cell-budget-s`` bounds each cell and metric: after its first
run, no new run starts once the cell has spent it (the headline cell's torch baselines take 50-90 ms a
call and its fp64 oracle seconds a check), so every cell gets measured. Records are written after each
one; their ``commit`` is ``CAKE_COMMIT`` where set (a copied tree's git metadata can be stale), else
git's. bench/benchlib.py gives the launcher (called by keyword: its argument order differs between
branches), the timing loop and the record writer.

Usage: python bench/knn.py [--cells all|0,1,..] [--metrics l2,ip] [--impls torch,torch-fp32]
       [--schedules auto] [--ip-schedules auto] [--runs 2] [--reps 5] [--warmup 1]
       [--cell-budget-s 12] [--compile-workers N] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
#: each metric's committed schedules (knn-ip's in a package of its own)
SCHEDULES = {"l2": ROOT / "cake_core" / "problems" / "knn" / "schedules",
             "ip": ROOT / "cake_core" / "problems" / "knn" / "ip" / "schedules"}  # fmt: skip
PROBLEMS = {"l2": "knn", "ip": "knn-ip"}
TORCH_IMPLS = ("torch", "torch-fp32")
#: what ``auto`` tries per cell, in order: the first whose domain takes the cell runs
AUTO = ("hopper_split", "hopper_split_big")


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line; a bad value ends with one error line (argparse's usage and message)."""
    from cake_core.problems.knn.cells import BENCH_CELLS

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cells", default="all", help="`all` or indices into BENCH_CELLS, e.g. 0,3")
    ap.add_argument("--metrics", default="l2,ip", help="l2 (problem knn), ip (problem knn-ip)")
    ap.add_argument("--impls", default=",".join(TORCH_IMPLS), help="torch baselines: torch, torch-fp32 (or none)")
    ap.add_argument("--schedules", default="auto", help="Cake schedules of knn (L2): names, paths or auto")
    ap.add_argument("--ip-schedules", default="auto", help="Cake schedules of knn-ip: names, paths or auto")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--cell-budget-s", type=float, default=12.0,
                    help="per cell and metric: no new run starts after this many seconds (the first always runs)")
    ap.add_argument("--compile-workers", type=int, default=os.cpu_count() or 1,
                    help="Cake specializations compiled at a time before anything is timed")
    ap.add_argument("--out", default="")
    args = ap.parse_args(argv)
    if args.cells == "all":
        args.cell_list = list(BENCH_CELLS)
    else:
        try:
            args.cell_list = [BENCH_CELLS[int(i)] for i in _csv(args.cells)]
        except (ValueError, IndexError):
            ap.error(f"--cells takes `all` or indices 0..{len(BENCH_CELLS) - 1}, not `{args.cells}`")
    args.metric_list = _csv(args.metrics)
    if not args.metric_list or set(args.metric_list) - set(PROBLEMS):
        ap.error(f"--metrics takes l2 and/or ip, not `{args.metrics}`")
    args.impl_list = [] if args.impls == "none" else _csv(args.impls)
    if set(args.impl_list) - set(TORCH_IMPLS):
        ap.error(f"--impls takes {', '.join(TORCH_IMPLS)} or none, not `{args.impls}`")
    if min(args.runs, args.reps, args.compile_workers) < 1 or args.warmup < 0 or args.cell_budget_s <= 0:
        ap.error("--runs, --reps and --compile-workers must be at least 1, --warmup at least 0, --cell-budget-s "
                 "positive")
    args.schedule_paths = {"l2": [_schedules("l2", s) for s in _csv(args.schedules)],
                           "ip": [_schedules("ip", s) for s in _csv(args.ip_schedules)]}  # fmt: skip
    missing = [str(p) for ps in args.schedule_paths.values() for group in ps for _, p in group if not p.exists()]
    if missing:
        ap.error(f"no schedule file {missing[0]}")
    return args


def _schedules(metric: str, name: str) -> list[tuple[str, Path]]:
    """The ``(label, path)`` choices of one ``--schedules`` entry: ``auto``'s, in order, or the one named."""
    return [_schedule(metric, a) for a in AUTO] if name == "auto" else [_schedule(metric, name)]


def _schedule(metric: str, name: str) -> tuple[str, Path]:
    """``(label, path)``: a committed schedule of the metric's problem by its name, or a path."""
    path = SCHEDULES[metric] / f"{name}.cake"
    return (name, path) if path.exists() else (Path(name).stem, Path(name))


def record_commit(git_commit: Any) -> str:
    """The commit the records name: ``CAKE_COMMIT`` where set (a copied tree's git metadata can be stale),
    else ``git_commit()`` (benchlib's)."""
    return os.environ.get("CAKE_COMMIT", "").strip() or git_commit()


def make_record(problem: Any, cell: Any, impl: str, run: int, samples: list[float], report: Any, *, gpu: str,
                commit: str, date: str, status: str = "ok", error: str | None = None,
                launcher: Any = None) -> dict[str, Any]:  # fmt: skip
    """benchlib's record of one measurement, dated once per run, with the target named for every Cake schedule
    (built or not) and ``correct`` false where nothing was judged."""
    import benchlib

    rec = benchlib.make_record(problem, cell, impl, run, samples, report, gpu=gpu, target="h200", commit=commit,
                               status=status, error=error, launcher=launcher)  # fmt: skip
    rec.update(target="h200" if impl.startswith("cake:") else None, date=date,
               correct=bool(report.passed) if report else False)  # fmt: skip
    return rec


def table(records: list[dict[str, Any]]) -> list[str]:
    """Per cell, problem and impl: the run medians and the ratio to the faster correct torch baseline."""
    lines = [f"{'problem':7} {'cell':44} {'impl':22} {'runs (ms)':24} {'TFLOP/s':>8} {'vs torch':>9}"]
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in records:
        key = (r["problem"], " ".join(f"{k}={v}" for k, v in r["shape"].items()) + " " + r["dtype"], r["impl"])
        groups.setdefault(key, []).append(r)
    for (problem, cell, impl), rs in groups.items():
        meds = [r["median_ms"] for r in rs if r["median_ms"]]
        torch_ms = [r["median_ms"] for (p, c, i), g in groups.items() if (p, c) == (problem, cell)
                    and i in TORCH_IMPLS for r in g if r["median_ms"] and r["correct"]]  # fmt: skip
        ratio = f"{min(torch_ms) / max(meds):8.2f}x" if meds and torch_ms else " " * 9
        flag = "" if all(r["correct"] for r in rs) else ("WRONG" if meds else rs[0]["status"])
        lines.append(f"{problem:7} {cell[:44]:44} {impl:22} {', '.join(f'{m:.3f}' for m in meds):24} "
                     f"{(rs[0]['tflops'] or 0):8.1f} {ratio} {flag}")  # fmt: skip
    return lines


def _fresh(cell: Any, seed: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Standard-normal q and x drawn on the GPU, rounded to the cell's type: (host storage arrays, device)."""
    import numpy as np
    import torch

    s = cell.shape
    g = torch.Generator(device="cuda").manual_seed(seed)
    tdtype = {"bf16": torch.bfloat16, "f16": torch.float16}[cell.dtype]
    dev = {name: torch.randn((s["B"], s[rows], s["D"]), generator=g, device="cuda").to(tdtype)
           for name, rows in (("q", "M"), ("x", "N"))}  # fmt: skip
    host = {}
    for name, t in dev.items():
        arr = t.view(torch.int16).cpu().numpy().view(np.uint16) if cell.dtype == "bf16" else t.cpu().numpy()
        arr.flags.writeable = False
        host[name] = arr
    return host, dev


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    from benchlib import CakeLauncher, commit, precompile, time_fn, write_records
    from cake_core import plugins
    from cake_core.errors import CakeUserError
    from cake_core.loop.benchmark import today
    from cake_core.problems.knn.baseline import torch_topk
    from cake_core.runtime.worker import GpuRunner

    reg = plugins.registry()
    target = reg.get("targets", "h200")
    gpu, sha, date = torch.cuda.get_device_name(), record_commit(commit), today()
    began = time.perf_counter()
    for metric in args.metric_list:
        paths = [p for group in args.schedule_paths[metric] for _, p in group]
        cells = [(c.shape, c.dtype) for c in args.cell_list]
        done = precompile(paths, reg.get("problems", PROBLEMS[metric]), cells, args.compile_workers) if paths else []
        print(f"{metric}: {len(done)} specialization(s) compiled, {time.perf_counter() - began:.0f} s so far",
              flush=True)  # fmt: skip
    flush = torch.empty(256 * 1024 * 1024, dtype=torch.uint8, device="cuda")
    records: list[dict[str, Any]] = []
    with GpuRunner() as oracle_runner:
        for cell, metric in [(c, m) for c in args.cell_list for m in args.metric_list]:
            cell_began = time.perf_counter()
            problem = reg.get("problems", PROBLEMS[metric])
            s = cell.shape
            out = torch.empty((s["B"], s["M"], s["K"]), dtype=torch.int32, device="cuda")
            _, dev = _fresh(cell, 1000)  # the device tensors every implementation is bound to
            impls: dict[str, Any] = {i: torch_topk(dev["q"], dev["x"], s["K"], out, inner=problem.inner,
                                                   fp32=i == "torch-fp32") for i in args.impl_list}  # fmt: skip
            for group in args.schedule_paths[metric]:
                for n, (label, path) in enumerate(group):  # the first choice whose domain takes the cell
                    try:
                        bound = {"q": dev["q"], "x": dev["x"], "out": out}
                        impls[f"cake:{label}"] = CakeLauncher(path=path, target=target, problem=problem, shape=s,
                                                              dtype=cell.dtype, tensors=bound)  # fmt: skip
                        break
                    except Exception as exc:  # noqa: BLE001 - recorded: outside the domain, or not built
                        status = "unsupported" if isinstance(exc, CakeUserError) else "error"
                        if status == "unsupported" and n + 1 < len(group):
                            continue
                        error = f"{type(exc).__name__}: {exc}"
                        records.append(make_record(problem, cell, f"cake:{label}", 0, [], None, gpu=gpu,
                                                   commit=sha, date=date, status=status, error=error))  # fmt: skip
                        break
            for run in range(args.runs):
                if run and time.perf_counter() - cell_began > args.cell_budget_s:
                    print(f"{cell.label} {metric}: cell budget of {args.cell_budget_s:g} s spent after {run} run(s)")
                    break
                host, new = _fresh(cell, 2000 + run)
                dev["q"].copy_(new["q"])
                dev["x"].copy_(new["x"])
                del new
                oracle_runner.keep(host)
                for impl, fn in impls.items():
                    out.fill_(-7)  # poison
                    torch.cuda.synchronize()
                    try:
                        samples, status, error = time_fn(fn, args.reps, args.warmup, flush), "ok", None
                    except Exception as exc:  # noqa: BLE001 - recorded, the run goes on
                        samples, status, error = [], "error", f"{type(exc).__name__}: {exc}"
                    torch.cuda.synchronize()
                    report = problem.check(host, {"out": out.cpu().numpy()}, s, cell.dtype, runner=oracle_runner)
                    rec = make_record(problem, cell, impl, run, samples, report, gpu=gpu, commit=sha, date=date,
                                      status=status, error=error,
                                      launcher=fn if impl.startswith("cake:") else None)  # fmt: skip
                    records.append(rec)
                    ms = rec["median_ms"] or float("nan")
                    print(f"run {run} {problem.name:6} {cell.label} {impl:18} {ms:9.3f} ms correct={report.passed}",
                          flush=True)  # fmt: skip
                    if args.out:  # after every record: a run cut short keeps what it measured
                        write_records(Path(args.out), records)
            del impls, dev, out
            torch.cuda.empty_cache()
    if args.out:
        write_records(Path(args.out), records)
    print("\n".join(["", *table(records), f"{time.perf_counter() - began:.0f} s in all"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
