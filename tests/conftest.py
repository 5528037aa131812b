"""Shared fixtures. Unit tests may not reach the network: connections to anything but
loopback fail (real workers in later suites talk to 127.0.0.1 only)."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import podium.builder  # noqa: F401 - imported first, so a test that patches podium.pool_workers never leaks into it
from podium.testing import ThreadedUvicorn  # noqa: F401 - the server helper, re-exported for the tests

try:  # property tests: CI replays the same examples on every run (HYPOTHESIS_PROFILE=ci, set by .ci/run),
    # so a landing never hangs on a random draw; a developer's runs explore new ones (default profile)
    from hypothesis import settings as _hypothesis

    _hypothesis.register_profile("ci", derandomize=True, database=None, print_blob=True)
    _hypothesis.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
except ImportError:  # the dev extra is not installed: the property tests skip on their own
    pass

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"
"""The benchmarks and case files: the project's shared folder beside the checkout where there is
one (its cases may be newer than the copies here), else the copies in the repository's own data/."""
if not (SHARED_DATA / "benchmarks").is_dir():
    SHARED_DATA = ROOT / "data"
POOLS = Path(__file__).resolve().parent / "pools"


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    real_connect = socket.socket.connect

    def guarded(self: socket.socket, address: Any) -> Any:
        host = address[0] if isinstance(address, tuple) else str(address)
        if isinstance(host, str) and (host.startswith("127.") or host in ("localhost", "::1")):
            return real_connect(self, address)
        if self.family == socket.AF_UNIX:
            return real_connect(self, address)
        raise OSError(f"network access blocked in tests: {address!r}")

    monkeypatch.setattr(socket.socket, "connect", guarded)
    yield


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PODIUM_HOME in a temporary folder for every test, so no test reads or writes the user's
    data dir (traces, the registry, shadow records): a command run with its defaults in a test
    met a trace database another podium version had migrated there, and failed."""
    monkeypatch.setenv("PODIUM_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def v2_trace_database(path: Path, *statements: str) -> None:
    """A trace database of schema version 2 (tests/data/trace-schema-v2.sql, the schema before
    the upgrade) with ``statements`` run in it, committed."""
    import sqlite3

    db = sqlite3.connect(path)
    db.executescript((Path(__file__).parent / "data" / "trace-schema-v2.sql").read_text())
    for statement in statements:
        db.execute(statement)
    db.commit()
    db.close()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Any]:
    """A real PostgreSQL server for the session (tests/postgres_support.py); skips, saying why,
    where PostgreSQL or psycopg is not installed. Its folder is a fresh one under the system's
    temporary directory (pytest's own is private to root, and the server runs as ``postgres``)."""
    import shutil
    import tempfile

    from tests.postgres_support import PostgresServer, find_bindir

    bindir, why = find_bindir()
    if bindir is None:
        pytest.skip(why)
    pytest.importorskip("psycopg", reason="psycopg is not installed (pip install 'podium[postgres]')")
    root = Path(tempfile.mkdtemp(prefix="podium-pg-"))
    server = PostgresServer(bindir, root)
    yield server
    server.stop()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store at the current schema on each engine: an SQLite file, and a new database
    on the session's PostgreSQL server. One suite, both engines."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.sqlite3'}"
    return str(request.getfixturevalue("store_url_postgresql"))  # upgraded, as `podium db upgrade` does


@pytest.fixture
def store_url_postgresql(postgres_server: Any) -> str:
    """A fresh database on the session's PostgreSQL server, at the current schema."""
    from podium.store.engine import open_store

    url = str(postgres_server.new_database())
    open_store(url, migrate=True).dispose()
    return url
