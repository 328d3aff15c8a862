"""Stage 4: every finding of a round as a typed record sent where it can be acted on (``docs/loop.md``).

- **candidate** (the agent's feedback): a gate refused it (``rejected-verify``, ``rejected-interp``, or
  ``below-floor``: the cost model predicts it faster than the cell's bytes and FLOPs allow;
  ``out-of-domain``: its domain does not take the run's cell), the
  compiler warned (``compiler-warning``), its measurement is not to be trusted (``quarantined``), or a GPU
  failure confirmed what stage 2 had refused (``confirmed-on-gpu``, with ``--bench-rejected``).
- **verifier**: the GPU found what stage 2 let through (``wrong-on-gpu``, ``fault-on-gpu``, ``timeout-on-gpu``,
  ``nondeterministic-on-gpu``), NVRTC refused a verified kernel (``compile-escape``), or a candidate a rule
  refused ran correctly (``refused-but-correct``: a possible false positive).
- **cost-model**: the model ranked two measured candidates the wrong way round by more than
  :data:`MISRANK_FACTOR` (``misranked``).
- **vocabulary**: the candidate needs something the IR cannot say or lower yet (``inexpressible``: an
  operation no plugin provides; ``not-lowered``).

Findings are a pure function of the ledger's records of the round, so a resumed run routes the same ones.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cake_core.loop.benchmark import Measurement
from cake_core.loop.records import CandidateInfo, FilterOutcome, Finding

#: a measured pair is misranked when the one predicted faster is slower by more than this factor
MISRANK_FACTOR = 1.2
#: diagnostic codes that say the vocabulary lacks something (not that the kernel is wrong)
VOCABULARY_CODES = frozenset({"CK004"})

#: ``reproduce(candidate, gate, code)``: the smallest ``.cake`` text on which that stage-2 gate still reports
#: that code, and a note on how it was made (``run.py`` passes the reducer of :mod:`cake_core.loop.reduce`)
Reproduce = Callable[[CandidateInfo, str, str], tuple[str, dict[str, Any]]]


def unreduced(c: CandidateInfo, gate: str, code: str) -> tuple[str, dict[str, Any]]:
    """The candidate itself, for a finding no reducer is asked to shrink."""
    return c.source, {"reduced": False}


def _measurement_evidence(m: Measurement) -> dict[str, Any]:
    return {"impl": m.impl, "status": m.status, "correct": m.correct, "median_ms": m.median_ms, "gpu": m.gpu,
            "error": m.error, "oracle": list(m.oracle)}  # fmt: skip


def _static(rnd: int, c: CandidateInfo, o: FilterOutcome, reproduce: Reproduce) -> list[Finding]:
    """What stage 2 found about one candidate: one finding per distinct error code, then compiler warnings."""
    out: list[Finding] = []
    if o.status == "rejected":
        diags = o.verify if o.gate == "verify" else o.interp
        seen: set[str] = set()
        for d in diags:
            if not d.is_error or d.code in seen:
                continue
            seen.add(d.code)
            vocab = d.code in VOCABULARY_CODES
            text, how = reproduce(c, o.gate or "verify", d.code)
            out.append(Finding(
                "vocabulary" if vocab else "candidate", "inexpressible" if vocab else f"rejected-{o.gate}",
                f"{d.code} {d.slug}: {d.message}", rnd, c.id, str(d.primary),
                {"gate": o.gate, "code": d.code, "slug": d.slug, "plugin": d.plugin, "reproducer": how}, text,
            ))  # fmt: skip
        if not seen:  # refused without a diagnostic: the interpreter could not run it, a lowering gap, NVRTC,
            # an estimate under the floor
            dest, kind = {"lower": ("vocabulary", "not-lowered"), "compile": ("verifier", "compile-escape"),
                          "floor": ("candidate", "below-floor"), "domain": ("candidate", "out-of-domain")}.get(o.gate or "", ("candidate", f"rejected-{o.gate}"))  # fmt: skip
            evidence: dict[str, Any] = {"gate": o.gate}
            if o.estimate is not None:
                evidence |= {"predicted_ms": o.estimate.ms, "bound": o.estimate.bound, "model": o.estimate.model}
            out.append(Finding(dest, kind, o.reason or "rejected", rnd, c.id, None, evidence, c.source))
    elif o.compile is not None:
        for w in o.compile.warnings:
            out.append(Finding("candidate", "compiler-warning", w, rnd, c.id, None, {"arch": o.compile.arch}, c.source))
    return out


def _measured(rnd: int, c: CandidateInfo, o: FilterOutcome | None, m: Measurement) -> list[Finding]:
    """What stage 3 found about one candidate."""
    ev = _measurement_evidence(m)
    passed = o is not None and o.status == "compiled"
    if m.status == "quarantined":
        return [Finding("candidate", "quarantined", f"measurement not trusted: {m.error}", rnd, c.id, None, ev,
                        c.source)]  # fmt: skip
    if m.status == "ok" and m.correct:
        if passed:
            return []
        codes = sorted({d.code for d in (o.verify + o.interp if o else []) if d.is_error})
        return [Finding("verifier", "refused-but-correct", f"refused by {', '.join(codes) or 'stage 2'} yet correct "
                        f"on {m.gpu} ({m.median_ms:.4f} ms): a possible false positive", rnd, c.id, None,
                        {**ev, "codes": codes}, c.source)]  # fmt: skip
    what = f"{m.status} on {m.gpu or 'the GPU'}: {m.error or 'no detail'}"
    if passed:
        return [Finding("verifier", f"{m.status}-on-gpu", f"verified clean but {what}", rnd, c.id, None, ev, c.source)]
    return [Finding("candidate", "confirmed-on-gpu", f"stage 2 refused it and the GPU agrees: {what}", rnd, c.id,
                    None, ev, c.source)]  # fmt: skip


def _misranked(rnd: int, cands: Sequence[CandidateInfo], outcomes: Mapping[int, FilterOutcome | None],
               dispatches: Mapping[int, Measurement]) -> list[Finding]:  # fmt: skip
    """Each measured candidate the model predicted faster than another it turned out slower than, by more than
    MISRANK_FACTOR; the worst such pair per candidate."""
    points = []
    for c in cands:
        o, m = outcomes.get(c.id), dispatches.get(c.id)
        if o is None or o.estimate is None or m is None or not (m.status == "ok" and m.correct and m.median_ms):
            continue
        points.append((c, o.estimate, m.median_ms))
    out = []
    for c, est, ms in points:
        worse = [(ms / other_ms, o, oest, other_ms) for o, oest, other_ms in points
                 if est.ms < oest.ms and ms > MISRANK_FACTOR * other_ms]  # fmt: skip
        if not worse:
            continue
        factor, other, oest, other_ms = max(worse, key=lambda w: (w[0], w[1].id))
        out.append(Finding(
            "cost-model", "misranked",
            f"{est.model} predicted `{c.name}` ({est.ms:.4f} ms, {est.bound}-bound) faster than `{other.name}` "
            f"({oest.ms:.4f} ms, {oest.bound}-bound); measured {ms:.4f} ms against {other_ms:.4f} ms ({factor:.2f}x)",
            rnd, c.id, None,
            {"model": est.model, "predicted_ms": est.ms, "measured_ms": ms, "bound": est.bound, "terms": est.terms,
             "other": other.name, "other_predicted_ms": oest.ms, "other_measured_ms": other_ms},
            c.source,
        ))  # fmt: skip
    return out


def route_round(rnd: int, cands: Sequence[CandidateInfo], outcomes: Mapping[int, FilterOutcome | None],
                dispatches: Mapping[int, Measurement], reproduce: Reproduce = unreduced) -> list[Finding]:  # fmt: skip
    """Every finding of the round, in candidate order (stage 2, then stage 3), then the cost model's. A
    stage-2 finding's reproducer comes from ``reproduce``; the others' is the candidate (a GPU finding cannot
    be reduced without a GPU to judge each step)."""
    out: list[Finding] = []
    for c in cands:
        o = outcomes.get(c.id)
        if o is not None:
            out += _static(rnd, c, o, reproduce)
        if c.id in dispatches:
            out += _measured(rnd, c, o, dispatches[c.id])
    return out + _misranked(rnd, cands, outcomes, dispatches)
