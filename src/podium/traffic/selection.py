"""What a traffic command reads and how it becomes tasks, as typed options: :class:`Selection`
(which stored requests: traces or shadow records, window, tags, use case, status) and
:func:`read_requests`; :class:`ExportOptions` and :func:`export_records` (the new tasks of what was
read, pseudonymized unless allowed). ``podium tasks export`` (:mod:`podium.traffic.tasks_cli`)
and the loop's export stage (:mod:`podium.loop`) both run them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from podium.errors import ConfigError
from podium.trace import default_trace_path
from podium.traffic.options import check_tags as _check_tags
from podium.traffic.options import embedder_for as _embedder
from podium.traffic.options import pseudonymizer

if TYPE_CHECKING:
    from podium.traffic.export import ExportResult

__all__ = ["ExportOptions", "Selection", "export_records", "read_requests"]


@dataclass(frozen=True)
class Selection:
    """Which stored requests a regression set is made from (``podium tasks export``'s filters).

    Attributes:
        source: ``traces`` (a trace database) or ``shadow`` (shadow records).
        traces: the trace database file (None: the default, or the shared store); traces only.
        store: the shadow store, a file or URL (None: the default); shadow only.
        since, until: the window (ISO 8601 UTC; a date alone for ``until`` includes that day).
        tags: every one of these tags (traces only).
        use_case: this use case (shadow's ``X-Podium-Use-Case``; for traces the
            ``use-case:NAME`` tag).
        status: this request status (a trace's or a shadow row's).
    """

    source: Literal["traces", "shadow"] = "traces"
    traces: Path | None = None
    store: str | Path | None = None
    since: str | None = None
    until: str | None = None
    tags: tuple[str, ...] = ()
    use_case: str | None = None
    status: str | None = None


@dataclass(frozen=True)
class ExportOptions:
    """How selected requests become tasks (:func:`podium.traffic.export.build_set`'s settings).

    Attributes:
        task_type: the type of a request whose client and tags name none.
        candidate: whose answer is the candidate reference: ``auto``, ``podium`` or ``upstream``.
        allow_pii: write questions and answers in clear (default: pseudonymized).
        similar: also drop a question at least this cosine-similar to a kept one (None: off).
        embedder: the embedding model for ``similar``.
        limit: keep the newest ``limit`` new tasks (None: all).
    """

    task_type: str = "open"
    candidate: str = "auto"
    allow_pii: bool = False
    similar: float | None = None
    embedder: str = "hash"
    limit: int | None = None


def _window(selection: Selection) -> tuple[str | None, str | None]:
    from podium.trace.query import parse_utc

    since = parse_utc(selection.since, flag="--since") if selection.since else None
    until = parse_utc(selection.until, flag="--until", end_of_day=True) if selection.until else None
    if since and until and since >= until:
        raise ConfigError(f"--since {since} is not before --until {until}; nothing could match")
    return since, until


def read_requests(selection: Selection) -> list[Any]:
    """The requests ``selection`` selects, oldest first; ConfigError for an unknown tag or use
    case, or a status of the wrong source. An empty list when nothing matches (the caller says
    so)."""
    from podium.traffic import source

    since, until = _window(selection)
    if selection.source == "shadow":
        from podium.serve.options import default_shadow_path
        from podium.store.shadow import shadow_location

        if selection.tags:
            raise ConfigError("--tag filters traces; the shadow store has use cases: use --use-case NAME")
        path = shadow_location(selection.store, default_shadow_path())
        use_case = selection.use_case
        items = source.read_shadow(path, since=since, until=until, status=selection.status, use_case=use_case)
        if not items and use_case and use_case not in (cases := source.shadow_use_cases(path)):
            raise ConfigError(
                f"no shadow record has use case {use_case!r}; use cases: {', '.join(sorted(cases)) or 'none'}"
            )
        return items
    from podium.trace.query import FILTER_STATUSES

    if selection.status is not None and selection.status not in FILTER_STATUSES:
        raise ConfigError(f"--status {selection.status!r}: a trace's status is one of {', '.join(FILTER_STATUSES)}")
    store = source.open_traces(selection.traces or default_trace_path())
    try:
        tags = [*selection.tags, *([f"use-case:{selection.use_case}"] if selection.use_case else [])]
        items = source.read_traces(store, since=since, until=until, status=selection.status, tags=tags)
        if not items and tags:
            _check_tags(store, tags)
    finally:
        store.close()
    return items


def export_records(
    selection: Selection, options: ExportOptions, items: Sequence[Any], existing: Sequence[dict[str, Any]]
) -> ExportResult:
    """The new tasks of ``items`` (what :func:`read_requests` read for ``selection``) for a set
    holding ``existing``, made as ``options`` say (pseudonymized unless ``allow_pii``).
    ConfigError for an empty selection (naming the window and filters) or a bad option."""
    from podium.traffic.export import build_set

    if not items:
        window = f"{selection.since or 'the beginning'} → {selection.until or 'now'}"
        what = "shadow record" if selection.source == "shadow" else "stored request"
        raise ConfigError(
            f"no {what} passes the filters (window {window}"
            + (f", status {selection.status}" if selection.status else "")
            + "); widen --since/--until or drop a filter"
        )
    return build_set(
        items,
        existing=existing,
        task_type=options.task_type,
        candidate=options.candidate,
        pseudonymize=None if options.allow_pii else pseudonymizer(),
        embedder=_embedder(options.embedder) if options.similar is not None else None,
        similarity=options.similar,
        limit=options.limit,
    )
