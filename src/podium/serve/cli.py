"""``podium serve``, ``podium keys create | list | revoke`` and ``podium shadow``.

Exit codes: 0 done, 2 bad options or configuration.

Here: the parsers, ``podium serve`` and ``podium ui``. The key store's commands (``keys``,
``kill-switch``) are :mod:`podium.serve.keys_cli`, ``podium shadow`` is
:mod:`podium.serve.shadow_cli`, and what the options resolve to (default files, the key store,
the serving stack) is :mod:`podium.serve.options`; their public names are re-exported here.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rich.console import Console

from podium._args import MANY, PositiveNumber, WholeNumber
from podium.serve.keys_cli import cmd_keys, cmd_kill_switch
from podium.serve.options import check_address, default_key_path, default_shadow_path, key_store, serving_stack
from podium.serve.options import require_serve_extra as _require_serve_extra
from podium.serve.shadow_cli import cmd_shadow
from podium.trace import default_trace_path, open_traces

__all__ = [
    "add_parsers",
    "cmd_keys",
    "cmd_kill_switch",
    "cmd_serve",
    "cmd_shadow",
    "cmd_ui",
    "default_key_path",
    "default_shadow_path",
    "key_store",
    "run",
    "serving_stack",
    "worker_app",
]


def _stack_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--loop", choices=("auto", "uvloop", "asyncio"), default="auto",
                   help="event loop (default auto: uvloop when installed, as the serve extra does)")  # fmt: skip
    p.add_argument("--http", choices=("auto", "httptools", "h11"), default="auto",
                   help="HTTP parser (default auto: httptools when installed)")  # fmt: skip


def _database_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--database-url",
        metavar="URL",
        help="shared store (keys, budgets, traces, shadow records), e.g. postgresql://USER:PASSWORD@HOST:PORT/DB, "
        "which every replica then shares (default: $PODIUM_DATABASE_URL, else the files in podium's data folder)",
    )


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
    s.add_argument("--port", action=WholeNumber, low=1, high=65535, default=8000, help="port (default: 8000)")
    s.add_argument(
        "--workers",
        action=WholeNumber,
        low=1,
        high=64,
        default=1,
        metavar="N",
        help="server processes sharing the port (uvicorn's workers; default 1). They share the trace file, the "
        "keys and the key budgets (one ledger in the store); each loads its own local models",
    )
    s.add_argument("--traces", type=Path, help=f"trace database (default: {default_trace_path()})")
    s.add_argument("--keys", type=Path, help=f"API key file (default: {default_key_path()})")
    _database_argument(s)
    s.add_argument(
        "--eval-dir",
        type=Path,
        help="folder of 'podium eval --out' folders for the /ui eval pages "
        "(default: $PODIUM_EVAL_DIR, else ./podium-eval)",
    )
    _stack_arguments(s)

    ui = sub.add_parser(
        "ui",
        help="browse stored traces in a web page (the /ui of podium serve, without serving a pool)",
        description="Serve the trace browser on http://HOST:PORT/ui for a trace database: the request list with "
        "filters and full-text search, each request's workflow graph, messages and costs, and purge; stored eval "
        "runs (tables, slices, Pareto plot, two side by side with the gate's flips), the shadow report and the "
        "conductor registry. Without API keys it answers loopback clients only; with keys in the key store, clients "
        "signed in with an admin key (podium keys create NAME --scope admin), from any address.",
    )
    ui.add_argument("--traces", type=Path, help=f"trace database (default: {default_trace_path()})")
    ui.add_argument("--keys", type=Path, help=f"API key file (default: {default_key_path()})")
    _database_argument(ui)
    ui.add_argument("--host", default="127.0.0.1", help="address (default 127.0.0.1; other clients need an admin key)")
    ui.add_argument("--port", action=WholeNumber, low=1, high=65535, default=8010, help="port (default: 8010)")
    ui.add_argument(
        "--eval-dir",
        type=Path,
        help="folder of 'podium eval --out' folders for the eval pages, searched two levels deep "
        "(default: $PODIUM_EVAL_DIR, else ./podium-eval)",
    )
    ui.add_argument(
        "--shadow-store", type=Path, help=f"shadow store file (default: the shared store, else {default_shadow_path()})"
    )
    ui.add_argument("--conductors", type=Path, help="conductor registry folder (default: the data folder's)")

    k = sub.add_parser("keys", help="API keys of podium serve (stored hashed, with period budgets)").add_subparsers(
        dest="keys_command", required=True, metavar="SUBCOMMAND"
    )
    create = k.add_parser("create", help="create a key; it is printed once")
    create.add_argument("name", help="a name for the key (e.g. the team using it)")
    create.add_argument(
        "--budget", action=PositiveNumber, metavar="USD", help="spending cap per period, USD (default: none)"
    )
    create.add_argument(
        "--period", default="day", choices=["hour", "day", "week", "month"], help="the budget's period (default: day)"
    )
    create.add_argument(
        "--scope",
        default="api",
        choices=["api", "admin"],
        help="api: calls /v1 (default); admin: also opens the web UI (/ui: every trace, purge) from any address",
    )
    k_list = k.add_parser("list", help="keys, budgets and this period's spending")
    k_list.add_argument("--json", action="store_true")
    rotate = k.add_parser(
        "rotate", help="give a key a new secret, printed once; the old one stops working (name, budget, spending stay)"
    )
    rotate.add_argument("name", help="the key's name (podium keys list)")
    revoke = k.add_parser("revoke", help="revoke a key (its usage record stays)")
    revoke.add_argument("name", help="the key's name (podium keys list)")
    for p in (create, k_list, rotate, revoke):
        p.add_argument("--keys", type=Path, help=f"API key file (default: {default_key_path()})")
        _database_argument(p)

    ks = sub.add_parser(
        "kill-switch",
        help="serve the fallback pipeline on every replica now (on), or let each configuration decide (off)",
        description="The kill switch is kept in the key store (the key file of one host, or the shared store of "
        "every replica with --database-url / $PODIUM_DATABASE_URL). Each podium serve process reads it about once "
        "a second: 'on' makes every request run the fallback pipeline (no conductor call) within seconds, whatever "
        "the configuration files say; 'off' hands back to them; 'status' shows it.",
    )
    ks.add_argument("state", choices=["on", "off", "status"])
    ks.add_argument("--keys", type=Path, help=f"API key file (default: {default_key_path()})")
    ks.add_argument("--json", action="store_true", help="print the switch as JSON")
    _database_argument(ks)

    sh = sub.add_parser(
        "shadow",
        help="run podium in shadow beside an existing OpenAI-compatible pipeline; 'shadow report' compares",
        description=(
            "An OpenAI-compatible proxy in front of --upstream: clients get the upstream's reply unchanged; in the "
            "background podium plans (--mode plan) or also executes (--mode execute, under a shadow budget) each "
            "chat completion and records it beside the upstream's answer. 'podium shadow report' compares them."
        ),
    )
    sh.add_argument("--upstream", metavar="URL", help="the existing pipeline's base URL (e.g. http://127.0.0.1:8000)")
    sh.add_argument("--mode", choices=["plan", "execute"], default="plan", help="plan only (default) or execute")
    sh.add_argument("--request-cap", action=PositiveNumber, metavar="USD", help="shadow cost cap per request (execute)")
    sh.add_argument("--daily-budget", action=PositiveNumber, metavar="USD", help="shadow cost cap per UTC day")
    sh.add_argument("--upstream-price", metavar="IN,OUT", help="upstream USD per 1M input,output tokens (report)")
    sh.add_argument("--pool", help="pool file or preset podium runs in the shadow (default: the local pool)")
    sh.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    sh.add_argument("--port", action=WholeNumber, low=1, high=65535, default=8001, help="port (default: 8001)")
    sh.add_argument("--traces", type=Path, help=f"trace database (default: {default_trace_path()})")
    sh.add_argument(
        "--store", type=Path, help=f"shadow store file (default: the shared store, else {default_shadow_path()})"
    )
    _database_argument(sh)
    _stack_arguments(sh)
    reports = sh.add_subparsers(dest="shadow_command", metavar="[SUBCOMMAND]", title="subcommand (optional)")
    rep = reports.add_parser("report", help="compare shadow runs with the upstream per use case")
    rep.add_argument(
        "--since", metavar="WHEN", help="from this date/time (ISO 8601, e.g. 2026-11-01; UTC unless an offset)"
    )
    rep.add_argument("--until", metavar="WHEN", help="until this date/time (a date alone includes that day)")
    rep.add_argument(
        "--top",
        action=WholeNumber,
        low=0,
        high=MANY,
        default=5,
        help="largest disagreements listed per use case (default 5)",
    )
    rep.add_argument("--out", type=Path, metavar="FILE.md", help="also write the Markdown report here")
    rep.add_argument("--json", action="store_true", help="print the report as JSON")
    rep.add_argument(
        "--store",
        dest="report_store",
        type=Path,
        metavar="PATH",
        help=f"shadow store file (default: the shared store, else {default_shadow_path()})",
    )
    _database_argument(rep)


_WORKER_ENV = "PODIUM_SERVE_WORKER"
"""How ``podium serve --workers N`` hands its options to each worker process (JSON)."""


def _server(options: dict[str, Any]) -> Any:
    """The Server the options (``config``, ``pool``, ``traces``, ``keys``, ``database_url``) ask for."""
    from podium.serve.server import Server

    keys = key_store(argparse.Namespace(keys=options["keys"] and Path(options["keys"]),
                                        database_url=options["database_url"]))  # fmt: skip
    traces = open_traces(Path(options["traces"]) if options["traces"] else None, url=options["database_url"])
    config = Path(options["config"]) if options["config"] else None
    return Server(config_path=config, pool=options["pool"], traces=traces, keys=keys)


@contextlib.contextmanager
def _line(console: Console, text: str) -> Iterator[None]:
    """Print ``text`` once, for a step too short or too quiet for a spinner (server start-up)."""
    console.print(text, highlight=False)
    yield


def _warm(server: Any, console: Console) -> None:
    """Before serving: the plan conductors' local models start loading in the background
    (:func:`podium.builder.warm_models`) and PII detection is loaded
    (:func:`podium.builder.warm_pii`)."""
    from podium.builder import warm_models, warm_pii

    warm_models(server.current.models.values())
    warm_pii(server.current.models.values(), lambda: _line(console, "loading PII detection (Presidio) before serving…"))


def worker_app() -> Any:
    """uvicorn's app factory in each ``--workers`` process: the Server of the options the
    parent passed in ``$PODIUM_SERVE_WORKER``; its lifespan flushes its traces at shutdown."""
    import os

    from podium.serve.app import create_app

    server = _server(json.loads(os.environ[_WORKER_ENV]))
    _warm(server, Console(stderr=True))
    return create_app(server)


def cmd_serve(args: argparse.Namespace, out: Console) -> int:
    _require_serve_extra("serve")
    import os

    import uvicorn

    from podium.serve.app import create_app

    loop, http = serving_stack(args.loop, args.http)
    if args.eval_dir is not None:  # the UI's eval pages read it, in this process and in every --workers one
        from podium.serve.report_data import EVAL_DIR_ENV

        os.environ[EVAL_DIR_ENV] = str(args.eval_dir.resolve())
    options = {
        "config": str(args.config) if args.config else None,
        "pool": args.pool,
        "traces": str(args.traces) if args.traces else None,
        "keys": str(args.keys) if args.keys else None,
        "database_url": args.database_url,
    }
    check_address(args.host, args.port)  # before any model loads, and before "serving" is printed
    server = _server(options)  # errors in the configuration surface here, once, before any worker starts
    loaded = server.current
    if args.workers == 1:  # each --workers process loads its own when it builds its server
        _warm(server, out)
    auth = "API keys required" if server.keys.active() else "no API keys (open to anyone who can reach it)"
    processes = f"; {args.workers} worker processes" if args.workers > 1 else ""
    from podium.store.engine import mask_url

    stores = f"traces: {server.traces.path if server.traces else 'none'}; keys: {mask_url(server.keys.url)}"
    out.print(
        f"podium serving pool {loaded.pool.name!r} on http://{args.host}:{args.port}/v1 — models: "
        f"{', '.join(loaded.models)}; {auth}; serving: {server.serving()}; {loop} + {http}{processes}; {stores}",
        highlight=False,
    )
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    common: dict[str, Any] = {
        "host": args.host,
        "port": args.port,
        "log_level": "warning",
        "timeout_graceful_shutdown": int(loaded.config.graceful_shutdown_s),
        "loop": loop,
        "http": http,
    }
    if args.workers > 1:
        server.traces.close()
        server.keys.close()
        os.environ[_WORKER_ENV] = json.dumps(options)
        uvicorn.run("podium.serve.cli:worker_app", factory=True, workers=args.workers, **common)
        return 0
    try:
        uvicorn.run(create_app(server), **common)
    finally:
        server.traces.close()  # the lifespan flushed already; this stores anything written after it
    return 0


def cmd_ui(args: argparse.Namespace, out: Console) -> int:
    """``podium ui``: the trace browser alone, for a trace database."""
    _require_serve_extra("ui")
    import types

    import uvicorn
    from fastapi import FastAPI

    from podium.serve.ui import ReportSources, UIHeaders, ui_router
    from podium.store.shadow import shadow_location

    check_address(args.host, args.port)
    traces = open_traces(args.traces, url=args.database_url)
    keys = key_store(args)
    defaults = ReportSources.defaults()
    sources = ReportSources(
        args.eval_dir or defaults.eval_dir,
        shadow_location(args.shadow_store, default_shadow_path(), url=args.database_url),
        args.conductors or defaults.conductors,
    )
    app = FastAPI(title="podium ui", docs_url=None, redoc_url=None, openapi_url=None)
    app.include_router(ui_router(types.SimpleNamespace(traces=traces, keys=keys), sources))  # type: ignore[arg-type]
    app.add_middleware(UIHeaders)
    out.print(f"podium trace browser on http://{args.host}:{args.port}/ui — traces: {traces.path}", highlight=False)
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    finally:
        traces.close()
    return 0


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Run ``podium serve``, ``keys``, ``kill-switch``, ``shadow`` or ``ui``; returns the exit code."""
    commands = {
        "serve": cmd_serve,
        "keys": cmd_keys,
        "kill-switch": cmd_kill_switch,
        "shadow": cmd_shadow,
        "ui": cmd_ui,
    }
    return commands[args.command](args, out)
