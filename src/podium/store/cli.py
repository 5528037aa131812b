"""``podium db upgrade | check``: the shared store's schema and health.

The store is ``--database-url`` or ``$PODIUM_DATABASE_URL`` (e.g. PostgreSQL shared by every
``podium serve`` replica), else the embedded SQLite key file in podium's data folder.

Exit codes: 0 done (check: reachable and current), 1 check found the store unreachable or behind,
2 bad options or configuration.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any

from rich.console import Console
from rich.table import Table

from podium.errors import ConfigError

__all__ = ["add_parsers", "run", "store_url"]


def add_parsers(sub: Any) -> None:
    """Register ``podium db`` on the top-level subparsers."""
    db = sub.add_parser("db", help="the shared store (SQLite or PostgreSQL): schema upgrade and health check")
    commands = db.add_subparsers(dest="db_command", required=True, metavar="SUBCOMMAND")
    up = commands.add_parser(
        "upgrade",
        help="migrate the store's schema to this podium's (run once per release, before starting replicas)",
    )
    check = commands.add_parser("check", help="the store's URL (password masked), schema, row counts, reachability")
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    for p in (up, check):
        p.add_argument(
            "--database-url",
            metavar="URL",
            help="postgresql://USER:PASSWORD@HOST:PORT/DB or sqlite:///PATH "
            "(default: $PODIUM_DATABASE_URL, else the embedded key file)",
        )


def store_url(explicit: str | None = None) -> str:
    """The store's URL: the option, ``$PODIUM_DATABASE_URL``, else the embedded key file's."""
    from podium.serve.options import default_key_path
    from podium.store.engine import database_url, sqlite_url

    return database_url(explicit) or sqlite_url(default_key_path())


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Run ``podium db``; returns the exit code. Raises ConfigError for a malformed URL."""
    from podium.store.engine import check, mask_url, upgrade_url

    url = store_url(args.database_url)
    if args.db_command == "upgrade":
        before, after = upgrade_url(url)
        what = "already at" if before == after else f"upgraded from {before or 'an empty database'} to"
        out.print(f"store {mask_url(url)}: {what} schema {after}", highlight=False)
        return 0
    try:
        report = check(url)
    except ConfigError as exc:  # a malformed URL or a missing driver: in the form asked for
        if not args.json:
            raise
        print(json.dumps({"url": mask_url(url), "reachable": False, "current": False, "error": str(exc)}, indent=2))
        return 2
    if args.json:
        print(json.dumps(dataclasses.asdict(report) | {"current": report.current}, indent=2))
        return 0 if report.current else 1
    table = Table(box=None, show_header=False)
    table.add_row("store", report.url)
    table.add_row("engine", report.engine + (f" {report.server_version}" if report.server_version else ""))
    table.add_row("reachable", "yes" if report.reachable else f"no: {report.error}")
    if report.reachable:
        behind = "" if report.current else "  (behind: run 'podium db upgrade')"
        table.add_row("schema", f"{report.revision or 'none'} (this podium: {report.head}){behind}")
        for name, count in report.rows.items():
            table.add_row(f"  {name}", f"{count} row{'' if count == 1 else 's'}")
    out.print(table)
    from podium.store.engine import database_url

    if database_url(args.database_url) is None:  # the embedded default: each store is a file of its own
        out.print(_embedded_files(), style="dim", highlight=False)
    return 0 if report.current else 1


def _embedded_files() -> str:
    """Where the other embedded stores are: with no database URL, traces, shadow records and
    the request cache are SQLite files of their own, not tables of the key file checked above
    (whose shadow table only a shared database uses)."""
    from podium.serve.options import default_shadow_path
    from podium.store.request_cache import default_cache_path
    from podium.trace import default_trace_path

    def state(path: Any) -> str:
        return f"{path} ({path.stat().st_size / 1e6:.1f} MB)" if path.exists() else f"{path} (not created yet)"

    files = [("traces", default_trace_path()), ("shadow", default_shadow_path()), ("cache", default_cache_path())]
    return "with no --database-url each store is a SQLite file of its own:\n" + "\n".join(
        f"  {name}: {state(path)}" for name, path in files
    )
