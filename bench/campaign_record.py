"""One campaign record from a `cake run` directory: what issue 13 asks each campaign seed to report, read from the
run's ledger and run.json (nothing re-measured).

    python bench/campaign_record.py RUN_DIR [--label L] [--out FILE]

The record holds problem, shape, dtype, target, seed, gpu_benchmarks (every stage-3 dispatch, the baseline's and
failures included), candidates, rejected_stage2, best_ms, baseline_ms, speedup, best_hash, date, commit, and:
stage3_failures (dispatches of candidates that passed every stage-2 gate and then failed or were wrong on the
GPU: each one a check the verifier or the interpreter gate should have made), best_chain (the tactics that made
the best candidate), best_sass (the instruction families its cubin holds: HGMMA and UTMALDG mark a TMA + wgmma
kernel) and the rounds it took.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any


def record(run_dir: Path, label: str = "") -> dict[str, Any]:
    run = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    summary = run["summary"]
    db = sqlite3.connect(run_dir / "ledger.sqlite")
    try:
        dispatches = db.execute(
            "SELECT d.candidate, d.impl, d.status, d.correct, d.measurement, d.recorded_at FROM dispatches d ORDER BY d.id"
        ).fetchall()
        rejected = db.execute("SELECT COUNT(*) FROM filtered WHERE status = 'rejected'").fetchone()[0]
        candidates = db.execute("SELECT COUNT(*) FROM candidates").fetchone()[0]
        rounds = db.execute("SELECT COUNT(*) FROM rounds").fetchone()[0]
        best = db.execute("SELECT id, how FROM candidates WHERE hash = ?", (summary.get("best_hash"),)).fetchone()
        meta = {k: json.loads(v) for k, v in db.execute("SELECT key, value FROM meta")}
    finally:
        db.close()
    failures = [d for d in dispatches if d[0] is not None and (d[2] != "ok" or not d[3])]
    measurements = [json.loads(d[4]) for d in dispatches]
    commits = sorted({m.get("commit") for m in measurements if m.get("commit")})
    best_sass, best_chain = None, None
    if best is not None:
        best_m = [json.loads(d[4]) for d in dispatches if d[0] == best[0]]
        if best_m and best_m[-1].get("sass"):
            best_sass = best_m[-1]["sass"].get("counts")
        try:
            best_chain = [step["tactic"] for step in json.loads(best[1]).get("chain", [])]
        except (ValueError, AttributeError, TypeError):
            best_chain = None
    cell = run["cell"]
    starts = [c for c in run["candidates"] if c["origin"] in ("seed", "from")]  # what search must beat
    return {
        "benchmark": "campaign",
        "label": label,
        "problem": run["problem"],
        "shape": cell["shape"],
        "dtype": cell["dtype"],
        "target": run["target"],
        "seed": run["seed"],
        "feedback": "on" if meta.get("feedback", True) else "off",  # `cake run --no-feedback`: the ablation
        "start": [c["name"] for c in starts],  # naive, or the --from files
        "start_ms": min((c["measured_ms"] for c in starts if c["measured_ms"]), default=None),  # measured here
        "gpu_benchmarks": sum(1 for d in dispatches if d[0] is not None),  # the candidates' stage-3 dispatches
        "baseline_dispatches": sum(1 for d in dispatches if d[0] is None),  # flash-kmeans, timed in the same worker
        "candidates": candidates,
        "rejected_stage2": rejected,
        "stage3_failures": len(failures),
        "best": summary.get("best"),
        "best_ms": summary.get("best_ms"),
        "baseline": summary.get("baseline"),
        "baseline_ms": summary.get("baseline_ms"),
        "speedup": summary.get("speedup"),
        "best_hash": summary.get("best_hash"),
        "best_chain": best_chain,
        "best_sass": best_sass,
        "rounds": rounds,
        "spent": summary.get("spent"),
        "gpu": next((m.get("gpu") for m in measurements if m.get("gpu")), None),
        "date": dispatches[-1][5][:10] if dispatches else None,
        "commit": commits[0] if len(commits) == 1 else commits,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--label", default="")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    if not (args.run_dir / "run.json").is_file() or not (args.run_dir / "ledger.sqlite").is_file():
        print(f"error: {args.run_dir} is not a cake run directory (no run.json and ledger.sqlite)", file=sys.stderr)
        return 2
    text = json.dumps(record(args.run_dir, args.label), indent=1, sort_keys=True)
    if args.out is None:
        print(text)
    else:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
