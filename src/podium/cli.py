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

from podium import __version__
from podium._args import Parser
from podium.errors import ConfigError, PodiumError

__all__ = ["cli", "main"]

_SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "run": ("podium.request_cli", "plan a workflow for a question and execute it; print the answer"),
    "plan": ("podium.request_cli", "write the workflow for a question without executing it"),
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
        word = arg.split("=", 1)[0]
        if not word.startswith("--"):
            continue
        # an abbreviation (refused where options are remembered) names what it abbreviates first
        close = [o for o in options if o.startswith(word)][:3] or difflib.get_close_matches(word, options, n=1)
        if close:
            message += f" (did you mean {' or '.join(close)}?)"
            break
    return message


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
        for i, value in enumerate(argv):
            # a question's own check names it (podium.orchestrator.validate_question)
            if args.command not in ("run", "plan") and any("\ud800" <= ch <= "\udfff" for ch in value):
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
