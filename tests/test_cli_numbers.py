"""Every integer option of every ``podium`` command is read by one bounded parser
(podium._args.WholeNumber): a huge, negative, zero or malformed value is exit 2 with one line
naming the option and its range, never a traceback (a huge ``trace list --limit`` overflowed
SQLite's integer: OverflowError, exit 1)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from podium._args import WholeNumber
from podium.cli import _parser, cli

SRC = Path(__file__).parent.parent / "src" / "podium"


def options(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.Action]]:
    """(command words, action) of every option of ``parser`` and its subcommands."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from options(sub, (*path, name))
        elif action.option_strings:
            yield path, action


ALL = list(options(_parser(every=True)))
NUMBERS = [(path, action) for path, action in ALL if isinstance(action, WholeNumber)]


def test_no_integer_option_is_parsed_by_plain_int() -> None:
    assert len(NUMBERS) >= 30  # run, trace, serve, ui, shadow, train, eval, bank, tasks, drift …
    assert not [(p, a.option_strings) for p, a in ALL if a.type is int]
    written = [str(f.relative_to(SRC)) for f in SRC.rglob("*.py") if re.search(r"type\s*=\s*int\b", f.read_text())]
    assert written == []  # nor anywhere else (a parser built outside podium.cli, e.g. fake_upstream)


@pytest.mark.parametrize(("path", "action"), NUMBERS, ids=[" ".join((*p, a.option_strings[-1])) for p, a in NUMBERS])
def test_every_integer_option_refuses_values_out_of_range_with_one_line(
    path: tuple[str, ...], action: WholeNumber, capsys: pytest.CaptureFixture[str]
) -> None:
    flag = action.option_strings[-1]
    for value in ("99999999999999999999999", str(action.high + 1), str(action.low - 1), "-5", "1e3", "٣", "", "4.0"):
        if value.lstrip("-").isdigit() and action.low <= int(value) <= action.high:
            continue
        assert cli([*path, flag, value]) == 2, value
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and flag in err, (value, err)
        assert f"{action.low:,}" in err and f"{action.high:,}" in err, err  # the range


def test_a_huge_trace_list_limit_is_exit_2_and_the_largest_works(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from podium.trace.store import TraceStore

    db = tmp_path / "traces.sqlite3"
    TraceStore(db).close()
    assert cli(["trace", "list", "--limit", "99999999999999999999999", "--traces", str(db)]) == 2
    err = capsys.readouterr().err
    assert "--limit must be at most 1,000,000,000" in err and err.count("\n") == 1
    assert cli(["trace", "list", "--limit", "1000000000", "--traces", str(db), "--json"]) == 0
    assert cli(["trace", "search", "x", "--limit", "-3", "--traces", str(db)]) == 2
    assert "--limit must be at least 1, got -3" in capsys.readouterr().err


def test_a_value_in_range_is_read(capsys: pytest.CaptureFixture[str]) -> None:
    parser = _parser("trace")
    assert parser.parse_args(["trace", "list", "--limit", " 7 "]).limit == 7
    assert parser.parse_args(["trace", "list"]).limit == 20  # the default as given
