"""Start-up cost of the CLI (issue 20): ``podium --help`` and ``podium trace list`` load only what
they use. Checked by what a fresh interpreter has imported, not by timing (bench/startup.py
times it): pydantic, asyncio, numpy and the orchestrator are what made ``--help`` take seconds.

The lazy command table must say what the commands' own modules define, so ``podium --help``
lists the same commands, with the same help, as the full parser."""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
from pathlib import Path

import podium
from podium.cli import _SUBCOMMANDS, _parser
from podium.trace.store import TraceStore
from tests.test_trace_writer import numbered

HEAVY = ("pydantic", "asyncio", "numpy", "podium.pool", "podium.orchestrator", "podium.budget", "podium.conductor")


def imported_after(argv: list[str], home: Path) -> set[str]:
    """The modules a fresh interpreter holds after running ``podium ARGV``."""
    script = f"""
import json, sys
from podium.cli import cli
try:
    cli({argv!r})
except SystemExit:
    pass
sys.stderr.write(json.dumps(sorted(sys.modules)))
"""
    env = {"PODIUM_HOME": str(home), "PATH": "/usr/bin:/bin", "HOME": str(home)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


def loaded(modules: set[str], prefix: str) -> bool:
    return any(m == prefix or m.startswith(prefix + ".") for m in modules)


def test_help_loads_no_library_module(tmp_path: Path) -> None:
    modules = imported_after(["--help"], tmp_path)
    assert not [h for h in (*HEAVY, "rich", "sqlite3", "podium.trace.store") if loaded(modules, h)]
    assert {m for m in modules if m.startswith("podium")} == {
        "podium", "podium._args", "podium.cli", "podium.errors"
    }  # fmt: skip


def test_trace_list_loads_the_store_and_rich_but_not_the_orchestrator(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "traces.sqlite3")
    store.write(numbered(1))
    store.close()
    modules = imported_after(["trace", "list"], tmp_path)
    assert "podium.trace.store" in modules and loaded(modules, "rich")  # it did list the trace
    assert not [h for h in HEAVY if loaded(modules, h)]


def test_import_podium_is_light_and_every_public_name_resolves() -> None:
    script = "import sys, podium; print(sorted(m for m in sys.modules if m.startswith(('podium', 'pydantic'))))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.strip() == "['podium']"
    assert set(podium._LAZY) | {"__version__"} == set(podium.__all__)
    for name, module in podium._LAZY.items():
        assert getattr(podium, name) is getattr(importlib.import_module(module), name), name


def commands(parser: argparse.ArgumentParser) -> dict[str, str | None]:
    (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {a.dest: a.help for a in sub._choices_actions}


def test_the_lazy_table_matches_what_each_module_defines() -> None:
    for module in dict.fromkeys(m for m, _ in _SUBCOMMANDS.values()):
        scratch = argparse.ArgumentParser()
        importlib.import_module(module).add_parsers(scratch.add_subparsers())
        table = {name: help_text for name, (m, help_text) in _SUBCOMMANDS.items() if m == module}
        assert commands(scratch) == table, module
    # podium --help lists what the full parser lists, in the same order, with the same help
    assert list(commands(_parser()).items()) == list(commands(_parser(every=True)).items())
    assert _parser().format_help() == _parser(every=True).format_help()


def test_each_command_still_parses_its_own_options() -> None:
    args = _parser("serve").parse_args(["serve", "--port", "9000"])
    assert args.command == "serve" and args.port == 9000
    args = _parser("trace").parse_args(["trace", "search", "eggs", "--field", "answer"])
    assert args.trace_command == "search" and args.field == ["answer"]
