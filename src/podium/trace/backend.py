"""What a trace store offers, whichever database holds it: the SQLite file
(:class:`~podium.trace.store.TraceStore`) or PostgreSQL
(:class:`~podium.trace.postgres.PostgresTraceStore`). The CLI, the server, the data-flow
register and the traffic tools use only this; the orchestrator writes through the narrower
:class:`~podium.records.RecordSink`. Either store raises :class:`TraceStoreError` when its
database fails."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any, Protocol

from podium.errors import ConfigError
from podium.records import RunRecord
from podium.trace.query import PurgeListener, PurgeResult, SearchHit, TraceFilter, TraceSummary
from podium.trace.rows import DisclosureRow
from podium.trace.writer import WriterStats

__all__ = ["TraceBackend", "TraceStoreError"]


class TraceStoreError(ConfigError):
    """The trace database cannot be opened, read or written (names the file and the fix)."""


class TraceBackend(Protocol):
    """A trace store. ``path`` names it in messages (a file, or a URL with its password
    masked). Methods, arguments, results and errors: :class:`~podium.trace.store.TraceStore`."""

    @property
    def path(self) -> object: ...

    @property
    def shared_engine(self) -> Any | None:
        """The SQLAlchemy engine of a database several processes share (PostgreSQL), on which
        the pool's period budgets keep one ledger; None for a file of one machine (SQLite)."""
        ...

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
    ) -> None: ...

    def write(self, record: RunRecord) -> None: ...

    def flush(self, timeout: float | None = None) -> bool: ...

    def stats(self) -> WriterStats: ...

    def close(self) -> None: ...

    def list(self, *, limit: int = 20, where: TraceFilter | None = None) -> list[TraceSummary]: ...

    def search(
        self,
        query: str,
        *,
        where: TraceFilter | None = None,
        fields: Sequence[str] = (),
        limit: int = 20,
        raw: bool = False,
    ) -> builtins.list[SearchHit]: ...

    def get(self, request_id: str) -> RunRecord | None: ...

    def resolve_id(self, prefix: str) -> str: ...

    def spent_since(self, pool: str, since: str) -> float: ...

    def disclosures(self, since: str, until: str) -> tuple[DisclosureRow, ...]: ...

    def add_purge_listener(self, listener: PurgeListener) -> None: ...

    def select(
        self, *, before: str | None = None, request_ids: Sequence[str] = (), subject: str | None = None
    ) -> tuple[str, ...]: ...

    def purge(
        self,
        *,
        before: str | None = None,
        request_ids: Sequence[str] = (),
        subject: str | None = None,
        dry_run: bool = False,
    ) -> PurgeResult: ...

    def apply_retention(self) -> PurgeResult | None: ...
