"""The run's ledger: one SQLite database (WAL mode) in the run directory, the record ``cake run`` resumes from.

It holds every candidate (its IR text, structural hash, parent and how it was made), the diagnostics and
outcome of stage 2 (verifier, interpreter gate, compile report, estimate), every stage-3 dispatch with every
time sample, every routed finding, and the versions of the plugin distributions, target data and cost model in
use. Each result is written in one transaction when it is known, so a run killed at any point loses at most the
work in flight; ``--resume`` redoes only what has no row yet.

Tables other than ``sessions`` and ``attempts`` are the run's *contents*: a resumed run ends with the same
contents as an uninterrupted one, timestamps and durations aside (columns ending in ``_at`` and ``seconds``).
``attempts`` is the journal of work started (one row before each piece of work), which is how a test shows
that nothing already recorded was redone.
"""

from __future__ import annotations

import datetime as _dt
import json
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from cake_core.errors import CakeUserError

SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS versions (
  kind TEXT NOT NULL, name TEXT NOT NULL, version TEXT NOT NULL, PRIMARY KEY (kind, name));
CREATE TABLE IF NOT EXISTS sessions (
  id INTEGER PRIMARY KEY, argv TEXT NOT NULL, started_at TEXT NOT NULL, finished_at TEXT);
CREATE TABLE IF NOT EXISTS rounds (
  round INTEGER PRIMARY KEY, proposer TEXT NOT NULL, proposed INTEGER NOT NULL, tokens INTEGER NOT NULL,
  routed INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS candidates (
  id INTEGER PRIMARY KEY, hash TEXT NOT NULL UNIQUE, name TEXT NOT NULL, round INTEGER NOT NULL,
  origin TEXT NOT NULL, parent TEXT, how TEXT NOT NULL, path TEXT, source TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS diagnostics (
  candidate INTEGER NOT NULL REFERENCES candidates(id), stage TEXT NOT NULL, seq INTEGER NOT NULL,
  code TEXT NOT NULL, severity TEXT NOT NULL, message TEXT NOT NULL, location TEXT, record TEXT NOT NULL,
  PRIMARY KEY (candidate, stage, seq));
CREATE TABLE IF NOT EXISTS filtered (
  candidate INTEGER PRIMARY KEY REFERENCES candidates(id), status TEXT NOT NULL, gate TEXT, reason TEXT,
  compile TEXT, estimate TEXT, estimate_ms REAL, bound TEXT, interp_seconds REAL, seconds REAL,
  recorded_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS dispatches (
  id INTEGER PRIMARY KEY, candidate INTEGER REFERENCES candidates(id), impl TEXT NOT NULL, run INTEGER NOT NULL,
  status TEXT NOT NULL, correct INTEGER NOT NULL, median_ms REAL, gpu TEXT, measurement TEXT NOT NULL,
  seconds REAL, recorded_at TEXT NOT NULL, phases_seconds TEXT, UNIQUE (impl, run));
CREATE TABLE IF NOT EXISTS samples (
  dispatch INTEGER NOT NULL REFERENCES dispatches(id), seq INTEGER NOT NULL, ms REAL NOT NULL,
  PRIMARY KEY (dispatch, seq));
CREATE TABLE IF NOT EXISTS findings (
  id INTEGER PRIMARY KEY, round INTEGER NOT NULL, candidate INTEGER REFERENCES candidates(id),
  destination TEXT NOT NULL, kind TEXT NOT NULL, message TEXT NOT NULL, location TEXT, evidence TEXT NOT NULL,
  reproducer TEXT, recorded_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS attempts (session INTEGER NOT NULL, work TEXT NOT NULL, started_at TEXT NOT NULL);
"""

#: the tables whose rows are the run's contents (compared across resumes, timestamps aside)
CONTENT_TABLES = ("meta", "versions", "rounds", "candidates", "diagnostics", "filtered", "dispatches", "samples",
                  "findings")  # fmt: skip


def now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")


def dumps(value: Any) -> str:
    """JSON as the ledger stores it: keys sorted, so equal values are equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


class Ledger:
    """One run's SQLite ledger. Open with :meth:`create` (a new run) or :meth:`open` (``--resume``)."""

    FILE = "ledger.sqlite"

    def __init__(self, path: Path, db: sqlite3.Connection) -> None:
        self.path = path
        self.db = db
        self.session: int | None = None

    # -- opening -----------------------------------------------------------------------------------------

    @classmethod
    def _connect(cls, path: Path) -> sqlite3.Connection:
        db = sqlite3.connect(path, isolation_level=None, timeout=30)
        db.row_factory = sqlite3.Row
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: a committed row survives a killed process
        db.execute("PRAGMA foreign_keys=ON")
        return db

    @classmethod
    def create(cls, out: Path, meta: Mapping[str, Any]) -> Ledger:
        """A new ledger in ``out`` (refused where one exists: that is what ``--resume`` is for)."""
        path = out / cls.FILE
        if path.exists():
            raise CakeUserError(f"{out} already holds a run ({cls.FILE}); pass --resume to continue it, or "
                                "choose another --out")  # fmt: skip
        # built under another name and renamed when whole: a run killed here leaves no ledger, not half a one
        tmp = out / (cls.FILE + ".new")
        for stale in (tmp, tmp.with_name(tmp.name + "-wal"), tmp.with_name(tmp.name + "-shm")):
            stale.unlink(missing_ok=True)
        try:
            db = sqlite3.connect(tmp, isolation_level=None)
            db.execute("BEGIN")
            for statement in SCHEMA.split(";"):  # not executescript: it would commit on its own
                if statement.strip():
                    db.execute(statement)
            rows = {"schema": SCHEMA_VERSION, **meta}
            db.executemany("INSERT INTO meta VALUES (?, ?)", [(k, dumps(v)) for k, v in rows.items()])
            db.execute("COMMIT")
            db.close()
            tmp.replace(path)
            ledger = cls(path, cls._connect(path))
        except sqlite3.Error as exc:
            raise CakeUserError(f"cannot create {path}: {exc}") from None
        return ledger

    @classmethod
    def open(cls, out: Path, expect: Mapping[str, Any]) -> Ledger:
        """The ledger of the run in ``out``; a user error where there is none, or it belongs to a run whose
        ``expect`` keys (problem, target) differ."""
        path = out / cls.FILE
        if not path.is_file():
            raise CakeUserError(f"cannot resume: {out} holds no run ledger ({cls.FILE})")
        try:
            db = cls._connect(path)
            meta = {r["key"]: json.loads(r["value"]) for r in db.execute("SELECT key, value FROM meta")}
        except (sqlite3.Error, ValueError) as exc:
            raise CakeUserError(f"cannot resume from {path}: {exc}") from None
        if meta.get("schema") != SCHEMA_VERSION:
            raise CakeUserError(f"cannot resume from {path}: ledger schema {meta.get('schema')}, this Cake writes "
                                f"{SCHEMA_VERSION}")  # fmt: skip
        for key, want in expect.items():
            if meta.get(key) != want:
                raise CakeUserError(f"cannot resume: {out} is a run of {key} `{meta.get(key)}`, not `{want}`")
        if "phases_seconds" not in {r["name"] for r in db.execute("PRAGMA table_info(dispatches)")}:
            db.execute("ALTER TABLE dispatches ADD COLUMN phases_seconds TEXT")  # a ledger written before it existed
        return cls(path, db)

    def close(self) -> None:
        self.db.close()

    # -- writing -----------------------------------------------------------------------------------------

    def transaction(self) -> Any:
        """``with ledger.transaction():`` one atomic write."""
        return _Transaction(self.db)

    def begin_session(self, argv: Sequence[str]) -> int:
        with self.transaction():
            cur = self.db.execute("INSERT INTO sessions (argv, started_at) VALUES (?, ?)", (dumps(list(argv)), now()))
        self.session = int(cur.lastrowid or 0)
        return self.session

    def end_session(self) -> None:
        with self.transaction():
            self.db.execute("UPDATE sessions SET finished_at = ? WHERE id = ?", (now(), self.session))

    def attempt(self, work: str) -> None:
        """Journal that ``work`` starts now (committed before the work is done)."""
        with self.transaction():
            self.db.execute("INSERT INTO attempts VALUES (?, ?, ?)", (self.session, work, now()))

    def set_versions(self, rows: Sequence[tuple[str, str, str]]) -> None:
        """Record the versions in use; on resume, a user error where one differs from the recorded run's."""
        recorded = {(r["kind"], r["name"]): r["version"] for r in self.db.execute("SELECT * FROM versions")}
        if recorded:
            now_in_use = {(k, n): v for k, n, v in rows}
            changed = sorted(f"{k} {n} {recorded.get((k, n), 'absent')} -> {now_in_use.get((k, n), 'absent')}"
                             for k, n in set(recorded) | set(now_in_use)
                             if recorded.get((k, n)) != now_in_use.get((k, n)))  # fmt: skip
            if changed:
                raise CakeUserError("cannot resume: the versions in use differ from the run's: " + "; ".join(changed))
            return
        with self.transaction():
            self.db.executemany("INSERT INTO versions VALUES (?, ?, ?)", rows)

    def meta(self) -> dict[str, Any]:
        return {r["key"]: json.loads(r["value"]) for r in self.db.execute("SELECT key, value FROM meta")}

    # -- reading -----------------------------------------------------------------------------------------

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        return list(self.db.execute(sql, params))

    def one(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Row | None:
        return self.db.execute(sql, params).fetchone()

    def contents(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every content table's rows in key order, without timestamp and duration columns (what a resumed run
        must share with an uninterrupted one)."""
        out: dict[str, list[tuple[Any, ...]]] = {}
        for table in CONTENT_TABLES:
            cols = [r["name"] for r in self.db.execute(f"PRAGMA table_info({table})")
                    if not (r["name"].endswith("_at") or r["name"].endswith("seconds"))]  # fmt: skip
            out[table] = [tuple(r) for r in self.db.execute(f"SELECT {', '.join(cols)} FROM {table} ORDER BY 1, 2")]
        return out

    def journal(self) -> Iterator[tuple[int, str]]:
        yield from ((r["session"], r["work"]) for r in self.db.execute("SELECT session, work FROM attempts"))


class _Transaction:
    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.db.execute("COMMIT" if exc_type is None else "ROLLBACK")
