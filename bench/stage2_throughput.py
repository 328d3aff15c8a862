"""Benchmark (not a timed test): stage 2 of ``cake run`` as a whole — parse, type check, verify, the
interpreter gate, lower and NVRTC compile — per candidate, with a cold NVRTC cache and then a warm one,
and the share of each step.

The candidates are every (committed kmeans-assign schedule, target) pair: what ``cake run kmeans-assign
--target T`` filters, for every registered target. Each goes the way ``cake run``'s stage 2 takes it:
the verifier over every specialization; where it passes, the interpreter gate
(:func:`cake_core.verify.interp_gate.run_gate`); where that passes, the one specialization of the
problem's default cell is lowered and compiled for the target. A candidate the verifier rejects costs
its parse, type check and verification only; one the gate rejects, those and the gate. Each step is
one step of :mod:`cake_core.pipeline`, taking the product of the one before it (the module is
type-checked once for the target, before the verifier, and the checked module goes on to lowering; the
gate checks it once more without a target), timed in one process on one core, serially.

The cold pass uses an empty NVRTC cache directory; the warm pass repeats the run with the cache the cold
pass filled (the NVRTC step is then a cache read).

Writes ``bench/results/<date>-stage2-throughput[-LABEL].json``.

    python bench/stage2_throughput.py [--label before] [--repeat 3] [--out DIR]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchlib import ROOT, SCHEDULES, commit, write_record


STEPS = ("parse", "check", "verify", "interp", "lower", "nvrtc")


def candidates(reg: Any) -> list[tuple[Path, Any]]:
    return [(path, tgt) for path in sorted(SCHEDULES.glob("*.cake")) for tgt in reg.values("targets")]


def one_pass(cands: list[tuple[Path, Any]], problem: Any, cache_dir: Path) -> dict[str, Any]:
    """Stage 2 over every candidate; seconds per step and candidate, and what became of each."""
    from cake_core import pipeline
    from cake_core.loop.benchmark import program_values
    from cake_core.lower.program import select_spec
    from cake_core.runtime.nvrtc import CompileError

    shape, dtype = problem.default_cell.shape, problem.default_cell.dtype
    rows = []
    for path, tgt in cands:
        t: dict[str, float] = dict.fromkeys(STEPS, 0.0)
        c0 = time.perf_counter()
        source = pipeline.load(path)
        c1 = time.perf_counter()
        t["parse"] = c1 - c0
        checked = pipeline.check(source, tgt)
        c2 = time.perf_counter()
        t["check"] = c2 - c1
        report = pipeline.verify(checked, tgt)
        c3 = time.perf_counter()
        t["verify"] = c3 - c2
        outcome = "rejected by the verifier"
        gate_ok = False
        if report.ok:
            gate_ok = pipeline.interp_gate(source, problem).ok
            outcome = "rejected by the interpreter gate"
        c3i = time.perf_counter()
        t["interp"] = c3i - c3
        if gate_ok:
            spec = select_spec(checked, program_values(checked, problem, shape, dtype))
            lowered = pipeline.build(checked, tgt, spec)
            c4 = time.perf_counter()
            t["lower"] = c4 - c3i
            try:
                pipeline.compile_program(lowered, tgt, cache_directory=cache_dir)
                outcome = "compiled"
            except CompileError:
                outcome = "rejected by NVRTC"
            t["nvrtc"] = time.perf_counter() - c4
        rows.append({"schedule": path.name, "target": tgt.name, "outcome": outcome,
                     "seconds": {k: round(v, 5) for k, v in t.items()}, "total": round(sum(t.values()), 5)})  # fmt: skip
    total = sum(r["total"] for r in rows)
    steps = {k: sum(r["seconds"][k] for r in rows) for k in STEPS}
    return {
        "seconds": round(total, 4),
        "candidates_per_second": round(len(rows) / total, 3),
        "steps_seconds": {k: round(v, 4) for k, v in steps.items()},
        "steps_share": {k: round(v / total, 4) for k, v in steps.items()},
        "candidates": rows,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--label", default="")
    ap.add_argument("--repeat", type=int, default=3, help="cold+warm passes; the fastest of each is the headline")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = ap.parse_args(argv)
    os.environ.pop("CAKE_NO_CACHE", None)
    from cake_core import plugins

    reg = plugins.registry()
    problem = reg.get("problems", "kmeans-assign")
    cands = candidates(reg)
    # one unmeasured pass loads NVRTC, the plugins and every import, as a long-lived `cake run` would have
    with tempfile.TemporaryDirectory() as warmup:
        one_pass(cands[:1], problem, Path(warmup))
    passes: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as cache:
            passes["cold"].append(one_pass(cands, problem, Path(cache)))
            passes["warm"].append(one_pass(cands, problem, Path(cache)))
    best = {k: min(v, key=lambda p: p["seconds"]) for k, v in passes.items()}
    for k, p in best.items():
        print(f"{k}: {len(cands)} candidates in {p['seconds']:.2f}s, {p['candidates_per_second']:.2f}/s; shares "
              + ", ".join(f"{s} {100 * v:.1f}%" for s, v in p["steps_share"].items()), file=sys.stderr)  # fmt: skip
    outcomes: dict[str, int] = defaultdict(int)
    for r in best["cold"]["candidates"]:
        outcomes[r["outcome"]] += 1
    record = {
        "benchmark": "stage2-throughput",
        "definition": "cake run's stage 2 (parse, type check, verify, the interpreter gate, lower, NVRTC compile of "
        "the default cell's specialization) over every (kmeans-assign schedule, target) pair, serially on one core",
        "date": dt.date.today().isoformat(),
        "commit": commit(),
        "label": args.label,
        "machine": {"cpu": platform.processor() or platform.machine(), "cores_present": os.cpu_count(),
                    "python": platform.python_version(), "load_average": os.getloadavg(),
                    "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS", "library default")},  # fmt: skip
        "candidates": len(cands),
        "outcomes": dict(outcomes),
        "passes_seconds": {k: [p["seconds"] for p in v] for k, v in passes.items()},
        "median_pass_seconds": {k: statistics.median(p["seconds"] for p in v) for k, v in passes.items()},
        "cold": best["cold"],
        "warm": best["warm"],
    }
    write_record(args.out, "stage2-throughput", record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
