"""Operator switches every replica reads: the kill switch (``podium kill-switch on|off``).

A switch is one row of the store's ``settings`` table (:data:`podium.store.schema.settings`):
name, value, when it was set (UTC ISO 8601) and by whom (``user@host``). It lives where the API
keys live — the key file for the processes of one host, the shared PostgreSQL store for
replicas on many — and each ``podium serve`` process reads it about once a second, off its
event loop, so flipping it reaches every replica within a few seconds without a config change
on any host.
"""

from __future__ import annotations

import getpass
import socket
from dataclasses import dataclass
from typing import Any

from podium.records import utc_now
from podium.store.engine import database_errors, read_only, upsert

__all__ = ["KILL_SWITCH", "Setting", "SharedSettings"]

KILL_SWITCH = "serving"
"""The kill switch's setting: value ``fallback`` makes every replica serve the fallback
pipeline (no conductor call), whatever its configuration file says."""


@dataclass(frozen=True)
class Setting:
    """One switch as stored: ``name``, ``value``, ``updated_at`` (UTC ISO 8601) and
    ``updated_by`` (``user@host`` of whoever set it)."""

    name: str
    value: str
    updated_at: str
    updated_by: str


class SharedSettings:
    """The switches in one store.

    Args:
        engine: the store's SQLAlchemy engine (:func:`podium.store.engine.open_store`), at a
            schema with the ``settings`` table (revision 0003 or later).

    Every method raises StoreError (a ConfigError) when the database refuses, naming it.
    """

    def __init__(self, engine: Any) -> None:
        from podium.store.schema import settings

        self.engine = engine
        self._table = settings

    def get(self, name: str) -> Setting | None:
        """The switch called ``name``, or None when it is not set."""
        from sqlalchemy import select

        table = self._table
        with database_errors(f"cannot read the setting {name!r}"), read_only(self.engine) as db:
            row = db.execute(select(table).where(table.c.name == name)).first()
        return Setting(**row._mapping) if row is not None else None

    def set(self, name: str, value: str, *, by: str | None = None) -> Setting:
        """Set ``name`` to ``value`` (replacing what was there); ``by`` defaults to the current
        ``user@host``. Returns what was stored."""
        setting = Setting(name, value, utc_now(), by or _who())
        with database_errors(f"cannot store the setting {name!r}"), self.engine.begin() as db:
            upsert(db, self._table, vars(setting), key=("name",))
        return setting

    def clear(self, name: str) -> bool:
        """Remove ``name``; returns whether it was set."""
        from sqlalchemy import delete

        table = self._table
        with database_errors(f"cannot clear the setting {name!r}"), self.engine.begin() as db:
            return bool(db.execute(delete(table).where(table.c.name == name)).rowcount)


def _who() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login name (some containers)
        user = "unknown"
    return f"{user}@{socket.gethostname()}"
