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

from podium._args import MANY, WholeNumber
from podium.errors import ConfigError
from podium.trace import data_dir, default_trace_path, open_traces

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


def default_key_path() -> Path:
    """The API key file in podium's data folder: ``keys.sqlite3``."""
    return data_dir() / "keys.sqlite3"


def default_shadow_path() -> Path:
    """The shadow store in podium's data folder: ``shadow.sqlite3``."""
    return data_dir() / "shadow.sqlite3"


def _stack_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--loop", choices=("auto", "uvloop", "asyncio"), default="auto",
                   help="event loop (default auto: uvloop when installed, as the serve extra does)")  # fmt: skip
    p.add_argument("--http", choices=("auto", "httptools", "h11"), default="auto",
                   help="HTTP parser (default auto: httptools when installed)")  # fmt: skip


def serving_stack(loop: str, http: str) -> tuple[str, str]:
    """The event loop and HTTP implementation uvicorn gets: ``auto`` is uvloop / httptools when
    importable (the ``serve`` extra installs them where the platform has wheels), else asyncio /
    h11. Raises ConfigError when one asked for by name is not installed."""
    import importlib.util

    chosen = []
    for asked, fast, plain in ((loop, "uvloop", "asyncio"), (http, "httptools", "h11")):
        found = importlib.util.find_spec(fast) is not None
        if asked == fast and not found:
            raise ConfigError(f"--{'loop' if fast == 'uvloop' else 'http'} {fast}: {fast} is not installed; "
                              "pip install 'podium[serve]' (or leave the option at auto)")  # fmt: skip
        chosen.append(fast if asked == fast or (asked == "auto" and found) else plain)
    return chosen[0], chosen[1]


def _database_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--database-url",
        metavar="URL",
        help="shared store (keys, budgets, traces, shadow records), e.g. postgresql://USER:PASSWORD@HOST:PORT/DB, "
        "which every replica then shares (default: $PODIUM_DATABASE_URL, else the files in podium's data folder)",
    )


def key_store(args: argparse.Namespace) -> Any:
    """The key store the options ask for: ``--database-url``, else ``--keys FILE``, else
    ``$PODIUM_DATABASE_URL``, else the key file in podium's data folder."""
    from podium.serve.keys import KeyStore
    from podium.store.engine import database_url

    if args.database_url:
        return KeyStore(url=args.database_url)
    if args.keys:
        return KeyStore(args.keys)
    return KeyStore(default_key_path(), url=database_url())


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
    create.add_argument("--budget", type=float, metavar="USD", help="spending cap per period, USD (default: none)")
    create.add_argument("--period", default="day", choices=["hour", "day", "week", "month"])
    create.add_argument(
        "--scope",
        default="api",
        choices=["api", "admin"],
        help="api: calls /v1 (default); admin: also opens the web UI (/ui: every trace, purge) from any address",
    )
    k_list = k.add_parser("list", help="keys, budgets and this period's spending")
    k_list.add_argument("--json", action="store_true")
    revoke = k.add_parser("revoke", help="revoke a key (its usage record stays)")
    revoke.add_argument("name")
    for p in (create, k_list, revoke):
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
    sh.add_argument("--request-cap", type=float, metavar="USD", help="shadow cost cap per request (execute)")
    sh.add_argument("--daily-budget", type=float, metavar="USD", help="shadow cost cap per UTC day")
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
    reports = sh.add_subparsers(dest="shadow_command", metavar="report")
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


def _require_serve_extra(command: str) -> None:
    """Raises ConfigError naming the extra when FastAPI, uvicorn or httpx is missing."""
    import importlib.util

    for module in ("fastapi", "uvicorn", "httpx"):
        if importlib.util.find_spec(module) is None:
            raise ConfigError(
                f"podium {command} needs the serve extra ({module} is missing): pip install 'podium[serve]'"
            )


def cmd_keys(args: argparse.Namespace, out: Console) -> int:

    store = key_store(args)
    if args.keys_command == "create":
        secret = store.create(args.name, budget_usd=args.budget, period=args.period, scope=args.scope)
        budget = f"${args.budget:g} per {args.period}" if args.budget else "no budget"
        scope = "; admin: opens the web UI" if args.scope == "admin" else ""
        out.print(f"key {args.name!r} created ({budget}{scope}); it is shown only now:", highlight=False)
        print(secret)
        return 0
    if args.keys_command == "revoke":
        store.revoke(args.name)
        out.print(f"key {args.name!r} revoked", highlight=False)
        return 0
    rows = []
    for key in store.list():
        ledger = store.budget(key) if key.revoked_at is None else None
        if ledger is not None:
            ledger.refresh()
        rows.append(
            {
                "name": key.name,
                "scope": key.scope,
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
    table = Table("name", "scope", "budget", "spent this period", "created", "status", box=None)
    for r in rows:
        budget = f"${r['budget_usd']:g}/{r['period']}" if r["budget_usd"] else "-"
        spent = f"${r['spent_this_period_usd']:.6f}" if r["spent_this_period_usd"] is not None else "-"
        status = f"revoked {r['revoked_at']}" if r["revoked_at"] else "active"
        table.add_row(str(r["name"]), str(r["scope"]), budget, spent, str(r["created_at"]), status)
    out.print(table if rows else "no keys: the server is open to anyone who can reach it (podium keys create NAME)")
    return 0


def cmd_kill_switch(args: argparse.Namespace, out: Console) -> int:
    from podium.store.settings import KILL_SWITCH, SharedSettings

    store = key_store(args)
    switches = SharedSettings(store.engine)
    try:
        if args.state == "on":
            switches.set(KILL_SWITCH, "fallback")
        elif args.state == "off":
            switches.clear(KILL_SWITCH)
        setting = switches.get(KILL_SWITCH)
    finally:
        store.close()
    on = setting is not None and setting.value == "fallback"
    if args.json:
        print(json.dumps({"on": on, "set_at": setting.updated_at if setting else None,
                          "set_by": setting.updated_by if setting else None}))  # fmt: skip
    elif on and setting is not None:
        out.print(
            f"kill switch ON (set {setting.updated_at} by {setting.updated_by}): every podium serve on this store "
            "serves the fallback pipeline within a few seconds; 'podium kill-switch off' hands back",
            highlight=False,
        )
    else:
        out.print("kill switch off: each podium serve follows its configuration's serving", highlight=False)
    return 0


def cmd_shadow(args: argparse.Namespace, out: Console) -> int:
    _require_serve_extra("shadow")
    import uvicorn

    from podium.serve.shadow import ShadowProxy, create_shadow_app, report_markdown, shadow_report
    from podium.store.shadow import ShadowStore, shadow_location

    if args.shadow_command == "report":
        from podium.trace.query import parse_utc

        since = parse_utc(args.since, flag="--since") if args.since else None
        until = parse_utc(args.until, flag="--until", end_of_day=True) if args.until else None
        if since is not None and until is not None and since >= until:
            raise ConfigError(f"--since {args.since} is not before --until {args.until}: swap them")
        location = shadow_location(args.report_store or args.store, default_shadow_path(), url=args.database_url)
        store = ShadowStore(location)
        report = shadow_report(store.rows(since=since, until=until), top=args.top)
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
    if not args.upstream:
        raise ConfigError("podium shadow needs --upstream URL (the existing pipeline), or 'podium shadow report'")
    from podium.pool import load_pool
    from podium.runtime import build_orchestrator, build_telemetry

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


_WORKER_ENV = "PODIUM_SERVE_WORKER"
"""How ``podium serve --workers N`` hands its options to each worker process (JSON)."""


def _server(options: dict[str, Any]) -> Any:
    """The Server the options (``config``, ``pool``, ``traces``, ``keys``, ``database_url``) ask for."""
    from podium.serve.app import Server

    keys = key_store(argparse.Namespace(keys=options["keys"] and Path(options["keys"]),
                                        database_url=options["database_url"]))  # fmt: skip
    traces = open_traces(Path(options["traces"]) if options["traces"] else None, url=options["database_url"])
    config = Path(options["config"]) if options["config"] else None
    return Server(config_path=config, pool=options["pool"], traces=traces, keys=keys)


def _warm_pii(server: Any, out: Console) -> None:
    """Load PII detection at start-up when a served worker is external, so no request's
    deadline pays for it (a failure is reported by the guard on the call it protects)."""
    from podium.runtime import pii_to_warm

    protections = pii_to_warm(server.current.models.values())
    if protections:
        out.print("loading PII detection (Presidio) before serving…", highlight=False)
    for protection in protections:
        try:
            protection.warm_up()
        except Exception:
            return


def worker_app() -> Any:
    """uvicorn's app factory in each ``--workers`` process: the Server of the options the
    parent passed in ``$PODIUM_SERVE_WORKER``; its lifespan flushes its traces at shutdown."""
    import os

    from podium.serve.app import create_app

    server = _server(json.loads(os.environ[_WORKER_ENV]))
    _warm_pii(server, Console(stderr=True))
    return create_app(server)


def cmd_serve(args: argparse.Namespace, out: Console) -> int:
    _require_serve_extra("serve")
    import os

    import uvicorn

    from podium.serve.app import create_app

    loop, http = serving_stack(args.loop, args.http)
    if args.eval_dir is not None:  # the UI's eval pages read it, in this process and in every --workers one
        from podium.serve.ui_reports import EVAL_DIR_ENV

        os.environ[EVAL_DIR_ENV] = str(args.eval_dir.resolve())
    options = {
        "config": str(args.config) if args.config else None,
        "pool": args.pool,
        "traces": str(args.traces) if args.traces else None,
        "keys": str(args.keys) if args.keys else None,
        "database_url": args.database_url,
    }
    server = _server(options)  # errors in the configuration surface here, once, before any worker starts
    loaded = server.current
    if args.workers == 1:  # each --workers process loads its own when it builds its server
        _warm_pii(server, out)
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
