"""SQLite trace store: one record per request, written in WAL mode.

A request row is inserted with status ``running`` when the request starts, so even a process
killed mid-request leaves a trace; :meth:`TraceStore.write` then stores the finished record —
request row, conductor attempts and steps — in one transaction.

Tables: ``requests`` (one row per request), ``plan_attempts`` (one row per conductor call),
``steps`` (one row per executed step, workflow and fallback). JSON columns hold messages,
workflows, access lists and disclosures (third-party recipients of a call and the PII kinds they
received; never PII values unless the pool file says ``record_values``). Times are UTC ISO 8601.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from podium.errors import ConfigError
from podium.records import Disclosure, FallbackInfo, PlanAttempt, RunRecord, StepRecord, Totals
from podium.workers.base import Message, Usage
from podium.workflow import ALL, Access, Step, Workflow

__all__ = ["SCHEMA_VERSION", "DisclosureRow", "TraceStore", "TraceStoreError", "TraceSummary"]


class TraceStoreError(ConfigError):
    """The trace database cannot be opened, read or written (names the file and the fix)."""


SCHEMA_VERSION = 3
"""Version of the tables below. An older database is upgraded in place by additive migrations
(new columns and indexes only, in one transaction, announced on stderr); a newer one is refused
with the fix, never altered. (Version 1 was a development schema that never shipped.)"""

_MIGRATIONS: dict[int, str] = {
    # 2 → 3: caller-given tags and the data subject's key, for search, slices and purge; each
    # call's third-party recipients and the PII kinds they received (data-flow register).
    2: """
    ALTER TABLE requests ADD COLUMN tags TEXT NOT NULL DEFAULT '[]';
    ALTER TABLE requests ADD COLUMN subject TEXT;
    ALTER TABLE plan_attempts ADD COLUMN disclosures TEXT NOT NULL DEFAULT '[]';
    ALTER TABLE steps ADD COLUMN disclosures TEXT NOT NULL DEFAULT '[]';
    """,
}
"""SQL that upgrades version ``k`` to ``k + 1``."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS requests (
    id TEXT PRIMARY KEY,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    mode TEXT NOT NULL,
    pool TEXT NOT NULL,
    workers TEXT NOT NULL DEFAULT '[]',
    conductor TEXT NOT NULL,
    status TEXT NOT NULL,
    question TEXT NOT NULL,
    answer TEXT,
    error TEXT,
    workflows TEXT NOT NULL DEFAULT '[]',
    fallback_reason TEXT,
    fallback_detail TEXT,
    totals TEXT,
    total_cost_usd REAL,
    wall_time_s REAL,
    tags TEXT NOT NULL DEFAULT '[]',
    subject TEXT
);
CREATE INDEX IF NOT EXISTS requests_started ON requests (started_at);
CREATE INDEX IF NOT EXISTS requests_subject ON requests (subject) WHERE subject IS NOT NULL;
CREATE TABLE IF NOT EXISTS plan_attempts (
    request_id TEXT NOT NULL REFERENCES requests (id) ON DELETE CASCADE,
    round INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    messages TEXT NOT NULL,
    raw_output TEXT NOT NULL,
    workflow TEXT,
    error_kind TEXT,
    error TEXT,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cached_input_tokens INTEGER NOT NULL,
    reasoning_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL NOT NULL,
    latency_s REAL NOT NULL,
    constrained INTEGER NOT NULL,
    disclosures TEXT NOT NULL DEFAULT '[]',
    PRIMARY KEY (request_id, round, attempt)
);
CREATE TABLE IF NOT EXISTS steps (
    request_id TEXT NOT NULL REFERENCES requests (id) ON DELETE CASCADE,
    phase TEXT NOT NULL,
    round INTEGER NOT NULL,
    step_index INTEGER NOT NULL,
    worker_index INTEGER NOT NULL,
    worker TEXT NOT NULL,
    subtask TEXT NOT NULL,
    access TEXT NOT NULL,
    visible TEXT NOT NULL,
    visible_previous TEXT NOT NULL,
    messages TEXT NOT NULL,
    output TEXT NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cached_input_tokens INTEGER NOT NULL,
    reasoning_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL NOT NULL,
    latency_s REAL NOT NULL,
    finish_reason TEXT NOT NULL,
    error TEXT,
    error_type TEXT,
    started_at TEXT NOT NULL,
    finished_at TEXT NOT NULL,
    disclosures TEXT NOT NULL DEFAULT '[]',
    PRIMARY KEY (request_id, phase, round, step_index)
);
"""


@dataclass(frozen=True)
class TraceSummary:
    """One line of ``podium trace list``."""

    id: str
    started_at: str
    status: str
    mode: str
    question: str
    steps: int
    total_cost_usd: float | None
    wall_time_s: float | None


@dataclass(frozen=True)
class DisclosureRow:
    """A stored step or conductor attempt whose calls reached third parties.

    Attributes:
        request_id: the request.
        at: when (the step's start, or the request's start for a conductor attempt), UTC ISO 8601.
        source: ``"step"``, ``"fallback"`` or ``"conductor"``.
        round: the recursion round; index: the step index, or the conductor's attempt number.
        visible, visible_previous: what its access list granted (steps; empty for the conductor).
        system_prompt: whether the worker's configured system message was sent too.
        disclosures: the recipients and PII kinds.
    """

    request_id: str
    at: str
    source: str
    round: int
    index: int
    visible: tuple[int, ...]
    visible_previous: tuple[tuple[int, int], ...]
    system_prompt: bool
    disclosures: tuple[Disclosure, ...]


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


class TraceStore:
    """A SQLite file of request traces.

    Args:
        path: the database file (created with its folder if missing).

    Raises ConfigError when the file cannot be opened or is not a podium trace database.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            found = self._check_version()  # before anything that writes, WAL mode included
            self._db.execute("PRAGMA journal_mode=WAL")
            if found is not None and found < SCHEMA_VERSION:
                self._migrate(found)
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.execute("PRAGMA busy_timeout=5000")
            self._db.executescript(_SCHEMA)
            self._db.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
            )
        except (sqlite3.Error, OSError) as exc:
            raise TraceStoreError(f"cannot open trace database {str(self.path)!r}: {exc}") from None

    def _check_version(self) -> int | None:
        """The file's schema version (None for a new file); raises TraceStoreError for a version
        this podium cannot use (newer, or older than any migration)."""
        tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not tables:
            return None  # a new file
        row = (
            self._db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if "meta" in tables
            else None
        )
        found = int(row[0]) if row else 0
        if found == SCHEMA_VERSION or found in _MIGRATIONS:
            return found
        self._db.close()
        raise TraceStoreError(
            f"trace database {str(self.path)!r} has schema version {found}, this podium uses {SCHEMA_VERSION}; "
            f"nothing was changed. Move it aside to start a new one (mv {self.path} {self.path}.v{found}) "
            "or pass --traces with another file"
        )

    def _migrate(self, found: int) -> None:
        """Upgrade from version ``found`` to SCHEMA_VERSION in one transaction."""
        sys.stderr.write(f"podium: upgrading trace database {self.path} from schema {found} to {SCHEMA_VERSION}\n")
        self._db.execute("BEGIN IMMEDIATE")
        try:
            for version in range(found, SCHEMA_VERSION):
                for statement in filter(str.strip, _MIGRATIONS[version].split(";")):
                    self._db.execute(statement)
            self._db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; SQLite failures (locked, disk full, ...) become TraceStoreError."""
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    yield self._db
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                raise TraceStoreError(f"cannot write to trace database {str(self.path)!r}: {exc}") from None

    def begin(
        self,
        request_id: str,
        question: str,
        *,
        started_at: str,
        pool: str,
        conductor: str,
        mode: str,
        tags: tuple[str, ...] = (),
        subject: str | None = None,
    ) -> None:
        """Insert the request row with status ``running``."""
        with self._tx() as db:
            db.execute(
                "INSERT INTO requests (id, started_at, mode, pool, conductor, status, question, tags, subject) "
                "VALUES (?, ?, ?, ?, ?, 'running', ?, ?, ?)",
                (request_id, started_at, mode, pool, conductor, question, _dumps(list(tags)), subject),
            )

    def write(self, record: RunRecord) -> None:
        """Store a finished record (replacing its ``running`` row) in one transaction."""
        data = record.to_json()
        request = {
            "id": record.id,
            "started_at": record.started_at,
            "finished_at": record.finished_at,
            "mode": record.mode,
            "pool": record.pool,
            "workers": _dumps(list(record.workers)),
            "conductor": record.conductor,
            "status": record.status,
            "question": record.question,
            "answer": record.answer,
            "error": record.error,
            "workflows": _dumps(data["workflows"]),
            "fallback_reason": record.fallback.reason if record.fallback else None,
            "fallback_detail": record.fallback.detail if record.fallback else None,
            "totals": _dumps(data["totals"]),
            "total_cost_usd": record.totals.total_cost_usd,
            "wall_time_s": record.totals.wall_time_s,
            "tags": _dumps(list(record.tags)),
            "subject": record.subject,
        }
        attempts = [
            {
                "request_id": record.id,
                "round": a.round,
                "attempt": a.attempt,
                "messages": _dumps(list(a.messages)),
                "raw_output": a.raw_output,
                "workflow": _dumps(a.workflow.to_json()) if a.workflow is not None else None,
                "error_kind": a.error_kind,
                "error": a.error,
                "input_tokens": a.usage.input_tokens,
                "output_tokens": a.usage.output_tokens,
                "cached_input_tokens": a.usage.cached_input_tokens,
                "reasoning_tokens": a.usage.reasoning_tokens,
                "cost_usd": a.cost_usd,
                "latency_s": a.latency_s,
                "constrained": int(a.constrained),
                "disclosures": _dumps(data_attempt["disclosures"]),
            }
            for a, data_attempt in zip(record.attempts, data["attempts"], strict=True)
        ]
        steps = [
            {
                "request_id": record.id,
                "phase": s.phase,
                "round": s.round,
                "step_index": s.index,
                "worker_index": s.worker_index,
                "worker": s.worker,
                "subtask": s.subtask,
                "access": _dumps(s.access),
                "visible": _dumps(list(s.visible)),
                "visible_previous": _dumps([list(p) for p in s.visible_previous]),
                "messages": _dumps(list(s.messages)),
                "output": s.output,
                "input_tokens": s.usage.input_tokens,
                "output_tokens": s.usage.output_tokens,
                "cached_input_tokens": s.usage.cached_input_tokens,
                "reasoning_tokens": s.usage.reasoning_tokens,
                "cost_usd": s.cost_usd,
                "latency_s": s.latency_s,
                "finish_reason": s.finish_reason,
                "error": s.error,
                "error_type": s.error_type,
                "started_at": s.started_at,
                "finished_at": s.finished_at,
                "disclosures": _dumps(data_step["disclosures"]),
            }
            for s, data_step in zip(record.steps, data["steps"], strict=True)
        ]
        with self._tx() as db:
            db.execute("DELETE FROM requests WHERE id = ?", (record.id,))
            _insert(db, "requests", [request])
            _insert(db, "plan_attempts", attempts)
            _insert(db, "steps", steps)

    def list(self, *, limit: int = 20) -> list[TraceSummary]:
        """The most recent requests first."""
        rows = self._db.execute(
            "SELECT r.id, r.started_at, r.status, r.mode, r.question, "
            "(SELECT COUNT(*) FROM steps s WHERE s.request_id = r.id), r.total_cost_usd, r.wall_time_s "
            "FROM requests r ORDER BY r.started_at DESC, r.rowid DESC LIMIT ?",
            (limit,),
        ).fetchall()
        return [TraceSummary(*row) for row in rows]

    def spent_since(self, pool: str, since: str) -> float:
        """USD spent by requests of ``pool`` started at or after ``since`` (UTC ISO 8601),
        finished or not, conductor included."""
        finished = self._db.execute(
            "SELECT COALESCE(SUM(total_cost_usd), 0) FROM requests WHERE pool = ? AND started_at >= ?",
            (pool, since),
        ).fetchone()[0]
        return float(finished)

    def disclosures(self, since: str, until: str) -> tuple[DisclosureRow, ...]:
        """Steps and conductor attempts with third-party recipients, of requests started at or
        after ``since`` and before ``until`` (UTC ISO 8601), oldest first."""
        with self._lock:
            steps = self._db.execute(
                "SELECT s.request_id, s.started_at, s.phase, s.round, s.step_index, s.visible, s.visible_previous, "
                "json_extract(s.messages, '$[0].role') = 'system', s.disclosures FROM steps s "
                "JOIN requests r ON r.id = s.request_id "
                "WHERE r.started_at >= ? AND r.started_at < ? AND s.disclosures != '[]' "
                "ORDER BY s.started_at",
                (since, until),
            ).fetchall()
            attempts = self._db.execute(
                "SELECT a.request_id, r.started_at, a.round, a.attempt, "
                "json_extract(a.messages, '$[0].role') = 'system', a.disclosures FROM plan_attempts a "
                "JOIN requests r ON r.id = a.request_id "
                "WHERE r.started_at >= ? AND r.started_at < ? AND a.disclosures != '[]' "
                "ORDER BY r.started_at, a.round, a.attempt",
                (since, until),
            ).fetchall()
        rows = [
            DisclosureRow(
                request_id=rid,
                at=at,
                source="step" if phase == "workflow" else "fallback",
                round=rnd,
                index=idx,
                visible=tuple(json.loads(vis)),
                visible_previous=tuple((p[0], p[1]) for p in json.loads(prev)),
                system_prompt=bool(system),
                disclosures=_disclosures(disc),
            )
            for rid, at, phase, rnd, idx, vis, prev, system, disc in steps
        ]
        rows += [
            DisclosureRow(rid, at, "conductor", rnd, idx, (), (), bool(system), _disclosures(disc))
            for rid, at, rnd, idx, system, disc in attempts
        ]
        return tuple(sorted(rows, key=lambda r: r.at))

    def resolve_id(self, prefix: str) -> str:
        """The full request id for an id or unique prefix (as ``git`` resolves short hashes).

        Raises ConfigError when nothing or more than one request matches.
        """
        cleaned = prefix.strip().lower()
        if not cleaned or not all(c in "0123456789abcdef" for c in cleaned):
            raise ConfigError(f"{prefix!r} is not a request id (hex); see 'podium trace list'")
        rows = self._db.execute(
            "SELECT id FROM requests WHERE id >= ? AND id < ? LIMIT 2", (cleaned, cleaned + "g")
        ).fetchall()
        if not rows:
            raise ConfigError(f"no request with id {prefix!r}; see 'podium trace list'")
        if len(rows) > 1:
            raise ConfigError(f"id prefix {prefix!r} is ambiguous; give more characters")
        return cast(str, rows[0][0])

    def get(self, request_id: str) -> RunRecord | None:
        """The stored record, or None. A request still ``running`` (or cut off) comes back with
        status ``"error"`` and error ``"unfinished"`` and whatever was stored."""
        db = self._db
        with self._lock:
            db.row_factory = sqlite3.Row
            try:
                return self._get(db, request_id)
            finally:
                db.row_factory = None

    def _get(self, db: sqlite3.Connection, request_id: str) -> RunRecord | None:
        r = db.execute("SELECT * FROM requests WHERE id = ?", (request_id,)).fetchone()
        if r is None:
            return None
        attempts = tuple(
            PlanAttempt(
                attempt=a["attempt"],
                round=a["round"],
                messages=tuple(cast(list[Message], json.loads(a["messages"]))),
                raw_output=a["raw_output"],
                workflow=_workflow(json.loads(a["workflow"])) if a["workflow"] else None,
                error_kind=a["error_kind"],
                error=a["error"],
                usage=Usage(a["input_tokens"], a["output_tokens"], a["cached_input_tokens"], a["reasoning_tokens"]),
                cost_usd=a["cost_usd"],
                latency_s=a["latency_s"],
                constrained=bool(a["constrained"]),
                disclosures=_disclosures(a["disclosures"]),
            )
            for a in db.execute(
                "SELECT * FROM plan_attempts WHERE request_id = ? ORDER BY round, attempt", (request_id,)
            )
        )
        steps = tuple(
            StepRecord(
                index=s["step_index"],
                phase=s["phase"],
                round=s["round"],
                worker_index=s["worker_index"],
                worker=s["worker"],
                subtask=s["subtask"],
                access=json.loads(s["access"]),
                visible=tuple(json.loads(s["visible"])),
                visible_previous=tuple((p[0], p[1]) for p in json.loads(s["visible_previous"])),
                messages=tuple(json.loads(s["messages"])),
                output=s["output"],
                usage=Usage(s["input_tokens"], s["output_tokens"], s["cached_input_tokens"], s["reasoning_tokens"]),
                cost_usd=s["cost_usd"],
                latency_s=s["latency_s"],
                finish_reason=s["finish_reason"],
                error=s["error"],
                error_type=s["error_type"],
                started_at=s["started_at"],
                finished_at=s["finished_at"],
                disclosures=_disclosures(s["disclosures"]),
            )
            for s in db.execute(
                "SELECT * FROM steps WHERE request_id = ? ORDER BY phase = 'fallback', round, step_index",
                (request_id,),
            )
        )
        status, error = r["status"], r["error"]
        if status == "running":
            status, error = "error", "unfinished"
        return RunRecord(
            id=r["id"],
            question=r["question"],
            pool=r["pool"],
            workers=tuple(json.loads(r["workers"])),
            conductor=r["conductor"],
            mode=r["mode"],
            started_at=r["started_at"],
            finished_at=r["finished_at"] or r["started_at"],
            status=status,
            answer=r["answer"] or "",
            attempts=attempts,
            workflows=tuple(_workflow(w) for w in json.loads(r["workflows"])),
            steps=steps,
            totals=Totals(**json.loads(r["totals"])) if r["totals"] else Totals(),
            fallback=FallbackInfo(r["fallback_reason"], r["fallback_detail"] or "") if r["fallback_reason"] else None,
            error=error,
            tags=tuple(json.loads(r["tags"])),
            subject=r["subject"],
        )


def _insert(db: sqlite3.Connection, table: str, rows: list[dict[str, Any]]) -> None:
    """Insert dict rows by column name (the names are this module's own, never user input)."""
    if not rows:
        return
    columns = list(rows[0])
    sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})"
    db.executemany(sql, [tuple(row[c] for c in columns) for row in rows])


def _disclosures(raw: str) -> tuple[Disclosure, ...]:
    return tuple(Disclosure.from_json(d) for d in json.loads(raw))


def _workflow(data: dict[str, Any]) -> Workflow:
    """Rebuild a stored workflow (already validated when it was written)."""
    return Workflow(
        steps=tuple(
            Step(s["worker"], s["subtask"], ALL if s["access"] == ALL else cast(Access, tuple(s["access"])))
            for s in data["steps"]
        )
    )
