"""Tolerant parser for conductor output (docs/design.md, "The workflow format").

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

import contextlib
import re
from typing import Any

from podium.errors import PlanParseError
from podium.workflow import Workflow, validate_lists

__all__ = ["MAX_OUTPUT_CHARS", "PLAN_LABEL", "QUOTES", "listed_strings", "parse_workflow", "try_parse_workflow"]

MAX_OUTPUT_CHARS = 100_000
"""Conductor outputs longer than this (characters) are cut to their last part before parsing."""

_MAX_DEPTH = 8
_MAX_ITEMS = 256
_WORK_FACTOR = 4
"""Characters the literal reader may read per field, per character of input (plus a constant):
a field whose occurrences need more is unparseable."""
_DIGITS = frozenset("0123456789")

QUOTES: dict[str, str] = {
    '"': '"',
    "'": "'",
    "\u201c": '\u201d"',  # “…”
    "\u2018": "\u2019",  # ‘…’
    "\u201e": '\u201c\u201d"',  # „…“ (German, Danish)
    "\u201a": "\u2018\u2019",  # ‚…‘
    "\u00ab": "\u00bb",  # «…» (French, Spanish)
    "\u00bb": "\u00ab",  # »…« (Danish, German)
    "\u300c": "\u300d",  # 「…」
    "\u300e": "\u300f",  # 『…』
}
"""Opening quote -> the characters that may close it: the strings of a list. The one table of
quotes, read by the parser and by the LM conductor's injection check
(:func:`listed_strings`)."""

_FIELDS: dict[str, str] = {
    "model_id": r"model[ _-]?ids?(?:[ _-]?list)?|worker[ _-]?ids?",
    "subtasks": r"sub[ _-]?tasks?",
    "access_list": r"access[ _-]?lists?",
}
_MARKS = re.escape("`*" + "".join(QUOTES) + "".join(QUOTES.values()))
"""What may stand around a label (up to three): a quote of :data:`QUOTES` (JSON keys), markdown
emphasis (``**subtasks**:``)."""
_LABEL_TEXT = {name: rf"[{_MARKS}]{{0,3}}\b(?:{alts})\b[{_MARKS}]{{0,3}}[ \t]*[:=]" for name, alts in _FIELDS.items()}
_LABEL = {name: re.compile(rf"{label}[ \t\r\n]*\[", re.IGNORECASE) for name, label in _LABEL_TEXT.items()}
PLAN_LABEL = re.compile("|".join(_LABEL_TEXT.values()), re.IGNORECASE)
"""A label of any of the three lists, as the parser reads it (``model_id =``, ``"subtasks":``,
``**access list**:``), whatever follows it."""
# A YAML or markdown list under a label: ``subtasks:`` (also ``**subtasks:**`` or a heading
# ``## Subtasks``), then, after any blank lines, lines that start with a bullet (``-``, ``*``,
# ``+``, ``•``, ``‣``, ``◦``, ``–``) or a number or letter (``1.``, ``1)``, ``(1)``, ``a)``), blank
# lines between items allowed (a loose markdown list). The parser does not read it as a plan; a
# model does (:func:`listed_strings`).
_BULLET = r"(?:[-*+\u2022\u2023\u25e6\u2043\u2013]|\(?\d{1,3}[.)]|\(?[a-zA-Z][.)])"
_BLANK_LINES = r"(?:[ \t]*\r?\n)*"
_YAML_LABEL = {
    name: re.compile(
        rf"(?:{label}|(?m:^)[ \t]{{0,3}}#{{1,6}}[ \t]+[*_]{{0,3}}\b(?:{_FIELDS[name]})\b[*_]{{0,3}}[ \t]*:?)"
        rf"[*_]{{0,3}}[ \t]*\r?\n{_BLANK_LINES}(?=[ \t]*{_BULLET}[ \t])",
        re.IGNORECASE,
    )
    for name, label in _LABEL_TEXT.items()
}
_YAML_ITEM = re.compile(rf"{_BLANK_LINES}[ \t]*{_BULLET}[ \t]+([^\n]*)(?:\n|$)")
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
            if value is not None:
                values[name] = value
                break
            if budget.spent():
                break
        if name not in values:
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


def listed_strings(text: str, field: str = "subtasks") -> list[str]:
    """Every string of every ``field`` list written in ``text``, in order.

    What the parser reads as such a list — its label pattern, quote table (:data:`QUOTES`) and
    literal reader — at every occurrence rather than only the last, keeping the strings read
    before a list breaks; and the items of a YAML or markdown list under the label
    (``subtasks:`` or ``## Subtasks``, then ``- …``, ``+ …``, ``* …``, ``1. …`` or ``1) …`` lines,
    blank lines before and between them allowed), which a model reads as a plan though the
    parser does not. The LM conductor's injection check reads the question with it, so any
    plan the parser would take from a conductor's output is recognised when the question holds
    it. Each occurrence is read up to where the next label starts, so the work is linear in
    ``len(text)`` however many labels, broken lists or unclosed quotes the text holds; a text
    with markdown blockquote markers (``> ``) is read a second time without them.
    """
    found = _listed(text, field)
    unquoted = _BLOCKQUOTE.sub("", text)  # a markdown blockquote ("> subtasks:" / "> - …") read as its text
    if unquoted != text:
        found += [s for s in _listed(unquoted, field) if s not in found]
    return found


_BLOCKQUOTE = re.compile(r"(?m)^[ \t]{0,3}(?:>[ \t]?)+")


def _listed(text: str, field: str) -> list[str]:
    """:func:`listed_strings` on ``text`` as written."""
    labels = sorted(
        [(m.start(), m.end() - 1, False) for m in _LABEL[field].finditer(text)]
        + [(m.start(), m.end(), True) for m in _YAML_LABEL[field].finditer(text)]
    )
    found: list[str] = []
    for index, (label, start, yaml) in enumerate(labels):
        limit = next((later for later, _, _ in labels[index + 1 :] if later > label), len(text))
        if start >= limit:
            continue
        if yaml:
            found += _yaml_items(text, start, limit)
            continue
        reader = _Reader(text, start, _Budget(_WORK_FACTOR * (limit - start) + 64), end=limit, strings=found)
        with contextlib.suppress(_Broken):  # the strings read before a break are kept
            reader.value(0)
    return found


def _yaml_items(text: str, pos: int, limit: int) -> list[str]:
    """The items of the YAML or markdown list at ``text[pos:limit]``: one per line, a quoted
    item without its quotes."""
    items: list[str] = []
    while len(items) < _MAX_ITEMS and (line := _YAML_ITEM.match(text, pos, limit)) is not None:
        item = line.group(1).strip()
        if len(item) > 1 and item[0] in QUOTES and item[-1] in QUOTES[item[0]]:
            item = item[1:-1]
        if item:
            items.append(item)
        pos = line.end()
        if pos == line.start():
            break
    return items


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


def _read_literal(text: str, start: int, budget: _Budget) -> Any:
    """Read the list literal that starts at ``text[start] == '['``; None if it is broken or the
    budget runs out."""
    try:
        return _Reader(text, start, budget).value(0)
    except _Broken:
        return None


class _Broken(Exception):
    pass


class _Reader:
    """Linear recursive-descent reader for Python/JSON-ish literals: lists, strings, ints,
    and bare words (``all``). Depth and item counts are bounded."""

    def __init__(
        self, text: str, pos: int, budget: _Budget, *, end: int | None = None, strings: list[str] | None = None
    ) -> None:
        self.text = text
        self.pos = pos
        self.budget = budget
        self.end = len(text) if end is None else end
        """Where the text ends for this reader (:func:`listed_strings` reads up to the next label)."""
        self.strings = strings
        """Where every string read is also kept, when given (even if the list breaks later)."""

    def _skip_space(self) -> None:
        text, start = self.text, self.pos
        pos = start
        while pos < self.end and text[pos] in " \t\r\n":
            pos += 1
        self.budget.take(pos - start)
        self.pos = pos

    def value(self, depth: int) -> Any:
        self._skip_space()
        if self.pos >= self.end:
            raise _Broken
        ch = self.text[self.pos]
        if ch == "[":
            return self._list(depth)
        if ch in QUOTES:
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
            if self.pos >= self.end:
                raise _Broken
            if self.text[self.pos] == "]":
                self.pos += 1
                return items
            if len(items) >= _MAX_ITEMS:
                raise _Broken
            items.append(self.value(depth + 1))
            self._skip_space()
            if self.pos >= self.end:
                raise _Broken
            ch = self.text[self.pos]
            if ch == ",":
                self.pos += 1
            elif ch != "]":
                raise _Broken

    def _string(self) -> str:
        text = self.text
        closers = QUOTES[text[self.pos]]
        self.pos += 1
        out: list[str] = []
        while self.pos < self.end:
            self.budget.take()
            ch = text[self.pos]
            if ch == "\\" and self.pos + 1 < self.end:
                nxt = text[self.pos + 1]
                if nxt == "u" and _is_hex(text[self.pos + 2 : min(self.pos + 6, self.end)]):
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
                if self.strings is not None:
                    self.strings.append(joined)
                return joined
            if ch == "\n" and closers in ("'", '"'):
                raise _Broken  # a Python/JSON string never spans a raw newline
            out.append(ch)
            self.pos += 1
        raise _Broken

    def _number(self) -> int | float:
        start = self.pos
        self.pos += 1
        while self.pos < self.end and (self.text[self.pos] in _DIGITS or self.text[self.pos] == "."):
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
        while self.pos < self.end and (self.text[self.pos].isalnum() or self.text[self.pos] in "_ "):
            self.pos += 1
        self.budget.take(self.pos - start)
        return self.text[start : self.pos].strip()
