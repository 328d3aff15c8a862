"""What a finished run leaves beside its ledger: ``best.cake``, the best kernel exported as standalone CUDA
(``best.cu`` + ``best.h``), ``run.json`` (the summary, for tools) and ``report.md`` with its plots
(:mod:`cake_core.loop.report`)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from cake_core.convert import unstructure
from cake_core.loop.report import write_report
from cake_core.paths import write_text

if TYPE_CHECKING:
    from cake_core.loop.records import CandidateInfo, RunSummary
    from cake_core.loop.run import Loop


def write_outputs(loop: Loop, summary: RunSummary) -> None:
    out = loop.opts.out
    best = next((c for c in loop.candidates() if c.hash == summary.best_hash), None)
    for stale in ("best.cake", "best.cu", "best.h"):
        (out / stale).unlink(missing_ok=True)
    if best is not None:
        write_text(out / "best.cake", best.source)
        _export(loop, best)
    record = {
        "problem": loop.problem.name, "target": loop.tgt.name, "cell": loop.info.cell, "seed": loop.seed,
        "summary": unstructure(summary),
        "candidates": [
            {"id": c.id, "name": c.name, "hash": c.hash, "origin": c.origin, "round": c.round,
             **_status(loop, c.id)}
            for c in loop.candidates()
        ],
    }  # fmt: skip
    write_text(out / "run.json", json.dumps(record, indent=1))
    write_report(out, loop.ledger, summary)


def _status(loop: Loop, cid: int) -> dict[str, object]:
    o = loop.outcome(cid)
    d = loop.ledger.one("SELECT status, correct, median_ms FROM dispatches WHERE candidate = ? ORDER BY id DESC", (cid,))
    status = o.status if o is not None else "unfiltered"
    if d is not None:
        status = "measured" if d["status"] == "ok" and d["correct"] else f"failed-on-gpu ({d['status']})"
    return {"status": status, "gate": o.gate if o else None, "reason": o.reason if o else None,
            "predicted_ms": o.estimate.ms if o and o.estimate else None,
            "measured_ms": d["median_ms"] if d is not None else None}  # fmt: skip


def _export(loop: Loop, best: CandidateInfo) -> None:
    """The best kernel as ``best.cu`` + ``best.h`` for the run's cell (standalone: no Cake at run time)."""
    from cake_core.loop.benchmark import program_values
    from cake_core.lower.export import export_program, write_export

    cand = loop.load(best)
    spec = cand.spec(program_values(cand.check(), loop.problem, loop.shape, loop.dtype))
    write_export(export_program([cand.build(spec)], "best"), loop.opts.out, "best")
