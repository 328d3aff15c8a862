"""Benchmark (not a timed test): parse + verify throughput on distinct mutants of corpus kernels.

What issue 4 asks for, and what this measures by default: ``--count`` (10,000) structurally distinct
mutants of the files of the cake-rules-core corpus (each base file contributes alike), each printed to
text, then timed, in this one process on one core: ``verify_source`` of the text (parse, type check
and every rule) for the file's target with the full core pack (every rule of ``cake-rules-core``, and the
``cake-targets-nvidia`` targets; other installed plugins are left out through ``CAKE_PLUGINS``). No
memoization spans two kernels: each verification starts from nothing but the registry.

``--wide`` measures a heavier set instead: the kmeans-assign schedules join the bases (big kernels of 18
specializations each, a few percent of the mutants and over a third of the time) and every installed
plugin's rules run (the advisory pack, the example plugin). Its record is written beside the other,
with ``-wide`` in its name.

Mutants come from the operators of :mod:`cake_core.mutate` (the report's classes and integer-literal
perturbations), one to three edits each, and are deduplicated by structural hash. Generation is not
timed.

The loop runs under the garbage collector's setting of the ``cake`` command
(:mod:`cake_core.gcpolicy`: a first threshold of 200,000 instead of 700), since a batch of
verifications is what that command does. ``--gc python`` times it under CPython's default thresholds
instead, ``--gc both`` both ways, one after the other (the record keeps every figure; the headline is
the ``cake`` setting's). ``--repeat R`` times the whole set R times in a row and reports the fastest
pass as the headline (every pass is kept), since other work on a shared machine only ever slows a pass.

Writes ``bench/results/<date>-verify-throughput[-wide].json``: date, machine, commit, definition,
counts, seconds, rate, and the slowest kernels with their times.

    python bench/verify_throughput.py [--count 10000] [--seed 0] [--wide] [--repeat 1]
                                      [--gc cake|python|both] [--out DIR]
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import os
import platform
import random
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from benchlib import CORPUS, ROOT, SCHEDULES, commit, registry


#: the plugins of the issue's definition ("the full core pack"), for ``CAKE_PLUGINS``
CORE_PLUGINS = "cake-rules-core,cake-targets-nvidia"


def base_files(wide: bool = False) -> list[Path]:
    """The corpus files; with ``wide``, the kmeans-assign schedules first."""
    return (sorted(SCHEDULES.glob("*.cake")) if wide else []) + sorted(CORPUS.rglob("*.cake"))


def _edits(base: list[str], mutant: list[str]) -> list[tuple[int, int, list[str]]]:
    """Line edits turning ``base`` into ``mutant``: ``(i1, i2, lines)`` replaces base lines i1..i2."""
    import difflib

    ops = difflib.SequenceMatcher(a=base, b=mutant, autojunk=False).get_opcodes()
    return [(i1, i2, mutant[j1:j2]) for tag, i1, i2, j1, j2 in ops if tag != "equal"]


def _combine(base: list[str], parts: list[list[tuple[int, int, list[str]]]]) -> str | None:
    """The text with every edit of ``parts`` applied, or None when two of them touch the same lines."""
    edits = sorted(e for part in parts for e in part)
    for (a1, a2, _), (b1, _, _) in zip(edits, edits[1:], strict=False):
        if b1 < max(a2, a1 + 1):
            return None
    lines = list(base)
    for i1, i2, new in reversed(edits):
        lines[i1:i2] = new
    return "\n".join(lines) + "\n"


def make_mutants(count: int, seed: int, reg: Any, wide: bool = False) -> list[tuple[str, str, str]]:
    """``count`` distinct mutants as (base file, target, printed text), each base alike.

    Every first-order mutant of a base is kept as line edits of the printed base; a mutant of the
    benchmark applies one to three of them that touch different lines (printed text composes where
    trees, rebuilt by identity, would not).
    """
    from cake_core.diagnostics.diagnostic import DiagnosticError
    from cake_core.ir.hashing import structural_hash
    from cake_core.ir.parser import parse
    from cake_core.ir.printer import print_module
    from cake_core.mutate import EXTRA_OPERATORS, OPERATORS, mutants
    from cake_core.verify.expectations import named_target

    prims = {p.name: p for p in reg.values("primitives")}
    rng = random.Random(seed)
    bases = []
    seen: set[str] = set()
    for path in base_files(wide):
        text = path.read_text()
        try:
            module = parse(text, str(path))
        except DiagnosticError:
            continue  # a syntax-error corpus file has no tree to mutate
        printed = print_module(module).splitlines()
        first = []
        for m in mutants(module, prims, OPERATORS + EXTRA_OPERATORS):
            e = _edits(printed, print_module(m.module).splitlines())
            if e:
                first.append(e)
        if first:
            bases.append((str(path.relative_to(ROOT)), named_target(text) or "h200", printed, first))
            seen.add(structural_hash(module))
    out: list[tuple[str, str, str]] = []
    attempts = 0
    while len(out) < count and attempts < 50 * count:
        attempts += 1
        path, target, printed, first = bases[len(out) % len(bases)]
        text = _combine(printed, rng.sample(first, min(len(first), rng.choice((1, 1, 2, 3)))))
        if text is None:
            continue
        try:
            h = structural_hash(parse(text, path))
        except DiagnosticError:
            continue
        if h not in seen:
            seen.add(h)
            out.append((path, target, text))
    return out


def measure(items: list[tuple[str, str, str]], reg: Any) -> dict[str, Any]:
    """Parse and verify every item in turn; times per kernel and the outcomes."""
    from cake_core.verify.runner import verify_source

    targets = {t.name: t for t in reg.values("targets")}
    times: list[float] = []
    outcomes: Counter[str] = Counter()
    gc.collect()
    cpu = time.process_time()
    start = time.perf_counter()
    for path, target, text in items:
        t0 = time.perf_counter()
        report = verify_source(text, path, targets[target], reg)
        times.append(time.perf_counter() - t0)
        diags = report.diagnostics
        if report.kernels == 0:  # the text did not parse (a syntax error is the report's one diagnostic)
            outcomes["syntax error"] += 1
        elif not diags:
            outcomes["clean"] += 1
        elif any(d.code.startswith("CK") and d.is_error for d in diags):
            outcomes["type errors"] += 1
        elif any(d.is_error for d in diags):
            outcomes["rule errors"] += 1
        else:
            outcomes["warnings only"] += 1
    total = time.perf_counter() - start
    return {"seconds": total, "cpu_seconds": time.process_time() - cpu, "times": times, "outcomes": dict(outcomes)}


def _machine() -> dict[str, Any]:
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores_used": 1, "cores_present": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform(), "interpreter": _interpreter()}  # fmt: skip


def _interpreter() -> dict[str, Any]:
    """Which build of CPython ran the loop: the figure depends on it (a build without profile-guided and
    link-time optimization, such as pyenv's default, runs this loop measurably slower than a
    distribution's)."""
    import sysconfig

    args = sysconfig.get_config_var("CONFIG_ARGS") or ""
    return {
        "executable": sys.executable,
        "base_prefix": sys.base_prefix,
        "build": " ".join(platform.python_build()),
        "compiler": platform.python_compiler(),
        "configured_with_optimizations": "--enable-optimizations" in args,
        "configured_with_lto": "--with-lto" in args,
        "shared_libpython": bool(sysconfig.get_config_var("Py_ENABLE_SHARED")),
        "cflags": sysconfig.get_config_var("PY_CFLAGS") or "",
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--wide", action="store_true",
                    help="add the kmeans-assign schedules to the bases and run every installed plugin's rules")  # fmt: skip
    ap.add_argument("--repeat", type=int, default=1, help="time the whole set this many times; the fastest pass is the headline")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    ap.add_argument(
        "--gc", choices=("cake", "python", "both"), default="cake",
        help="garbage collector thresholds during the timed loop: the `cake` command's (cake_core.gcpolicy), "
        "CPython's defaults, or both, one after the other (the record keeps both; the headline is `cake`)",
    )  # fmt: skip
    args = ap.parse_args(argv)
    if args.count < 1 or args.repeat < 1:
        ap.error("--count and --repeat take a positive number")

    from cake_core import gcpolicy
    from cake_core.plugins import ALLOW_ENV

    if not args.wide:
        os.environ[ALLOW_ENV] = CORE_PLUGINS
    reg = registry()
    t0 = time.perf_counter()
    items = make_mutants(args.count, args.seed, reg, args.wide)
    generated = time.perf_counter() - t0
    files = len({p for p, _, _ in items})
    print(f"{len(items)} distinct mutants of {files} files in {generated:.1f}s", file=sys.stderr)
    runs: dict[str, dict[str, Any]] = {}
    passes: dict[str, list[float]] = {}
    defaults = gc.get_threshold()
    for mode in ("cake", "python") if args.gc == "both" else (args.gc,):
        if mode == "cake":
            gcpolicy.configure()
        else:
            gc.set_threshold(*defaults)
        for _ in range(args.repeat):
            r = measure(items, reg)
            print(f"gc {mode}: {len(items)} kernels in {r['seconds']:.2f}s, {len(items) / r['seconds']:.0f}/s",
                  file=sys.stderr)  # fmt: skip
            passes.setdefault(mode, []).append(round(r["seconds"], 3))
            if mode not in runs or r["seconds"] < runs[mode]["seconds"]:
                runs[mode] = r
        runs[mode]["thresholds"] = gc.get_threshold()
    result = runs["cake" if "cake" in runs else "python"]
    times = result["times"]
    per_base: dict[str, list[float]] = defaultdict(list)
    for (path, _, _), t in zip(items, times, strict=True):
        per_base[path].append(t)
    slowest = sorted(range(len(items)), key=lambda i: -times[i])[:10]
    rate = len(items) / result["seconds"]
    schedules = [t for (p, _, _), t in zip(items, times, strict=True) if "/schedules/" in p]
    corpus = [t for (p, _, _), t in zip(items, times, strict=True) if "/schedules/" not in p]
    record = {
        "benchmark": "verify-throughput",
        "definition": "wide: corpus and kmeans-assign schedule mutants, every installed plugin" if args.wide
        else "issue 4: corpus mutants, the full core pack (cake-rules-core, cake-targets-nvidia)",
        "date": dt.date.today().isoformat(),
        "machine": _machine(),
        "commit": commit(),
        "plugins": sorted(f"{i.distribution} {i.version}" if i.distribution != "(in-process)" else f"{i.name} (in-process)"
                          for i in reg.plugins.values() if not i.builtin),
        "rules": reg.names("rules"),
        "counts": {"kernels": len(items), "bases": len(per_base), "schedule_mutants": len(schedules),
                   "corpus_mutants": len(corpus), "outcomes": result["outcomes"]},  # fmt: skip
        "seconds": round(result["seconds"], 3),
        "cpu_seconds": round(result["cpu_seconds"], 3),
        "rate_per_second": round(rate, 1),
        "cpu_rate_per_second": round(len(items) / result["cpu_seconds"], 1),
        "passes_seconds": passes,
        "caches": "off: every verification starts from the registry alone; memoization lives inside one "
        "verify call (across the specializations of one kernel) and is dropped with it",
        "generation_seconds": round(generated, 1),
        "gc": {mode: {"thresholds": list(r["thresholds"]), "seconds": round(r["seconds"], 3), "rate_per_second": round(len(items) / r["seconds"], 1),
                      "median_ms": round(1000 * statistics.median(r["times"]), 3)} for mode, r in runs.items()},
        "median_ms": round(1000 * statistics.median(times), 3),
        "schedule_mutants_rate": round(len(schedules) / sum(schedules), 1) if schedules else None,
        "corpus_mutants_rate": round(len(corpus) / sum(corpus), 1) if corpus else None,
        "per_base_mean_ms": {p: round(1000 * statistics.fmean(ts), 3) for p, ts in sorted(per_base.items())},
        "slowest": [{"file": items[i][0], "ms": round(1000 * times[i], 2)} for i in slowest],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{record['date']}-verify-throughput{'-wide' if args.wide else ''}.json"
    path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"{len(items)} kernels in {result['seconds']:.2f}s: {rate:.0f} kernels/s on one core (schedules "
          f"{record['schedule_mutants_rate']}/s, corpus {record['corpus_mutants_rate']}/s) -> {path}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
