"""``podium serve``, ``podium keys create | list | revoke`` and ``podium shadow``.

Exit codes: 0 done, 2 bad options or configuration.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from podium.errors import ConfigError
from podium.trace import data_dir, default_trace_path

__all__ = ["add_parsers", "cmd_keys", "cmd_serve", "default_key_path"]


def default_key_path() -> Path:
    """The API key file in podium's data folder: ``keys.sqlite3``."""
    return data_dir() / "keys.sqlite3"


def add_parsers(sub: Any) -> None:
    """The ``serve`` and ``keys`` subcommands."""
    s = sub.add_parser(
        "serve",
        help="serve the conductor as an OpenAI-compatible API (POST /v1/chat/completions)",
        description=(
            "Serve an OpenAI-compatible API on HOST:PORT: /v1/chat/completions (streaming too), /v1/models "
            "(the conductor presets), /healthz. The configuration file is reloaded when it changes or on "
            'SIGHUP (kill switch: serving = "fallback"); SIGTERM lets in-flight requests finish.'
        ),
    )
    s.add_argument("--config", type=Path, help="server configuration (TOML; see docs/serve.md); default: built-in")
    s.add_argument("--pool", help="pool file or preset (overrides the configuration's; default: the local pool)")
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, this machine only)")
    s.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
    s.add_argument("--traces", type=Path, help=f"trace database (default: {default_trace_path()})")
    s.add_argument("--keys", type=Path, help=f"API key file (default: {default_key_path()})")

    k = sub.add_parser("keys", help="API keys of podium serve (stored hashed, with period budgets)").add_subparsers(
        dest="keys_command", required=True, metavar="SUBCOMMAND"
    )
    create = k.add_parser("create", help="create a key; it is printed once")
    create.add_argument("name", help="a name for the key (e.g. the team using it)")
    create.add_argument("--budget", type=float, metavar="USD", help="spending cap per period, USD (default: none)")
    create.add_argument("--period", default="day", choices=["hour", "day", "week", "month"])
    k_list = k.add_parser("list", help="keys, budgets and this period's spending")
    k_list.add_argument("--json", action="store_true")
    revoke = k.add_parser("revoke", help="revoke a key (its usage record stays)")
    revoke.add_argument("name")
    for p in (create, k_list, revoke):
        p.add_argument("--keys", type=Path, help=f"API key file (default: {default_key_path()})")


def cmd_keys(args: argparse.Namespace, out: Console) -> int:
    from podium.serve.keys import KeyStore

    store = KeyStore(args.keys or default_key_path())
    if args.keys_command == "create":
        secret = store.create(args.name, budget_usd=args.budget, period=args.period)
        budget = f"${args.budget:g} per {args.period}" if args.budget else "no budget"
        out.print(f"key {args.name!r} created ({budget}); it is shown only now:", highlight=False)
        print(secret)
        return 0
    if args.keys_command == "revoke":
        store.revoke(args.name)
        out.print(f"key {args.name!r} revoked", highlight=False)
        return 0
    rows = []
    for key in store.list():
        ledger = store.budget(key) if key.revoked_at is None else None
        rows.append(
            {
                "name": key.name,
                "budget_usd": key.budget_usd,
                "period": key.period,
                "spent_this_period_usd": ledger.spent_usd if ledger else None,
                "created_at": key.created_at,
                "revoked_at": key.revoked_at,
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    table = Table("name", "budget", "spent this period", "created", "status", box=None)
    for r in rows:
        budget = f"${r['budget_usd']:g}/{r['period']}" if r["budget_usd"] else "-"
        spent = f"${r['spent_this_period_usd']:.6f}" if r["spent_this_period_usd"] is not None else "-"
        status = f"revoked {r['revoked_at']}" if r["revoked_at"] else "active"
        table.add_row(str(r["name"]), budget, spent, str(r["created_at"]), status)
    out.print(table if rows else "no keys: the server is open to anyone who can reach it (podium keys create NAME)")
    return 0


def cmd_serve(args: argparse.Namespace, out: Console) -> int:
    try:
        import uvicorn

        from podium.serve.app import Server, create_app
    except ImportError as exc:
        raise ConfigError(
            f"podium serve needs the serve extra ({exc.name} is missing): pip install 'podium[serve]'"
        ) from None
    from podium.serve.keys import KeyStore
    from podium.trace.store import TraceStore

    if not 0 < args.port < 65536:
        raise ConfigError(f"--port {args.port}: give a port between 1 and 65535")
    keys = KeyStore(args.keys or default_key_path())
    traces = TraceStore(args.traces or default_trace_path())
    server = Server(config_path=args.config, pool=args.pool, traces=traces, keys=keys)
    loaded = server.current
    auth = "API keys required" if keys.active() else "no API keys (open to anyone who can reach it)"
    out.print(
        f"podium serving pool {loaded.pool.name!r} on http://{args.host}:{args.port}/v1 — models: "
        f"{', '.join(loaded.models)}; {auth}; serving: {loaded.config.serving}",
        highlight=False,
    )
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    uvicorn.run(
        create_app(server),
        host=args.host,
        port=args.port,
        log_level="warning",
        timeout_graceful_shutdown=int(loaded.config.graceful_shutdown_s),
    )
    return 0
