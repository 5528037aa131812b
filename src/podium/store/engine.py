"""The one place podium opens a database: URLs, engines, migrations, checks, SQLite files.

A store is chosen by a URL (SQLAlchemy's form): ``PODIUM_DATABASE_URL`` or a ``--database-url``
option, e.g. ``postgresql://podium:secret@db.internal:5432/podium``; without one each store is
an embedded SQLite file in podium's data folder (the default: nothing to set up). PostgreSQL is
reached through psycopg 3 (``pip install 'podium[postgres]'``); a plain ``postgresql://`` URL
means ``postgresql+psycopg://``.

SQLite engines open every transaction with ``BEGIN IMMEDIATE`` (the write lock up front, waiting
up to 5 s for it) in WAL mode, so a read-then-write transaction — a budget reservation — cannot
fail halfway when another process writes; PostgreSQL transactions lock the rows they change
(``SELECT … FOR UPDATE``).

Embedded single-purpose files are opened here too: :func:`open_embedded` (an engine for the
shadow store's and the request cache's SQLite files). A raw connection for what needs SQLite
itself (the trace file's FTS5 index, the embedding cache) comes from
:func:`podium.sqlite_files.connect_sqlite`, with the same locking and write-ahead-log settings;
it lives below the stores so that the embedding cache, which conductors use, needs no store.

The schema is versioned by Alembic (``podium/store/migrations``). :func:`open_store` upgrades an
embedded SQLite file by itself; a PostgreSQL database is upgraded by ``podium db upgrade`` (one
operator step per release, never a race between replicas starting together), and a store
behind the code's schema raises :class:`StoreError` saying so.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from podium.errors import ConfigError
from podium.extras import install_command

__all__ = [
    "DATABASE_URL_ENV",
    "StoreCheck",
    "StoreError",
    "check",
    "database_errors",
    "database_url",
    "first_line",
    "head_revision",
    "insert_ignore",
    "is_database_url",
    "mask_url",
    "open_embedded",
    "open_store",
    "read_only",
    "schema_revision",
    "sqlite_url",
    "store_location",
    "upgrade",
    "upgrade_url",
    "upsert",
    "vacuum",
]

DATABASE_URL_ENV = "PODIUM_DATABASE_URL"
"""The environment variable naming the shared store's URL."""

_MIGRATIONS = Path(__file__).with_name("migrations")


class StoreError(ConfigError):
    """The store's database cannot be reached or opened, or its schema is older than this
    podium's (the message names the URL, password masked, and the fix)."""


def database_url(explicit: str | None = None, environ: Mapping[str, str] | None = None) -> str | None:
    """The shared store's URL: ``explicit`` (an option), else ``$PODIUM_DATABASE_URL``, else None
    (each store uses its embedded SQLite file)."""
    if explicit:
        return explicit
    value = (os.environ if environ is None else environ).get(DATABASE_URL_ENV, "").strip()
    return value or None


def sqlite_url(path: Path) -> str:
    """The URL of the SQLite file at ``path``."""
    return f"sqlite:///{path}"


def store_location(value: str) -> str | Path:
    """An option's value as a store location: a database URL as written, else a file path
    (``type=`` of argparse options such as ``--cache``)."""
    return value if "://" in value else Path(value)


def is_database_url(location: str | Path) -> bool:
    """Whether a store location (an option's value) is a database URL (``postgresql://…``,
    ``sqlite:///…``) rather than a file path."""
    return isinstance(location, str) and "://" in location


def mask_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (for logs, errors and ``db check``)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):  # ValueError: e.g. a port that is not a number
        return "<unparseable URL>"


def open_store(url: str, *, migrate: bool | None = None) -> Any:
    """An SQLAlchemy :class:`~sqlalchemy.engine.Engine` for ``url``, configured as podium needs
    and at the current schema.

    Args:
        url: ``sqlite:///PATH`` or ``postgresql://USER:PASSWORD@HOST:PORT/DB``.
        migrate: upgrade the schema to the current one when it is behind. Default: yes for
            SQLite (the embedded file), no for PostgreSQL (``podium db upgrade`` does it).

    Raises:
        ConfigError: the URL is malformed, names an engine other than SQLite or PostgreSQL, or
            needs a driver that is not installed (names the extra).
        StoreError: the database cannot be reached or opened, or is behind the code's schema.
    """
    engine = _engine(url)
    if migrate is None:
        migrate = engine.dialect.name == "sqlite"
    try:
        if migrate:
            upgrade(engine)
        else:
            current, head = schema_revision(engine), head_revision()
            if current != head:
                engine.dispose()
                raise StoreError(
                    f"the store at {mask_url(url)} is at schema {current or 'none'}, this podium needs {head}: "
                    f"run 'podium db upgrade' (with {DATABASE_URL_ENV} set) once, then start again"
                )
    except StoreError:
        raise
    except Exception as exc:
        engine.dispose()
        raise _unavailable(url, exc) from None
    return engine


def open_embedded(path: str | Path, tables: Sequence[Any], *, what: str = "the store") -> Any:
    """An engine for an embedded single-purpose SQLite file (the shadow store, the request
    cache), configured as :func:`open_store`'s, with ``tables`` (SQLAlchemy tables) created
    when missing. These files are not migrated: each holds one table whose shape has not changed
    since its first release (a change would need a migration here first).

    Raises:
        StoreError: the file cannot be created or opened as a SQLite database.
    """
    from sqlalchemy import MetaData

    location = Path(path).expanduser()
    engine = _engine(sqlite_url(location))
    try:
        with engine.begin() as connection:
            MetaData().create_all(connection, tables=list(tables), checkfirst=True)
    except Exception as exc:
        engine.dispose()
        raise _unavailable(str(location), exc, what) from None
    return engine


def _engine(url: str) -> Any:
    from sqlalchemy import create_engine, event
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):  # ValueError: e.g. a port that is not a number
        raise ConfigError(
            f"database URL {mask_url(url)!r} is not a URL: use postgresql://USER:PASSWORD@HOST:PORT/DB "
            "(PORT a number) or sqlite:///PATH"
        ) from None
    if parsed.drivername in ("postgresql", "postgres"):  # postgres:// is what many providers hand out
        parsed = parsed.set(drivername="postgresql+psycopg")
    backend = parsed.get_backend_name()
    if backend == "postgresql":
        try:
            import psycopg  # noqa: F401
        except ImportError:
            raise ConfigError(f"a PostgreSQL store needs psycopg 3: {install_command('postgres')}") from None
        return create_engine(parsed, pool_pre_ping=True, pool_size=5, max_overflow=10)
    if backend != "sqlite":
        raise ConfigError(f"database URL {mask_url(url)!r}: podium stores run on sqlite:// or postgresql://")
    if parsed.database and parsed.database != ":memory:":
        try:
            Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the folder of {parsed.database}: {exc}") from None
    engine = create_engine(parsed, connect_args={"timeout": 5.0, "check_same_thread": False})

    @event.listens_for(engine, "connect")
    def _configure(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # podium issues BEGIN itself (below)
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA busy_timeout=5000")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection: Any) -> None:  # a reader (see read_only) does not take the write lock
        connection.exec_driver_sql("BEGIN" if connection.get_execution_options().get(_READ_ONLY) else "BEGIN IMMEDIATE")

    return engine


_READ_ONLY = "podium_read_only"


def read_only(engine: Any) -> Any:
    """A connection for reading (use as ``with read_only(engine) as db:``): on SQLite its
    transactions begin deferred, so readers never wait for each other or hold up a writer."""
    return engine.connect().execution_options(**{_READ_ONLY: True})


def _alembic_config(connection: Any) -> Any:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(_MIGRATIONS))
    config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """The schema revision this podium's code expects (the newest migration)."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(_alembic_config(None)).get_current_head()
    assert head is not None, "podium/store/migrations has no revision"
    return head


def schema_revision(engine: Any) -> str | None:
    """The schema revision the database is at (None: never migrated)."""
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as connection:
        revision: str | None = MigrationContext.configure(connection).get_current_revision()
        return revision


def upgrade_url(url: str) -> tuple[str | None, str]:
    """``podium db upgrade``: migrate the database at ``url`` (:func:`upgrade`); returns (before,
    after) revisions. Raises ConfigError for a malformed URL or a missing driver, StoreError when
    the database cannot be reached or migrated."""
    engine = _engine(url)
    try:
        try:
            before = schema_revision(engine)
        except Exception as exc:
            raise _unavailable(url, exc) from None
        try:
            return upgrade(engine)
        except Exception as exc:  # reached, but a migration failed: not a connection problem
            postgres = engine.dialect.name == "postgresql"
            kept = " (PostgreSQL ran the upgrade in one transaction: nothing was changed)" if postgres else ""
            raise StoreError(
                f"upgrading the store at {mask_url(url)} from revision {before or 'none'} to {head_revision()} "
                f"failed: {first_line(exc)}{kept}"
            ) from None
    finally:
        engine.dispose()


def upgrade(engine: Any) -> tuple[str | None, str]:
    """Migrate the database to :func:`head_revision` in one transaction; returns (before, after)
    revisions. Nothing happens when it is current."""
    from alembic import command

    before = schema_revision(engine)
    head = head_revision()
    if before != head:
        with engine.begin() as connection:
            command.upgrade(_alembic_config(connection), "head")
    return before, head


def insert_ignore(connection: Any, table: Any, values: Mapping[str, Any]) -> None:
    """``INSERT … ON CONFLICT DO NOTHING`` on either engine."""
    connection.execute(_dialect_insert(connection, table).values(**values).on_conflict_do_nothing())


def upsert(connection: Any, table: Any, values: Mapping[str, Any], key: Sequence[str]) -> None:
    """``INSERT … ON CONFLICT (key) DO UPDATE`` setting every other column, on either engine."""
    insert = _dialect_insert(connection, table).values(**values)
    update = {name: insert.excluded[name] for name in values if name not in key}
    connection.execute(insert.on_conflict_do_update(index_elements=list(key), set_=update))


def vacuum(engine: Any, tables: Sequence[str]) -> None:
    """Rewrite ``tables`` so deleted rows leave no trace in the database's files: ``VACUUM FULL``
    on PostgreSQL (locks those tables while it runs), ``VACUUM`` then a truncating checkpoint of
    the write-ahead log on SQLite (the whole file). Runs outside a transaction, as both require.

    Raises:
        sqlalchemy.exc.SQLAlchemyError, sqlite3.Error: the database refused (callers say that
            the rows are deleted but the files not yet rewritten).
    """
    if engine.dialect.name == "postgresql":
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.exec_driver_sql(f"VACUUM FULL {', '.join(tables)}")
        return
    raw = engine.raw_connection()
    try:
        raw.execute("VACUUM")
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        raw.close()


def _dialect_insert(connection: Any, table: Any) -> Any:
    from sqlalchemy.dialects import postgresql, sqlite

    return (postgresql if connection.dialect.name == "postgresql" else sqlite).insert(table)


@dataclass(frozen=True)
class StoreCheck:
    """What ``podium db check`` reports.

    Attributes:
        url: the store's URL, password masked.
        engine: ``sqlite`` or ``postgresql``; server_version: e.g. ``15.8`` (None for SQLite or
            when unreachable).
        reachable: whether a connection opened; error: why not.
        revision, head: the schema revision the database is at / this podium expects.
        rows: table → row count.
    """

    url: str
    engine: str
    reachable: bool
    revision: str | None = None
    head: str | None = None
    server_version: str | None = None
    error: str | None = None
    rows: dict[str, int] = field(default_factory=dict)

    @property
    def current(self) -> bool:
        """Reachable and at the schema this podium expects."""
        return self.reachable and self.revision == self.head


def check(url: str) -> StoreCheck:
    """Connect to ``url`` and report (never raises for an unreachable store; ConfigError for a
    malformed URL or a missing driver)."""
    from sqlalchemy import func, inspect, select

    from podium.store.schema import metadata

    engine = _engine(url)
    name = engine.dialect.name
    database = engine.url.database
    if name == "sqlite" and database and database != ":memory:" and not Path(database).expanduser().exists():
        engine.dispose()
        return StoreCheck(
            mask_url(url), name, False, head=head_revision(),
            error=f"{database} does not exist yet (its first use or 'podium db upgrade' creates it)",
        )  # fmt: skip
    try:
        revision = schema_revision(engine)
        rows: dict[str, int] = {}
        with engine.connect() as connection:
            present = set(inspect(connection).get_table_names())
            for table in metadata.sorted_tables:
                if table.name in present:
                    rows[table.name] = int(connection.scalar(select(func.count()).select_from(table)) or 0)
            version = None
            if name == "postgresql":
                version = str(connection.exec_driver_sql("SHOW server_version").scalar())
        return StoreCheck(mask_url(url), name, True, revision, head_revision(), version, rows=rows)
    except Exception as exc:
        return StoreCheck(mask_url(url), name, False, head=head_revision(), error=first_line(exc))
    finally:
        engine.dispose()


def _unavailable(url: str, exc: BaseException, what: str = "the store") -> StoreError:
    hint = (
        "is the server running and the URL right (host, port, user, password, database)?"
        if url.startswith("postgres")
        else "is the folder writable and the file a podium store?"
    )
    shown = mask_url(url) if is_database_url(url) else url
    return StoreError(f"cannot open {what} at {shown}: {first_line(exc)}; {hint}")


@contextmanager
def database_errors(message: str) -> Iterator[None]:
    """Turn a database error raised inside into a :class:`StoreError` ``"{message}: {the
    driver's first line}"`` (other exceptions pass through)."""
    from sqlalchemy.exc import SQLAlchemyError

    try:
        yield
    except (SQLAlchemyError, sqlite3.Error) as exc:
        raise StoreError(f"{message}: {first_line(exc)}") from None


def first_line(exc: BaseException) -> str:
    """The first line of a database error (the driver's own message when it has one)."""
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
