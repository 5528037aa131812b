"""A real PostgreSQL server for the store tests: Debian's ``postgresql`` package, started in a
temporary data directory on 127.0.0.1 at a free port (``initdb`` + ``pg_ctl``; as the
``postgres`` user when the tests run as root, since PostgreSQL refuses to run as root).

Not a fake: the same server binary an operator runs. Where it is not installed the tests that
need it skip with the one-line reason :func:`find_bindir` gives.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

from tests.serve_support import free_port


def find_bindir() -> tuple[Path | None, str]:
    """The folder holding ``initdb`` and ``pg_ctl``, or None and why not."""
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    if pg_config := shutil.which("pg_config"):
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False).stdout.strip()
        if out:
            candidates.insert(0, out)
    for folder in candidates:
        if (Path(folder) / "initdb").exists() and (Path(folder) / "pg_ctl").exists():
            return Path(folder), ""
    return None, "PostgreSQL is not installed (Debian: apt-get install postgresql; .ci/run installs it)"


class PostgresServer:
    """One PostgreSQL cluster in ``root`` (a temporary folder); :attr:`url` reaches its
    ``postgres`` database as the trust-authenticated user ``podium``."""

    def __init__(self, bindir: Path, root: Path) -> None:
        self.bindir = bindir
        self.root = root
        self.data = root / "data"
        self.port = free_port()
        self._as_postgres = os.geteuid() == 0
        root.mkdir(parents=True, exist_ok=True)
        if self._as_postgres:
            shutil.chown(root, "postgres")
        self._run("initdb", "-D", str(self.data), "-U", "podium", "--auth=trust", "-E", "UTF8", "--no-sync")
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(root / "server.log"), "-w", "-t", "60", "-o",
            f"-c listen_addresses=127.0.0.1 -p {self.port} -k {root} -c fsync=off -c max_connections=200",
            "start",
        )  # fmt: skip
        self.url = f"postgresql://podium@127.0.0.1:{self.port}/postgres"

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self.bindir / tool), *args]
        if self._as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        result = subprocess.run(command, capture_output=True, text=True, check=False, cwd=self.root)
        if result.returncode:
            log = (self.root / "server.log").read_text() if (self.root / "server.log").exists() else ""
            raise RuntimeError(f"{tool} failed ({result.returncode}): {result.stderr.strip()} {log[-2000:]}")

    def new_database(self) -> str:
        """A fresh, empty database; returns its URL."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(f"host=127.0.0.1 port={self.port} user=podium dbname=postgres", autocommit=True) as c:
            c.execute(f"CREATE DATABASE {name}")
        return f"postgresql://podium@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        """Stop the server (fast shutdown); the folder is the caller's to remove."""
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
        except RuntimeError:
            time.sleep(0.5)
