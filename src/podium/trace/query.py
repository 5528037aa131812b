"""What ``podium trace search|list|purge`` select and return: request filters, times, FTS5
queries, and the summaries, search hits and purge results the store hands back.

A :class:`TraceFilter` narrows requests by their row (time, status, cost, latency, conductor,
tags, subject) and by the workers their steps ran on; :func:`fts_query` turns plain words into
an FTS5 query that cannot be a syntax error. Times are UTC ISO 8601 strings in the store's own
form (``2026-11-30T14:00:00.000Z``), so comparing strings compares instants.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from typing import Any

from podium.errors import ConfigError
from podium.records import CANCELLED

__all__ = [
    "FIELDS",
    "FILTER_STATUSES",
    "LETTERS",
    "MARK_OFF",
    "MARK_ON",
    "MAX_QUERY_CHARS",
    "MAX_TERMS",
    "STATUSES",
    "PurgeListener",
    "PurgeResult",
    "SearchHit",
    "TraceFilter",
    "TraceSummary",
    "fold",
    "fold_map",
    "fts_query",
    "parse_utc",
    "restore_snippet",
    "search_terms",
    "unmark",
]

STATUSES = ("ok", "fallback", "error", "running")
"""Request statuses in the store; ``running`` is a request in flight or one cut off (a killed
process), which ``podium trace show`` reports as error ``unfinished``."""
FILTER_STATUSES = (*STATUSES, "cancelled")
"""What a filter's ``status`` may be: a stored status, or ``cancelled``, the requests of status
``error`` that were cancelled (a client gone, Ctrl-C, a shutdown: :data:`podium.records.CANCELLED`)."""

FIELDS = ("question", "answer", "reasoning", "subtask", "output", "error")
"""Indexed texts: the question, the answer, each conductor attempt's raw output (its reasoning
and lists), each step's subtask and output, and the request's and steps' error messages."""


def _format(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_utc(text: str, *, flag: str = "time", end_of_day: bool = False) -> str:
    """An ISO 8601 date or datetime as the store's UTC form (``YYYY-MM-DDTHH:MM:SS.mmmZ``).

    A datetime without an offset is taken as UTC; one with an offset is converted. A date alone
    means its midnight (UTC), or with ``end_of_day`` the next midnight, so ``--until
    2026-11-30`` includes that whole day.

    Raises ConfigError naming ``flag`` when ``text`` is neither.
    """
    cleaned = text.strip()
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", cleaned):
            day = date.fromisoformat(cleaned)
            moment = datetime(day.year, day.month, day.day, tzinfo=UTC)
            return _format(moment + timedelta(days=1) if end_of_day else moment)
        moment = datetime.fromisoformat(cleaned)
        return _format(moment if moment.tzinfo else moment.replace(tzinfo=UTC))
    except ValueError:
        raise ConfigError(
            f"{flag} {text!r} is not an ISO 8601 date or datetime; use YYYY-MM-DD or e.g. 2026-11-30T14:00:00Z "
            "(UTC unless it has an offset)"
        ) from None
    except OverflowError:  # 9999-12-31's next midnight, or an offset past year 1 or 9999 in UTC
        raise ConfigError(
            f"{flag} {text!r} is outside the dates the store can hold (years 1 to 9999, in UTC); give a nearer one"
        ) from None


@dataclass(frozen=True)
class TraceFilter:
    """Which requests to keep; every field optional, all given ones must hold.

    Attributes:
        since, until: ``since <= started_at < until``, UTC in the store's form (see
            :func:`parse_utc`).
        worker: a worker name that ran at least one step of the request (fallback included).
        status: ``ok``, ``fallback``, ``error`` or ``running`` (see :data:`STATUSES`), or
            ``cancelled``: the errors that are a cancellation (:data:`FILTER_STATUSES`).
        min_cost_usd, max_cost_usd: total cost (conductor and workers), USD, inclusive.
        min_wall_s, max_wall_s: the request's wall time, seconds, inclusive.
        conductor: the conductor's name as stored (e.g. ``lm:qwen-1.5b``); ``*`` and ``?`` are
            wildcards (``lm:*``), case-sensitive.
        tags: tags the request must all carry.
        subject: the data subject's key, exactly.
        older_than: ``(started_at, id)`` of a listed request: only requests listed after it
            (``started_at`` earlier, or equal with a smaller id) — a page cursor that skips
            nothing when several requests started in the same millisecond.

    Raises ConfigError (from ``__post_init__``) for an unknown status, a negative or inverted
    range.
    """

    since: str | None = None
    until: str | None = None
    worker: str | None = None
    status: str | None = None
    min_cost_usd: float | None = None
    max_cost_usd: float | None = None
    min_wall_s: float | None = None
    max_wall_s: float | None = None
    conductor: str | None = None
    tags: tuple[str, ...] = ()
    subject: str | None = None
    older_than: tuple[str, str] | None = None

    def __post_init__(self) -> None:
        if self.status is not None and self.status not in FILTER_STATUSES:
            raise ConfigError(f"status {self.status!r} is unknown; use one of {', '.join(FILTER_STATUSES)}")
        for what, low, high in (
            ("cost", self.min_cost_usd, self.max_cost_usd),
            ("latency", self.min_wall_s, self.max_wall_s),
        ):
            if any(v is not None and not math.isfinite(v) for v in (low, high)):
                raise ConfigError(f"the {what} bounds must be numbers (got {low} .. {high}); give e.g. 0.01")
            if any(v is not None and v < 0 for v in (low, high)):
                raise ConfigError(f"the {what} bounds must not be negative (got {low} .. {high})")
            if low is not None and high is not None and low > high:
                raise ConfigError(f"min {what} {low:g} is above max {what} {high:g}; swap them")
        if self.since and self.until and self.since >= self.until:
            raise ConfigError(f"since ({self.since}) is not before until ({self.until}); nothing could match")

    def sql(self) -> tuple[str, list[Any]]:
        """A WHERE condition over the ``requests`` table aliased ``r``, and its parameters
        (never interpolated: every value is a parameter)."""
        parts: list[str] = []
        params: list[Any] = []

        def add(condition: str, *values: Any) -> None:
            parts.append(condition)
            params.extend(values)

        if self.since is not None:
            add("r.started_at >= ?", self.since)
        if self.until is not None:
            add("r.started_at < ?", self.until)
        if self.status == "cancelled":
            add("r.status = 'error' AND r.error LIKE ?", CANCELLED.split(":")[0] + ":%")
        elif self.status is not None:
            add("r.status = ?", self.status)
        if self.min_cost_usd is not None:
            add("r.total_cost_usd >= ?", self.min_cost_usd)
        if self.max_cost_usd is not None:
            add("r.total_cost_usd <= ?", self.max_cost_usd)
        if self.min_wall_s is not None:
            add("r.wall_time_s >= ?", self.min_wall_s)
        if self.max_wall_s is not None:
            add("r.wall_time_s <= ?", self.max_wall_s)
        if self.conductor is not None:
            add("r.conductor GLOB ?", self.conductor.replace("[", "[[]"))
        if self.subject is not None:
            add("r.subject = ?", self.subject)
        if self.older_than is not None:
            add("(r.started_at, r.id) < (?, ?)", *self.older_than)
        if self.worker is not None:
            add("EXISTS (SELECT 1 FROM steps s WHERE s.request_id = r.id AND s.worker = ?)", self.worker)
        for tag in self.tags:
            add("EXISTS (SELECT 1 FROM json_each(r.tags) WHERE json_each.value = ?)", tag)
        return (" AND ".join(parts) or "1"), params


LETTERS = {
    "ø": "o", "Ø": "O", "æ": "ae", "Æ": "AE", "œ": "oe", "Œ": "OE", "ß": "ss", "ẞ": "SS",
    "ð": "d", "Ð": "D", "þ": "th", "Þ": "TH", "ł": "l", "Ł": "L", "đ": "d", "Đ": "D",
    "ħ": "h", "Ħ": "H", "ı": "i", "ŧ": "t", "Ŧ": "T", "ŀ": "l", "Ŀ": "L",
}  # fmt: skip
"""Letters Unicode does not decompose into a base letter and accents, and what search reads
them as (Danish/Norwegian ø, æ; French œ; German ß; Icelandic ð, þ; Polish ł; Croatian đ;
Maltese ħ; Turkish dotless ı; Sami ŧ; Catalan ŀ)."""


@lru_cache(maxsize=4096)
def _fold_char(char: str) -> str:
    special = LETTERS.get(char)
    if special is not None:
        return special
    return "".join(c for c in unicodedata.normalize("NFKD", char) if not unicodedata.combining(c))


def fold_map(text: str) -> tuple[str, tuple[int, ...]]:
    """``text`` as the search index reads it (see :func:`fold`), and for each character of the
    result the index of the character of ``text`` it came from."""
    if text.isascii():
        return text, tuple(range(len(text)))
    folded: list[str] = []
    source: list[int] = []
    for i, char in enumerate(text):
        piece = char if char.isascii() else _fold_char(char)
        folded.append(piece)
        source.extend([i] * len(piece))
    return "".join(folded), tuple(source)


def fold(text: str) -> str:
    """``text`` without accents, as the search index holds it and queries are read: every
    character in its compatibility decomposition (NFKD: é → e, å → a, ü → u, ﬁ → fi, fullwidth
    Ａ → A) with the combining marks dropped, and the letters that do not decompose spelled as
    :data:`LETTERS` says (ø → o, æ → ae, ß → ss, ł → l, ...). Case is left to the index's
    tokenizer. So ``lørdag`` and ``lordag`` are one word, as are ``Æblegrød`` and ``aeblegrod``."""
    return text if text.isascii() else "".join(c if c.isascii() else _fold_char(c) for c in text)


_TOKEN = re.compile(r'"([^"]*)"|(\S+)')


MAX_TERMS = 16
"""The most distinct terms one search may hold (every one must occur in a request)."""
MAX_QUERY_CHARS = 1000
"""The longest search query, characters."""


def search_terms(text: str) -> list[tuple[str, str]]:
    """What plain search words mean, for either store: (kind, term) pairs, folded as the index
    is (:func:`fold`), every one of which must occur — kind ``"phrase"`` (a ``"quoted phrase"``,
    as written), ``"prefix"`` (``retr*``, the term without its ``*``) or ``"word"``. Operators,
    column filters and punctuation are just text.

    A term given twice counts once (every term must occur anyway). Raises ConfigError when
    ``text`` holds no word, is longer than :data:`MAX_QUERY_CHARS` characters, or holds more than
    :data:`MAX_TERMS` distinct terms: the index's cost grows with the square of the terms (a
    3 KB query of 1,000 words held a server for minutes).
    """
    if len(text) > MAX_QUERY_CHARS:
        raise ConfigError(f"the search query is {len(text):,} characters; at most {MAX_QUERY_CHARS:,}: shorten it")
    terms: list[tuple[str, str]] = []
    for phrase, word in _TOKEN.findall(fold(text)):
        prefix = not phrase and len(word) > 1 and word.endswith("*")
        term = phrase if phrase else word[:-1] if prefix else word
        pair = ("phrase" if phrase else "prefix" if prefix else "word", term)
        if term.strip() and pair not in terms:
            terms.append(pair)
            if len(terms) > MAX_TERMS:
                raise ConfigError(
                    f"the search has more than {MAX_TERMS} different terms; give at most {MAX_TERMS} "
                    '(a "quoted phrase" counts as one)'
                )
    if not terms:
        raise ConfigError("the search query is empty; give some words (or only filters, without a query)")
    return terms


def fts_query(text: str) -> str:
    """Plain search words (:func:`search_terms`) as an FTS5 query that always parses.

    Raises ConfigError when ``text`` holds no word.
    """
    terms = search_terms(text)
    return " ".join('"' + term.replace('"', '""') + '"' + ("*" if kind == "prefix" else "") for kind, term in terms)


@dataclass(frozen=True)
class TraceSummary:
    """One line of ``podium trace list``: times UTC ISO 8601, cost USD, wall time seconds
    (None while the request runs)."""

    id: str
    started_at: str
    status: str
    mode: str
    question: str
    steps: int
    total_cost_usd: float | None
    wall_time_s: float | None
    conductor: str = ""
    tags: tuple[str, ...] = ()
    subject: str | None = None
    workers: tuple[str, ...] = ()
    """The workers its steps ran on (fallback included), sorted by name; empty before any step."""


@dataclass(frozen=True)
class SearchHit:
    """One request that matches a search, with its best-ranked matching text.

    Attributes:
        trace: the request.
        field: which text matched best (one of :data:`~podium.trace.query.FIELDS`).
        location: where in the request: ``""`` (question, answer), ``"attempt 0"``,
            ``"step 2"``, ``"round 1 step 0"``, ``"fallback"``.
        snippet: an excerpt of that text around the matched words (FTS5 ``snippet()``).
        highlights: (start, end) character offsets of the matched words in ``snippet``.
        matches: how many of the request's texts match.
        score: FTS5 bm25 rank of the best text (lower is better).
    """

    trace: TraceSummary
    field: str
    location: str
    snippet: str
    highlights: tuple[tuple[int, int], ...]
    matches: int
    score: float


@dataclass(frozen=True)
class PurgeResult:
    """What :meth:`TraceStore.purge` removed (or, with ``dry_run``, would remove).

    Attributes:
        request_ids: the purged requests' ids, oldest first — the selection other stores
            keyed by request id (a PII vault, caches) apply to purge theirs.
        subjects: the distinct data-subject keys among them.
        dry_run: nothing was deleted.
        bytes_before, bytes_after: the database file plus its write-ahead log, bytes.
        log_truncated: the write-ahead log was checkpointed and emptied; False when another
            connection still reads old pages (they leave the log at its next checkpoint).
    """

    request_ids: tuple[str, ...]
    subjects: tuple[str, ...]
    dry_run: bool
    bytes_before: int
    bytes_after: int
    log_truncated: bool


PurgeListener = Callable[[tuple[str, ...]], None]
"""Called by :meth:`TraceStore.purge` with the ids about to be deleted, inside the deleting
transaction: raising aborts the purge (nothing is deleted)."""


MARK_ON, MARK_OFF = "\ue000", "\ue001"
"""Private-use characters snippet() puts around matched words (never in real text)."""


def restore_snippet(
    snippet: str, highlights: tuple[tuple[int, int], ...], original: str, ellipsis: str = "…"
) -> tuple[str, tuple[tuple[int, int], ...]]:
    """A snippet of the folded text (:func:`fold`) as the same excerpt of ``original``, with the
    highlights moved onto it: what the index matched, shown as it was written (``lørdag``, not
    ``lordag``). The snippet may start and end with ``ellipsis`` (text left out). When the excerpt
    cannot be found in the folded original (it always can, unless Unicode's tables changed
    between writing and reading), the snippet is returned as it is."""
    folded, source = fold_map(original)
    if folded == original:
        return snippet, highlights
    for lead in (0, len(ellipsis)):
        for trail in (0, len(ellipsis)):
            if (lead and not snippet.startswith(ellipsis)) or (trail and not snippet.endswith(ellipsis)):
                continue
            core = snippet[lead : len(snippet) - trail]
            at = folded.find(core)
            if not core or at < 0:
                continue
            begin, end = _back(source, original, at, at + len(core))
            text = snippet[:lead] + original[begin:end] + snippet[len(snippet) - trail :]
            moved = []
            for a, b in highlights:
                if lead <= a < b <= lead + len(core):
                    x, y = _back(source, original, at + a - lead, at + b - lead)
                    moved.append((x - begin + lead, y - begin + lead))
            return text, tuple(moved)
    return snippet, highlights


def _back(source: tuple[int, ...], original: str, start: int, end: int) -> tuple[int, int]:
    """Folded characters [start, end) → the original's [start, end), accents after the end kept."""
    first, last = source[start], source[end - 1] + 1
    while last < len(original) and unicodedata.combining(original[last]):
        last += 1
    return first, last


def unmark(marked: str) -> tuple[str, tuple[tuple[int, int], ...]]:
    """A snippet without its markers, and the (start, end) offsets they enclosed."""
    plain: list[str] = []
    spans: list[tuple[int, int]] = []
    length, start = 0, 0
    for char in marked:
        if char == MARK_ON:
            start = length
        elif char == MARK_OFF:
            spans.append((start, length))
        else:
            plain.append(char)
            length += 1
    return "".join(plain), tuple(spans)
