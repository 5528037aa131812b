"""Raw SQLite connections, one policy for every file podium keeps in SQLite itself: the trace
file (its FTS5 index and write-behind writer, :mod:`podium.trace.store`) and the embedding cache
(:class:`podium.embed.Embedder`). Engines and migrations are :mod:`podium.store.engine`'s; this
module sits below the stores so that the embedding cache, which the conductors use, imports none.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

__all__ = ["connect_sqlite", "use_wal"]


def connect_sqlite(
    path: str | Path, *, wal: bool = True, secure_delete: bool = False, foreign_keys: bool = False
) -> sqlite3.Connection:
    """A raw :mod:`sqlite3` connection for the stores that need SQLite itself (the trace file's
    FTS5 index and write-behind writer, the embedding cache): autocommit (the caller issues
    ``BEGIN``), usable from any thread (the caller serialises), waiting up to 5 s for another
    process's lock, and with ``wal`` the write-ahead log with ``synchronous=NORMAL`` (a commit
    survives a crash of podium; only a power loss may lose the last ones). ``secure_delete``
    zeroes deleted content; ``foreign_keys`` enforces them. The folder is created.

    Raises:
        sqlite3.Error, OSError: the file cannot be opened (callers name the store in their error).
    """
    location = Path(path).expanduser()
    location.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(location, check_same_thread=False, isolation_level=None)
    connection.execute("PRAGMA busy_timeout=5000")
    if wal:
        use_wal(connection)
    if secure_delete:
        connection.execute("PRAGMA secure_delete=ON")
    if foreign_keys:
        connection.execute("PRAGMA foreign_keys=ON")
    return connection


def use_wal(connection: sqlite3.Connection) -> None:
    """Switch a SQLite connection to the write-ahead log with ``synchronous=NORMAL``."""
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")
