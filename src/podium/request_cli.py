"""``podium run`` and ``podium plan``: one question through the orchestrator, from the command
line. Builds the pool's orchestrator, warms its models and PII detection, runs the request with a
status line on stderr, stores its trace and prints the record (``--json``: the whole record).
The top-level :mod:`podium.cli` dispatches here, as to every other command's module.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from podium._args import PositiveNumber, WholeNumber
from podium.errors import ConfigError
from podium.trace import default_trace_path, open_traces

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["add_parsers", "run"]


def add_parsers(sub: Any) -> None:
    """Add ``run`` and ``plan`` to ``sub`` (an argparse subparsers action)."""

    def request_cmd(name: str, help_text: str) -> None:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("question", help="the question; '-' reads it from standard input")
        # podium.pool.packaged_pools' names, read here without importing pydantic (podium --help stays light)
        presets = ", ".join(sorted(f.stem for f in (Path(__file__).parent / "pools").glob("*.toml")))
        p.add_argument("--pool", help=f"pool file (TOML) or preset name ({presets}); default: local, the embedded pool")
        p.add_argument("--json", action="store_true", help="print the whole record as JSON")
        p.add_argument("--traces", type=Path, help=f"trace database (default: {default_trace_path()})")
        p.add_argument("--no-trace", action="store_true", help="do not store a trace")
        p.add_argument(
            "--tag",
            action="append",
            default=[],
            metavar="TAG",
            help="store TAG with the trace (repeatable), as 'podium trace list --tag', 'tasks export' and 'drift' "
            "filter by it",
        )
        p.add_argument(
            "--use-case", metavar="NAME", help="the tag use-case:NAME, the use case 'tasks export' and 'drift' slice by"
        )
        p.add_argument(
            "--max-steps", action=WholeNumber, low=1, high=20, help="workflow step limit (default: the pool file's)"
        )
        p.add_argument(
            "--resamples",
            action=WholeNumber,
            low=0,
            high=20,
            help="extra conductor attempts after an invalid plan (default: the pool file's, 2 unless it sets one)",
        )
        p.add_argument(
            "--deadline", action=PositiveNumber, metavar="SECONDS", help="request latency budget (default: pool's)"
        )
        p.add_argument("--cost-cap", action=PositiveNumber, metavar="USD", help="request cost cap (default: pool's)")
        p.add_argument(
            "--rounds",
            action=WholeNumber,
            low=0,
            high=5,
            metavar="N",
            help="review rounds of the conductor after the first workflow, 0..5 (default: the pool file's; a "
            "plan conductor's cascade always gets the round its escalation needs, which costs nothing when it "
            "keeps the answer)",
        )

    request_cmd("run", "plan a workflow for a question and execute it; print the answer")
    request_cmd("plan", "write the workflow for a question without executing it")


def _read_question(arg: str) -> str:
    if arg != "-":
        return arg
    if sys.stdin is None or sys.stdin.closed:
        raise ConfigError(
            "the question is '-' (read standard input), but standard input is closed: pipe the question in"
        )
    try:
        return sys.stdin.read()
    except UnicodeDecodeError:
        raise ConfigError("standard input is not UTF-8 text") from None
    except OSError as exc:
        raise ConfigError(f"cannot read the question from standard input ({exc.strerror or exc})") from None


def _progress(console: Console) -> Any:
    """A status line on stderr that follows the orchestrator's events."""
    from rich.text import Text

    status = console.status("podium: starting", spinner="dots")

    def on_event(event: str, data: dict[str, Any]) -> None:
        if event == "plan_start":
            what = "reviewing its answer" if data.get("round") else "writing the workflow"
            status.update(f"conductor: {what} (round {data.get('round', 0)}, attempt {data['attempt']})")
        elif event == "plan_end" and not data["ok"]:
            where = f"round {data['round']} · " if data.get("round") else ""
            console.print(
                Text(f"conductor {where}attempt {data['attempt']}: invalid plan ({data['error']})", style="yellow")
            )
        elif event == "step_start":
            status.update(f"step {data['index']}: Model {data['step'].worker} working")
        elif event == "fallback":
            status.update(f"fallback pipeline ({data['reason']})")

    return status, on_event


def _request_tags(tags: list[str], use_case: str | None) -> tuple[str, ...]:
    """``--tag`` values and ``--use-case`` as the trace's tags, in order, each once. Raises
    ConfigError for an empty one or one with a control character."""
    given = [*tags, *([f"use-case:{use_case}"] if use_case is not None else [])]
    for tag in given:
        if not tag.strip() or tag == "use-case:" or any(ord(c) < 32 or ord(c) == 127 for c in tag):
            flag = "--use-case" if tag.startswith("use-case:") and use_case is not None else "--tag"
            raise ConfigError(f"{flag} {tag!r}: a tag is a non-empty line of text, e.g. --tag team:billing")
    return tuple(dict.fromkeys(t.strip() for t in given))


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Run ``podium run`` or ``podium plan`` (``args.command``): exit code 0 answered (or
    planned), 1 the request ended without an answer. Raises ConfigError for bad input."""
    import asyncio

    from rich.text import Text

    from podium._render import print_record
    from podium.builder import build_orchestrator, build_telemetry, pool_limits
    from podium.orchestrator import validate_question
    from podium.pool import load_pool
    from podium.workers.offload import main_thread_wanted, run_on_loop_thread

    tags = _request_tags(args.tag, args.use_case)
    config = load_pool(args.pool)
    question = validate_question(_read_question(args.question), max_chars=config.max_question_chars)
    config.require_api_keys()
    limits = pool_limits(config).overridden(deadline_s=args.deadline, cost_cap_usd=args.cost_cap)
    traces = None if args.no_trace else open_traces(args.traces, retention_days=config.traces.retention_days)
    telemetry = build_telemetry(config)
    orchestrator = build_orchestrator(config, traces=traces, exporter=telemetry)
    per_request = orchestrator.config.updated(
        resamples=args.resamples, max_steps=args.max_steps, limits=limits, recursion_rounds=args.rounds
    )
    orchestrator = dataclasses.replace(orchestrator, config=per_request)
    from podium.builder import warm_models, warm_pii

    warm_models([orchestrator])  # in the background: overlaps what follows
    warm_pii([orchestrator], lambda: err.status("loading PII detection (Presidio), once per process"))
    status, on_event = _progress(err)
    try:
        with status:
            if main_thread_wanted():  # the model's computation on the main thread (podium.workers.offload)
                record = run_on_loop_thread(
                    lambda: orchestrator.run(question, mode=args.command, on_event=on_event, tags=tags)
                )
            else:
                record = asyncio.run(orchestrator.run(question, mode=args.command, on_event=on_event, tags=tags))
    finally:
        if traces is not None:  # store the queued trace writes before exit; losses are reported
            traces.close()
            if lost := traces.stats().lost:
                err.print(Text(f"{lost} trace write(s) could not be stored (logged above)", style="yellow"))
        if telemetry is not None:  # flush the spans; losses are reported, never silent
            sent = telemetry.shutdown(report=False)
            if sent.spans_lost or sent.spans_unconfirmed:  # a timed-out export is reported too
                err.print(Text(sent.summary(), style="yellow"), highlight=False)
    print_record(record, args.json, out, stored=traces is not None)
    return 1 if record.status == "error" else 0
