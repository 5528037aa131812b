"""Tolerant parser for conductor output (DESIGN.md §2).

Reads what language models really write — ``model_id = [...]`` or ``Model IDs: [...]``, JSON
objects, code fences, smart quotes, brackets and apostrophes inside strings, ``<think>`` blocks,
multi-line lists with trailing commas — and then validates strictly with
:func:`podium.workflow.validate_lists`.

It takes the **last** parseable occurrence of each list, so lists quoted earlier (from the
question, from a ``<think>`` block, from a draft) never win over the conductor's final ones.

Hostile text cannot hang or crash it, by construction: input is capped; the label patterns
cannot backtrack past their own whitespace; ``<think>`` blocks are removed by one forward scan;
the literal reader is a small recursive-descent parser with a depth limit that shares one
**work budget** per field (:data:`_WORK_FACTOR` characters per character of input), so however
many broken lists an output holds, parsing it reads each character a bounded number of times
— linear time (a property test checks it). Only ASCII digits are numbers (``²`` and ``①`` are
not), and every failure, for any input, surfaces as :class:`~podium.errors.PlanParseError`.
"""

from __future__ import annotations

import re
from typing import Any

from podium.errors import PlanParseError
from podium.workflow import Workflow, validate_lists

__all__ = ["MAX_OUTPUT_CHARS", "parse_workflow", "try_parse_workflow"]

MAX_OUTPUT_CHARS = 100_000
"""Conductor outputs longer than this (characters) are cut to their last part before parsing."""

_MAX_DEPTH = 8
_MAX_ITEMS = 256
_WORK_FACTOR = 4
"""Characters the literal reader may read per field, per character of input (plus a constant):
a field whose occurrences need more is unparseable."""
_DIGITS = frozenset("0123456789")

_FIELDS: dict[str, str] = {
    "model_id": r"model[ _-]?ids?(?:[ _-]?list)?|worker[ _-]?ids?",
    "subtasks": r"sub[ _-]?tasks?",
    "access_list": r"access[ _-]?lists?",
}
_LABEL = {
    name: re.compile(rf"[\"'`*]?\b(?:{alts})\b[\"'`*]?[ \t]*[:=][ \t\r\n]*\[", re.IGNORECASE)
    for name, alts in _FIELDS.items()
}

# Opening quote -> the characters that may close it.
_QUOTES = {'"': '"', "'": "'", "\u201c": '\u201d"', "\u2018": "\u2019", "\u201e": '\u201c\u201d"'}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "/": "/", '"': '"', "'": "'", "\\": "\\"}
_HEX = frozenset("0123456789abcdefABCDEF")


def _is_hex(text: str) -> bool:
    return len(text) == 4 and all(c in _HEX for c in text)


def parse_workflow(
    text: str,
    *,
    pool_size: int,
    max_steps: int = 5,
    allow_empty: bool = False,
) -> Workflow:
    """Parse and validate a conductor's output.

    Args:
        text: the conductor's raw output (reasoning, then the three lists).
        pool_size: number of workers in the pool; ids must be 0..pool_size-1.
        max_steps: the step limit (paper default 5).
        allow_empty: accept three empty lists (recursion rounds: "keep the answer").

    Returns the validated :class:`Workflow`.

    Raises PlanParseError with ``kind``: ``missing_field`` (a list is absent), ``unparseable``
    (a list is present but broken, e.g. truncated), or a validation kind from
    :func:`validate_lists`.
    """
    if not isinstance(text, str):
        raise PlanParseError("unparseable", f"expected text, got {type(text).__name__}")
    text = text[-MAX_OUTPUT_CHARS:]
    text = _strip_thinking(text)
    values: dict[str, Any] = {}
    broken: list[str] = []
    missing: list[str] = []
    _WORK.clear()
    for name, label in _LABEL.items():
        starts = [m.end() - 1 for m in label.finditer(text)]
        if not starts:
            missing.append(name)
            continue
        budget = _Budget(_WORK_FACTOR * len(text) + 10_000)
        _WORK.append(budget)
        for start in reversed(starts):
            value = _read_literal(text, start, budget)
            if value is not _FAIL:
                values[name] = value
                break
            if budget.spent():
                break
        else:
            broken.append(name)
        if name not in values and name not in broken:
            broken.append(name)
    if broken:
        raise PlanParseError("unparseable", f"could not read {', '.join(broken)} (truncated or malformed)")
    if missing:
        raise PlanParseError("missing_field", f"no {', '.join(missing)} found in the conductor output")
    return validate_lists(
        values["model_id"],
        values["subtasks"],
        values["access_list"],
        pool_size=pool_size,
        max_steps=max_steps,
        allow_empty=allow_empty,
    )


def try_parse_workflow(
    text: str, *, pool_size: int, max_steps: int = 5, allow_empty: bool = False
) -> tuple[Workflow | None, PlanParseError | None]:
    """:func:`parse_workflow` that returns ``(workflow, None)`` or ``(None, error)`` instead of
    raising, for callers that record failed attempts."""
    try:
        return parse_workflow(text, pool_size=pool_size, max_steps=max_steps, allow_empty=allow_empty), None
    except PlanParseError as exc:
        return None, exc


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _strip_thinking(text: str) -> str:
    """Drop ``<think>…</think>`` blocks (case-insensitive) in one forward scan; an unclosed
    ``<think>`` hides everything after it; a stray ``</think>`` hides everything before it."""
    lower = text.translate(_ASCII_LOWER)  # one for one: str.lower() makes "İ" two characters, shifting every index
    last_close = lower.rfind("</think>")
    if last_close != -1 and lower.rfind("<think>", 0, last_close) == -1:
        return text[last_close + len("</think>") :]  # a stray closing tag: the answer follows it
    parts: list[str] = []
    pos = 0
    while (opened := lower.find("<think>", pos)) != -1:
        parts.append(text[pos:opened])
        closed = lower.find("</think>", opened)
        if closed == -1:
            return " ".join(parts)
        pos = closed + len("</think>")
        parts.append(" ")
    parts.append(text[pos:])
    return "".join(parts)


_WORK: list[_Budget] = []
"""The budgets of the last parse in this thread of control (tests read how much was used)."""


class _Budget:
    """Characters the reader may still read (shared by every attempt on one field)."""

    def __init__(self, chars: int) -> None:
        self.limit = chars
        self.left = chars

    def take(self, n: int = 1) -> None:
        if n > self.left:
            self.left = 0
            raise _Broken
        self.left -= n

    def spent(self) -> bool:
        return self.left <= 0


class _Fail:
    pass


_FAIL: Any = _Fail()


def _read_literal(text: str, start: int, budget: _Budget) -> Any:
    """Read the list literal that starts at ``text[start] == '['``; ``_FAIL`` if it is broken
    or the budget runs out."""
    reader = _Reader(text, start, budget)
    try:
        value = reader.value(0)
    except _Broken:
        return _FAIL
    return value


class _Broken(Exception):
    pass


class _Reader:
    """Linear recursive-descent reader for Python/JSON-ish literals: lists, strings, ints,
    and bare words (``all``). Depth and item counts are bounded."""

    def __init__(self, text: str, pos: int, budget: _Budget) -> None:
        self.text = text
        self.pos = pos
        self.budget = budget

    def _skip_space(self) -> None:
        text, start = self.text, self.pos
        pos = start
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        self.budget.take(pos - start)
        self.pos = pos

    def value(self, depth: int) -> Any:
        self._skip_space()
        if self.pos >= len(self.text):
            raise _Broken
        ch = self.text[self.pos]
        if ch == "[":
            return self._list(depth)
        if ch in _QUOTES:
            return self._string()
        if ch == "-" or ch in _DIGITS:
            return self._number()
        if ch.isalpha() or ch == "_":
            return self._word()
        raise _Broken

    def _list(self, depth: int) -> list[Any]:
        if depth >= _MAX_DEPTH:
            raise _Broken
        self.pos += 1  # '['
        self.budget.take()
        items: list[Any] = []
        while True:
            self._skip_space()
            if self.pos >= len(self.text):
                raise _Broken
            if self.text[self.pos] == "]":
                self.pos += 1
                return items
            if len(items) >= _MAX_ITEMS:
                raise _Broken
            items.append(self.value(depth + 1))
            self._skip_space()
            if self.pos >= len(self.text):
                raise _Broken
            ch = self.text[self.pos]
            if ch == ",":
                self.pos += 1
            elif ch != "]":
                raise _Broken

    def _string(self) -> str:
        text = self.text
        closers = _QUOTES[text[self.pos]]
        self.pos += 1
        out: list[str] = []
        while self.pos < len(text):
            self.budget.take()
            ch = text[self.pos]
            if ch == "\\" and self.pos + 1 < len(text):
                nxt = text[self.pos + 1]
                if nxt == "u" and _is_hex(text[self.pos + 2 : self.pos + 6]):
                    out.append(chr(int(text[self.pos + 2 : self.pos + 6], 16)))  # JSON \uXXXX
                    self.pos += 6
                    continue
                out.append(_ESCAPES.get(nxt, "\\" + nxt))
                self.pos += 2
                continue
            if ch in closers:
                self.pos += 1
                # JSON writes characters outside the BMP as surrogate pairs; a lone one is no text
                joined = "".join(out).encode("utf-16", "surrogatepass").decode("utf-16", "replace")
                return joined
            if ch == "\n" and closers in ("'", '"'):
                raise _Broken  # a Python/JSON string never spans a raw newline
            out.append(ch)
            self.pos += 1
        raise _Broken

    def _number(self) -> int | float:
        start = self.pos
        self.pos += 1
        while self.pos < len(self.text) and (self.text[self.pos] in _DIGITS or self.text[self.pos] == "."):
            self.pos += 1
        self.budget.take(self.pos - start)
        token = self.text[start : self.pos]
        try:
            return int(token)
        except ValueError:
            try:
                return float(token)
            except ValueError:
                raise _Broken from None

    def _word(self) -> str:
        start = self.pos
        while self.pos < len(self.text) and (self.text[self.pos].isalnum() or self.text[self.pos] in "_ "):
            self.pos += 1
        self.budget.take(self.pos - start)
        return self.text[start : self.pos].strip()
