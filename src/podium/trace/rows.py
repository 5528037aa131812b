"""A request's record as table rows and back: what both trace stores (SQLite, PostgreSQL) write
and read, so the two cannot drift apart.

Rows are dicts keyed by column name (:func:`rows_of`); reading takes any mapping row (an
``sqlite3.Row``, an SQLAlchemy ``RowMapping``). JSON columns hold messages, workflows, access
lists and disclosures; times are UTC ISO 8601.

Every text written is valid Unicode: a lone surrogate (U+D800–U+DFFF, which no UTF-8 database
can hold) is written as U+FFFD (:func:`podium.unicode.valid_text`). Worker replies are already
made valid where they enter podium; this is the last line of defence, so that no record is ever
lost to an encoding error.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from podium.records import Disclosure, FallbackInfo, PlanAttempt, RunRecord, StepRecord, Totals, plain_json
from podium.trace.query import TraceSummary
from podium.trace.writer import WriteBehind
from podium.unicode import valid_text
from podium.workers.base import Message, Usage
from podium.workflow import ALL, Access, Step, Workflow

__all__ = [
    "SUMMARY",
    "Begin",
    "DisclosureRow",
    "Op",
    "describe",
    "disclosures_from_json",
    "dumps",
    "record_from_rows",
    "rows_of",
    "search_texts",
    "step_location",
    "summary_from_row",
    "trace_writer",
    "usage_from_row",
    "workflow_from_json",
]


SUMMARY = (
    "r.id, r.started_at, r.status, r.mode, r.question, "
    "(SELECT COUNT(*) FROM steps s WHERE s.request_id = r.id), r.total_cost_usd, r.wall_time_s, "
    "r.conductor, r.tags, r.subject, "
    "(SELECT json_group_array(DISTINCT s.worker) FROM steps s WHERE s.request_id = r.id)"
)


def summary_from_row(row: Sequence[Any]) -> TraceSummary:
    """A :data:`SUMMARY` row as a TraceSummary."""
    return TraceSummary(
        row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[8], tuple(json.loads(row[9])), row[10],
        tuple(sorted(json.loads(row[11] or "[]"))),
    )  # fmt: skip


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


def usage_from_row(row: Mapping[str, Any]) -> Usage:
    """A stored attempt's or step's token counts."""
    return Usage(
        row["input_tokens"],
        row["output_tokens"],
        row["cached_input_tokens"],
        row["reasoning_tokens"],
        bool(row["usage_estimated"]),
    )


_ENCODER = json.JSONEncoder(ensure_ascii=False)
"""``json.dumps(value, ensure_ascii=False)`` builds this encoder on every call; a record takes ~10."""


def dumps(value: Any) -> str:
    return valid_text(_ENCODER.encode(value))


def _valid(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with every text made valid Unicode (see the module doc)."""
    return {k: valid_text(v) if isinstance(v, str) else v for k, v in row.items()}


@dataclass(frozen=True)
class Begin:
    """A queued ``begin`` of a trace store."""

    request_id: str
    question: str
    started_at: str
    pool: str
    conductor: str
    mode: str
    tags: tuple[str, ...]
    subject: str | None

    def __post_init__(self) -> None:  # its texts as they will be written (see the module doc)
        for name in ("question", "pool", "conductor", "mode"):
            object.__setattr__(self, name, valid_text(getattr(self, name)))
        object.__setattr__(self, "tags", tuple(valid_text(t) for t in self.tags))
        if self.subject is not None:
            object.__setattr__(self, "subject", valid_text(self.subject))


Op = Begin | RunRecord
"""A queued trace write."""


def describe(op: Op) -> str:
    if isinstance(op, Begin):
        return f"request {op.request_id} (its start)"
    return f"request {op.id} (its finished record)"


def _is_begin(op: Op) -> bool:
    return isinstance(op, Begin)


def _request_of(op: Op) -> str:
    return op.request_id if isinstance(op, Begin) else op.id


def trace_writer(
    commit: Callable[[Sequence[Op]], None], *, max_pending: int, max_batch: int, hold_s: float, gather_s: float
) -> WriteBehind[Op]:
    """The background writer of a trace store (SQLite or PostgreSQL): a request's start is held
    up to ``hold_s`` seconds, keyed by its request id, so that a request that finishes sooner is
    written once, finished; a writer woken within ``gather_s`` seconds of its last commit waits
    up to that long for more writes to share the next one (:mod:`podium.trace.writer`)."""
    return WriteBehind(
        commit,
        describe=describe,
        max_pending=max_pending,
        max_batch=max_batch,
        hold=_is_begin,
        key=_request_of,
        hold_s=hold_s,
        gather_s=gather_s,
    )


def rows_of(record: RunRecord) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """A finished record's ``requests`` row, ``plan_attempts`` rows and ``steps`` rows."""
    request = {
        "id": record.id,
        "started_at": record.started_at,
        "finished_at": record.finished_at,
        "mode": record.mode,
        "pool": record.pool,
        "workers": dumps(list(record.workers)),
        "conductor": record.conductor,
        "status": record.status,
        "question": record.question,
        "answer": record.answer,
        "error": record.error,
        "workflows": dumps([w.to_json() for w in record.workflows]),
        "fallback_reason": record.fallback.reason if record.fallback else None,
        "fallback_detail": record.fallback.detail if record.fallback else None,
        "totals": dumps(plain_json(record.totals)),
        "total_cost_usd": record.totals.total_cost_usd,
        "wall_time_s": record.totals.wall_time_s,
        "tags": dumps(list(record.tags)),
        "subject": record.subject,
    }
    attempts = [
        {
            "request_id": record.id,
            "round": a.round,
            "attempt": a.attempt,
            "messages": dumps(list(a.messages)),
            "raw_output": a.raw_output,
            "workflow": dumps(a.workflow.to_json()) if a.workflow is not None else None,
            "error_kind": a.error_kind,
            "error": a.error,
            "input_tokens": a.usage.input_tokens,
            "output_tokens": a.usage.output_tokens,
            "cached_input_tokens": a.usage.cached_input_tokens,
            "reasoning_tokens": a.usage.reasoning_tokens,
            "usage_estimated": int(a.usage.estimated),
            "cost_usd": a.cost_usd,
            "latency_s": a.latency_s,
            "constrained": int(a.constrained),
            "started_at": a.started_at or None,
            "finished_at": a.finished_at or None,
            "disclosures": dumps(plain_json(a.disclosures)),
        }
        for a in record.attempts
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
            "access": dumps(s.access),
            "visible": dumps(list(s.visible)),
            "visible_previous": dumps([list(p) for p in s.visible_previous]),
            "messages": dumps(list(s.messages)),
            "output": s.output,
            "input_tokens": s.usage.input_tokens,
            "output_tokens": s.usage.output_tokens,
            "cached_input_tokens": s.usage.cached_input_tokens,
            "reasoning_tokens": s.usage.reasoning_tokens,
            "usage_estimated": int(s.usage.estimated),
            "cost_usd": s.cost_usd,
            "latency_s": s.latency_s,
            "finish_reason": s.finish_reason,
            "error": s.error,
            "error_type": s.error_type,
            "started_at": s.started_at,
            "finished_at": s.finished_at,
            "disclosures": dumps(plain_json(s.disclosures)),
        }
        for s in record.steps
    ]
    return _valid(request), [_valid(a) for a in attempts], [_valid(s) for s in steps]


def disclosures_from_json(raw: str) -> tuple[Disclosure, ...]:
    return tuple(Disclosure.from_json(d) for d in json.loads(raw))


def workflow_from_json(data: dict[str, Any]) -> Workflow:
    """Rebuild a stored workflow (already validated when it was written)."""
    return Workflow(
        steps=tuple(
            Step(s["worker"], s["subtask"], ALL if s["access"] == ALL else cast(Access, tuple(s["access"])))
            for s in data["steps"]
        )
    )


def record_from_rows(r: Mapping[str, Any], attempt_rows: Iterable[Mapping[str, Any]],
                     step_rows: Iterable[Mapping[str, Any]]) -> RunRecord:  # fmt: skip
    """A stored request rebuilt from its ``requests`` row and its ``plan_attempts`` and
        ``steps`` rows (each in order: attempts by round, attempt; steps workflow first, then by
    round, index). A request still ``running`` comes back with status ``"error"`` and error
    ``"unfinished"``."""
    attempts = tuple(
        PlanAttempt(
            attempt=a["attempt"],
            round=a["round"],
            messages=tuple(cast(list[Message], json.loads(a["messages"]))),
            raw_output=a["raw_output"],
            workflow=workflow_from_json(json.loads(a["workflow"])) if a["workflow"] else None,
            error_kind=a["error_kind"],
            error=a["error"],
            usage=usage_from_row(a),
            cost_usd=a["cost_usd"],
            latency_s=a["latency_s"],
            constrained=bool(a["constrained"]),
            started_at=a["started_at"] or "",
            finished_at=a["finished_at"] or "",
            disclosures=disclosures_from_json(a["disclosures"]),
        )
        for a in attempt_rows
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
            usage=usage_from_row(s),
            cost_usd=s["cost_usd"],
            latency_s=s["latency_s"],
            finish_reason=s["finish_reason"],
            error=s["error"],
            error_type=s["error_type"],
            started_at=s["started_at"],
            finished_at=s["finished_at"],
            disclosures=disclosures_from_json(s["disclosures"]),
        )
        for s in step_rows
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
        workflows=tuple(workflow_from_json(w) for w in json.loads(r["workflows"])),
        steps=steps,
        totals=Totals.from_json(json.loads(r["totals"])) if r["totals"] else Totals(),
        fallback=FallbackInfo(r["fallback_reason"], r["fallback_detail"] or "") if r["fallback_reason"] else None,
        error=error,
        tags=tuple(json.loads(r["tags"])),
        subject=r["subject"],
    )


def step_location(phase: str, round_: int, index: int) -> str:
    """Where a step's text is, as search hits name it: ``step 2``, ``round 1 step 0``, ``fallback``."""
    if phase == "fallback":
        return "fallback"
    return f"round {round_} step {index}" if round_ > 0 else f"step {index}"


def search_texts(record: RunRecord) -> list[tuple[str, str, str]]:
    """A finished record's searchable texts as (field, location, text), the same the SQLite
    store's index statements select (empty texts left out)."""
    texts = [("question", "", record.question)]
    texts += [(f, "", t) for f, t in (("answer", record.answer), ("error", record.error or "")) if t]
    for a in record.attempts:
        if a.raw_output:
            where = f"round {a.round} attempt {a.attempt}" if a.round > 0 else f"attempt {a.attempt}"
            texts.append(("reasoning", where, a.raw_output))
    for s in record.steps:
        where = step_location(s.phase, s.round, s.index)
        step_texts = (("subtask", s.subtask), ("output", s.output), ("error", s.error or ""))
        texts += [(f, where, t) for f, t in step_texts if t]
    return [(f, where, valid_text(t)) for f, where, t in texts]
