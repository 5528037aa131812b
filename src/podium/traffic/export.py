"""Regression sets from traffic: ``podium tasks export``.

Stored requests (:mod:`podium.traffic.source`) become a regression set — the JSONL format
:func:`podium.eval.tasks.load_tasks` reads (docs/eval.md) — one task per distinct question:

1. **Pseudonymized** first, unless the operator allows personal data in the file: the question
   and the candidate answer of each request share one vault, so ``<PERSON_1>`` is the same person
   in both (:mod:`podium.pii`, offline Presidio).
2. **De-duplicated**: questions with the same normalised text
   (:func:`podium.traffic.features.normalise`) are one task, the oldest kept; with a similarity
   threshold, a question whose embedding's cosine similarity to a kept one that states the same
   numbers reaches it is dropped too. Questions already in the set an export appends to count as kept.
3. **Typed and referenced.** The task type comes from the client (a shadow row's
   ``X-Podium-Task``), else a ``task:TYPE`` tag, else the export's default (``open``). A client's
   own reference (``X-Podium-Reference``) is the reference (``reference_source: "client"``).
   Otherwise the **candidate** — the upstream's answer for shadow rows, podium's for traces —
   is, marked ``reference_source: "candidate:upstream"`` or ``"candidate:podium"``: what the
   label round trip (:mod:`podium.traffic.review`) or a judge confirms or replaces. For
   ``math`` and ``choice`` the candidate is the answer's final number or letter, as the
   verifiers extract it; a candidate without one makes the task ``open`` (graded by a judge
   against the whole answer). ``code`` traffic has no tests, so it is exported as ``open`` too,
   and so is a ``math``, ``choice`` or ``exact`` request with neither a reference nor an answer
   (it ended in an error): the set must load, and a reviewer can give the reference.

Each task records where it came from (``origin``: ``trace:<id>`` or ``shadow:<row>``). Its id is
``traffic/<request id>`` (:func:`~podium.traffic.source.task_id`), so exporting again with
``append`` adds only requests not yet in the set: the export is idempotent and incremental.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from podium.answers import extract_choice, extract_math_answer
from podium.embed import Embedder
from podium.errors import ConfigError
from podium.eval.tasks import TASK_TYPES
from podium.traffic.features import PLACEHOLDER, normalise
from podium.traffic.source import TrafficItem, task_id

__all__ = [
    "CANDIDATE_SOURCES",
    "DROPPED_TAG_PREFIXES",
    "REFERENCE_SOURCES",
    "ExportResult",
    "Pseudonymize",
    "build_set",
    "declared_type",
    "numbers",
    "read_set",
    "write_jsonl",
]

REFERENCE_SOURCES = ("candidate:podium", "candidate:upstream", "client", "human", "judge:<worker>")
"""What a task's ``reference_source`` says about its reference: a **candidate** (the answer
podium or the upstream gave, unconfirmed), the **client**'s own expected answer, a **human**'s
label (the review round trip), or a **judge** worker's verdict on the candidate."""

CANDIDATE_SOURCES = ("candidate:podium", "candidate:upstream")
_NEEDS_REFERENCE = ("math", "choice", "exact")

DROPPED_TAG_PREFIXES = ("key:", "model:", "task:")
"""Trace tags that describe how a request was served, not what was asked (the API key, the
served preset; ``task:`` is read as the task type); they, and ``shadow``, are not copied."""

Pseudonymize = Callable[[Sequence[str]], tuple[list[str], Counter[str]]]
"""Pseudonymizes the texts of one request with one vault; returns them and the count of
replacements per PII kind."""


@dataclass(frozen=True)
class ExportResult:
    """What an export produced.

    Attributes:
        records: the regression-set records added, oldest first (JSON objects).
        read: requests read from the store (after the filters).
        duplicates: requests dropped because their normalised question was already kept.
        similar: requests dropped by the embedding similarity threshold.
        existing: requests already in the set appended to (same id).
        retyped: tasks made ``open``: code traffic (no tests) and candidates with no final
            number / letter.
        without_reference: tasks with neither a client reference nor a candidate (no answer,
            or one cut off).
        cut_off: tasks whose answer stopped at its token limit, so no candidate was taken from it.
        pii: replacements per PII kind, or None when personal data was allowed in clear.
    """

    records: list[dict[str, Any]]
    read: int
    duplicates: int = 0
    similar: int = 0
    existing: int = 0
    retyped: int = 0
    without_reference: int = 0
    cut_off: int = 0
    pii: dict[str, int] | None = field(default=None)


def build_set(
    items: Sequence[TrafficItem],
    *,
    existing: Sequence[dict[str, Any]] = (),
    task_type: str = "open",
    candidate: str = "auto",
    pseudonymize: Pseudonymize | None = None,
    embedder: Embedder | None = None,
    similarity: float | None = None,
    limit: int | None = None,
) -> ExportResult:
    """The regression-set records for ``items`` (see the module docstring).

    Args:
        items: stored requests, oldest first.
        existing: the records of the set being appended to (their ids and questions count as
            kept).
        task_type: the type of a request whose client and tags say none (one of
            :data:`~podium.eval.tasks.TASK_TYPES`).
        candidate: whose answer is the candidate: ``auto`` (the upstream's for shadow rows,
            podium's for traces), ``podium`` or ``upstream``.
        pseudonymize: masks each request's texts; None keeps them in clear (the operator's
            explicit choice).
        embedder: embeds questions for ``similarity``.
        similarity: drop a question whose cosine similarity to a kept one is at least this
            (in (0, 1]); None compares normalised text only.
        limit: keep the newest ``limit`` new tasks.

    Raises ConfigError for an unknown task type or candidate, ``code`` (no tests to grade it by),
    a similarity outside (0, 1], or a similarity without an embedder.
    """
    if task_type == "code":
        raise ConfigError(
            "--task-type code: a code task is graded by its tests, and traffic has none; export as open, then "
            "retype rows to code in the review file with their tests in the reference column"
        )
    if task_type not in TASK_TYPES:
        raise ConfigError(f"--task-type {task_type!r}: use one of open, math, choice, exact")
    if candidate not in ("auto", "podium", "upstream"):
        raise ConfigError(f"--candidate {candidate!r}: use auto, podium or upstream")
    if similarity is not None and not 0 < similarity <= 1:
        raise ConfigError(f"--similar {similarity}: give a cosine similarity in (0, 1], e.g. 0.95")
    if similarity is not None and embedder is None:
        raise ConfigError("a similarity threshold needs an embedder")
    if limit is not None and limit < 1:
        raise ConfigError(f"--limit must be at least 1, got {limit}")
    known_ids = {str(r.get("id")) for r in existing}
    seen = {normalise(str(r.get("question", ""))) for r in existing}
    pii: Counter[str] | None = Counter() if pseudonymize is not None else None
    records: list[dict[str, Any]] = []
    duplicates = existing_count = 0
    for item in items:
        if task_id(item) in known_ids:
            existing_count += 1
            continue
        record = _record(item, task_type, candidate)
        counts: Counter[str] = Counter()
        if pseudonymize is not None:
            record, counts = _masked(record, pseudonymize)
        key = normalise(record["question"])
        if key in seen:
            duplicates += 1
            continue
        seen.add(key)
        if pii is not None:
            pii.update(counts)  # what the written tasks held, not the duplicates dropped
        known_ids.add(record["id"])
        records.append(record)
    similar = 0
    if similarity is not None and embedder is not None and records:
        records, similar = _drop_similar(records, existing, embedder, similarity)
    if limit is not None and len(records) > limit:
        records = records[-limit:]
    return _result(records, len(items), duplicates, similar, existing_count, pii)


def _result(
    records: list[dict[str, Any]],
    read: int,
    duplicates: int,
    similar: int,
    existing: int,
    pii: Counter[str] | None,
) -> ExportResult:
    retyped = sum(1 for r in records if r.pop("_retyped", False))
    cut_off = sum(1 for r in records if r.pop("_cut_off", False))
    return ExportResult(
        records=records,
        read=read,
        duplicates=duplicates,
        similar=similar,
        existing=existing,
        retyped=retyped,
        without_reference=sum(1 for r in records if "reference" not in r),
        cut_off=cut_off,
        pii=dict(sorted(pii.items())) if pii is not None else None,
    )


def declared_type(item: TrafficItem, default: str) -> str:
    """The task type the client gave a request (a shadow row's ``X-Podium-Task``, else a
    ``task:TYPE`` tag), else ``default``: before the export makes a task ``open``."""
    if item.task_type:
        return item.task_type
    tagged = [t.split(":", 1)[1] for t in item.tags if t.startswith("task:")]
    return tagged[0] if tagged else default


def _record(item: TrafficItem, default_type: str, candidate: str) -> dict[str, Any]:
    """One task record (before pseudonymization); ``_retyped`` (removed before the record is
    returned by :func:`build_set`) says whether its type was changed to ``open``."""
    kind = declared_type(item, default_type)
    retyped = False
    if kind not in TASK_TYPES or kind == "code":  # code: no tests to run; unknown: a client's typo
        kind, retyped = "open", True
    tags = [t for t in item.tags if t != "shadow" and not t.startswith(DROPPED_TAG_PREFIXES)]
    record: dict[str, Any] = {"id": task_id(item), "question": item.question, "task_type": kind}
    if item.reference:
        record.update(reference=item.reference, reference_source="client")
    else:
        side = candidate if candidate != "auto" else ("upstream" if item.origin.startswith("shadow:") else "podium")
        text = item.upstream_answer if side == "upstream" else item.answer
        if side == "podium" and item.cut_off:  # a cut-off answer's last number is no final answer
            text, record["_cut_off"] = None, True
        if text and text.strip():
            extracted = _final_answer(kind, text)
            if extracted is None:  # no final number / letter: a judge grades it against the whole answer
                kind, retyped, extracted = "open", True, text.strip()
                record["task_type"] = kind
            record.update(reference=extracted, reference_source=f"candidate:{side}")
    if "reference" not in record and record["task_type"] in _NEEDS_REFERENCE:  # no answer (an error): nothing
        record["task_type"], retyped = "open", True  # to compare with, and the set must still load
    record["tags"] = tags
    record["origin"] = item.origin
    record["_retyped"] = retyped
    return record


def _final_answer(kind: str, text: str) -> str | None:
    """What the verifier of ``kind`` compares: the final number (math), the letter (choice),
    the answer's text (exact, open)."""
    if kind == "math":
        return extract_math_answer(text)
    if kind == "choice":
        return extract_choice(text)
    return text.strip()


def _masked(record: dict[str, Any], pseudonymize: Pseudonymize) -> tuple[dict[str, Any], Counter[str]]:
    fields = ["question", *(["reference"] if "reference" in record else [])]
    texts, counts = pseudonymize([record[f] for f in fields])
    return {**record, **dict(zip(fields, texts, strict=True))}, counts


_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def numbers(text: str) -> tuple[str, ...]:
    """The numbers ``text`` states, sorted (``"2.5"`` and ``"25"`` differ); pseudonymization
    placeholders (``<PERSON_1>``) state none."""
    return tuple(sorted(_NUMBER.findall(PLACEHOLDER.sub(" ", text))))


def _drop_similar(
    records: list[dict[str, Any]], existing: Sequence[dict[str, Any]], embedder: Embedder, threshold: float
) -> tuple[list[dict[str, Any]], int]:
    """Greedy, in order: a new question is kept unless its cosine similarity to an existing or
    an already kept question **that states the same numbers** is at least ``threshold``. A
    changed number usually changes the answer (another amount, another table row), while a
    character n-gram or sentence vector barely moves with it."""
    old = [str(r.get("question", "")) for r in existing]
    vectors = embedder.embed([*old, *(r["question"] for r in records)])
    kept_vectors: dict[tuple[str, ...], list[np.ndarray[Any, Any]]] = {}
    for text, vector in zip(old, vectors, strict=False):
        kept_vectors.setdefault(numbers(text), []).append(vector)
    kept: list[dict[str, Any]] = []
    for record, vector in zip(records, vectors[len(old) :], strict=True):
        alike = kept_vectors.setdefault(numbers(record["question"]), [])
        if alike and float(np.max(np.stack(alike) @ vector)) >= threshold:
            continue
        kept.append(record)
        alike.append(vector)
    return kept, len(records) - len(kept)


def read_set(path: Path) -> list[dict[str, Any]]:
    """The records of a regression-set JSONL file as written (validated by
    :func:`podium.eval.tasks.load_tasks` first, so a malformed file stops with its line and
    the fix)."""
    from podium.eval.tasks import load_tasks

    load_tasks(path)
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_jsonl(path: Path, records: Iterable[dict[str, Any]]) -> None:
    """Write ``records`` as JSONL atomically: a temporary file in the same folder, then a rename,
    so a reader never sees half a file and a failure leaves the old one as it was."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            for record in records:
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
