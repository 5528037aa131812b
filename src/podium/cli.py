"""The ``podium`` command line. Thin: parse arguments, call the library, print.

``cli(argv) -> int`` is callable from tests. Exit codes: 0 answered (by the workflow or the
fallback pipeline), 1 the request ended without an answer, 2 bad input or configuration
(the message says what to fix), 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import io
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from podium import __version__
from podium._args import Parser, PositiveNumber, WholeNumber
from podium.errors import ConfigError, PodiumError
from podium.trace import default_trace_path, open_traces

if TYPE_CHECKING:  # imported where a command needs them, so 'podium --help' starts in a blink
    from rich.console import Console


__all__ = ["cli", "main"]

_SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "trace": ("podium.trace.cli", "search, show, export and purge stored traces"),
    "dataflow": ("podium.trace.cli", "data-flow register: which third parties received which data (from traces)"),
    "models": ("podium.pool_cli", "the embedded local models"),
    "pool": ("podium.pool_cli", "inspect pool files"),
    "eval": ("podium.eval.cli", "evaluate the conductor against baselines on a task set (quality, cost, latency)"),
    "train": (
        "podium.train.cli",
        "train a conductor offline on recorded outcomes (light conductor: CMA-ES, minutes on CPU)",
    ),
    "conductor": ("podium.train.cli", "the registry of trained conductors"),
    "serve": ("podium.serve.cli", "serve the conductor as an OpenAI-compatible API (POST /v1/chat/completions)"),
    "ui": ("podium.serve.cli", "browse stored traces in a web page (the /ui of podium serve, without serving a pool)"),
    "keys": ("podium.serve.cli", "API keys of podium serve (stored hashed, with period budgets)"),
    "kill-switch": (
        "podium.serve.cli",
        "serve the fallback pipeline on every replica now (on), or let each configuration decide (off)",
    ),
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
    "loop": (
        "podium.loop.cli",
        "the weekly procedure as one command: drift, export, labels, record, train, promote",
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
    parser = Parser(
        prog="podium",
        description="A learned LLM orchestrator: a conductor writes a workflow, podium executes it over a worker pool.",
    )
    parser.add_argument("--version", action="version", version=f"podium {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

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

    chosen = {m for name, (m, _) in _SUBCOMMANDS.items() if every or name == command}
    for module in dict.fromkeys(m for m, _ in _SUBCOMMANDS.values()):
        if module in chosen:
            importlib.import_module(module).add_parsers(sub)
    for name, (module, help_text) in _SUBCOMMANDS.items():
        if module not in chosen:
            sub.add_parser(name, help=help_text, add_help=False)  # never parsed: its module is not loaded
    return parser


def _innermost(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.ArgumentParser:
    """The parser of the deepest command word in ``argv`` (``trace search`` → its parser), so an
    unknown option is refused with that command's usage instead of the top-level one."""
    for word in argv:
        commands = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        if commands is not None and word in commands.choices:
            parser = commands.choices[word]
    return parser


def _unrecognized(parser: argparse.ArgumentParser, unknown: Sequence[str]) -> str:
    """argparse's message for ``unknown`` arguments, with the closest option of ``parser`` for a
    mistyped one (``--jsn`` → ``--json``)."""
    import difflib

    options = [o for a in parser._actions for o in a.option_strings]
    message = f"unrecognized arguments: {' '.join(unknown)}"
    for arg in unknown:
        close = difflib.get_close_matches(arg.split("=", 1)[0], options, n=1) if arg.startswith("--") else []
        if close:
            message += f" (did you mean {close[0]}?)"
            break
    return message


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


def _cmd_request(args: argparse.Namespace, out: Console, err: Console) -> int:
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
    orchestrator.config = orchestrator.config.updated(
        resamples=args.resamples, max_steps=args.max_steps, limits=limits, recursion_rounds=args.rounds
    )
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


def cli(argv: Sequence[str] | None = None) -> int:
    """Run the CLI on ``argv``; returns the exit code (never raises for user errors)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = _parser(_command(argv))
    command = _innermost(parser, argv)
    where = f"{command.prog}: error: "  # as argparse's own errors begin: podium trace list: error:
    try:
        args, unknown = parser.parse_known_args(argv)
        if unknown:  # refused by the (sub)command's own parser, a close option named
            command.error(_unrecognized(command, unknown))
    except ConfigError as exc:  # a bad option value (podium._args.WholeNumber): one line, exit 2
        from rich.console import Console
        from rich.text import Text

        Console(stderr=True, soft_wrap=True).print(Text.assemble((where, "red"), str(exc)), highlight=False)
        return 2
    from rich.console import Console
    from rich.text import Text

    from podium._render import output_console

    for stream in (sys.stdout, sys.stderr):  # a terminal that cannot show a character gets '?', not a crash
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="replace")

    # piped output is wide and plain lines are never hard-wrapped; errors never are: commands stay pasteable
    out, err = output_console(), Console(stderr=True, soft_wrap=True)
    try:
        if args.command in ("run", "plan"):
            return _cmd_request(args, out, err)  # the question's own check names it (validate_question)
        for i, value in enumerate(argv):
            if any("\ud800" <= ch <= "\udfff" for ch in value):
                raise ConfigError(
                    f"argument {i + 1} ({value.encode('utf-8', 'replace').decode()!r}) holds bytes that are not UTF-8 "
                    "text; give it as UTF-8"
                )
        module = importlib.import_module(_SUBCOMMANDS[args.command][0])
        code: int = module.run(args, out, err)
        return code
    except ConfigError as exc:
        err.print(Text.assemble((where, "red"), str(exc)), highlight=False)
        return 2
    except PodiumError as exc:
        err.print(Text.assemble((where, "red"), f"{type(exc).__name__}: {exc}"), highlight=False)
        return 1
    except KeyboardInterrupt:
        err.print("interrupted")
        return 130


def main() -> None:
    """Console-script entry point. Output piped into a reader that stops early (``| head``)
    ends the command quietly, as with other Unix tools, instead of with a traceback."""
    from podium.llama_runtime import short_openmp_spin

    short_openmp_spin()  # before anything loads the OpenMP runtime (llama.cpp, torch)
    try:
        code = cli()
        sys.stdout.flush()
    except BrokenPipeError:
        # Python flushes stdout again at exit; point it at /dev/null so that flush cannot fail too
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 141  # 128 + SIGPIPE, what a shell reports for a writer whose reader went away
    else:
        if _command(sys.argv[1:]) in ("run", "plan") and "llama_cpp" in sys.modules:
            from podium.llama_runtime import exit_without_teardown

            exit_without_teardown(code)  # the trace store and exporter are closed: skip freeing the models
    sys.exit(code)
