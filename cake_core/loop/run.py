"""``cake run``: the four stages (DESIGN section 5), round after round, over one ledger.

1. **Generate**: round 0 takes the seeds (the problem's committed schedules, or the user's ``--from`` files);
   later rounds ask the ``--agent`` for proposals built on the best so far and the findings routed to them.
   Candidates are deduplicated by structural hash.
2. **Filter** (no GPU needed), in a process pool: verifier, interpreter gate, NVRTC compile of the run's cell,
   the cost model's estimate (:mod:`cake_core.loop.filter`). Only the most promising compiled candidates (by
   predicted time) go on.
3. **Benchmark** on a GPU of the target's architecture, in isolated workers: the problem's baseline once, then
   each survivor (:func:`~cake_core.loop.benchmark.bench_candidate`). Elsewhere the stage says plainly that
   nothing was measured and ranking is by the cost model.
4. **Route** each finding as a typed record (:mod:`cake_core.loop.route`; ``docs/loop.md``).

Every result goes to the ledger (:mod:`cake_core.loop.ledger`) as soon as it is known; ``--resume`` redoes
only what the ledger lacks. Budgets (:class:`~cake_core.loop.records.Budgets`) stop the loop between steps.
Observers (the progress display, plugins) see every step through the lifecycle hooks.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from cake_core import pipeline
from cake_core.convert import structure, unstructure
from cake_core.cost.floor import floor_ms
from cake_core.diagnostics.diagnostic import Diagnostic, DiagnosticError
from cake_core.errors import CakeUserError
from cake_core.ir.hashing import structural_hash
from cake_core.loop.agent import Feedback, Parent
from cake_core.loop.benchmark import Measurement
from cake_core.loop.filter import FilterJob, filter_all
from cake_core.loop.ledger import Ledger, dumps, now
from cake_core.loop.records import (
    Budgets, CandidateInfo, CompileSummary, EstimateSummary, FilterOutcome, Finding, RunInfo, RunSummary, Spent,
)  # fmt: skip
from cake_core.paths import make_dir
from cake_core.problems.problem import SameInputs
from cake_core.runtime.plan import Timing

#: how stage 3 times a candidate: 50 repetitions, fewer for a kernel slow enough that they would take more
#: than a second (a variant of the naive schedule takes ~200 ms a call: 5 repetitions rank it well enough)
STAGE3_TIMING = Timing(budget_ms=1000.0)
#: how many of a round's compiled candidates stage 3 takes when no budget says otherwise
DEFAULT_BENCHMARK_TOP = 8
#: how many calls of the refusing gate a finding's reproducer may cost (verifier: ~10 ms each; interpreter
#: gate: ~0.1 s), and a deadline that only guards against a pathological predicate
REDUCE_VERIFY_CALLS, REDUCE_GATE_CALLS, REDUCE_DEADLINE_S = 120, 24, 120.0


@attrs.frozen
class RunOptions:
    """Everything ``cake run`` was asked (on ``--resume`` the recorded run's seed, agent, sources and budgets win)."""

    problem: str
    target: str
    out: Path
    seed: int = 0
    agent: str | None = None
    sources: tuple[Path, ...] = ()  # --from
    budgets: Budgets = Budgets()
    resume: bool = False
    bench_rejected: bool = False
    gpu_timeout_s: float = 120.0
    workers: int | None = None
    argv: tuple[str, ...] = ()
    cell: tuple[dict[str, int], str] | None = None  # (shape, dtype); default: the problem's default cell
    feedback: bool = True  # hand the agent the routed findings (--no-feedback: the ablation without them)


def seed_schedules(problem: object, reg: Any = None, target: str | None = None) -> list[Path]:
    """The problem's committed schedules: those plugins registered for it and for ``target``
    (``cake_register_schedules``: written for the target, so a ``--budget`` takes them first), then
    ``schedules/*.cake`` beside the module that defines it."""
    module = importlib.import_module(type(problem).__module__)
    base = Path(module.__file__).resolve().parent  # type: ignore[arg-type]
    own = sorted((base / "schedules").glob("*.cake"))
    if reg is None or target is None:
        return own
    name = getattr(problem, "name", "")
    return [s.path for s in reg.values("schedules") if s.seeds_for(name, target)] + own


def source_hash(text: str, path: str) -> tuple[str, pipeline.Source | None]:
    """The structural hash of a candidate's text and the parsed source, or a hash of the text itself
    (prefixed ``text:``) with ``None`` where it does not parse."""
    try:
        source = pipeline.load_text(text, path)
    except DiagnosticError:
        return "text:" + hashlib.sha256(text.encode()).hexdigest(), None
    return structural_hash(source.module), source


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise CakeUserError(f"cannot read {path}: {exc.strerror or exc}") from None


class Loop:
    """One run over its ledger: the stages as methods, the ledger as the only state that outlives them."""

    def __init__(self, opts: RunOptions, reg: Any, ledger: Ledger, meta: dict[str, Any], log: Callable[[str], None]):
        self.opts, self.reg, self.ledger, self.log = opts, reg, ledger, log
        self.problem = reg.get("problems", meta["problem"])
        self.tgt = reg.get("targets", meta["target"])
        self.seed: int = meta["seed"]
        self.agent = reg.get("agents", meta["agent"]) if meta["agent"] else None
        self.sources = [Path(p) for p in meta["from"]]
        self.budgets: Budgets = structure(meta["budgets"], Budgets)
        self.feedback: bool = meta.get("feedback", True)  # a ledger from before --no-feedback handed it on
        self.shape: dict[str, int] = meta["cell"]["shape"]
        self.dtype: str = meta["cell"]["dtype"]
        self.info = RunInfo(self.problem.name, self.tgt.name, str(opts.out), self.seed, self.budgets, meta["cell"])
        self.hook = reg.manager.hook
        self.started = time.monotonic()
        self.prior_wall = self._prior_wall()
        self.stages: dict[str, str] = {}
        self.stopped: str | None = None
        self.floor_ms = floor_ms(self.problem, self.shape, self.dtype, self.tgt)
        #: stage 3's view of the problem: every dispatch of the run checks and times on the same inputs, made once
        self.bench_problem = SameInputs(self.problem)
        #: candidates loaded in this process, by ledger id: their products (checked module, compiled cubin)
        #: go down the stages with them where the stages run here
        self.loaded: dict[int, pipeline.Candidate] = {}
        self.parsed: dict[str, pipeline.Source] = {}  # by hash, from generation until the candidate has an id

    # -- bookkeeping ---------------------------------------------------------------------------------------

    def _prior_wall(self) -> float:
        """Wall seconds spent by earlier sessions of this run (a killed one up to its last recorded work)."""
        import datetime as dt

        total = 0.0
        for r in self.ledger.rows(
            "SELECT s.started_at, COALESCE(s.finished_at, (SELECT MAX(started_at) FROM attempts a "
            "WHERE a.session = s.id), s.started_at) AS ended FROM sessions s WHERE s.id != ?", (self.ledger.session,)
        ):  # fmt: skip
            total += (dt.datetime.fromisoformat(r["ended"]) - dt.datetime.fromisoformat(r["started_at"])).total_seconds()
        return total

    def spent(self) -> Spent:
        row = self.ledger.one("SELECT COUNT(*) AS n, COALESCE(SUM(seconds), 0) AS s FROM dispatches "
                              "WHERE candidate IS NOT NULL")  # fmt: skip
        cands = self.ledger.one("SELECT COUNT(*) AS n FROM candidates")
        tokens = self.ledger.one("SELECT COALESCE(SUM(tokens), 0) AS t FROM rounds")
        assert row is not None and cands is not None and tokens is not None
        return Spent(cands["n"], row["n"], round(row["s"], 3), round(self.prior_wall + time.monotonic() - self.started,
                     3), tokens["t"])  # fmt: skip

    def over_budget(self) -> str | None:
        self.stopped = self.stopped or self.spent().exhausted(self.budgets)
        return self.stopped

    def candidates(self, where: str = "1", params: Sequence[Any] = ()) -> list[CandidateInfo]:
        return [CandidateInfo(r["id"], r["hash"], r["name"], r["round"], r["origin"], r["how"], r["source"],
                              r["parent"], r["path"])
                for r in self.ledger.rows(f"SELECT * FROM candidates WHERE {where} ORDER BY id", params)]  # fmt: skip

    def outcome(self, cid: int) -> FilterOutcome | None:
        r = self.ledger.one("SELECT * FROM filtered WHERE candidate = ?", (cid,))
        if r is None:
            return None
        diags: dict[str, list[Diagnostic]] = {"verify": [], "interp": []}
        for d in self.ledger.rows("SELECT stage, record FROM diagnostics WHERE candidate = ? ORDER BY stage, seq",
                                  (cid,)):  # fmt: skip
            diags[d["stage"]].append(structure(json.loads(d["record"]), Diagnostic))
        return FilterOutcome(
            r["status"], r["gate"], r["reason"], diags["verify"], diags["interp"], r["interp_seconds"],
            structure(json.loads(r["compile"]), CompileSummary) if r["compile"] else None,
            structure(json.loads(r["estimate"]), EstimateSummary) if r["estimate"] else None, r["seconds"] or 0.0,
        )  # fmt: skip

    def measurement(self, row: Any) -> Measurement:
        data = json.loads(row["measurement"])
        data["date"] = row["recorded_at"]  # the ledger keeps times in its `_at` columns only
        data["phases"] = json.loads(row["phases_seconds"]) if row["phases_seconds"] else None  # durations likewise
        data["samples"] = [s["ms"] for s in self.ledger.rows(
            "SELECT ms FROM samples WHERE dispatch = ? ORDER BY seq", (row["id"],))]  # fmt: skip
        return structure(data, Measurement)  # type: ignore[no-any-return]

    # -- 1. generate ---------------------------------------------------------------------------------------

    def generate(self, rnd: int) -> list[CandidateInfo]:
        """The round's candidates: from the ledger where the round is recorded, else proposed and recorded."""
        if self.ledger.one("SELECT 1 FROM rounds WHERE round = ?", (rnd,)) is not None:
            cands = self.candidates("round = ?", (rnd,))
            for c in cands:
                self.hook.cake_candidate_generated(run=self.info, candidate=c, resumed=True)
            return cands
        if self.over_budget():
            return []
        self.ledger.attempt(f"generate:{rnd}")
        left = None if self.budgets.candidates is None else self.budgets.candidates - self.spent().candidates
        if rnd == 0:
            proposals, proposer, tokens = self.seeds(), "seed" if not self.sources else "from", 0
        else:
            assert self.agent is not None
            proposals, tokens = self.ask_agent(rnd, left)
            proposer = f"agent:{self.agent.name}"
        known = {r["hash"] for r in self.ledger.rows("SELECT hash FROM candidates")}
        new: list[dict[str, Any]] = []
        for p in proposals:
            if left is not None and len(new) >= left:
                self.stopped = f"candidates budget ({self.budgets.candidates}) spent"
                break
            if p["hash"] in known:
                self.log(f"  {p['name']}: same structure as a candidate already recorded, skipped")
                continue
            known.add(p["hash"])
            new.append(p)
        if rnd > 0 and not new and not self.stopped:
            self.stopped = f"the agent proposed nothing new in round {rnd} ({len(proposals)} proposal(s), all recorded)"
        with self.ledger.transaction() as db:
            for p in new:
                db.execute("INSERT INTO candidates (hash, name, round, origin, parent, how, path, source, created_at) "
                           "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", (p["hash"], p["name"], rnd, p["origin"], p["parent"],
                           p["how"], p["path"], p["source"], now()))  # fmt: skip
            db.execute("INSERT INTO rounds (round, proposer, proposed, tokens) VALUES (?, ?, ?, ?)",
                       (rnd, proposer, len(new), tokens))  # fmt: skip
        cands = self.candidates("round = ?", (rnd,))
        for c in cands:
            if c.hash in self.parsed:
                self.loaded[c.id] = pipeline.Candidate(self.parsed.pop(c.hash), self.tgt, self.reg)
            self.hook.cake_candidate_generated(run=self.info, candidate=c, resumed=False)
        return cands

    def seeds(self) -> list[dict[str, Any]]:
        """Round 0: the ``--from`` files; else, with an agent, the problem's naive schedule (the clean start the
        agent evolves from); else every committed schedule."""
        paths = self.sources or seed_schedules(self.problem, self.reg, self.tgt.name)
        if not self.sources and self.agent is not None:
            paths = [p for p in paths if p.stem == "naive"] or paths
        origin = "from" if self.sources else "seed"
        out = []
        for path in paths:
            text = _read(path)
            h, source = source_hash(text, str(path))
            if source is not None:
                self.parsed[h] = source
            how = f"read from {path}" if self.sources else f"committed schedule {path.name}"
            out.append({"hash": h, "name": path.stem, "origin": origin, "parent": None, "how": how,
                        "path": str(path), "source": text})  # fmt: skip
        return out

    def ask_agent(self, rnd: int, left: int | None) -> tuple[list[dict[str, Any]], int]:
        from cake_core.ir.printer import print_module

        parents = self.parents()
        by_id = {c.id: c for c in self.candidates()}
        feedback = [Feedback(f, by_id[f.candidate].hash, by_id[f.candidate].how) for f in self.findings()
                    if f.candidate is not None] if self.feedback else []  # fmt: skip
        count = 8 if left is None else max(0, min(8, left))
        known = frozenset(c.hash for c in by_id.values())
        proposals, tokens = self.agent.propose(self.info, parents, feedback, self.tgt, count,
                                               random.Random(f"{self.seed}:{rnd}"), known)  # fmt: skip
        out = []
        for i, p in enumerate(proposals):
            name, text = f"{self.agent.name}-r{rnd}-{i}", print_module(p.module)
            h = structural_hash(p.module)
            self.parsed[h] = pipeline.load_text(text, f"{name}.cake")
            out.append({"hash": h, "name": name, "origin": f"agent:{self.agent.name}", "parent": p.parent,
                        "how": p.how, "path": None, "source": text})  # fmt: skip
        return out, int(tokens)

    def parents(self, count: int = 4) -> list[Parent]:
        """The best candidates so far: measured correct ones by time, then compiled ones by predicted time."""
        return [Parent(self.load(c).source.module, c.hash, c.name, ms, measured, c.how)
                for c, ms, measured in self.ranking()[:count]]  # fmt: skip

    def load(self, c: CandidateInfo) -> pipeline.Candidate:
        """The candidate as loaded in this process: parsed once, its products (checked module, lowered and
        compiled specializations) kept for every later stage that needs them."""
        if c.id not in self.loaded:
            source = pipeline.load_text(c.source, c.path or f"{c.name}.cake")
            self.loaded[c.id] = pipeline.Candidate(source, self.tgt, self.reg)
        return self.loaded[c.id]

    # -- 2. filter -----------------------------------------------------------------------------------------

    def filter(self, cands: Sequence[CandidateInfo]) -> None:
        todo = []
        for c in cands:
            recorded = self.outcome(c.id)
            if recorded is not None:
                self.hook.cake_candidate_filtered(run=self.info, candidate=c, outcome=recorded, resumed=True)
            else:
                todo.append(c)
        if not todo:
            return
        for c in todo:
            self.ledger.attempt(f"filter:{c.id}")
        jobs = [FilterJob(c.id, c.source, c.path or f"{c.name}.cake", self.problem.name, self.tgt.name, self.shape,
                          self.dtype, self.floor_ms) for c in todo]  # fmt: skip
        by_id = {c.id: c for c in todo}
        for job, outcome in filter_all(jobs, workers=self.opts.workers, local=self.loaded):
            self.record_outcome(job.key, outcome)
            self.hook.cake_candidate_filtered(run=self.info, candidate=by_id[job.key], outcome=outcome, resumed=False)

    def record_outcome(self, cid: int, o: FilterOutcome) -> None:
        with self.ledger.transaction() as db:
            db.execute(
                "INSERT INTO filtered (candidate, status, gate, reason, compile, estimate, estimate_ms, bound, "
                "interp_seconds, seconds, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (cid, o.status, o.gate, o.reason, dumps(unstructure(o.compile)) if o.compile else None,
                 dumps(unstructure(o.estimate)) if o.estimate else None, o.estimate.ms if o.estimate else None,
                 o.estimate.bound if o.estimate else None, o.interp_seconds, o.seconds, now()),
            )  # fmt: skip
            for stage, diags in (("verify", o.verify), ("interp", o.interp)):
                db.executemany(
                    "INSERT INTO diagnostics VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [(cid, stage, i, d.code, d.severity.value, d.message, str(d.primary), dumps(unstructure(d)))
                     for i, d in enumerate(diags)],
                )  # fmt: skip

    # -- 3. benchmark --------------------------------------------------------------------------------------

    def survivors(self, rnd: int) -> list[CandidateInfo]:
        """The round's candidates stage 3 takes: the most promising compiled ones by predicted time, then (with
        ``--bench-rejected``) those refused by a verifier rule, the interpreter gate or the floor, which can still
        run."""
        top = self.budgets.benchmark_top or DEFAULT_BENCHMARK_TOP
        compiled = self.ledger.rows(
            "SELECT c.id FROM candidates c JOIN filtered f ON f.candidate = c.id WHERE c.round = ? AND "
            "f.status = 'compiled' ORDER BY f.estimate_ms IS NULL, f.estimate_ms, c.id LIMIT ?", (rnd, top))  # fmt: skip
        ids = [r["id"] for r in compiled]
        if self.opts.bench_rejected:
            ids += [r["candidate"] for r in self.ledger.rows(
                "SELECT f.candidate FROM filtered f JOIN candidates c ON f.candidate = c.id WHERE c.round = ? AND "
                "f.status = 'rejected' AND f.gate IN ('verify', 'interp', 'floor') AND NOT EXISTS (SELECT 1 FROM diagnostics "
                "d WHERE d.candidate = c.id AND d.severity = 'error' AND d.code LIKE 'CK%') ORDER BY c.id", (rnd,))]  # fmt: skip
        by_id = {c.id: c for c in self.candidates("round = ?", (rnd,))}
        return [by_id[i] for i in ids]

    def benchmark(self, rnd: int, runner: Any) -> None:
        """Stage 3 for the round: dispatch each survivor that has no recorded measurement."""
        from cake_core.loop.benchmark import bench_candidate

        for c in self.survivors(rnd):
            impl = f"cake:{c.name}"
            row = self.ledger.one("SELECT * FROM dispatches WHERE impl = ? AND run = 0", (impl,))
            if row is not None:
                self.hook.cake_measured(run=self.info, candidate=c, measurement=self.measurement(row), resumed=True)
                continue
            if self.over_budget():
                break
            self.ledger.attempt(f"dispatch:{impl}")
            cand = self.load(c)
            start, waited = time.monotonic(), _waited(runner)
            m = bench_candidate(cand, self.bench_problem, self.shape, self.dtype, runner, impl=impl, seed=self.seed,
                                timing=STAGE3_TIMING, timeout_s=self.opts.gpu_timeout_s, floor_ms=self.floor_ms)  # fmt: skip
            self.record_dispatch(c.id, m, time.monotonic() - start - (_waited(runner) - waited))
            self.hook.cake_measured(run=self.info, candidate=c, measurement=m, resumed=False)

    def record_dispatch(self, cid: int | None, m: Measurement, seconds: float) -> None:
        data = unstructure(m)
        del data["samples"], data["date"], data["phases"]  # own table; `recorded_at`; `phases_seconds`
        with self.ledger.transaction() as db:
            cur = db.execute(
                "INSERT INTO dispatches (candidate, impl, run, status, correct, median_ms, gpu, measurement, seconds, "
                "recorded_at, phases_seconds) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (cid, m.impl, m.run, m.status, int(m.correct), m.median_ms, m.gpu, dumps(data), round(seconds, 3),
                 now(), dumps(m.phases) if m.phases is not None else None),
            )  # fmt: skip
            db.executemany("INSERT INTO samples VALUES (?, ?, ?)", [(cur.lastrowid, i, s) for i, s in enumerate(m.samples)])

    # -- 4. route ------------------------------------------------------------------------------------------

    def route(self, rnd: int) -> None:
        from cake_core.loop.route import route_round

        if self.ledger.one("SELECT routed FROM rounds WHERE round = ?", (rnd,))["routed"]:  # type: ignore[index]
            for f in self.findings("round = ?", (rnd,)):
                self.hook.cake_finding_routed(run=self.info, finding=f, resumed=True)
            return
        self.ledger.attempt(f"route:{rnd}")
        cands = self.candidates("round = ?", (rnd,))
        outcomes = {c.id: self.outcome(c.id) for c in cands}
        dispatches = {r["candidate"]: self.measurement(r) for r in self.ledger.rows(
            "SELECT * FROM dispatches WHERE candidate IN (SELECT id FROM candidates WHERE round = ?)", (rnd,))}  # fmt: skip
        findings = route_round(rnd, cands, outcomes, dispatches, self.reproduce)
        with self.ledger.transaction() as db:
            for f in findings:
                db.execute("INSERT INTO findings (round, candidate, destination, kind, message, location, evidence, "
                           "reproducer, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                           (f.round, f.candidate, f.destination, f.kind, f.message, f.location, dumps(f.evidence),
                            f.reproducer, now()))  # fmt: skip
            db.execute("UPDATE rounds SET routed = 1 WHERE round = ?", (rnd,))
        for f in findings:
            self.hook.cake_finding_routed(run=self.info, finding=f, resumed=False)

    def reproduce(self, c: CandidateInfo, gate: str, code: str) -> tuple[str, dict[str, Any]]:
        """The candidate reduced while the stage-2 gate that refused it still reports ``code``: within a number
        of the gate's calls, not a time, so that every machine (and a resumed run) reduces it alike."""
        from cake_core.loop.reduce import NotReproduced, reduce
        from cake_core.loop.reproduces import gate_reports, verifier_reports

        if gate == "verify":
            still, calls = verifier_reports(code, self.tgt, self.reg, baseline=c.source), REDUCE_VERIFY_CALLS
        elif gate == "interp":
            still = gate_reports(code, self.problem, self.reg, target=self.tgt, baseline=c.source)
            calls = REDUCE_GATE_CALLS
        else:
            return c.source, {"reduced": False}
        try:
            r = reduce(c.source, still, deadline_s=REDUCE_DEADLINE_S, max_tests=calls)
        except NotReproduced as exc:  # e.g. a syntax error the canonical print loses
            return c.source, {"reduced": False, "why": str(exc)}
        return r.text, {"reduced": r.lines_after < r.lines_before, "method": r.method,
                        "lines": [r.lines_before, r.lines_after], "calls": r.tests}  # fmt: skip

    def findings(self, where: str = "1", params: Sequence[Any] = ()) -> list[Finding]:
        return [Finding(r["destination"], r["kind"], r["message"], r["round"], r["candidate"], r["location"],
                        json.loads(r["evidence"]), r["reproducer"])
                for r in self.ledger.rows(f"SELECT * FROM findings WHERE {where} ORDER BY id", params)]  # fmt: skip

    # -- the result ----------------------------------------------------------------------------------------

    def ranking(self) -> list[tuple[CandidateInfo, float, bool]]:
        """Candidates best first: measured correct ones (status ok) by median time; where nothing was measured,
        compiled ones by predicted time. A candidate stage 2 rejected is never ranked, even where
        ``--bench-rejected`` measured it correct (its finding says so). ``(candidate, ms, measured)``."""
        by_id = {c.id: c for c in self.candidates()}
        measured = [(by_id[r["candidate"]], r["median_ms"], True) for r in self.ledger.rows(
            "SELECT d.candidate, d.median_ms FROM dispatches d JOIN filtered f ON f.candidate = d.candidate "
            "WHERE f.status = 'compiled' AND d.status = 'ok' AND d.correct AND d.median_ms IS NOT NULL "
            "ORDER BY d.median_ms, d.candidate")]  # fmt: skip
        if measured or self.ledger.one("SELECT 1 FROM dispatches WHERE candidate IS NOT NULL") is not None:
            return measured  # where a GPU measured, only what it found correct can be best
        return [(by_id[r["candidate"]], r["estimate_ms"], False) for r in self.ledger.rows(
            "SELECT candidate, estimate_ms FROM filtered WHERE status = 'compiled' AND estimate_ms IS NOT NULL "
            "ORDER BY estimate_ms, candidate")]  # fmt: skip

    def summary(self) -> RunSummary:
        ranked = self.ranking()
        best = ranked[0] if ranked else None
        base = self.ledger.one("SELECT impl, median_ms FROM dispatches WHERE candidate IS NULL AND status = 'ok' AND "
                               "correct ORDER BY id LIMIT 1")  # fmt: skip
        best_pred = None
        if best is not None:
            row = self.ledger.one("SELECT estimate_ms FROM filtered WHERE candidate = ?", (best[0].id,))
            best_pred = row["estimate_ms"] if row is not None else None
        measured = best is not None and best[2]
        best_ms = best[1] if measured else None
        base_ms = base["median_ms"] if base is not None else None
        return RunSummary(
            best[0].name if best else None, best[0].hash if best else None, best_ms, best_pred,
            base["impl"].removeprefix("baseline:") if base is not None else None, base_ms,
            round(base_ms / best_ms, 4) if base_ms and best_ms else None, measured, dict(self.stages), self.over_budget(),
            self.spent(),
        )  # fmt: skip


def _versions(reg: Any, tgt: Any) -> list[tuple[str, str, str]]:
    rows = {("distribution", p.distribution, p.version) for p in reg.plugins.values()}
    rows.add(("target-data", tgt.name, tgt.data_version))
    for name in reg.names("cost_models"):
        m = reg.get("cost_models", name)
        rows.add(("cost-model", name, m.version))
        rows.add(("calibration", name, "calibrated" if m.calibrated else "uncalibrated"))
    return sorted(rows)


def open_ledger(opts: RunOptions, reg: Any) -> tuple[Ledger, dict[str, Any]]:
    """The run's ledger and settings: a new one (``--out`` must not hold a run) or, with ``--resume``, the
    recorded one (refused for another problem or target)."""
    problem = reg.get("problems", opts.problem)
    tgt = reg.get("targets", opts.target)
    if opts.agent is not None:
        reg.get("agents", opts.agent)  # an unknown agent is a user error naming the known ones
    if opts.resume:
        ledger = Ledger.open(opts.out, {"problem": problem.name, "target": tgt.name})
        return ledger, ledger.meta()
    for path in opts.sources:
        _read(path)  # a missing --from file is refused before anything is written
    meta = {
        "problem": problem.name, "target": tgt.name, "seed": opts.seed, "agent": opts.agent,
        "from": [str(p) for p in opts.sources], "budgets": unstructure(opts.budgets), "feedback": opts.feedback,
        "cell": {"shape": dict(opts.cell[0]), "dtype": opts.cell[1]} if opts.cell else
                {"shape": dict(problem.default_cell.shape), "dtype": problem.default_cell.dtype},
    }  # fmt: skip
    make_dir(opts.out)
    return Ledger.create(opts.out, meta), meta


def run(opts: RunOptions, *, observers: Sequence[object] = (), log: Callable[[str], None] = print) -> RunSummary:
    """Run (or resume) the loop and write the run directory: ledger, ``best.cake``, the exported kernel,
    ``report.md``. Returns how it ended."""
    from cake_core import plugins

    reg = plugins.registry()
    ledger, meta = open_ledger(opts, reg)
    try:
        ledger.set_versions(_versions(reg, reg.get("targets", meta["target"])))
        ledger.begin_session(opts.argv)
        names = [reg.manager.register(o, name=f"cake-observer-{i}") for i, o in enumerate(observers)]
        try:
            loop = Loop(opts, reg, ledger, meta, log)
            summary = _drive(loop)
        finally:
            for n in names:
                if n is not None:
                    reg.manager.unregister(name=n)
        ledger.end_session()
        from cake_core.loop.outputs import write_outputs

        write_outputs(loop, summary)
        return summary
    finally:
        ledger.close()


def _drive(loop: Loop) -> RunSummary:
    from cake_core.runtime.device import arch_runs_on, driver_status

    hook, info = loop.hook, loop.info
    resumed = loop.ledger.one("SELECT 1 FROM candidates") is not None
    hook.cake_run_started(run=info, resumed=resumed)
    ok, reason = driver_status()
    runner = None
    gpu_note = f"no GPU here ({reason})"
    if ok:
        from cake_core.runtime.worker import GpuRunner

        runner = GpuRunner()
        gpu = runner.device_info()
        if arch_runs_on(loop.tgt.nvrtc_arch, tuple(gpu.compute_capability)):
            gpu_note = gpu.name
        else:
            gpu_note = f"this GPU ({gpu.name}) is not a {loop.tgt.name} ({loop.tgt.nvrtc_arch}); no silent fallback"
            runner.close()
            runner = None
    try:
        if runner is not None:
            loop.bench_problem.keep_in(runner)  # the run's inputs cross to the worker once
            _baseline(loop, runner)
        rnd = 0
        while True:
            cands = loop.generate(rnd)
            if not cands:
                break
            loop.filter(cands)
            if runner is not None:
                loop.benchmark(rnd, runner)
            loop.route(rnd)
            if loop.agent is None:
                break
            rnd += 1
    finally:
        if runner is not None:
            runner.close()
    _describe_stages(loop, runner is not None, gpu_note)
    summary = loop.summary()
    hook.cake_run_finished(run=info, summary=summary)
    return summary


def _waited(runner: Any) -> float:
    """Seconds ``runner`` has waited so far for other processes' GPU work: a dispatch's recorded seconds
    leave them out (what it cost the device, not how long it queued)."""
    return float(getattr(runner, "waited_s", 0.0))


def _baseline(loop: Loop, runner: Any) -> None:
    """The problem's baseline, timed once per run in the same worker as the candidates."""
    from cake_core.loop.baseline import bench_baseline
    from cake_core.problems.problem import baseline_of

    if baseline_of(loop.problem) is None:
        return
    row = loop.ledger.one("SELECT * FROM dispatches WHERE candidate IS NULL AND run = 0")
    if row is not None:
        loop.hook.cake_measured(run=loop.info, candidate=None, measurement=loop.measurement(row), resumed=True)
        return
    loop.ledger.attempt("dispatch:baseline")
    start, waited = time.monotonic(), _waited(runner)
    m = bench_baseline(loop.bench_problem, loop.shape, loop.dtype, runner, seed=loop.seed, target=loop.tgt.name,
                       timeout_s=max(loop.opts.gpu_timeout_s, 600.0))  # fmt: skip
    loop.record_dispatch(None, m, time.monotonic() - start - (_waited(runner) - waited))
    loop.hook.cake_measured(run=loop.info, candidate=None, measurement=m, resumed=False)


def _describe_stages(loop: Loop, measured: bool, gpu_note: str) -> None:
    """One sentence per stage, from the ledger."""
    db = loop.ledger
    n = db.one("SELECT COUNT(*) AS n, COUNT(DISTINCT round) AS r FROM candidates")
    origins = ", ".join(f"{r['k']} {r['origin']}" for r in db.rows(
        "SELECT origin, COUNT(*) AS k FROM candidates GROUP BY origin ORDER BY origin"))  # fmt: skip
    loop.stages["generate"] = f"{n['n']} distinct candidate(s) over {n['r']} round(s) ({origins or 'none'})"
    compiled = db.one("SELECT COUNT(*) AS n FROM filtered WHERE status = 'compiled'")["n"]
    gates = ", ".join(f"{r['k']} by the {r['gate']} gate" for r in db.rows(
        "SELECT gate, COUNT(*) AS k FROM filtered WHERE status = 'rejected' GROUP BY gate ORDER BY gate"))  # fmt: skip
    loop.stages["filter"] = f"{compiled} of {n['n']} pass every gate and compile for {loop.tgt.name}" + (
        f"; rejected {gates}" if gates else "")
    if measured:
        d = db.one("SELECT COUNT(*) AS n, SUM(status = 'ok' AND correct) AS ok FROM dispatches WHERE candidate IS NOT NULL")
        loop.stages["benchmark"] = f"{d['n']} candidate dispatch(es) on {gpu_note}, {d['ok'] or 0} correct"
    else:
        models = loop.reg.names("cost_models")
        if models:
            m = loop.reg.get("cost_models", models[0])
            kind = "calibrated" if m.calibrated else "uncalibrated"
            # a model may say where its figures for the target come from (``basis(target)``: one sentence)
            basis = getattr(m, "basis", None)
            source = f" {basis(loop.tgt)}" if callable(basis) else ""
            loop.stages["benchmark"] = (f"skipped: {gpu_note}; nothing was measured (ran: false). Ranked by the "
                                        f"{m.name} cost model's predicted time ({kind}).{source}")  # fmt: skip
        else:
            loop.stages["benchmark"] = (f"skipped: {gpu_note}; nothing was measured, and no cost model is installed, "
                                        "so there is no ranking by predicted time")  # fmt: skip
    routed = ", ".join(f"{r['k']} to the {r['destination']}" for r in db.rows(
        "SELECT destination, COUNT(*) AS k FROM findings GROUP BY destination ORDER BY destination"))  # fmt: skip
    loop.stages["route"] = routed or "no findings"
    if loop.stopped:
        loop.stages["stopped"] = loop.stopped
