"""Traces: the stored record of every request — an SQLite file (WAL mode) by default, or the
shared PostgreSQL store (:class:`~podium.trace.postgres.PostgresTraceStore`) when
``$PODIUM_DATABASE_URL`` names one. :func:`open_traces` picks; both implement
:class:`~podium.trace.query.TraceBackend`."""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from podium.trace.backend import TraceBackend
    from podium.trace.postgres import PostgresTraceStore
    from podium.trace.query import PurgeResult, SearchHit, TraceFilter, TraceSummary
    from podium.trace.store import TraceStore

__all__ = [
    "PostgresTraceStore",
    "PurgeResult",
    "SearchHit",
    "TraceBackend",
    "TraceFilter",
    "TraceStore",
    "TraceSummary",
    "data_dir",
    "default_trace_path",
    "open_traces",
    "shared_trace_url",
]

_LAZY = {
    "PostgresTraceStore": "podium.trace.postgres",
    "TraceBackend": "podium.trace.backend",
    "PurgeResult": "podium.trace.query",
    "SearchHit": "podium.trace.query",
    "TraceFilter": "podium.trace.query",
    "TraceSummary": "podium.trace.query",
    "TraceStore": "podium.trace.store",
}
"""Names imported on first use (PEP 562), so ``default_trace_path`` costs no store import."""


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def data_dir() -> Path:
    """podium's data folder: ``$PODIUM_HOME``, else ``$XDG_DATA_HOME/podium``, else
    ``~/.local/share/podium``."""
    if env := os.environ.get("PODIUM_HOME"):
        return Path(env).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "podium"


def default_trace_path() -> Path:
    """The trace database in :func:`data_dir`: ``traces.sqlite3``."""
    return data_dir() / "traces.sqlite3"


def shared_trace_url(url: str | None = None) -> str | None:
    """The PostgreSQL database traces go to — ``url`` (an option), else
    ``$PODIUM_DATABASE_URL`` — or None when traces stay in a file (no URL, or an ``sqlite://``
    one)."""
    from podium.store.engine import database_url

    chosen = database_url(url)
    return chosen if chosen is not None and chosen.startswith("postgres") else None


def open_traces(
    path: Path | None = None, *, url: str | None = None, retention_days: float | None = None
) -> TraceBackend:
    """The trace store to use: the PostgreSQL database ``url`` (or ``$PODIUM_DATABASE_URL``)
    names when there is one and no explicit ``path``; else the SQLite file ``path`` (default:
    :func:`default_trace_path`). An ``sqlite://`` database URL keeps traces in their own file.

    Raises ConfigError when the store cannot be opened (names it and the fix).
    """
    if path is None and (shared := shared_trace_url(url)) is not None:
        from podium.trace.postgres import PostgresTraceStore

        return PostgresTraceStore(shared, retention_days=retention_days)
    from podium.trace.store import TraceStore

    return TraceStore(path or default_trace_path(), retention_days=retention_days)
