"""The request cache's store: completions by request key in a SQLite file or a shared database
(the ``request_cache`` table of :mod:`podium.store.schema`; an embedded file keeps the table name
``calls`` of every release before the shared store). :class:`podium.workers.cache.CachedWorker`
computes the keys (:func:`podium.workers.cache.request_key`) and uses this store through its
:class:`~podium.workers.cache.CallStore` protocol."""

from __future__ import annotations

import dataclasses
import json
import threading
from contextlib import AbstractContextManager
from pathlib import Path

from podium.errors import ConfigError
from podium.workers.base import Completion, Usage

__all__ = ["RequestCache", "default_cache_path"]


def default_cache_path() -> Path:
    """Where evaluation, bank recording and the retrain loop keep their request cache unless
    told otherwise: ``eval/requests.sqlite3`` in podium's cache folder
    (:func:`podium.local_models.cache_dir`)."""
    from podium.local_models import cache_dir

    return cache_dir() / "eval" / "requests.sqlite3"


class RequestCache:
    """Stored completions by request key: a SQLite file (the default) or the ``request_cache``
    table of a shared database, so the eval jobs of several machines share their calls.

    Args:
        location: the SQLite file (created with its folder; its table is ``calls``), or a
            database URL (``postgresql://…``, set up by ``podium db upgrade``).

    Raises:
        ConfigError: the file or database cannot be opened (names it and the fix).

    Attributes:
        path: where the cache is, as reports show it: the file's path, or the URL with its
            password masked.
        hits, misses: counts since this object was created.
    """

    def __init__(self, location: str | Path) -> None:
        from sqlalchemy import MetaData

        from podium.store.engine import is_database_url, mask_url, open_embedded, open_store
        from podium.store.schema import request_cache

        shared = is_database_url(location)
        self.path: str | Path = mask_url(str(location)) if shared else Path(location)
        try:
            if shared:
                self._table = request_cache
                self._engine = open_store(str(location))
            else:  # the file of every release before the shared store: table "calls"
                self._table = request_cache.to_metadata(MetaData(), name="calls")
                self._engine = open_embedded(location, [self._table], what="the request cache")
        except ConfigError as exc:
            raise ConfigError(f"{exc} (or pass another --cache)") from None
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> Completion | None:
        """The completion stored under ``key`` (marked ``cached``), or None."""
        from sqlalchemy import select

        from podium.store.engine import read_only

        with self._errors("read"), read_only(self._engine) as db:
            stored = db.scalar(select(self._table.c.completion).where(self._table.c.key == key))
        with self._lock:
            if stored is None:
                self.misses += 1
                return None
            self.hits += 1
        data = json.loads(stored)
        data["usage"] = Usage(**data["usage"])
        data["cached"] = True
        return Completion(**data)

    def put(self, key: str, worker: str, completion: Completion) -> None:
        """Store ``completion`` under ``key`` (replacing what was there)."""
        from podium.records import utc_now
        from podium.store.engine import upsert

        data = json.dumps(dataclasses.asdict(completion), ensure_ascii=False)
        row = {"key": key, "worker": worker, "completion": data, "created_at": utc_now()}
        with self._errors("write"), self._engine.begin() as db:
            upsert(db, self._table, row, key=("key",))

    def __len__(self) -> int:
        from sqlalchemy import func, select

        from podium.store.engine import read_only

        with self._errors("read"), read_only(self._engine) as db:
            return int(db.scalar(select(func.count()).select_from(self._table)) or 0)

    def close(self) -> None:
        """Close the cache's connections."""
        self._engine.dispose()

    def _errors(self, action: str) -> AbstractContextManager[None]:
        from podium.store.engine import database_errors

        return database_errors(f"cannot {action} the request cache {self.path}")
