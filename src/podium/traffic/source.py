"""Stored traffic as export and drift read it: traces (:class:`~podium.trace.TraceStore`) or
shadow records (:class:`~podium.store.shadow.ShadowStore`), through their public read APIs.

Each request becomes one :class:`TrafficItem`, oldest first. Times are the stores' UTC ISO 8601
strings (``2026-11-30T14:00:00.000Z``), so comparing strings compares instants.

What the stores hold about personal data (docs/pii.md): a trace keeps the question, the step
outputs and the answer **as the user wrote them** — only the messages sent to external workers
are pseudonymized — and the shadow store keeps the question and both answers in clear. Whoever
copies traffic out of the stores (``podium tasks export``) therefore pseudonymizes it there.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from podium.errors import ConfigError
from podium.extras import install_command
from podium.trace.backend import TraceBackend
from podium.trace.query import TraceFilter

__all__ = [
    "SHADOW_STATUSES",
    "TrafficItem",
    "known_tags",
    "open_traces",
    "read_shadow",
    "read_traces",
    "shadow_use_cases",
    "task_id",
    "unknown_tags",
]

SHADOW_STATUSES = ("done", "over_budget", "failed", "skipped_budget", "dropped", "error", "unreadable")
"""A shadow row's statuses (:data:`podium.serve.shadow.Status`)."""

_ALL = 1 << 62
"""A LIMIT no store reaches (SQLite's LIMIT is a signed 64-bit integer)."""


@dataclass(frozen=True)
class TrafficItem:
    """One stored request.

    Attributes:
        origin: where it came from: ``trace:<request id>`` or ``shadow:<row id>``.
        request_id: podium's trace id (32 hex), or None (a shadow row podium never ran).
        at: when the request arrived, UTC ISO 8601.
        question: the question as stored (in clear; see the module docstring).
        status: the trace's status (``ok``, ``fallback``, ``error``, ``running``) or the shadow
            row's (:data:`SHADOW_STATUSES`).
        tags: the trace's tags; a shadow row has ``use-case:<its use case>``.
        answer: podium's answer, or None (plan mode, no answer).
        upstream_answer: the existing pipeline's answer (shadow rows), or None.
        reference: the expected answer the client sent (shadow ``X-Podium-Reference``), or None.
        task_type: the client's task type (shadow ``X-Podium-Task``), or None.
        mode: ``run`` or ``plan`` (traces; shadow rows: their shadow mode).
        cost_usd: podium's total cost of the request (conductor and workers), USD, or None.
        latency_s: podium's wall time, seconds, or None.
        parse_failures: conductor attempts whose output did not parse or validate.
        fallback: the fallback pipeline answered (trace status ``fallback``).
        cut_off: podium's answer stopped at its token limit (the answering step's finish
            reason is ``length``): its last number is no final answer.
    """

    origin: str
    request_id: str | None
    at: str
    question: str
    status: str
    tags: tuple[str, ...] = ()
    answer: str | None = None
    upstream_answer: str | None = None
    reference: str | None = None
    task_type: str | None = None
    mode: str = "run"
    cost_usd: float | None = None
    latency_s: float | None = None
    parse_failures: int = 0
    fallback: bool = False
    cut_off: bool = False


def task_id(item: TrafficItem) -> str:
    """The regression-set id of ``item``: ``traffic/<request id>``, or ``traffic/shadow-<row>``
    for a shadow row podium never ran. The same request exported from the traces or from the
    shadow store gets the same id, so an incremental export recognises it."""
    if item.request_id:
        return f"traffic/{item.request_id}"
    return f"traffic/shadow-{item.origin.split(':', 1)[1]}"


def open_traces(path: Path) -> TraceBackend:
    """The trace store at ``path`` (the shared PostgreSQL store instead when
    ``$PODIUM_DATABASE_URL`` names one and ``path`` is the default file); ConfigError naming the
    fix when there is none."""
    from podium.trace import default_trace_path, shared_trace_url
    from podium.trace import open_traces as open_store

    if path == default_trace_path() and shared_trace_url() is not None:
        return open_store()
    if not path.is_file():
        raise ConfigError(f"no trace database at {path}; serve traffic first, or pass --traces FILE")
    return open_store(path)


def read_traces(
    store: TraceBackend,
    *,
    since: str | None = None,
    until: str | None = None,
    status: str | None = None,
    tags: Sequence[str] = (),
) -> list[TrafficItem]:
    """Requests with ``since <= started_at < until``, this status and all these tags, oldest
    first. Requests still running (or cut off) are left out unless ``status="running"`` asks
    for them."""
    where = TraceFilter(since=since, until=until, status=status, tags=tuple(tags))
    summaries = store.list(limit=_ALL, where=where)
    items: list[TrafficItem] = []
    for summary in reversed(summaries):  # newest first → oldest first
        if summary.status == "running" and status != "running":
            continue
        record = store.get(summary.id)
        if record is None:  # purged between the listing and the read
            continue
        items.append(
            TrafficItem(
                origin=f"trace:{record.id}",
                request_id=record.id,
                at=record.started_at,
                question=record.question,
                status=summary.status,
                tags=record.tags,
                answer=(record.answer or None) if record.mode == "run" else None,
                mode=record.mode,
                cost_usd=record.totals.total_cost_usd,
                latency_s=record.totals.wall_time_s,
                parse_failures=sum(1 for a in record.attempts if a.error_kind),
                fallback=summary.status == "fallback",
                cut_off=_cut_off(record),
            )
        )
    return items


def _cut_off(record: Any) -> bool:
    """Whether the step that gave ``record``'s answer (:func:`podium.eval.runner.answer_step`)
    hit its token limit."""
    from podium.eval.runner import answer_step

    step = answer_step(record)
    return step is not None and step.finish_reason == "length"


def read_shadow(
    path: str | Path,
    *,
    since: str | None = None,
    until: str | None = None,
    status: str | None = None,
    use_case: str | None = None,
) -> list[TrafficItem]:
    """Shadow rows with ``since <= at < until``, this status and use case, oldest first; rows
    without a question (the request could not be read) are left out."""
    if status is not None and status not in SHADOW_STATUSES:
        raise ConfigError(f"shadow status {status!r} is unknown; use one of {', '.join(SHADOW_STATUSES)}")
    if isinstance(path, Path) and not path.is_file():
        raise ConfigError(f"no shadow store at {path}; run 'podium shadow --upstream URL' first, or pass --store FILE")
    try:
        from podium.store.shadow import ShadowStore
    except ImportError as exc:  # SQLAlchemy: the serve extra
        raise ConfigError(
            f"reading the shadow store needs the serve extra: {install_command('serve')} ({exc})"
        ) from None
    items: list[TrafficItem] = []
    for row in ShadowStore(path).rows(since=since, until=until):
        if (status is not None and row["status"] != status) or (use_case is not None and row["use_case"] != use_case):
            continue
        if not row.get("question"):
            continue
        items.append(_shadow_item(row))
    return items


def _shadow_item(row: dict[str, Any]) -> TrafficItem:
    return TrafficItem(
        origin=f"shadow:{row['id']}",
        request_id=row.get("request_id"),
        at=str(row["at"]),
        question=str(row["question"]),
        status=str(row["status"]),
        tags=(f"use-case:{row['use_case']}",),
        answer=row.get("podium_answer") or None,
        upstream_answer=row.get("upstream_answer") or None,
        reference=row.get("reference") or None,
        task_type=row.get("task_type") or None,
        mode=str(row.get("mode") or "plan"),
        cost_usd=row.get("podium_cost_usd"),
        latency_s=row.get("podium_latency_s"),
        fallback=row.get("podium_status") == "fallback",
    )


def known_tags(store: TraceBackend) -> set[str]:
    """Every tag any stored request carries (to tell an unknown tag from an empty window)."""
    return {tag for summary in store.list(limit=_ALL) for tag in summary.tags}


def shadow_use_cases(path: str | Path) -> set[str]:
    """Every use case in the shadow store (a file or a database URL)."""
    from podium.store.shadow import ShadowStore

    return {str(row["use_case"]) for row in ShadowStore(path).rows()}


def unknown_tags(wanted: Iterable[str], known: set[str]) -> list[str]:
    """The tags of ``wanted`` no stored request carries."""
    return [t for t in wanted if t not in known]
