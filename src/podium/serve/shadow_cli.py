"""``podium shadow``: the OpenAI-compatible proxy that runs podium in shadow beside an existing
pipeline (:mod:`podium.serve.shadow`), and ``podium shadow report``, which compares the recorded
runs per use case (:mod:`podium.serve.shadow_report`).
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

from rich.console import Console

from podium.errors import ConfigError
from podium.serve.options import check_address, default_shadow_path, serving_stack
from podium.serve.options import require_serve_extra as _require_serve_extra
from podium.trace import open_traces

__all__ = ["cmd_shadow"]


def cmd_shadow(args: argparse.Namespace, out: Console) -> int:
    """``podium shadow --upstream URL``: serve the proxy until stopped (needs the serve extra);
    ``podium shadow report``: print (or write) the comparison (reads the store only)."""
    from podium.store.shadow import ShadowStore, shadow_location

    if args.shadow_command == "report":
        return _report(args, out)
    _require_serve_extra("shadow")
    import uvicorn

    from podium.serve.shadow import ShadowProxy, create_shadow_app

    if not args.upstream:
        raise ConfigError("podium shadow needs --upstream URL (the existing pipeline), or 'podium shadow report'")
    from podium.builder import build_orchestrator, build_telemetry
    from podium.pool import load_pool

    price = None
    if args.upstream_price:
        try:
            price_in, price_out = (float(x) for x in args.upstream_price.split(","))
        except ValueError:
            raise ConfigError(f"--upstream-price {args.upstream_price!r}: write IN,OUT in USD per 1M tokens") from None
        price = (price_in, price_out)
    config = load_pool(args.pool)
    telemetry = build_telemetry(config)
    traces = open_traces(args.traces, url=args.database_url)
    orchestrator = build_orchestrator(config, traces=traces, exporter=telemetry)
    proxy = ShadowProxy(
        args.upstream,
        orchestrator,
        ShadowStore(shadow_location(args.store, default_shadow_path(), url=args.database_url)),
        mode=args.mode,
        request_cap_usd=args.request_cap,
        daily_budget_usd=args.daily_budget,
        upstream_price=price,
    )
    budget = (
        f"; shadow budget: ${args.request_cap or 0:g}/request, ${args.daily_budget or 0:g}/day"
        if args.mode == "execute"
        else ""
    )
    check_address(args.host, args.port)
    out.print(
        f"podium shadow on http://{args.host}:{args.port}/v1 → {proxy.upstream} (mode: {args.mode}, pool "
        f"{config.name!r}{budget})",
        highlight=False,
    )
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    loop, http = serving_stack(args.loop, args.http)
    try:
        uvicorn.run(create_shadow_app(proxy), host=args.host, port=args.port, log_level="warning", loop=loop, http=http)
    finally:
        traces.close()  # store the queued trace writes
        if telemetry is not None:
            telemetry.shutdown()
    return 0


def _report(args: argparse.Namespace, out: Console) -> int:
    """``podium shadow report``."""
    from podium.serve.shadow_report import report_markdown, shadow_report
    from podium.store.engine import is_database_url
    from podium.store.shadow import ShadowStore, shadow_location
    from podium.trace.query import parse_utc

    since = parse_utc(args.since, flag="--since") if args.since else None
    until = parse_utc(args.until, flag="--until", end_of_day=True) if args.until else None
    if since is not None and until is not None and since >= until:
        raise ConfigError(f"--since {args.since} is not before --until {args.until}: swap them")
    explicit = args.report_store or args.store
    location = shadow_location(explicit, default_shadow_path(), url=args.database_url)
    local = None if is_database_url(location) else Path(location)
    if local is not None and local.is_dir():
        raise ConfigError(f"{local} is a folder; --store takes the shadow store's file (e.g. {default_shadow_path()})")
    if local is not None and not local.is_file():  # a report creates no store
        if explicit is not None:
            raise ConfigError(f"no shadow store at {local}: check the path, or run 'podium shadow --upstream URL'")
        rows: list[dict[str, Any]] = []
    else:
        if local is not None and not _is_sqlite(local):
            raise ConfigError(f"{local} is not a shadow store (not an SQLite database file): check --store")
        tables = _tables(local) if local is not None else {"shadow"}
        if tables and "shadow" not in tables:  # e.g. the trace database: opening it would add a table
            raise ConfigError(
                f"{local} is not a shadow store (it holds {', '.join(sorted(tables)[:4])}: another podium database?); "
                f"nothing was changed: check --store (the default is {default_shadow_path()})"
            )
        rows = ShadowStore(location).rows(since=since, until=until) if tables else []
    report = shadow_report(rows, top=args.top)
    markdown = report_markdown(report)
    if args.out:
        args.out.write_text(markdown, encoding="utf-8")
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    elif not report["rows"]:
        if since or until:
            out.print("no shadow records in that period")
        else:
            out.print("no shadow records yet: run 'podium shadow --upstream URL' and send it traffic")
    else:
        print(markdown, end="")
    return 0


def _is_sqlite(path: Path) -> bool:
    """Whether ``path`` begins as an SQLite database file does (an empty file counts: SQLite
    makes it one)."""
    with path.open("rb") as f:
        head = f.read(16)
    return head in (b"", b"SQLite format 3\x00")


def _tables(path: Path) -> set[str]:
    """The tables of the SQLite file at ``path``, read without writing anything."""
    import sqlite3

    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        db.close()
