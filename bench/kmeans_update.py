"""Side-by-side benchmark of kmeans-update on one GPU: Cake schedules, flash-kmeans and PyTorch.

Every implementation is timed the same way, in one process, on one stream, from the points ``x`` and their
assignments ``assign`` (and the previous centroids ``c``, kept by empty clusters) to the new fp32 centroids
and the counts, with every buffer it zeroes: warm-up first, CUDA events around each repetition, the L2
flushed (a 256 MiB write) before each repetition outside the timed region, median of the samples. Runs are
interleaved (run 0 of every implementation, then run 1, ...); each run of a cell draws fresh random inputs
on the GPU (the distribution of the problem's ``make_inputs``: standard normal points, uniform assignments
over all but an eighth of the clusters, which stay empty), shared by every implementation of that run.
Outputs are poisoned before and judged by the problem's full oracle after timing, every element.

- ``cake:NAME``: a schedule under ``cake_core/problems/kmeans_update/schedules`` (or a path), lowered for h200;
  at a cell outside its domain its records say ``unsupported``.
- ``flash-kmeans``: ``triton_centroid_update_sorted_euclid`` of flash-kmeans 0.3.1, its sort included, as
  ``cake run`` times it (cake_core/problems/kmeans_update/baseline.py, one implementation for both): into
  fp32 sums and the int32 ``counts`` output it is handed (both zeroed inside the timed region, as it
  zeroes its own), without its own division (which rounds the centroids to ``x``'s type, what no fp32
  oracle accepts), then the fp32 division into ``centroids`` (empty clusters keeping ``c``), also timed:
  one call computes every output. ``BLOCK_N`` is tuned per cell (over ``--fk-block-n``) before any
  timing. Without the package its records say ``unavailable``.
- ``torch``: ``index_add_`` of the points (converted to fp32) into the sums, ``bincount`` for the counts,
  one division, ``where`` for the empty clusters.

The table gives, per cell and implementation, each run's median and the ratio to flash-kmeans of the same
run; the ratio reported is the lowest run's.

The schedules' specializations are compiled first, ``--jobs`` at a time, into NVRTC's disk cache
(``$CAKE_CACHE_DIR``); ``--compile-only`` does just that, without torch or a GPU, so that a cache made on
another machine (same NVRTC and Cake versions) can travel with the tree.

Usage: python bench/kmeans_update.py [--runs 3] [--reps 30] [--schedules atomic,vector,privatized,staged,sorted]
       [--impls cake,flash-kmeans,torch] [--cells all|reference] [--dtypes bf16,f16] [--jobs 8]
       [--compile-only] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchlib import CakeLauncher, keep, make_record, precompile, time_fn, to_host  # noqa: E402

from cake_core.problems.kmeans_update.baseline import BLOCK_N_CHOICES, tuned_sorted_update  # noqa: E402

PROBLEM = "kmeans-update"
SCHEDULES = ROOT / "cake_core" / "problems" / "kmeans_update" / "schedules"
IMPLS = ("cake", "flash-kmeans", "torch")
BASELINE = "flash-kmeans"
#: the reference cell first, then four more of the domain: N prime, few clusters, ragged K with D=256, D=64
SHAPES: tuple[dict[str, int], ...] = (
    {"B": 32, "N": 65536, "K": 1024, "D": 128},
    {"B": 1, "N": 65521, "K": 1024, "D": 128},
    {"B": 8, "N": 16384, "K": 100, "D": 128},
    {"B": 4, "N": 30011, "K": 4093, "D": 256},
    {"B": 16, "N": 32768, "K": 1000, "D": 64},
)
DTYPES = ("bf16", "f16")
#: the fields every record has (benchlib's ``make_record``, and what this benchmark adds)
FIELDS = ("problem", "shape", "dtype", "gpu", "impl", "run", "median_ms", "correct", "date", "commit", "status",
          "error", "oracle", "samples", "checked", "config", "gbps")  # fmt: skip


class BadArgs(Exception):
    """A command line this script cannot run: one line for stderr, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise BadArgs(message)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line, checked before any GPU work: schedules resolved to files, cells and types known."""
    ap = _Parser(prog="kmeans_update.py", description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--schedules", default="atomic,vector,privatized,staged,sorted")
    ap.add_argument("--impls", default=",".join(IMPLS))
    ap.add_argument("--cells", default="all", help="all, or reference (the reference cell only)")
    ap.add_argument("--dtypes", default=",".join(DTYPES))
    ap.add_argument("--fk-block-n", default=",".join(map(str, BLOCK_N_CHOICES)),
                    help="the BLOCK_N values flash-kmeans is tuned over")
    ap.add_argument("--jobs", type=int, default=8, help="schedules compiled this many at a time, before any timing")
    ap.add_argument("--compile-only", action="store_true",
                    help="compile the schedules' specializations into the disk cache ($CAKE_CACHE_DIR) and stop: "
                         "no torch, no GPU")  # fmt: skip
    ap.add_argument("--out", default="")
    args = ap.parse_args(argv)
    for name in ("runs", "reps", "jobs"):
        if getattr(args, name) < 1:
            raise BadArgs(f"--{name} must be at least 1, not {getattr(args, name)}")
    if args.warmup < 0:
        raise BadArgs(f"--warmup must not be negative, not {args.warmup}")
    args.impls = _words(args.impls, IMPLS, "--impls")
    args.dtypes = _words(args.dtypes, DTYPES, "--dtypes")
    if args.cells not in ("all", "reference"):
        raise BadArgs(f"--cells is `all` or `reference`, not `{args.cells}`")
    try:
        args.fk_block_n = [int(v) for v in args.fk_block_n.split(",") if v]
    except ValueError:
        raise BadArgs(f"--fk-block-n takes integers separated by commas, not `{args.fk_block_n}`") from None
    if not args.fk_block_n or any(v < 16 or v & (v - 1) for v in args.fk_block_n):
        raise BadArgs("--fk-block-n takes powers of two from 16 up")
    args.schedules = schedule_paths(args.schedules) if "cake" in args.impls else {}
    return args


def _words(text: str, known: Sequence[str], flag: str) -> list[str]:
    words = [w for w in text.split(",") if w]
    unknown = [w for w in words if w not in known]
    if unknown or not words:
        raise BadArgs(f"{flag} takes some of {', '.join(known)}; not `{text}`")
    return words


def schedule_paths(text: str) -> dict[str, Path]:
    """``cake:NAME`` -> file for each name of ``text``: a schedule of the problem by name, or a path."""
    out = {}
    for name in [w for w in text.split(",") if w]:
        path = SCHEDULES / f"{name}.cake"
        if not path.is_file():
            path = Path(name)
            if not path.is_file():
                raise BadArgs(f"no schedule `{name}`: neither {SCHEDULES.relative_to(ROOT)}/{name}.cake nor a file")
            name = path.stem
        out[f"cake:{name}"] = path
    if not out:
        raise BadArgs("--schedules names no schedule")
    return out


def cells(which: str, dtypes: Sequence[str]) -> list[tuple[dict[str, int], str]]:
    shapes = SHAPES if which == "all" else SHAPES[:1]
    return [(dict(s), dt) for s in shapes for dt in dtypes]


def record(ctx: dict[str, Any], impl: str, run: int, samples: Sequence[float], report: Any, *, status: str = "ok",
           error: str | None = None, checked: str = "centroids, counts", config: dict | None = None,
           launcher: Any = None) -> dict:  # fmt: skip
    """One record (benchlib's ``make_record``) with what was judged, what was tuned and GB/s at the least
    traffic; ``ctx`` holds the cell's ``problem``, ``cell``, ``gpu`` and ``commit``. A failed verdict makes
    the status ``wrong``."""
    if status == "ok" and report is not None and not report.passed:
        status = "wrong"
    rec = make_record(ctx["problem"], ctx["cell"], impl, run, list(samples), report, gpu=ctx["gpu"], target="h200",
                      commit=ctx["commit"], status=status, error=error, launcher=launcher)  # fmt: skip
    med = rec["median_ms"]
    nbytes = ctx["problem"].min_bytes(ctx["cell"].shape, ctx["cell"].dtype)
    rec.update(checked=checked, config=dict(config or {}), gbps=nbytes / (med * 1e-3) / 1e9 if med else None)
    return rec


def table(records: Sequence[dict]) -> list[str]:
    """Per cell and implementation: each run's median, GB/s at the least traffic, and the lowest run's ratio
    to flash-kmeans in the same run."""
    lines = [f"{'cell':36} {'impl':22} {'runs (ms)':26} {'GB/s':>6} {'vs ' + BASELINE:>16}"]
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in records:
        cell = " ".join(f"{k}={v}" for k, v in r["shape"].items()) + f" {r['dtype']}"
        groups.setdefault((cell, r["impl"]), []).append(r)
    for (cell, impl), rs in groups.items():
        meds = [r["median_ms"] for r in rs]
        base = {r["run"]: r["median_ms"] for (c, i), g in groups.items() if c == cell and i == BASELINE for r in g}
        ratios = [base[r["run"]] / r["median_ms"] for r in rs if r["median_ms"] and base.get(r["run"])]
        verdict = "" if all(r["correct"] for r in rs) else f"  {'/'.join(sorted({r['status'] for r in rs}))}"
        runs = ", ".join("-" if m is None else f"{m:.3f}" for m in meds)
        gbps = max((r["gbps"] or 0.0 for r in rs), default=0.0)
        ratio = f"{min(ratios):6.2f}x lowest" if ratios else "-"
        lines.append(f"{cell[:36]:36} {impl:22} {runs:26} {gbps:6.0f} {ratio:>16}{verdict}")
    return lines


def device_inputs(shape: dict[str, int], dtype: str, seed: int, empty_fraction: float) -> dict[str, Any]:
    """Fresh inputs on the GPU with ``make_inputs``' distribution (numpy takes ~10 s at the reference cell)."""
    import torch

    b_, n_, k_, d_ = shape["B"], shape["N"], shape["K"], shape["D"]
    g = torch.Generator(device="cuda").manual_seed(seed)
    tdtype = {"bf16": torch.bfloat16, "f16": torch.float16}[dtype]
    x = torch.randn((b_, n_, d_), generator=g, device="cuda").to(tdtype)
    c = torch.randn((b_, k_, d_), generator=g, device="cuda").to(tdtype)
    empty = max(1, int(k_ * empty_fraction)) if k_ >= 2 else 0
    assign = torch.empty((b_, n_), dtype=torch.int32, device="cuda")
    for b in range(b_):
        used = torch.randperm(k_, generator=g, device="cuda")[empty:].sort().values
        assign[b] = used[torch.randint(0, used.numel(), (n_,), generator=g, device="cuda")].to(torch.int32)
    return {"x": x, "assign": assign, "c": c}


class Impl:
    """One implementation at one cell: the timed call, what it writes (poisoned before each run) and how its
    outputs reach the oracle; ``config`` is what was tuned, ``checked`` what the oracle judges."""

    def __init__(self, fn: Callable[[], None], written: Sequence[Any], outputs: Callable[[], dict],
                 checked: str = "centroids, counts", config: dict | None = None) -> None:  # fmt: skip
        self.fn, self.written, self.outputs, self.checked, self.config = fn, written, outputs, checked, config or {}

    def poison(self) -> None:
        for t in self.written:
            t.fill_(float("nan") if t.is_floating_point() else -7)


def baselines(dev: dict[str, Any], out: dict[str, Any], shape: dict[str, int], block_n: Sequence[int],
              flush: Any) -> dict[str, Impl]:  # fmt: skip
    """flash-kmeans (``BLOCK_N`` tuned over ``block_n``, outside any timed region) and torch at one cell, both
    writing ``out``; flash-kmeans is missing when ``block_n`` is empty or the package cannot be imported."""
    import torch

    b_, n_, k_, d_ = shape["B"], shape["N"], shape["K"], shape["D"]
    x, assign, c = dev["x"], dev["assign"], dev["c"]
    sums = torch.empty((b_, k_, d_), dtype=torch.float32, device="cuda")
    offsets = (torch.arange(b_, device="cuda") * k_)[:, None]

    def outputs() -> dict[str, Any]:
        return {k: to_host(v) for k, v in out.items()}

    def torch_update() -> None:
        idx = (assign + offsets).view(-1)
        sums.view(b_ * k_, d_).zero_().index_add_(0, idx, x.view(b_ * n_, d_).float())
        out["counts"].view(-1).copy_(torch.bincount(idx, minlength=b_ * k_))
        n = out["counts"][..., None]
        torch.where(n > 0, sums / n.clamp(min=1), c.float(), out=out["centroids"])

    impls = {"torch": Impl(torch_update, [*out.values(), sums], outputs)}

    def median_ms(fn: Callable[[], None]) -> float:
        return statistics.median(time_fn(fn, 5, 1, flush))

    if not block_n:
        return impls
    try:
        fk, best = tuned_sorted_update(x, assign, c, out["centroids"], out["counts"], sums, median_ms, block_n)
    except ImportError:
        return impls
    impls[BASELINE] = Impl(fk, [*out.values(), sums], outputs, config={"BLOCK_N": best})
    return impls


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parse(argv)
    except BadArgs as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.compile_only:
        from cake_core import plugins

        problem = plugins.registry().get("problems", PROBLEM)
        for line in precompile(args.schedules.values(), problem, cells(args.cells, args.dtypes), args.jobs):
            print(f"compiled {line}", flush=True)
        return 0
    try:
        import torch
    except ImportError:
        print("error: torch is not installed: this benchmark needs torch and a CUDA GPU", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("error: no CUDA GPU visible to torch: this benchmark needs one", file=sys.stderr)
        return 2
    from cake_core import plugins
    from cake_core.errors import CakeUserError
    from cake_core.loop.benchmark import git_commit
    from cake_core.problems.problem import Cell

    reg = plugins.registry()
    problem, target = reg.get("problems", PROBLEM), reg.get("targets", "h200")
    gpu, commit = torch.cuda.get_device_name(), git_commit(ROOT)
    flush = torch.empty(256 * 1024 * 1024, dtype=torch.uint8, device="cuda")
    records: list[dict] = []
    todo = cells(args.cells, args.dtypes)
    for line in precompile(args.schedules.values(), problem, todo, args.jobs):
        print(f"compiled {line}", flush=True)
    for shape, dtype in todo:
        ctx = {"problem": problem, "cell": Cell(shape, dtype), "gpu": gpu, "commit": commit}
        dev = device_inputs(shape, dtype, 1000, problem.empty_fraction)
        out = {"centroids": torch.empty((shape["B"], shape["K"], shape["D"]), dtype=torch.float32, device="cuda"),
               "counts": torch.empty((shape["B"], shape["K"]), dtype=torch.int32, device="cuda")}  # fmt: skip
        impls: dict[str, Impl | str] = {}
        for name, path in args.schedules.items():
            try:
                launcher = CakeLauncher(path, problem, target, shape, dtype, {**dev, **out})
                impls[name] = Impl(launcher, list(out.values()), lambda: {k: to_host(v) for k, v in out.items()})
            except CakeUserError as exc:  # a cell outside the schedule's domain
                impls[name] = f"unsupported: {exc}".splitlines()[0]
            except Exception as exc:  # noqa: BLE001 - recorded: the other implementations go on
                impls[name] = f"{type(exc).__name__}: {exc}".splitlines()[0]
        tuned = args.fk_block_n if BASELINE in args.impls else ()  # flash-kmeans tuned only where it is timed
        found = baselines(dev, out, shape, tuned, flush)
        for name in (BASELINE, "torch"):
            if name in args.impls:
                impls[name] = found.get(name, "unavailable: flash-kmeans 0.3.1 is not installed")
        for run in range(args.runs):
            new = device_inputs(shape, dtype, 2000 + 10 * run, problem.empty_fraction)
            for k, v in new.items():
                dev[k].copy_(v)
            del new
            inputs = {k: to_host(v) for k, v in dev.items()}
            judge = problem.judge(inputs, shape, dtype)
            for impl, entry in impls.items():
                keep(records, _one(ctx, impl, run, entry, judge, args, flush), ctx["cell"].label, args.out)
    print("\n".join(["", *table(records)]))
    return 0


def _one(ctx: dict, impl: str, run: int, entry: Impl | str, judge: Callable, args: Any, flush: Any) -> dict:
    """Poison, time, judge one implementation in one run; an implementation that cannot run is recorded so."""
    if isinstance(entry, str):
        status = entry.split(":")[0] if entry.startswith(("unavailable:", "unsupported:")) else "error"
        return record(ctx, impl, run, [], None, status=status, error=entry)
    import torch

    entry.poison()
    torch.cuda.synchronize()
    try:
        samples = time_fn(entry.fn, args.reps, args.warmup, flush)
        torch.cuda.synchronize()
        report, error, status = judge(entry.outputs()), None, "ok"
    except Exception as exc:  # noqa: BLE001 - recorded, the run goes on
        samples, report, status, error = [], None, "error", f"{type(exc).__name__}: {exc}"
    launcher = entry.fn if impl.startswith("cake:") and run == 0 else None  # SASS and resources, once a cell
    return record(ctx, impl, run, samples, report, status=status, error=error, checked=entry.checked,
                  config=entry.config, launcher=launcher)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
