"""What one stage-3 GPU benchmark costs: seconds per dispatch of two `cake run` ledgers, side by side.

Reads the ledgers of two runs of the same `cake run ... --from ...` (one made by the code before a change,
one after), and prints, per dispatch, the seconds the loop recorded (`dispatches.seconds`: wall time in
the running process, GPU held throughout), its status and median, and the steps `bench_candidate`
recorded (``phases``: seconds per step, where the code records them). Writes one JSON record with the
mean seconds per candidate dispatch before and after, and the baseline's.

Usage: python bench/dispatch_cost.py BEFORE/ledger.sqlite AFTER/ledger.sqlite --out FILE.json
       [--commit-before SHA] [--commit-after SHA] [--changed TEXT]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sqlite3
import statistics
from pathlib import Path
from typing import Any


def dispatches(path: Path) -> list[dict[str, Any]]:
    """Every dispatch of a ledger, in order: impl, seconds, status, correct, median, gpu, phases."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    out = []
    for r in db.execute("SELECT * FROM dispatches ORDER BY id"):
        m = json.loads(r["measurement"])  # held `phases` at e421a9b (the commit measured)
        phases = json.loads(r["phases_seconds"]) if "phases_seconds" in r.keys() and r["phases_seconds"] else None
        out.append({"impl": r["impl"], "candidate": r["candidate"] is not None, "seconds": r["seconds"],
                    "status": r["status"], "correct": bool(r["correct"]), "median_ms": r["median_ms"],
                    "gpu": r["gpu"], "phases": phases or m.get("phases")})  # fmt: skip
    db.close()
    return out


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    cands = [r["seconds"] for r in rows if r["candidate"]]
    base = [r["seconds"] for r in rows if not r["candidate"]]
    return {"candidate_dispatches": len(cands),
            "seconds_per_dispatch": round(statistics.mean(cands), 3) if cands else None,
            "seconds_max": max(cands) if cands else None,
            "baseline_seconds": base[0] if base else None, "dispatches": rows}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--commit-before", default="unknown")
    ap.add_argument("--commit-after", default="unknown")
    ap.add_argument("--changed", default="")
    ap.add_argument("--cell", default="B=32 N=65536 K=1024 D=128 bf16")
    args = ap.parse_args()
    before, after = summary(dispatches(args.before)), summary(dispatches(args.after))
    for label, s in (("before", before), ("after", after)):
        print(f"{label}: {s['candidate_dispatches']} candidate dispatches, {s['seconds_per_dispatch']} s each "
              f"(max {s['seconds_max']}), baseline {s['baseline_seconds']} s")  # fmt: skip
        for r in s["dispatches"]:
            steps = " ".join(f"{k}={v:.3g}" for k, v in (r["phases"] or {}).items())
            print(f"  {r['impl']:<28} {r['seconds']:>7.2f} s  {r['status']:<8} {r['median_ms']}  {steps}")
    gpu = next((r["gpu"] for r in after["dispatches"] + before["dispatches"] if r["gpu"]), None)
    record = {"date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), "gpu": gpu, "cell": args.cell,
              "commit": args.commit_after, "commit_before": args.commit_before,
              "seconds_per_dispatch_before": before["seconds_per_dispatch"],
              "seconds_per_dispatch_after": after["seconds_per_dispatch"], "changed": args.changed,
              "before": before, "after": after}  # fmt: skip
    args.out.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
