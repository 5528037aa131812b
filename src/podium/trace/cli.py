"""``podium trace list | search | show | export | purge`` and ``podium dataflow``: the stored
traces (SQLite file or the shared PostgreSQL store, :func:`podium.trace.open_traces`) and the
data-flow register built from them.

Exit codes: 0 done, 1 nothing to show (``trace show`` of an unknown id), 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from podium._args import MANY, WholeNumber
from podium.errors import ConfigError
from podium.trace import default_trace_path, open_traces

if TYPE_CHECKING:
    from rich.console import Console

    from podium.trace.backend import TraceBackend
    from podium.trace.query import SearchHit, TraceFilter

__all__ = ["add_parsers", "run"]

_HELP = {
    "trace": "search, show, export and purge stored traces",
    "dataflow": "data-flow register: which third parties received which data (from traces)",
}


def add_parsers(sub: Any) -> None:
    """Register ``podium trace`` and ``podium dataflow`` on the top-level subparsers."""
    _trace_parsers(sub)
    _dataflow_parser(sub)


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Run ``podium trace`` or ``podium dataflow``; returns the exit code."""
    if args.command == "dataflow":
        return _cmd_dataflow(args, out)
    return _cmd_trace(args, out, err)


def _trace_parsers(sub: Any) -> None:
    from podium.trace.query import FIELDS, FILTER_STATUSES

    trace = sub.add_parser("trace", help=_HELP["trace"]).add_subparsers(
        dest="trace_command", required=True, metavar="SUBCOMMAND"
    )
    t_list = trace.add_parser("list", help="most recent requests first (with filters)")
    t_search = trace.add_parser(
        "search",
        help="full-text search of questions, answers, conductor output, subtasks, outputs and errors",
        description="Full-text search (SQLite FTS5, or PostgreSQL text search for the shared store) over stored "
        'traces, best match first. Plain words must all occur (any case); "quoted phrases" as written; word* is a '
        "prefix. Without a query: the newest requests that pass the filters.",
    )
    t_search.add_argument("query", nargs="*", default=[], help="search words (optional with filters)")
    t_search.add_argument("--fts", action="store_true", help="the query is raw FTS5 syntax (AND, OR, NOT, NEAR)")
    t_search.add_argument("--field", action="append", default=[], choices=FIELDS,
                          help="search only this text (repeatable)")  # fmt: skip
    for p in (t_list, t_search):
        p.add_argument(
            "--limit", action=WholeNumber, low=1, high=MANY, default=20, help="most requests shown (default 20)"
        )
        f = p.add_argument_group("filters (all given must hold)")
        f.add_argument("--since", metavar="WHEN", help="started at or after (ISO 8601 date or datetime, UTC)")
        f.add_argument("--until", metavar="WHEN", help="started before (a date alone includes that day)")
        f.add_argument("--worker", metavar="NAME", help="a step ran on this worker")
        f.add_argument(
            "--status",
            choices=FILTER_STATUSES,
            help="request status (running: in flight or cut off; cancelled: the errors that are a client gone, "
            "Ctrl-C or a shutdown)",
        )
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
        "index, VACUUM the file and truncate its write-ahead log so none of their text remains (PostgreSQL: VACUUM "
        "FULL of the trace tables, see docs/scale-out.md). Several selectors narrow the selection (all must hold).",
    )
    t_purge.add_argument("--before", metavar="WHEN", help="requests started before (ISO 8601 date or datetime, UTC)")
    t_purge.add_argument("--request", action="append", default=[], metavar="ID",
                         help="this request (id or unique prefix; repeatable)")  # fmt: skip
    t_purge.add_argument("--subject", metavar="KEY", help="every request of this data subject")
    t_purge.add_argument("--dry-run", action="store_true", help="show what would be deleted; delete nothing")
    t_purge.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    t_purge.add_argument(
        "--shadow-store",
        type=Path,
        metavar="PATH",
        help="shadow store file purged alike (default: the shared store's with $PODIUM_DATABASE_URL, else "
        "podium's file if it exists)",
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
        _store_arguments(p)
        p.add_argument("--json", action="store_true", help="machine-readable output")


def _store_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--traces", type=Path, help=f"trace database file (default: the shared store, else {default_trace_path()})"
    )
    p.add_argument(
        "--database-url",
        metavar="URL",
        help="the shared store, e.g. postgresql://USER:PASSWORD@HOST:PORT/DB (default: $PODIUM_DATABASE_URL)",
    )


def _dataflow_parser(sub: Any) -> None:
    flow = sub.add_parser(
        "dataflow",
        help=_HELP["dataflow"],
        description=(
            "List every third-party recipient (worker, provider, endpoint, region) of requests started in a "
            "period and the data categories and PII kinds it received, from stored traces. Dates are UTC; "
            "a date-only --until includes that day."
        ),
    )
    flow.add_argument("--since", help="start, YYYY-MM-DD or ISO 8601 (default: 1970-01-01, i.e. every trace)")
    flow.add_argument("--until", help="end, exclusive; YYYY-MM-DD includes that day (default: now)")
    _store_arguments(flow)
    form = flow.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="machine-readable output")
    form.add_argument("--md", action="store_true", help="a Markdown document (for a records-of-processing file)")


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

    from podium._render import print_record, render_run, render_search, render_trace_list

    if args.trace_command in ("list", "search") and _no_history(args.traces, args.database_url):
        # nothing run yet is an empty history, not an error (a mistyped --traces still is one)
        if args.json:
            print("[]")
        else:
            out.print(Text("no traces yet: 'podium run \"your question\"' stores one"))
        return 0
    store = _existing_traces(args.traces, args.database_url)
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
        print_record(record, True, out)
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
    shadow_rows = 0
    if not result.dry_run:
        try:
            shadow_rows = _purge_shadow(args.shadow_store, result.request_ids, selection["before"], args.database_url)
        except ConfigError as exc:  # the traces are gone already: say so, then what is left to do
            raise ConfigError(
                f"purged {len(result.request_ids)} request(s) from the traces, but not their shadow copies: {exc}; "
                "run the same purge again once the shadow store can be read"
            ) from None
    if args.json:
        print(json.dumps(dataclasses.asdict(result) | {"shadow_rows": shadow_rows}, indent=2))
        return 0
    if result.dry_run:
        out.print(f"would purge {count} request(s) (dry run, nothing deleted)")
        for request_id in result.request_ids:
            out.print(f"  {request_id}")
        return 0
    out.print(
        f"purged {len(result.request_ids)} request(s); database {result.bytes_before:,} → {result.bytes_after:,} bytes"
    )
    if shadow_rows:
        out.print(f"also removed {shadow_rows} shadow record(s) from the shadow store")
    if result.request_ids and not result.log_truncated:
        err.print("[yellow]another process reads the file: its write-ahead log is emptied at its next checkpoint[/]")
    return 0


def _purge_shadow(path: Path | None, request_ids: Sequence[str], before: str | None, url: str | None = None) -> int:
    """Purge the shadow store's copies of what a trace purge removed (the shadow store keeps
    the question and both answers of each shadow run): rows of those requests, and with
    ``--before`` every older row. The shared store (``$PODIUM_DATABASE_URL``) is purged when it
    is set; the default file only if it exists."""
    from podium.serve.options import default_shadow_path
    from podium.store.shadow import purge_shadow_copies, shadow_location

    shadow = shadow_location(path, default_shadow_path(), url=url)
    if path is not None and isinstance(shadow, Path) and not shadow.is_file():
        raise ConfigError(f"no shadow store at {path}")
    return purge_shadow_copies(shadow, request_ids, before=before)


def _cmd_dataflow(args: argparse.Namespace, out: Console) -> int:
    from podium._render import render_register
    from podium.dataflow import build_register
    from podium.trace.query import parse_utc

    since = parse_utc(args.since, flag="--since") if args.since else "1970-01-01T00:00:00.000Z"
    until = parse_utc(args.until or datetime.now(UTC).isoformat(), flag="--until", end_of_day=True)
    register = build_register(_existing_traces(args.traces, args.database_url), since, until)
    if args.json:
        print(json.dumps(register.to_json(), indent=2, ensure_ascii=False))
    elif args.md:
        print(register.to_markdown(), end="")
    else:
        render_register(out, register)
    return 0


def _no_history(path: Path | None, url: str | None) -> bool:
    """Whether the default trace file is to be read and does not exist yet."""
    from podium.trace import shared_trace_url

    return path is None and shared_trace_url(url) is None and not default_trace_path().exists()


def _existing_traces(path: Path | None, url: str | None = None) -> TraceBackend:
    """The trace store to read: ``--traces FILE``, the shared PostgreSQL store when ``url``
    (``--database-url``) or ``$PODIUM_DATABASE_URL`` names one, else the default file. Raises
    ConfigError when the file does not exist (reading never creates one)."""
    from podium.trace import shared_trace_url

    if path is not None or shared_trace_url(url) is None:
        path = path or default_trace_path()
        if not Path(path).exists():
            raise ConfigError(f"no trace database at {path}; run 'podium run' first or pass --traces")
    return open_traces(path, url=url)
