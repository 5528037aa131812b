"""The shadow store: one row per chat completion ``podium shadow`` forwarded, beside podium's run.

Two engines behind one class: the embedded SQLite file in podium's data folder
(``shadow.sqlite3``, the default) or the ``shadow`` table of the shared PostgreSQL store
(``PODIUM_DATABASE_URL``), so a shadow proxy, the replicas that purge and the weekly job that
exports traffic all see the same rows. The columns are :data:`podium.store.schema.shadow`'s.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from podium.store.engine import (
    database_errors,
    database_url,
    is_database_url,
    mask_url,
    open_embedded,
    open_store,
    read_only,
    vacuum,
)

__all__ = ["ShadowStore", "purge_shadow_copies", "shadow_location"]


def shadow_location(explicit: str | Path | None, default: Path, *, url: str | None = None) -> str | Path:
    """Where the shadow records are: ``explicit`` (a ``--store FILE|URL`` option), else the shared
    store's URL (``url`` or ``$PODIUM_DATABASE_URL``), else the ``default`` file."""
    if explicit is not None:
        return explicit
    return database_url(url) or default


class ShadowStore:
    """The shadow records, on SQLite or PostgreSQL (see the module doc).

    Args:
        location: a SQLite file's path (created with its folder), or a database URL
            (``postgresql://…``: the shared store, which ``podium db upgrade`` set up).

    Raises:
        StoreError (a ConfigError): the file or database cannot be opened, or the database is
            behind this podium's schema (names the fix).
    """

    def __init__(self, location: str | Path) -> None:
        from podium.store.schema import shadow

        self._table = shadow
        self.location = location
        self.shared = is_database_url(location)
        self._name = mask_url(str(location)) if self.shared else str(location)
        self._lock = threading.Lock()  # SQLite: one writer per process at a time
        if self.shared:
            self.engine = open_store(str(location))
        else:
            self.engine = open_embedded(location, [shadow], what="the shadow store")

    def add(self, row: Mapping[str, Any]) -> None:
        """Store one row (column → value; columns not given are NULL)."""
        with self._lock, self._guard("store a shadow record in"), self.engine.begin() as db:
            db.execute(self._table.insert().values(**row))

    def rows(self, *, since: str | None = None, until: str | None = None) -> list[dict[str, Any]]:
        """Rows with ``since <= at < until`` (UTC ISO 8601 prefixes), oldest first, as dicts of
        the table's columns."""
        from sqlalchemy import select

        table = self._table
        query = select(table).order_by(table.c.id)
        if since:
            query = query.where(table.c.at >= since)
        if until:
            query = query.where(table.c.at < until)
        with self._guard("read"), read_only(self.engine) as db:
            return [dict(row._mapping) for row in db.execute(query)]

    def purge(self, *, request_ids: Sequence[str] = (), before: str | None = None) -> int:
        """Delete the rows of these requests (trace ids) and, with ``before`` (UTC ISO 8601),
        every row that arrived before it — also the skipped, dropped and unreadable ones, which
        have no trace; then rewrite the files (:func:`podium.store.engine.vacuum`), so no
        deleted text stays in them. Returns the number of rows deleted."""
        from sqlalchemy import delete

        table = self._table
        deleted = 0
        with self._lock:
            with self._guard("purge"), self.engine.begin() as db:
                for start in range(0, len(request_ids), 500):
                    chunk = list(request_ids[start : start + 500])
                    deleted += db.execute(delete(table).where(table.c.request_id.in_(chunk))).rowcount
                if before is not None:
                    deleted += db.execute(delete(table).where(table.c.at < before)).rowcount
            if deleted:
                with database_errors(f"the shadow rows are deleted but {self._name} was not rewritten (purge again)"):
                    vacuum(self.engine, [table.name])
        return deleted

    def spent_since(self, since: str) -> float:
        """Shadow USD spent since ``since`` (UTC ISO 8601)."""
        from sqlalchemy import func, select

        table = self._table
        query = select(func.coalesce(func.sum(table.c.podium_cost_usd), 0.0)).where(table.c.at >= since)
        with self._guard("read"), read_only(self.engine) as db:
            return float(db.scalar(query) or 0.0)

    def close(self) -> None:
        """Close the store's connections."""
        self.engine.dispose()

    def _guard(self, action: str) -> AbstractContextManager[None]:
        return database_errors(f"cannot {action} the shadow store {self._name}")


def purge_shadow_copies(location: str | Path, request_ids: Sequence[str], *, before: str | None = None) -> int:
    """Remove the shadow store's copies of purged requests (each shadow run keeps the question
    and both answers): rows of ``request_ids`` and, with ``before``, every older row. How many
    rows went; 0 for a store file that does not exist (a purge never creates one). Raises
    StoreError when the store cannot be opened."""
    if isinstance(location, Path) and not location.is_file():
        return 0
    store = ShadowStore(location)
    try:
        return store.purge(request_ids=request_ids, before=before)
    finally:
        store.close()
