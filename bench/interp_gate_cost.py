"""Benchmark (not a timed test): the cost of the interpreter gate per candidate — what ``cake verify
--problem`` and ``cake run``'s stage 2 add to the static rules.

The candidates are every committed schedule of every registered problem (``schedules/**/*.cake`` beside
each problem's module, for the target of its ``# target:`` line, else ``h200``) and the right twins of
the semantic corpus (``tests/corpus_semantic/*/right.cake``, with their ``# problem:`` lines). Each is
verified first (the gate runs only where the rules pass; that time is not the gate's), then the gate
(:func:`cake_core.verify.interp_gate.run_gate`: type check without a target, the sample, the interpreter
runs and the oracle) is timed ``--repeat`` times in one process on one core; a candidate's figure is the
median of its repeats (wall seconds, and the process's CPU seconds, which a loaded machine inflates
less). The record gives the median and p95 over candidates, and each run's seconds.
The interpreter's matrix products are small: ``--blas-threads`` (default 1, "one core") sets the BLAS
thread count before numpy loads; ``--blas-threads 0`` leaves the library's default (every core), which
on a loaded machine costs several times more.

Writes ``bench/results/<date>-interp-gate-cost[-LABEL].json``.

    python bench/interp_gate_cost.py [--label L] [--repeat 3] [--blas-threads 1] [--out DIR]
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import os
import platform
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchlib import ROOT, commit, write_record

SEMANTIC = ROOT / "tests" / "corpus_semantic"
HEADER = re.compile(r"#\s*(target|problem):\s*(\S+)")


def candidates(reg: Any) -> list[tuple[Path, str, str]]:
    """(file, problem, target) for every committed schedule and every right twin of the semantic corpus."""
    out = []
    for problem in reg.values("problems"):
        module = importlib.import_module(type(problem).__module__)
        base = Path(module.__file__).resolve().parent  # type: ignore[arg-type]
        for path in sorted((base / "schedules").rglob("*.cake")):
            out.append((path, problem.name, _header(path).get("target", "h200")))
    for path in sorted(SEMANTIC.glob("*/right.cake")):
        h = _header(path)
        out.append((path, h["problem"], h.get("target", "h200")))
    return out


def _header(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        m = HEADER.match(line)
        if m:
            out.setdefault(m.group(1), m.group(2))
    return out


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile by linear interpolation between the closest ranks."""
    xs = sorted(values)
    pos = (len(xs) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--label", default="")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--blas-threads", type=int, default=1, help="0: the BLAS library's default")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = ap.parse_args(argv)
    if args.blas_threads:
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(args.blas_threads)  # before numpy loads
    from cake_core import pipeline, plugins
    from cake_core.verify.interp_gate import run_gate

    reg = plugins.registry()
    rows = []
    for path, pname, tname in candidates(reg):
        problem, target = reg.get("problems", pname), reg.get("targets", tname)
        source = pipeline.load(path)
        t0 = time.perf_counter()
        report = pipeline.verify(pipeline.check(source, target, reg), target, reg)
        static = time.perf_counter() - t0
        row: dict[str, Any] = {"file": str(path.relative_to(ROOT)), "problem": pname, "target": tname,
                               "static_seconds": round(static, 4)}  # fmt: skip
        if not report.ok:
            row["outcome"] = "rejected by the static rules"
            rows.append(row)
            continue
        run_gate(problem, source.module, reg)  # warm: imports, compiled expressions of the registry
        gates, cpu = [], []
        for _ in range(args.repeat):
            c0 = time.process_time()
            gates.append(run_gate(problem, source.module, reg))
            cpu.append(time.process_time() - c0)
        row["outcome"] = "clean" if gates[0].ok else "findings: " + ", ".join(d.code for d in gates[0].diagnostics)
        row["runs"] = [r.describe() for r in gates[0].runs]
        row["seconds"] = round(statistics.median(g.seconds for g in gates), 4)
        row["cpu_seconds"] = round(statistics.median(cpu), 4)
        row["run_seconds"] = [round(statistics.median(g.run_seconds[i] for g in gates), 4)
                              for i in range(len(gates[0].runs))]  # fmt: skip
        rows.append(row)
        print(f"{row['file']} ({tname}): {row['seconds']:.3f}s {row['outcome']} {row['run_seconds']}", file=sys.stderr)
    timed = [r["seconds"] for r in rows if "seconds" in r]
    cpu_timed = [r["cpu_seconds"] for r in rows if "cpu_seconds" in r]
    record = {
        "benchmark": "interp-gate-cost",
        "definition": "seconds of the interpreter gate (type check without a target, the shape sample, the "
        "interpreter runs and the oracle) per candidate that passes the static rules; a candidate's figure is "
        "the median of its repeats, serially on one core",
        "date": dt.date.today().isoformat(),
        "commit": commit(),
        "label": args.label,
        "machine": {"cpu": platform.processor() or platform.machine(), "cores_present": os.cpu_count(),
                    "python": platform.python_version(), "load_average": os.getloadavg(),
                    "blas_threads": args.blas_threads or "library default"},  # fmt: skip
        "repeat": args.repeat,
        "candidates_timed": len(timed),
        "median_seconds": round(statistics.median(timed), 4),
        "p95_seconds": round(percentile(timed, 0.95), 4),
        "max_seconds": round(max(timed), 4),
        "cpu_median_seconds": round(statistics.median(cpu_timed), 4),
        "cpu_p95_seconds": round(percentile(cpu_timed, 0.95), 4),
        "gate_median_limit_seconds": 0.3,
        "candidates": rows,
    }
    print(f"gate: {len(timed)} candidates, median {record['median_seconds']:.3f}s, p95 {record['p95_seconds']:.3f}s",
          file=sys.stderr)  # fmt: skip
    write_record(args.out, "interp-gate-cost", record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
