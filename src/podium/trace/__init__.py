"""Traces: the stored record of every request (SQLite, WAL mode)."""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from podium.trace.query import PurgeResult, SearchHit, TraceFilter, TraceSummary
    from podium.trace.store import TraceStore

__all__ = ["PurgeResult", "SearchHit", "TraceFilter", "TraceStore", "TraceSummary", "data_dir", "default_trace_path"]

_LAZY = {
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
