"""How well the cost model ranks kmeans-assign schedules on the H200: the Spearman rank correlation of
predicted against measured time, within each of three shapes, averaged over the shapes.

The kernels ranked are the 48 settings of ampere.cake's constants (``AMPERE_SWEEP``) and the two Hopper
schedules; naive.cake is measured and estimated too, as an extra point outside the correlation (its gap
to the tuned schedules would inflate it). Each shape is ranked on its own:

* the reference cell B=32, N=65536, K=1024, D=128 (tensor-core work dominates);
* many centroids, B=4, N=32768, K=4096, D=128 (a long centroid loop per CTA, few CTAs);
* a small D, B=16, N=32768, K=1024, D=64 (half the work per distance, the D=64 specialization).

Every kernel is type-checked and estimated with the installed cost model, compiled with NVRTC (in a
process pool that fills the compile cache, so the measuring process finds every cubin there), and then,
one at a time, measured the way ``cake run`` measures (:func:`cake_core.loop.benchmark.bench_candidate`
in a :class:`~cake_core.runtime.worker.GpuRunner`: the full oracle before and after timing, the L2
flushed, CUDA events, median of the repetitions). Every kernel of a shape sees the same inputs. A
kernel that fails on the GPU is recorded with its status and left out of the correlation. The record
lists, per shape, every case (predicted and measured ms, correct, bound, both ranks), the five ranked
worst (largest difference of ranks), the correlation, and the average against the gate (0.7) and the
goal (0.85). ``--dry-run`` does everything but the GPU part and times it. ``--reuse RECORD`` takes the
measurements of an earlier record and measures only what it lacks (each case says which run measured it);
with ``--dry-run`` it ranks those measurements against the installed model's estimates, measuring nothing.

``--records FILE...`` ranks another problem's committed schedules offline instead (no GPU, no compile):
the measurements are the benchmark records of ``bench/kmeans_update.py`` or ``bench/kmeans_iter.py``
(``problem``, ``shape``, ``dtype``, ``impl``, ``median_ms``, ``correct`` per run), each ``cake:NAME``
taken as the problem's ``schedules/NAME.cake`` at its lowest correct run; every (shape, dtype) cell is
ranked on its own (a cell whose predictions all tie counts 0), and the average is over the cells that rank
at least two schedules; ``error_factor`` says how far off the times are (the geometric mean of the factor
between predicted and measured, every case).

    python bench/cost_rank.py [--dry-run] [--reuse RECORD] [--reps 20] [--jobs N] [--budget-s 480]
                              [--out DIR] [--label L]
    python bench/cost_rank.py --records RECORD... [--out DIR] [--label L]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from benchlib import ROOT, write_record

TARGET = "h200"
PROBLEM = "kmeans-assign"
DTYPE = "bf16"
SHAPES: tuple[tuple[str, dict[str, int]], ...] = (
    ("reference", {"B": 32, "N": 65536, "K": 1024, "D": 128}),
    ("many-centroids", {"B": 4, "N": 32768, "K": 4096, "D": 128}),
    ("small-d", {"B": 16, "N": 32768, "K": 1024, "D": 64}),
)
#: the schedules ranked besides the sweep, and the one measured as an extra point
HOPPER = ("hopper", "hopper_overlap")
EXTRA = ("naive",)
GATE, GOAL = 0.7, 0.85
WORST = 5


def ranks(values: Sequence[float]) -> np.ndarray:
    """1-based ranks of ``values``, ties given the mean of the ranks they span."""
    a = np.asarray(values, dtype=float)
    order = np.argsort(a, kind="stable")
    out = np.empty(len(a))
    out[order] = np.arange(1, len(a) + 1)
    for v in np.unique(a):
        tied = a == v
        out[tied] = out[tied].mean()
    return out


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation: the Pearson correlation of the ranks (ties averaged)."""
    if len(x) != len(y) or len(x) < 2:
        raise ValueError("spearman needs two sequences of the same length, at least 2")
    rx, ry = ranks(x) - (len(x) + 1) / 2, ranks(y) - (len(y) + 1) / 2
    den = float(np.sqrt((rx * rx).sum() * (ry * ry).sum()))
    return float((rx * ry).sum() / den) if den else float("nan")


def worst_ranked(cases: Sequence[Mapping[str, Any]], n: int = WORST) -> list[dict[str, Any]]:
    """The ``n`` ranked cases whose predicted and measured ranks differ most."""
    ranked = [c for c in cases if c.get("rank_pred") is not None]
    ranked.sort(key=lambda c: (-abs(c["rank_pred"] - c["rank_meas"]), c["impl"]))
    keys = ("impl", "pred_ms", "measured_ms", "bound", "rank_pred", "rank_meas")
    return [{k: c[k] for k in keys} for c in ranked[:n]]


def rank_shape(cases: list[dict[str, Any]]) -> dict[str, Any]:
    """Ranks the measured, correct cases of the sweep and the Hopper schedules (``cases`` gets each
    one's ranks); returns the correlation, how many were ranked and how many failed, and the worst."""
    ranked = [c for c in cases if c["group"] != "extra" and c["status"] == "ok" and c["correct"]]
    failed = [c["impl"] for c in cases if c["group"] != "extra" and c["status"] not in ("ok", "not-measured")]
    failed += [c["impl"] for c in cases if c["group"] != "extra" and c["status"] == "ok" and not c["correct"]]
    out: dict[str, Any] = {"ranked": len(ranked), "failed": failed,
                           "not_measured": sum(c["status"] == "not-measured" for c in cases)}  # fmt: skip
    if len(ranked) < 2:
        return {**out, "spearman": None, "worst": []}
    rp = ranks([c["pred_ms"] for c in ranked])
    rm = ranks([c["measured_ms"] for c in ranked])
    for c, a, b in zip(ranked, rp, rm, strict=True):
        c["rank_pred"], c["rank_meas"] = float(a), float(b)
    rho = spearman([c["pred_ms"] for c in ranked], [c["measured_ms"] for c in ranked])
    return {**out, "spearman": round(rho, 4), "worst": worst_ranked(ranked)}


# --------------------------------------------------------------------------------------------------- kernels


def source_of(recipe: tuple[str, tuple[tuple[str, int], ...]]) -> Any:
    """The parsed source a case is made from: a committed schedule by name, or an Ampere sweep variant."""
    from cake_core import pipeline
    from cake_core.problems.kmeans_assign.cells import SCHEDULES, ampere_variant

    name, values = recipe
    return pipeline.Source(*ampere_variant(dict(values))) if values else pipeline.load(SCHEDULES / f"{name}.cake")


def cases() -> list[tuple[str, str, tuple[str, tuple[tuple[str, int], ...]]]]:
    """(impl label, group, recipe) of every kernel ranked or measured, in the order they are measured."""
    from cake_core.problems.kmeans_assign.cells import AMPERE_SWEEP

    out = [(f"cake:{name}", "hopper", (name, ())) for name in HOPPER]
    out += [("cake:ampere[" + ",".join(f"{k}={v}" for k, v in values.items()) + "]", "sweep",
             ("ampere", tuple(values.items()))) for values in AMPERE_SWEEP]  # fmt: skip
    return out + [(f"cake:{name}", "extra", (name, ())) for name in EXTRA]


#: the fields of a case that a measurement gives (``--reuse`` takes them from an earlier record)
MEASURED = ("measured_ms", "correct", "status", "samples_ms", "registers", "error")


def measured_row(m: Any) -> dict[str, Any]:
    """The fields of a case that one :class:`~cake_core.loop.benchmark.Measurement` gives."""
    row: dict[str, Any] = {
        "measured_ms": round(m.median_ms, 5) if m.median_ms is not None else None, "correct": bool(m.correct),
        "status": m.status, "samples_ms": [round(x, 5) for x in m.samples],
        "registers": {k: r.get("registers") for k, r in (m.resources or {}).items()}, "measured_in": "this run",
    }  # fmt: skip
    if m.error:
        row["error"] = m.error.splitlines()[0][:300]
    return row


def _compile(recipe: tuple[str, tuple[tuple[str, int], ...]], values: dict[str, int | str]) -> tuple[float, str | None]:
    """In a pool process: compile one case's specialization into the NVRTC disk cache."""
    from cake_core import pipeline, plugins
    from cake_core.runtime.nvrtc import CompileError

    start = time.perf_counter()
    cand = pipeline.Candidate(source_of(recipe), plugins.registry().get("targets", TARGET))
    try:
        cand.compile(cand.spec(values))
    except CompileError as exc:
        return time.perf_counter() - start, str(exc).splitlines()[0]
    return time.perf_counter() - start, None


# --------------------------------------------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="estimate and compile only; no GPU")
    ap.add_argument("--model", default="roofline")
    ap.add_argument("--reps", type=int, default=20, help="timed repetitions per kernel (median of them)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="compile processes")
    ap.add_argument("--budget-s", type=float, default=480.0,
                    help="wall seconds after which the kernels not yet measured are recorded as not measured")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    ap.add_argument("--label", default="")
    ap.add_argument("--reuse", type=Path, metavar="RECORD",
                    help="take the measurements of an earlier record (same kernels) and measure only the cases it "
                         "did not; with --dry-run, rank the earlier measurements against this model's estimates")
    ap.add_argument("--records", type=Path, nargs="+", metavar="RECORD",
                    help="rank the committed schedules of the problem these benchmark records measured, offline")
    args = ap.parse_args()
    if args.records:
        return rank_records(args)
    started = time.perf_counter()
    seconds: dict[str, float] = {}

    from cake_core import pipeline, plugins
    from cake_core.loop.benchmark import bench_candidate, git_commit, program_values
    from cake_core.problems.problem import SameInputs

    reg = plugins.registry()
    commit = git_commit(ROOT)
    target, problem, model = reg.get("targets", TARGET), reg.get("problems", PROBLEM), reg.get("cost_models", args.model)

    t = time.perf_counter()
    kernels = [(impl, group, recipe, pipeline.Candidate(source_of(recipe), target)) for impl, group, recipe in cases()]
    for *_, cand in kernels:
        cand.check()
    seconds["check"] = time.perf_counter() - t

    t = time.perf_counter()
    estimates: dict[tuple[str, str], Any] = {}
    for label, shape in SHAPES:
        for impl, _, _, cand in kernels:
            estimates[(label, impl)] = model.estimate(cand.check(), target, program_values(cand.check(), problem, shape, DTYPE))
    seconds["estimate"] = time.perf_counter() - t

    gpu, reused = None, {}
    if args.reuse:
        prior = json.loads(args.reuse.read_text())
        gpu, source = prior["gpu"], f"{args.reuse.name} (commit {prior['commit']})"
        for s in prior["shapes"]:
            for c in s["cases"]:
                if c["status"] != "not-measured":
                    reused[(s["label"], c["impl"])] = {**{k: c.get(k) for k in MEASURED}, "measured_in": source}

    # one compile per distinct specialization still to measure (D=128 and D=64 here), in a pool that fills
    # the disk cache
    t = time.perf_counter()
    jobs: dict[tuple[str, Any], tuple] = {}
    for label, shape in SHAPES:
        for impl, _, recipe, cand in kernels:
            if (label, impl) in reused:
                continue
            values = program_values(cand.check(), problem, shape, DTYPE)
            jobs.setdefault((impl, cand.spec(values)), (recipe, values))
    with ProcessPoolExecutor(max(1, args.jobs)) as pool:
        made = pool.map(_compile, [r for r, _ in jobs.values()], [v for _, v in jobs.values()])
        done = dict(zip(jobs, made, strict=True))
    compile_errors = {impl: err for (impl, _), (_, err) in done.items() if err}
    seconds["compile"] = time.perf_counter() - t
    seconds["compile_each_mean"] = sum(s for s, _ in done.values()) / max(len(done), 1)

    measured: dict[tuple[str, str], dict[str, Any]] = dict(reused)
    t = time.perf_counter()
    if not args.dry_run:
        from cake_core.runtime.plan import Timing
        from cake_core.runtime.worker import GpuRunner

        timing = Timing(warmup=args.warmup, reps=args.reps)
        same = SameInputs(problem)
        with GpuRunner() as runner:
            gpu = runner.device_info().name
            # the shapes with the least input to move first, so a spent budget costs the most expensive one
            for label, shape in sorted(SHAPES, key=lambda s: s[1]["B"] * s[1]["N"] * s[1]["D"]):
                for impl, _, _, cand in kernels:
                    if (label, impl) in measured or time.perf_counter() - started > args.budget_s:
                        continue
                    m = bench_candidate(cand, same, shape, DTYPE, runner, impl=impl, timing=timing, timeout_s=60,
                                        commit=commit)  # fmt: skip
                    measured[(label, impl)] = measured_row(m)
                    print(f"{label:15} {impl:60} {m.status:14} "
                          f"{m.median_ms if m.median_ms is not None else float('nan'):9.4f} ms", file=sys.stderr)  # fmt: skip
    seconds["gpu"] = time.perf_counter() - t

    shapes_out = []
    for label, shape in SHAPES:
        rows = []
        for impl, group, _, _ in kernels:
            est = estimates[(label, impl)]
            status = "compile-error" if impl in compile_errors else "not-measured"
            row = {"impl": impl, "group": group, "pred_ms": round(est.ms, 5), "bound": est.bound,
                   **measured.get((label, impl), {"measured_ms": None, "correct": None, "status": status}),
                   "rank_pred": None, "rank_meas": None}  # fmt: skip
            rows.append(row)
        summary = rank_shape(rows) if measured else {"spearman": None}
        shapes_out.append({"label": label, "shape": shape, "dtype": DTYPE, **summary, "cases": rows})

    rhos = [s["spearman"] for s in shapes_out if s.get("spearman") is not None]
    average = round(sum(rhos) / len(rhos), 4) if len(rhos) == len(SHAPES) else None
    seconds["total"] = time.perf_counter() - started
    record = {
        "benchmark": "cost-rank", "date": time.strftime("%Y-%m-%d", time.gmtime()), "label": args.label,
        "gpu": gpu, "target": TARGET, "commit": commit, "dry_run": args.dry_run,
        "reused": str(args.reuse.name) if args.reuse else None,
        "model": f"{model.name} {model.version}", "calibrated": model.calibrated,
        "timing": {"warmup": args.warmup, "reps": args.reps, "statistic": "median", "l2_flushed": True},
        "ranked": "the 48 AMPERE_SWEEP variants of ampere.cake and hopper, hopper_overlap; naive is an extra point",
        "compile_errors": compile_errors, "seconds": {k: round(v, 2) for k, v in seconds.items()},
        "shapes": shapes_out, "average": average, "gate": GATE, "goal": GOAL,
        "gate_met": average is not None and average >= GATE, "goal_met": average is not None and average >= GOAL,
    }  # fmt: skip
    name = f"{TARGET}-cost-rank" + ("-dry-run" if args.dry_run and not args.reuse else "")
    write_record(args.out, name, record)
    print_table(record)
    return 0


def measured_cells(runs: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], dict[str, tuple[float, str]]]:
    """Per (shape, dtype) cell, each Cake schedule's lowest correct ``median_ms`` over ``runs`` and the commit
    that measured it (baselines, failed and unmeasured runs left out)."""
    cells: dict[tuple[str, str], dict[str, tuple[float, str]]] = {}
    for r in runs:
        if not str(r.get("impl", "")).startswith("cake:") or not r.get("correct") or r.get("median_ms") is None:
            continue
        cell = cells.setdefault((json.dumps(r["shape"]), r["dtype"]), {})
        name = r["impl"].split(":", 1)[1]
        if name not in cell or r["median_ms"] < cell[name][0]:
            cell[name] = (float(r["median_ms"]), str(r.get("commit")))
    return cells


def rank_records(args: argparse.Namespace) -> int:
    """``--records``: the installed model's estimates of a problem's schedules against recorded measurements;
    a record it cannot use is one line on stderr and exit 2."""
    from cake_core.errors import CakeUserError

    try:
        return _rank_records(args)
    except (CakeUserError, KeyError, ValueError) as exc:
        print(f"error: cannot rank the records: {exc}", file=sys.stderr)
        return 2


def _rank_records(args: argparse.Namespace) -> int:
    from cake_core import pipeline, plugins
    from cake_core.loop.benchmark import git_commit, program_values

    runs: list[dict[str, Any]] = []
    for path in args.records:
        try:
            got = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            print(f"error: cannot read the record {path}: {exc}", file=sys.stderr)
            return 2
        runs += got if isinstance(got, list) else []
    problems = {r.get("problem") for r in runs}
    if len(problems) != 1 or None in problems:
        print(f"error: the records must be benchmark runs of one problem, not {sorted(map(str, problems))}", file=sys.stderr)
        return 2
    reg = plugins.registry()
    target, model = reg.get("targets", TARGET), reg.get("cost_models", args.model)
    problem = reg.get("problems", problems.pop())
    schedules = ROOT / "cake_core" / "problems" / problem.name.replace("-", "_") / "schedules"
    checked: dict[str, Any] = {}
    cells = []
    for (shape_text, dtype), measured in measured_cells(runs).items():
        shape = json.loads(shape_text)
        rows = []
        for name, (ms, commit) in sorted(measured.items()):
            if not (schedules / f"{name}.cake").is_file():
                continue  # a schedule since removed or renamed
            if name not in checked:
                checked[name] = pipeline.Candidate(pipeline.load(schedules / f"{name}.cake"), target).check()
            est = model.estimate(checked[name], target, program_values(checked[name], problem, shape, dtype))
            rows.append({"impl": f"cake:{name}", "group": "schedule", "pred_ms": round(est.ms, 5), "bound": est.bound,
                         "measured_ms": round(ms, 5), "measured_at": commit, "status": "ok", "correct": True,
                         "rank_pred": None, "rank_meas": None})  # fmt: skip
        summary = rank_shape(rows)
        if summary["spearman"] is not None and summary["spearman"] != summary["spearman"]:
            summary["spearman"] = 0.0  # every prediction the same (NaN): the model tells the schedules apart not at all
        cells.append({"label": f"{dtype} " + ",".join(f"{k}={v}" for k, v in shape.items()), "shape": shape,
                      "dtype": dtype, **summary, "cases": rows})  # fmt: skip
    rhos = [c["spearman"] for c in cells if c.get("spearman") is not None]
    average = round(sum(rhos) / len(rhos), 4) if rhos else None
    logs = [abs(np.log(x["pred_ms"] / x["measured_ms"])) for c in cells for x in c["cases"] if x["pred_ms"] > 0]
    factor = round(float(np.exp(np.mean(logs))), 3) if logs else None
    record = {
        "benchmark": "cost-rank-records", "date": time.strftime("%Y-%m-%d", time.gmtime()), "label": args.label,
        "problem": problem.name, "gpu": sorted({str(r.get("gpu")) for r in runs}), "target": TARGET,
        "commit": git_commit(ROOT), "dry_run": True, "sources": [p.name for p in args.records],
        "model": f"{model.name} {model.version}", "calibrated": model.calibrated,
        "ranked": "each cake:NAME of the records as schedules/NAME.cake, at its lowest correct run, per (shape, dtype)",
        "shapes": cells, "average": average, "cells_ranked": len(rhos),
        "error_factor": factor,  # exp(mean |log(predicted / measured)|) over every case: how far off, not the order
    }  # fmt: skip
    write_record(args.out, f"{TARGET}-cost-rank-{problem.name}", record)
    for c in cells:
        order = " < ".join(f"{x['impl'][5:]} {x['pred_ms']:.3f}/{x['measured_ms']:.3f}"
                           for x in sorted(c["cases"], key=lambda x: x["measured_ms"]))  # fmt: skip
        print(f"{c['label']:32} spearman {c.get('spearman')}  (pred/measured ms) {order}")
    print(f"\n{record['model']}: average spearman {average} over {len(rhos)} cells; predictions off by {factor}x "
          "(geometric mean)")  # fmt: skip
    return 0


def print_table(record: Mapping[str, Any]) -> None:
    """The short summary: per shape the correlation and the worst-ranked cases; then the average."""
    print(f"\n{record['model']} on {record['gpu'] or 'no GPU (dry run)'}, commit {record['commit']}; "
          f"seconds {record['seconds']}")  # fmt: skip
    for s in record["shapes"]:
        meas = [c for c in s["cases"] if c["measured_ms"] is not None]
        print(f"\n{s['label']} {s['shape']}: spearman {s.get('spearman')} over {s.get('ranked', 0)} ranked, "
              f"{len(s.get('failed', []))} failed, {s.get('not_measured', len(s['cases']) - len(meas))} not measured")  # fmt: skip
        if s.get("worst"):
            print(f"  {'worst ranked':58} {'pred ms':>8} {'meas ms':>8} {'bound':>8} {'rank p/m':>9}")
            for w in s["worst"]:
                print(f"  {w['impl']:58} {w['pred_ms']:8.4f} {w['measured_ms']:8.4f} {w['bound']:>8} "
                      f"{w['rank_pred']:4.0f}/{w['rank_meas']:<4.0f}")  # fmt: skip
        for c in s["cases"]:
            if c["group"] != "sweep":
                m = f"{c['measured_ms']:8.4f}" if c["measured_ms"] is not None else "       -"
                print(f"  {c['impl']:58} {c['pred_ms']:8.4f} {m} {c['bound']:>8} {c['status']}")
    print(f"\naverage spearman {record['average']} (gate {record['gate']}, goal {record['goal']}): "
          f"gate {'met' if record['gate_met'] else 'NOT met'}")  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
