"""Side-by-side benchmark of kmeans-iter (one whole K-Means iteration) on one GPU: Cake schedules and
flash-kmeans's iteration.

Timed as bench/kmeans_assign.py times (its launcher and timing loop live in benchlib.py): one process, one
stream, from x and c in to the assignments and new centroids out, warm-up first, CUDA events around each
repetition, the L2 flushed before each repetition outside the timed region, median of the samples. Runs
are interleaved (run 0 of every impl, then run 1, ...), each run on fresh random inputs that every impl
of the run gets, with both outputs poisoned before timing and checked by the problem's full oracle after it.

The baseline is the problem's (`cake_core/problems/kmeans_iter/baseline.py`): flash-kmeans's iteration (`_euclid_iter`),
||x||^2 given (computed untimed), autotuned before timing, prepared on each run's inputs through its
declared entry; where flash-kmeans is not installed its records say `unavailable`. Each record carries
`fraction_of_compute_floor`: the time the problem's FLOPs take at the target's tensor peak for the
element type (`cake_core.cost.floor.peak_tflops`), over the median. The table's ratio is the lowest
run's baseline median over the impl's median in the same run.

Before any timing the schedules' specializations are compiled, each once, ``--jobs`` at a time, into
NVRTC's disk cache (``--compile-only`` does just that, without torch or a GPU). An impl whose first
timed call shows that ``--reps`` repetitions would take longer than ``--budget-ms`` gets fewer (at least
3): the long cells cost seconds, not minutes, and every run is still judged by the full oracle. Records
carry the commit of the tree, or ``$CAKE_COMMIT`` where it is set (a copy on a GPU machine).

Usage: python bench/kmeans_iter.py [--runs 3] [--reps 20] [--schedules hopper,fused,naive] [--cells default|all]
       [--jobs 8] [--budget-ms 1000] [--compile-only] [--out FILE.json]
(`default`: the reference cell in bf16 and f16; `all`: every check cell. naive.cake is one thread per
point on CUDA cores: at the reference cell it takes far longer than the others.)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchlib import CakeLauncher, keep, make_record, precompile, time_fn, to_device, to_host  # noqa: E402

SCHEDULES = ROOT / "cake_core" / "problems" / "kmeans_iter" / "schedules"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--schedules", default="hopper,fused")
    ap.add_argument("--cells", default="default",
                    help="default (the reference cell in bf16 and f16), all (every check cell), or indices: 0,4,5")
    ap.add_argument("--dtypes", default="",
                    help="bf16,f16: every chosen cell in each of these element types (default: each cell's own)")
    ap.add_argument("--jobs", type=int, default=8, help="specializations compiled this many at a time, before timing")
    ap.add_argument("--budget-ms", type=float, default=1000.0,
                    help="at most this long timing one impl in one run (not fewer than 3 repetitions)")
    ap.add_argument("--compile-only", action="store_true", help="compile into the disk cache and stop: no torch, no GPU")
    ap.add_argument("--out", default="")
    args = ap.parse_args(argv)
    if args.jobs < 1 or args.reps < 1 or args.runs < 1 or args.budget_ms <= 0:
        print("error: --jobs, --reps and --runs must be at least 1 and --budget-ms positive", file=sys.stderr)
        return 2
    from cake_core.problems.kmeans_iter.cells import CHECK_CELLS

    try:
        cells = _cells(CHECK_CELLS, args.cells, args.dtypes)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    paths = {}
    for name in [s for s in args.schedules.split(",") if s]:
        path = SCHEDULES / f"{name}.cake"  # a committed schedule by its name, or a path to any kmeans-iter one
        path, name = (path, name) if path.exists() else (Path(name), Path(name).stem)
        if not path.is_file():
            print(f"error: no schedule `{name}` (neither {SCHEDULES / (name + '.cake')} nor a file)", file=sys.stderr)
            return 2
        paths[f"cake:{name}"] = path
    if args.compile_only:
        from cake_core import plugins

        problem = plugins.registry().get("problems", "kmeans-iter")
        for line in precompile(paths.values(), problem, [(c.shape, c.dtype) for c in cells], args.jobs):
            print(f"compiled {line}", flush=True)
        return 0
    try:
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
    except (ImportError, RuntimeError) as exc:
        print(f"error: this benchmark needs torch with a CUDA GPU: {exc}", file=sys.stderr)
        return 2

    from cake_core import plugins
    from cake_core.cost.floor import peak_tflops
    from cake_core.loop.benchmark import git_commit
    from cake_core.problems.problem import baseline_of
    from cake_core.runtime.protocol import load_object
    from cake_core.runtime.worker import GpuRunner

    reg = plugins.registry()
    problem = reg.get("problems", "kmeans-iter")
    target = reg.get("targets", "h200")
    gpu = torch.cuda.get_device_name()
    commit = git_commit(ROOT)
    for line in precompile(paths.values(), problem, [(c.shape, c.dtype) for c in cells], args.jobs):
        print(f"compiled {line}", flush=True)
    flush = torch.empty(256 * 1024 * 1024, dtype=torch.uint8, device="cuda")
    baseline = baseline_of(problem)
    missing = baseline.missing()
    baseline_entry = None if missing else load_object(baseline.entry)
    records: list[dict] = []

    with GpuRunner() as oracle_runner:
        for cell in cells:
            shape, dtype = cell.shape, cell.dtype
            dev = to_device(problem.make_inputs(shape, dtype, 1000), dtype)
            outs = {t.name: torch.empty(t.shape_for(shape), device="cuda", dtype=dev["x"].dtype
                                        if t.dtype_for(dtype) == dtype else torch.int32)
                    for t in problem.tensors if t.role == "output"}  # fmt: skip
            impls: dict[str, object] = {
                impl: CakeLauncher(path, problem, target, shape, dtype, {**dev, **outs}) for impl, path in paths.items()
            }
            impls[f"baseline:{baseline.name}"] = baseline_entry
            compute_floor_ms = problem.flops(shape) / (peak_tflops(target, dtype) * 1e12) * 1e3

            for run in range(args.runs):
                # the run's inputs, the same for every impl: drawn once, sent to the oracle's worker once
                host = problem.make_inputs(shape, dtype, 2000 + 10 * run)
                for v in host.values():
                    v.flags.writeable = False
                oracle_runner.keep(host)
                pristine = to_device(host, dtype)
                for impl, fn in impls.items():
                    for k, v in pristine.items():
                        dev[k].copy_(v)
                    samples, status, error = [], "ok", None
                    if fn is None:
                        status, error = "unavailable", f"baseline `{baseline.name}` needs {', '.join(missing)}"
                    else:
                        try:
                            if not impl.startswith("cake:"):  # ||x||^2 and autotuning outside the timed region
                                fn = fn({"x": dev["x"], "c": dev["c"]}, outs, shape, dtype)
                            outs["assign"].fill_(-7)  # poison
                            outs["centroids"].fill_(float("nan"))
                            torch.cuda.synchronize()
                            first = time_fn(fn, 1, args.warmup, flush)[0]
                            reps = max(3, min(args.reps, int(args.budget_ms / max(first, 1e-3))))
                            outs["assign"].fill_(-7)  # poisoned again: the judged outputs are the timed runs'
                            outs["centroids"].fill_(float("nan"))
                            samples = time_fn(fn, reps, 0, flush)
                        except Exception as exc:  # noqa: BLE001 - recorded, the run goes on
                            status, error = "error", f"{type(exc).__name__}: {exc}"
                    torch.cuda.synchronize()
                    report = None
                    if status != "unavailable":
                        got = {k: to_host(v) for k, v in outs.items()}
                        report = problem.check(host, got, shape, dtype, runner=oracle_runner)
                    rec = make_record(problem, cell, impl, run, samples, report, gpu=gpu, target=target.name,
                                      commit=commit, status=status, error=error,
                                      launcher=impls[impl] if impl.startswith("cake:") else None)  # fmt: skip
                    med = rec["median_ms"]
                    rec.update(compute_floor_ms=compute_floor_ms,
                               fraction_of_compute_floor=compute_floor_ms / med if med else None)
                    keep(records, rec, cell.label, args.out)
    summarize(records)
    return 0


def _cells(check_cells, which: str, dtypes: str = "") -> list:
    """The reference cell in bf16 and f16 (``default``), every check cell (``all``) or the ones at the given
    indices (``0,4,5``); with ``dtypes`` (``bf16,f16``) each chosen cell in each of those element types, once."""
    if which == "default":
        chosen = [check_cells[0], check_cells[-1]]
    elif which == "all":
        chosen = list(check_cells)
    else:
        try:
            chosen = [check_cells[int(i)] for i in which.split(",") if i]
        except (ValueError, IndexError):
            raise ValueError(f"--cells takes default, all or indices in 0..{len(check_cells) - 1}, not `{which}`") from None
    if dtypes:
        wanted = [d for d in dtypes.split(",") if d]
        if not set(wanted) <= {"bf16", "f16"}:
            raise ValueError(f"--dtypes takes bf16 and f16, not `{dtypes}`")
        chosen = [attrs.evolve(c, dtype=d) for c in chosen for d in wanted]
    return list({(c.sizes, c.dtype): c for c in reversed(chosen)}.values())[::-1]


def table(records: list[dict]) -> list[dict]:
    """One row per cell and impl, in the records' order: the run medians, the best fraction of the compute
    floor, the lowest run's ratio of the baseline's median to the impl's (None without a baseline time in any
    of its runs) and the verdict (``ok``, ``WRONG`` or ``unavailable``)."""
    by: dict[tuple[str, str], list[dict]] = {}
    for r in records:
        cell = " ".join(f"{k}={v}" for k, v in r["shape"].items()) + " " + r["dtype"]
        by.setdefault((cell, r["impl"]), []).append(r)
    rows = []
    for (cell, impl), rs in by.items():
        base = {b["run"]: b["median_ms"] for (c, i), bs in by.items() if c == cell and i.startswith("baseline:")
                for b in bs if b["median_ms"]}  # fmt: skip
        ratios = [base[r["run"]] / r["median_ms"] for r in rs if r["median_ms"] and r["run"] in base]
        fractions = [r["fraction_of_compute_floor"] for r in rs if r["fraction_of_compute_floor"]]
        verdict = "unavailable" if rs[0]["status"] == "unavailable" else "ok" if all(r["correct"] for r in rs) else "WRONG"
        rows.append({"cell": cell, "impl": impl, "runs_ms": [r["median_ms"] for r in rs if r["median_ms"]],
                     "fraction_of_compute_floor": max(fractions, default=None),
                     "ratio": min(ratios, default=None), "verdict": verdict})  # fmt: skip
    return rows


def summarize(records: list[dict]) -> None:
    """Print :func:`table`."""
    print()
    print(f"{'cell':40} {'impl':22} {'runs (ms)':26} {'floor':>6} {'vs baseline (lowest run)':>25}")
    for row in table(records):
        frac, ratio = row["fraction_of_compute_floor"], row["ratio"]
        print(f"{row['cell']:40} {row['impl']:22} {', '.join(f'{m:.3f}' for m in row['runs_ms']):26} "
              f"{f'{frac:.1%}' if frac else '-':>6} {f'{ratio:.2f}x' if ratio else '-':>25} {row['verdict']}")


if __name__ == "__main__":
    sys.exit(main())
