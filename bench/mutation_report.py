"""Mutation report: how much of each class of plausible schedule bug the verifier and interpreter catch.

Subjects are the kmeans-assign schedules (their runs judged by the problem's oracle) and the valid
kernels of the cake-rules-core corpus that have barriers, rings or fences (their runs judged against
the original kernel's own). Every mutant of the operators in :data:`cake_core.mutate.OPERATORS` goes
through :class:`cake_core.mutate.pipeline.Judge`: type check, verifier (target from the file's
``# target:`` line), interpreter (standard runs, then exercising runs for survivors), and a verdict
for every survivor.

Writes ``bench/results/<date>-mutation-report.json`` (every mutant's fate and evidence) and
``bench/results/<date>-mutation-report.md`` (the table per class and the survivors).

    python bench/mutation_report.py [--out bench/results] [--only SUBSTRING] [--limit N]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from pathlib import Path
from typing import Any

from benchlib import CORPUS, ROOT, SCHEDULES, commit, registry

from cake_core.convert import unstructure


#: Survivors analysed by hand (the pipeline marks them missed: nothing automatic shows them harmless).
#: Keyed by (file name, line, operator, variant); the value is the argument.
_IN_ORDER_RELEASE = (
    "argued equivalent: the wait (or the release) moves to a neighbouring slot's `empty` barrier with the "
    "same parity. Consumers take tiles, and release their slots, strictly in order, so the phase the producer "
    "now waits for completes only after a release at least as late as the one the original waits for (or an "
    "earlier iteration's wait already covered it): a stricter or equal wait, never a deadlock, since every "
    "awaited release follows a tile already loaded"
)
_ONLY_WGMMA_READS = (
    "argued equivalent: the only reader of `xs` is `wgmma`, a warpgroup-wide asynchronous operation that "
    "`wgmma.wait` retires for the whole warpgroup before the release; an arrival by one elected thread then "
    "releases nothing another thread of the instance still reads (the CUTLASS consumer-release pattern)"
)
ARGUED: dict[tuple[str, int, str, str], str] = {
    ("hopper.cake", 85, "arrive-per-instance", "per=instance"): _ONLY_WGMMA_READS,
    ("hopper_overlap.cake", 114, "arrive-per-instance", "per=instance"): _ONLY_WGMMA_READS,
    # the explicit forms of the Hopper schedules (schedules/explicit/)
    **{("hopper.cake", line, "stage-index", v): _IN_ORDER_RELEASE for line in (51, 85)
       for v in ("+1 wrapped", "-1 wrapped")},
    ("hopper_overlap.cake", 50, "stage-index", "-1 wrapped"): _IN_ORDER_RELEASE,
    ("hopper_overlap.cake", 114, "stage-index", "+1 wrapped"): _IN_ORDER_RELEASE,
    **{("valid_two_warpgroups.cake", line, "stage-index", v): _IN_ORDER_RELEASE for line in (18, 30)
       for v in ("+1 wrapped", "-1 wrapped")},
    **{("valid_two_copies.cake", line, "stage-index", v): _IN_ORDER_RELEASE for line in (19, 32)
       for v in ("+1 wrapped", "-1 wrapped")},
    ("valid_producer_offset.cake", 19, "stage-index", "-1 wrapped"): _IN_ORDER_RELEASE,
    ("valid_producer_offset.cake", 31, "stage-index", "+1 wrapped"): _IN_ORDER_RELEASE,
}  # fmt: skip


def argued(outcome: Any) -> str:
    """The hand analysis of a survivor, if it has one."""
    m = outcome.mutant
    return ARGUED.get((Path(outcome.file).name, m.loc.line, m.operator, m.variant), "")


def subjects(reg: Any, only: str | None) -> list[Any]:
    """The schedules and the corpus's valid kernels with something to mutate."""
    from cake_core.diagnostics.diagnostic import DiagnosticError
    from cake_core.mutate.subjects import Subject

    prims = {p.name: p for p in reg.values("primitives")}
    problem = reg.get("problems", "kmeans-assign")
    out = []
    for path in sorted(SCHEDULES.rglob("*.cake")):  # with explicit/, the Hopper schedules' mbarrier forms
        rel = str(path.relative_to(ROOT))
        if only is None or only in rel:
            out.append(Subject.load(rel, path.read_text(), prims, problem))
    for path in sorted(CORPUS.rglob("valid_*.cake")):
        rel = str(path.relative_to(ROOT))
        if only is not None and only not in rel:
            continue
        try:
            subject = Subject.load(rel, path.read_text(), prims)
        except DiagnosticError:
            continue  # a corpus file this core's type checker rejects is not a valid subject
        if subject.has_sync:
            out.append(subject)
    return out


def table(summaries: list[Any]) -> list[str]:
    lines = [
        "| class | mutants | type-checked | caught by verifier | caught by interpreter | equivalent | missed "
        "| caught share |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in summaries:
        share = "n/a" if s.caught_share is None else f"{100 * s.caught_share:.0f}%"
        lines.append(
            f"| {s.operator} | {s.mutants} | {s.typechecked} | {s.verifier} | {s.interpreter} | {s.equivalent} "
            f"| {s.missed} | {share} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    from cake_core.ir.printer import print_module
    from cake_core.mutate import OPERATORS, mutants
    from cake_core.mutate.pipeline import Fate, Judge, summarize

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    ap.add_argument("--only", help="only subjects whose path contains this")
    ap.add_argument("--limit", type=int, help="at most this many mutants per subject (a quick look)")
    args = ap.parse_args(argv)

    start = time.perf_counter()
    reg = registry()
    judge = Judge(reg)
    outcomes = []
    for subject in subjects(reg, args.only):
        seen: set[str] = set()
        count = 0
        for m in mutants(subject.module, judge.primitives):
            text = print_module(m.module)
            if text in seen:
                continue  # two edits that make the same module are one mutant
            seen.add(text)
            if args.limit is not None and count >= args.limit:
                break
            count += 1
            outcome = judge.judge(subject, m)
            outcomes.append(outcome)
            print(f"{outcome.fate.value:24s} {m.operator:18s} {subject.path}:{m.loc.line} {m.description}",
                  file=sys.stderr)  # fmt: skip
    classes = [op.name for op in OPERATORS]
    summaries = summarize(outcomes, classes)
    survivors = [o for o in outcomes if o.fate in (Fate.EQUIVALENT, Fate.MISSED)]
    date = dt.date.today().isoformat()
    record = {
        "report": "mutation",
        "date": date,
        "commit": commit(),
        "seconds": round(time.perf_counter() - start, 1),
        "rules": reg.names("rules"),
        "subjects": sorted({o.file for o in outcomes}),
        "classes": [
            {"operator": s.operator, "mutants": s.mutants, "typechecked": s.typechecked, "verifier": s.verifier,
             "interpreter": s.interpreter, "equivalent": s.equivalent, "missed": s.missed,
             "caught_share": None if s.caught_share is None else round(s.caught_share, 4)}
            for s in summaries
        ],  # fmt: skip
        "mutants": [{**unstructure(o), "hand_analysis": argued(o)} for o in outcomes],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{date}-mutation-report.json").write_text(json.dumps(record, indent=1) + "\n")
    md = [
        f"# Mutation report ({date}, commit {record['commit']})",
        "",
        f"Subjects: {', '.join(f'`{s}`' for s in record['subjects'])}.",
        f"Rules registered: {', '.join(record['rules'])}.",
        "",
        "Caught share = (caught by verifier + caught by interpreter) / (type-checked - equivalent).",
        "",
        *table(summaries),
        "",
        "## Survivors",
        "",
        "Verdicts are the pipeline's (automatic); a hand analysis, where one was made, follows it.",
        "",
        "| class | where | edit | verdict | why | hand analysis |",
        "|---|---|---|---|---|---|",
    ]
    for o in survivors:
        md.append(
            f"| {o.mutant.operator} | `{o.file}:{o.mutant.loc.line}` | {o.mutant.description} | {o.fate.value} "
            f"| {o.detail} | {argued(o)} |"
        )
    (args.out / f"{date}-mutation-report.md").write_text("\n".join(md) + "\n")
    print("\n".join(table(summaries)))
    print(f"{len(outcomes)} mutants, {len(survivors)} survivors -> {args.out}/{date}-mutation-report.{{json,md}}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
