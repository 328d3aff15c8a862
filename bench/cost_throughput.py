"""Cost-model throughput: estimates per second on one core over distinct kernels.

The kernels are the 48 settings of ampere.cake's constants and the two Hopper schedules, type-checked
for the H200 once; each is then estimated at three shapes of the problem, round after round, for the
time given. A model is what lets an agent rank many candidates before paying about a second of NVRTC
each; the goal is 10,000 estimates a second.

    python bench/cost_throughput.py [--seconds 10] [--model roofline] [--out bench/results/...json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

from benchlib import ROOT, SCHEDULES, commit, registry

SHAPES = (
    {"B": 32, "N": 65536, "K": 1024, "D": 128, "T": "bf16"},
    {"B": 1, "N": 65521, "K": 1024, "D": 128, "T": "bf16"},
    {"B": 8, "N": 16384, "K": 100, "D": 128, "T": "bf16"},
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--model", default="roofline")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core

    from cake_core import pipeline
    from cake_core.problems.kmeans_assign.cells import AMPERE_SWEEP, ampere_variant

    reg = registry()
    target = reg.get("targets", "h200")
    model = reg.get("cost_models", args.model)
    checked = []
    for values in AMPERE_SWEEP:
        checked.append(pipeline.Candidate(pipeline.Source(*ampere_variant(values)), target).check())
    for name in ("hopper", "hopper_overlap"):
        checked.append(pipeline.Candidate(pipeline.load(SCHEDULES / f"{name}.cake"), target).check())
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < args.seconds:
        for c in checked:
            for shape in SHAPES:
                model.estimate(c, target, shape)
                done += 1
    elapsed = time.perf_counter() - start
    record = {
        "benchmark": "cost-throughput", "date": time.strftime("%Y-%m-%d"), "commit": commit(),
        "machine": platform.processor() or platform.machine(), "cores": 1, "model": f"{model.name} {model.version}",
        "kernels": len(checked), "shapes": len(SHAPES), "estimates": done, "seconds": round(elapsed, 3),
        "estimates_per_second": round(done / elapsed, 1), "goal_per_second": 10000,
    }  # fmt: skip
    print(json.dumps(record, indent=1))
    if args.out:
        args.out.write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
