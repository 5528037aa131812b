"""The command line's numbers: every integer option of every ``podium`` command is read by
:class:`WholeNumber` with its range, and the request limits (seconds, USD) by
:class:`PositiveNumber`, so a huge, negative, zero, infinite or malformed value is one line
naming the option and its range and exit status 2 (a :class:`~podium.errors.ConfigError`, as any
bad input) — never a traceback further on (a huge ``--limit`` once overflowed SQLite's integer),
nor a message in terms of an internal field.

    parser.add_argument("--limit", action=WholeNumber, low=1, high=10**9, default=20)
    parser.add_argument("--deadline", action=PositiveNumber, metavar="SECONDS")
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Sequence
from typing import Any

from podium.errors import ConfigError

__all__ = [
    "AUTO_CLUSTERS",
    "DECIMAL_HINT",
    "MANY",
    "SEED",
    "BoundedNumber",
    "ClusterCount",
    "Parser",
    "PositiveNumber",
    "WholeNumber",
    "plain_number",
    "positive_number",
    "whole_number",
]

_DIGITS = re.compile(r"[+-]?[0-9]{1,40}")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
"""Plain decimal notation, ASCII only: a sign, digits with at most one point, an exponent
(``30``, ``2.5``, ``.5``, ``1e3``). Python's ``float`` also takes ``1_0``, ``٣`` (any script's
digits), ``inf`` and ``nan``; none of them is a number a person means on a command line."""
DECIMAL_HINT = "plain decimal notation: ASCII digits, one point, an optional exponent, e.g. 30, 2.5, 1e3"


def plain_number(text: str) -> float | None:
    """``text`` (surrounding ASCII spaces aside) as a number in plain decimal notation
    (:data:`_DECIMAL`), or None when it is written any other way. It may be infinite
    (``1e400``): the caller checks the range."""
    value = text.strip(" \t\r\n")
    return float(value) if _DECIMAL.fullmatch(value) else None


SEED = (0, 2**32 - 1)
"""The range of a ``--seed`` (what every random generator podium seeds accepts)."""

MANY = 10**9
"""The upper end of a count with no natural limit (tasks, traces, steps): far above any real
use, far below what a database's integer or a loop can take."""


def _shown(text: str) -> str:
    """``text`` as an error message quotes it: at most 24 characters."""
    return text if len(text) <= 24 else text[:21] + "…"


def whole_number(flag: str, text: str, low: int, high: int) -> int:
    """``text`` given for ``flag`` as a whole number from ``low`` to ``high`` (ASCII digits and
    a sign only: not ``1_0``, not ``٣``). Raises ConfigError naming the flag and the range."""
    value = text.strip()
    number = int(value) if _DIGITS.fullmatch(value) else None
    shown = _shown(text)
    span = f"a whole number from {low:,} to {high:,}"
    if number is None:
        raise ConfigError(f"{flag} must be {span}, got {shown!r}")
    if number < low:
        least = "0 or more" if low == 0 else f"at least {low:,}"
        raise ConfigError(f"{flag} must be {least}, got {shown} ({span})")
    if number > high:
        raise ConfigError(f"{flag} must be at most {high:,}, got {shown} ({span})")
    return number


class _Checked(argparse.Action):
    """An argparse action that reads its value with :meth:`read` (a ConfigError naming the flag
    when it is refused)."""

    def read(self, flag: str, text: str) -> Any:
        raise NotImplementedError

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        flag = option_string or "/".join(self.option_strings) or self.dest
        setattr(namespace, self.dest, self.read(flag, str(values)))


class WholeNumber(_Checked):
    """An argparse action for an integer option: ``low`` and ``high`` (inclusive) are its range
    (see the module doc). The default is taken as given."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, low: int, high: int, **kwargs: Any) -> None:
        if low > high:
            raise ValueError(f"empty range {low}..{high}")
        self.low, self.high = low, high
        super().__init__(option_strings, dest, **kwargs)

    def read(self, flag: str, text: str) -> int:
        return whole_number(flag, text, self.low, self.high)


def positive_number(flag: str, text: str) -> float:
    """``text`` given for ``flag`` as a finite number above 0 in plain decimal notation
    (:func:`plain_number`). Raises ConfigError naming the flag."""
    shown = _shown(text)
    number = plain_number(text)
    if number is None:
        raise ConfigError(f"{flag} must be a number above 0 in {DECIMAL_HINT}; got {shown!r}")
    if not math.isfinite(number) or number <= 0:
        raise ConfigError(f"{flag} must be a number above 0 (and finite), got {shown!r}")
    return number


class PositiveNumber(_Checked):
    """An argparse action for a limit in seconds or USD: a finite number above 0 (see the module doc)."""

    def read(self, flag: str, text: str) -> float:
        return positive_number(flag, text)


class BoundedNumber(_Checked):
    """An argparse action for a weight or a margin (λ, μ, a quality margin): a finite number in
    plain decimal notation from ``low`` to ``high`` (inclusive; default 0 … no upper end).
    ``nan``, ``inf`` and a negative λ would make every reward meaningless, silently."""

    def __init__(
        self, option_strings: Sequence[str], dest: str, *, low: float = 0.0, high: float = math.inf, **kwargs: Any
    ) -> None:
        self.low, self.high = low, high
        super().__init__(option_strings, dest, **kwargs)

    def read(self, flag: str, text: str) -> float:
        shown = _shown(text)
        number = plain_number(text)
        span = f"from {self.low:g} to {self.high:g}" if math.isfinite(self.high) else f"{self.low:g} or more"
        if number is None:
            raise ConfigError(f"{flag} must be a number {span} in {DECIMAL_HINT}; got {shown!r}")
        if not (math.isfinite(number) and self.low <= number <= self.high):
            raise ConfigError(f"{flag} must be a finite number {span}, got {shown!r}")
        return number


AUTO_CLUSTERS = -1
"""What :class:`ClusterCount` reads ``auto`` as (the plan trainer's ``AUTO``)."""


class ClusterCount(_Checked):
    """An argparse action for ``--clusters``: a whole number ≥ 0, or ``auto`` (read as
    :data:`AUTO_CLUSTERS`)."""

    def read(self, flag: str, text: str) -> int:
        if text.strip().lower() == "auto":
            return AUTO_CLUSTERS
        if not _DIGITS.fullmatch(text.strip()) or int(text) < 0:
            raise ConfigError(f"{flag} {text!r} is not a cluster count: give a whole number ≥ 0, or auto")
        return whole_number(flag, text, 0, 100_000)


class Parser(argparse.ArgumentParser):
    """podium's argument parser (its subcommands' parsers are of the same class). An error about
    one option or word — a wrong value (``--preset gpu``), a missing value, an unknown option
    (with the closest one named, see podium.cli), an unknown command (with the closest one) — is
    one line naming it and a pointer to ``--help``: the line already says what was wrong, and a
    command with thirty options would bury it under a usage block of twenty lines. A missing
    required argument still shows the command's usage, which is what answers it. Exit status 2."""

    def error(self, message: str) -> Any:  # argparse's signature says NoReturn; it exits
        invalid = _INVALID_CHOICE.match(message)
        sub = next((a for a in self._actions if isinstance(a.choices, dict)), None)  # the subcommands
        if invalid and sub is not None and invalid["name"] in (sub.metavar, sub.dest):
            import difflib  # only for a mistyped command: ~4 ms of every start-up otherwise

            close = difflib.get_close_matches(invalid["value"], list(sub.choices or ()), n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            self.exit(2, f"{self.prog}: error: unknown command '{invalid['value']}'.{hint}\n"
                         f"(`{self.prog} --help` lists the commands)\n")  # fmt: skip
        if message.startswith(("argument ", "unrecognized arguments")):
            self.exit(2, f"{self.prog}: error: {message}\n(`{self.prog} --help` lists the options)\n")
        super().error(message)


_INVALID_CHOICE = re.compile(r"argument (?P<name>[^:]+): invalid choice: '(?P<value>[^']*)'")
