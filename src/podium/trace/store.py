"""SQLite trace store: one record per request, written in WAL mode.

A request row is inserted with status ``running`` when the request starts, so even a process
killed mid-request leaves a trace; :meth:`TraceStore.write` then stores the finished record —
request row, conductor attempts and steps — in one transaction.

Tables: ``requests`` (one row per request), ``plan_attempts`` (one row per conductor call),
``steps`` (one row per executed step, workflow and fallback). JSON columns hold messages,
workflows and access lists. Times are UTC ISO 8601.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from podium.errors import ConfigError
from podium.records import FallbackInfo, PlanAttempt, RunRecord, StepRecord, Totals
from podium.workers.base import Message, Usage
from podium.workflow import ALL, Access, Step, Workflow

__all__ = ["SCHEMA_VERSION", "TraceStore", "TraceSummary"]

SCHEMA_VERSION = 1

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
    workflow TEXT,
    fallback_reason TEXT,
    fallback_detail TEXT,
    totals TEXT,
    total_cost_usd REAL,
    wall_time_s REAL
);
CREATE INDEX IF NOT EXISTS requests_started ON requests (started_at);
CREATE TABLE IF NOT EXISTS plan_attempts (
    request_id TEXT NOT NULL REFERENCES requests (id) ON DELETE CASCADE,
    attempt INTEGER NOT NULL,
    messages TEXT NOT NULL,
    raw_output TEXT NOT NULL,
    workflow TEXT,
    error_kind TEXT,
    error TEXT,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cached_input_tokens INTEGER NOT NULL,
    cost_usd REAL NOT NULL,
    latency_s REAL NOT NULL,
    constrained INTEGER NOT NULL,
    PRIMARY KEY (request_id, attempt)
);
CREATE TABLE IF NOT EXISTS steps (
    request_id TEXT NOT NULL REFERENCES requests (id) ON DELETE CASCADE,
    phase TEXT NOT NULL,
    step_index INTEGER NOT NULL,
    worker_index INTEGER NOT NULL,
    worker TEXT NOT NULL,
    subtask TEXT NOT NULL,
    access TEXT NOT NULL,
    visible TEXT NOT NULL,
    messages TEXT NOT NULL,
    output TEXT NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cached_input_tokens INTEGER NOT NULL,
    cost_usd REAL NOT NULL,
    latency_s REAL NOT NULL,
    finish_reason TEXT NOT NULL,
    error TEXT,
    error_type TEXT,
    started_at TEXT NOT NULL,
    finished_at TEXT NOT NULL,
    PRIMARY KEY (request_id, phase, step_index)
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
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.execute("PRAGMA busy_timeout=5000")
            self._db.executescript(_SCHEMA)
            self._db.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
            )
        except (sqlite3.Error, OSError) as exc:
            raise ConfigError(f"cannot open trace database {str(self.path)!r}: {exc}") from None

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def begin(self, request_id: str, question: str, *, started_at: str, pool: str, conductor: str, mode: str) -> None:
        """Insert the request row with status ``running``."""
        with self._tx() as db:
            db.execute(
                "INSERT INTO requests (id, started_at, mode, pool, conductor, status, question) "
                "VALUES (?, ?, ?, ?, ?, 'running', ?)",
                (request_id, started_at, mode, pool, conductor, question),
            )

    def write(self, record: RunRecord) -> None:
        """Store a finished record (replacing its ``running`` row) in one transaction."""
        totals = record.to_json()["totals"]
        with self._tx() as db:
            db.execute("DELETE FROM requests WHERE id = ?", (record.id,))
            db.execute(
                "INSERT INTO requests (id, started_at, finished_at, mode, pool, workers, conductor, status, question, "
                "answer, error, workflow, fallback_reason, fallback_detail, totals, total_cost_usd, wall_time_s) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    record.id,
                    record.started_at,
                    record.finished_at,
                    record.mode,
                    record.pool,
                    _dumps(list(record.workers)),
                    record.conductor,
                    record.status,
                    record.question,
                    record.answer,
                    record.error,
                    _dumps(record.workflow.to_json()) if record.workflow else None,
                    record.fallback.reason if record.fallback else None,
                    record.fallback.detail if record.fallback else None,
                    _dumps(totals),
                    record.totals.total_cost_usd,
                    record.totals.wall_time_s,
                ),
            )
            db.executemany(
                "INSERT INTO plan_attempts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        record.id,
                        a.attempt,
                        _dumps(list(a.messages)),
                        a.raw_output,
                        _dumps(a.workflow.to_json()) if a.workflow else None,
                        a.error_kind,
                        a.error,
                        a.usage.input_tokens,
                        a.usage.output_tokens,
                        a.usage.cached_input_tokens,
                        a.cost_usd,
                        a.latency_s,
                        int(a.constrained),
                    )
                    for a in record.attempts
                ],
            )
            db.executemany(
                "INSERT INTO steps VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        record.id,
                        s.phase,
                        s.index,
                        s.worker_index,
                        s.worker,
                        s.subtask,
                        _dumps(s.access),
                        _dumps(list(s.visible)),
                        _dumps(list(s.messages)),
                        s.output,
                        s.usage.input_tokens,
                        s.usage.output_tokens,
                        s.usage.cached_input_tokens,
                        s.cost_usd,
                        s.latency_s,
                        s.finish_reason,
                        s.error,
                        s.error_type,
                        s.started_at,
                        s.finished_at,
                    )
                    for s in record.steps
                ],
            )

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
        row = self._db.execute(
            "SELECT id, question, pool, workers, conductor, mode, started_at, finished_at, status, answer, workflow, "
            "totals, fallback_reason, fallback_detail, error FROM requests WHERE id = ?",
            (request_id,),
        ).fetchone()
        if row is None:
            return None
        (
            rid,
            question,
            pool,
            workers,
            conductor,
            mode,
            started,
            finished,
            status,
            answer,
            wf,
            totals,
            fb_reason,
            fb_detail,
            error,
        ) = row
        attempts = tuple(
            PlanAttempt(
                attempt=a[0],
                messages=tuple(cast(list[Message], json.loads(a[1]))),
                raw_output=a[2],
                workflow=_workflow(a[3]),
                error_kind=a[4],
                error=a[5],
                usage=Usage(a[6], a[7], a[8]),
                cost_usd=a[9],
                latency_s=a[10],
                constrained=bool(a[11]),
            )
            for a in self._db.execute(
                "SELECT attempt, messages, raw_output, workflow, error_kind, error, input_tokens, output_tokens, "
                "cached_input_tokens, cost_usd, latency_s, constrained FROM plan_attempts "
                "WHERE request_id = ? ORDER BY attempt",
                (rid,),
            )
        )
        steps = tuple(
            StepRecord(
                index=s[1],
                phase=s[0],
                worker_index=s[2],
                worker=s[3],
                subtask=s[4],
                access=json.loads(s[5]),
                visible=tuple(json.loads(s[6])),
                messages=tuple(json.loads(s[7])),
                output=s[8],
                usage=Usage(s[9], s[10], s[11]),
                cost_usd=s[12],
                latency_s=s[13],
                finish_reason=s[14],
                error=s[15],
                error_type=s[16],
                started_at=s[17],
                finished_at=s[18],
            )
            for s in self._db.execute(
                "SELECT phase, step_index, worker_index, worker, subtask, access, visible, messages, output, "
                "input_tokens, output_tokens, cached_input_tokens, cost_usd, latency_s, finish_reason, error, "
                "error_type, started_at, finished_at FROM steps WHERE request_id = ? "
                "ORDER BY phase = 'fallback', step_index",
                (rid,),
            )
        )
        if status == "running":
            status, error = "error", "unfinished"
        return RunRecord(
            id=rid,
            question=question,
            pool=pool,
            workers=tuple(json.loads(workers)),
            conductor=conductor,
            mode=mode,
            started_at=started,
            finished_at=finished or started,
            status=status,
            answer=answer or "",
            attempts=attempts,
            workflow=_workflow(wf),
            steps=steps,
            totals=Totals(**json.loads(totals)) if totals else Totals(),
            fallback=FallbackInfo(fb_reason, fb_detail or "") if fb_reason else None,
            error=error,
        )


def _workflow(text: str | None) -> Workflow | None:
    """Rebuild a stored workflow (already validated when it was written)."""
    if text is None:
        return None
    data = json.loads(text)
    return Workflow(
        steps=tuple(
            Step(s["worker"], s["subtask"], ALL if s["access"] == ALL else cast(Access, tuple(s["access"])))
            for s in data["steps"]
        )
    )
