"""The labelling round trip: a review file out, references back in.

``podium tasks export --review FILE.csv`` writes one row per exported task (:func:`write_review`):

========================  =================================================================
column                    meaning
========================  =================================================================
``id``                    the task's id in the set (do not edit)
``task_type``             ``math``, ``choice``, ``exact``, ``code`` or ``open``; may be changed
``tags``                  the task's tags, ``;``-separated (not read back)
``question``              the question as in the set (pseudonymized unless allowed; not read back)
``candidate``             the reference the set holds now (podium's or the upstream's answer,
                          or the client's), empty when there is none
``candidate_source``      where it came from (``candidate:podium``, ``candidate:upstream``, ``client``...)
``verdict``               empty, for the reviewer: ``accept``, ``fix`` or ``drop``
``reference``             empty, for the reviewer: the right answer (with ``fix``); for a
                          ``code`` task its tests (Python asserts that call the function)
``note``                  free text (not read back)
========================  =================================================================

Verdicts: ``accept`` — the candidate is right: it becomes the reference; ``fix`` — the
``reference`` column is the right answer; ``drop`` — remove the task from the set; empty —
leave the task as it is (a filled ``reference`` with an empty verdict counts as ``fix``). A
confirmed reference gets ``reference_source: "human"``.

:func:`import_review` checks **every row before changing anything** — the header names ``id``,
``verdict`` and ``reference``; each row has as many cells as the header; every id is in the set
and appears once; each verdict is one of the above and has what it needs; a changed task type is
known and has a reference when it needs one, a ``code`` task tests that parse and assert —
and raises :class:`ReviewFileError` listing each
bad row by its spreadsheet row number (the header is row 1) with the fix. Nothing is written
unless every row is good. The file is read as UTF-8 (a byte-order mark is fine); the separator
is the one the header uses (``,``, ``;`` as spreadsheets in Danish or German locales write, or a
tab). The file is written UTF-8 with a byte-order mark, so spreadsheets show æ, ø and å.
"""

from __future__ import annotations

import ast
import csv
import dataclasses
import io
import os
import re
import tempfile
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from podium.errors import ConfigError
from podium.eval.tasks import TASK_TYPES

__all__ = [
    "COLUMNS",
    "REQUIRED",
    "VERDICTS",
    "ImportResult",
    "ReviewFileError",
    "import_review",
    "read_review",
    "write_review",
]

COLUMNS = ("id", "task_type", "tags", "question", "candidate", "candidate_source", "verdict", "reference", "note")
"""The review file's columns, in order."""

REQUIRED = ("id", "verdict", "reference")
"""The columns :func:`import_review` reads (``task_type`` too, when present)."""

VERDICTS = ("accept", "fix", "drop")
_NEEDS_REFERENCE = ("math", "choice", "exact")

_MATH_LIKE = re.compile(r"\d|\\[A-Za-z]")
"""What a math reference must contain: a digit or a LaTeX command (``\\pi``, ``\\frac``); words
alone ("three bolts") are not an answer the math verifier can compare."""
_MAX_SHOWN = 20


class ReviewFileError(ConfigError):
    """A review file cannot be imported; the message lists each bad row and its fix."""


@dataclass(frozen=True)
class ImportResult:
    """A review file applied to a set.

    Attributes:
        records: the whole set after the import, in its order (dropped tasks removed).
        accepted: candidates confirmed as references (that were not already).
        fixed: references given by the reviewer (that the set did not already have).
        dropped: tasks removed.
        unchanged: rows with no verdict and no reference, or whose verdict the set already holds.
        retyped: tasks whose type the reviewer changed.
        gone: rows of tasks already out of the set that say drop (or, for the ``gone`` of
            :func:`import_review`, nothing): nothing left to do.
    """

    records: list[dict[str, Any]]
    accepted: int = 0
    fixed: int = 0
    dropped: int = 0
    unchanged: int = 0
    retyped: int = 0
    gone: int = 0


def write_review(path: Path, records: Sequence[dict[str, Any]]) -> None:
    """Write the review file of ``records`` (see the module docstring). Raises ConfigError when
    the file cannot be written."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    for r in records:
        has_reference = r.get("reference") is not None
        writer.writerow(
            [
                r["id"],
                r.get("task_type", ""),
                ";".join(r.get("tags", [])),
                r["question"],
                r.get("reference", "") if has_reference else "",
                r.get("reference_source", "") if has_reference else "",
                "",
                "",
                "",
            ]
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8-sig") as handle:
                handle.write(buffer.getvalue())
            os.replace(tmp, path)  # atomically: a reader (or podium loop) never sees half a file
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise ConfigError(f"cannot write review file {path}: {exc.strerror or exc}") from None


def _rows(path: Path) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """(header, [(spreadsheet row number, cells)]) of the file; ReviewFileError when it cannot be
    read as CSV at all."""
    if path.is_dir():
        raise ReviewFileError(
            f"{path} is a folder; name the review file in it (a .csv that tasks export --review wrote)"
        )
    if not path.is_file():
        raise ReviewFileError(f"no review file at {path}; write one with 'podium tasks export --review {path}'")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ReviewFileError(
            f"{path} is not UTF-8 text (byte {exc.start}); save it from the spreadsheet as 'CSV UTF-8'"
        ) from None
    except OSError as exc:
        raise ReviewFileError(f"cannot read review file {path}: {exc.strerror or exc}") from None
    if not text.strip():
        raise ReviewFileError(f"review file {path} is empty; its first row must be the header ({', '.join(COLUMNS)})")
    first = text.splitlines()[0]
    delimiter = max((",", ";", "\t"), key=first.count)
    try:
        reader = csv.reader(io.StringIO(text), delimiter=delimiter, strict=True)
        rows = list(reader)
    except csv.Error as exc:
        raise ReviewFileError(f"{path}: not valid CSV near line {reader.line_num}: {exc}") from None
    header = [h.strip().lower() for h in rows[0]]
    numbered = [(n, cells) for n, cells in enumerate(rows[1:], start=2) if any(c.strip() for c in cells)]
    return header, numbered


def read_review(path: Path) -> list[dict[str, str]]:
    """The rows of a review file as ``{column: cell}`` (columns as the header names them,
    lowercased); rows whose width differs from the header's are left out. Raises
    ReviewFileError when the file cannot be read as CSV."""
    header, rows = _rows(path)
    return [dict(zip(header, cells, strict=True)) for _, cells in rows if len(cells) == len(header)]


def import_review(
    path: Path,
    records: Sequence[dict[str, Any]],
    *,
    set_name: str = "the set",
    gone: Collection[str] = (),
) -> ImportResult:
    """``records`` (a regression set's) with the review file at ``path`` applied (see the
    module docstring). Nothing is changed unless every row is good.

    A row that says drop for a task no longer in ``records`` changes nothing and is counted in
    :attr:`ImportResult.gone`, so importing a file again after its drops were applied is a
    no-op. ``gone`` names tasks the file was made for that an earlier import of it dropped: a
    row of theirs may also leave the verdict empty (:mod:`podium.loop` relies on it); any other
    verdict for such a row is an error.

    Raises ReviewFileError listing every problem (missing or repeated columns, rows of the wrong
    width, unknown or repeated ids, unknown verdicts, a verdict without what it needs, an
    unknown task type)."""
    header, rows = _rows(path)
    missing = [c for c in REQUIRED if c not in header]
    repeated = sorted({c for c in header if c and header.count(c) > 1})
    if missing or repeated:
        problems = []
        if missing:
            problems.append(f"missing column(s) {', '.join(missing)}")
        if repeated:
            problems.append(f"column(s) {', '.join(repeated)} appear more than once")
        raise ReviewFileError(
            f"{path}: {'; '.join(problems)}. The first row must be the header as 'podium tasks export --review' "
            f"writes it ({', '.join(COLUMNS)}); id, verdict and reference are read"
        )
    col = {name: header.index(name) for name in (*REQUIRED, "task_type") if name in header}
    by_id = {str(r["id"]): r for r in records}
    errors: list[str] = []
    seen: dict[str, int] = {}
    changes: dict[str, tuple[str, str | None, str | None]] = {}  # id -> (verdict, reference, task_type)
    gone_rows = 0
    for number, cells in rows:
        where = f"row {number}"
        if len(cells) != len(header):
            errors.append(
                f"{where}: {len(cells)} cells, the header has {len(header)} (a separator inside an unquoted "
                "cell? put the cell in double quotes, as the exported file does)"
            )
            continue

        def cell(name: str, cells: list[str] = cells) -> str:
            return cells[col[name]].strip() if name in col else ""

        task_id, verdict, reference, new_type = (
            cell("id"),
            cell("verdict").lower(),
            cell("reference"),
            cell("task_type"),
        )
        if not task_id:
            errors.append(f"{where}: the id is empty; copy it from the exported file (ids are not to be edited)")
            continue
        where = f"row {number} (id {task_id})"
        if task_id in seen:
            errors.append(f"{where}: the id is also on row {seen[task_id]}; keep one row per task")
            continue
        seen[task_id] = number
        task = by_id.get(task_id)
        if task is None and task_id in gone:
            if verdict in ("", "drop") and not reference:
                gone_rows += 1
            else:
                errors.append(
                    f"{where}: an earlier import of this file dropped the task, so it is no longer in {set_name}; "
                    "leave its verdict drop"
                )
            continue
        if task is None:
            if verdict == "drop" and not reference:  # already out of the set: nothing to do
                gone_rows += 1
                continue
            errors.append(
                f"{where}: no task with this id in {set_name}; was the file made for another set? "
                "Import it into the set it was exported with"
            )
            continue
        if verdict not in ("", *VERDICTS):
            errors.append(f"{where}: verdict {verdict!r} is unknown; write accept, fix, drop or leave it empty")
            continue
        if not verdict and reference:
            verdict = "fix"
        if verdict == "fix" and not reference:
            errors.append(f"{where}: verdict fix needs the right answer in the reference column")
            continue
        if verdict == "accept":
            if task.get("reference") is None:
                errors.append(
                    f"{where}: verdict accept, but the task has no candidate answer; write fix and the answer "
                    "in the reference column, or drop"
                )
                continue
            if reference and reference != str(task["reference"]).strip():
                errors.append(
                    f"{where}: verdict accept, but the reference column differs from the candidate; write fix "
                    "to use the reference column, or clear it to accept the candidate"
                )
                continue
        kind = new_type or str(task.get("task_type", "open"))
        if new_type and new_type not in TASK_TYPES:
            errors.append(f"{where}: task_type {new_type!r} is unknown; use one of {', '.join(TASK_TYPES)}")
            continue
        retyped_to_code = new_type == "code" and task.get("task_type") != "code"
        if kind == "code" and (retyped_to_code or verdict in ("fix", "accept")) and verdict != "drop":
            if verdict != "fix" or not reference:
                errors.append(
                    f"{where}: a code task is graded by its tests: write fix and the tests (Python asserts that "
                    "call the function) in the reference column, or keep it open"
                )
                continue
            problem = _tests_problem(reference)
            if problem:
                errors.append(f"{where}: the tests in the reference column {problem}")
                continue
        final_reference = reference if verdict == "fix" else task.get("reference")
        if verdict == "fix" and kind == "math" and not _MATH_LIKE.search(reference):
            errors.append(
                f"{where}: a math task's reference is compared as a number or expression, and {reference!r} has "
                "none; write the answer itself (e.g. 3, 3/4, \\frac{1}{2}) in the reference column"
            )
            continue
        if verdict != "drop" and kind in _NEEDS_REFERENCE and final_reference is None:
            errors.append(f"{where}: a {kind} task needs a reference; write fix and the answer, or keep it open")
            continue
        changes[task_id] = (verdict, reference or None, new_type or None)
    if errors:
        shown = errors[:_MAX_SHOWN]
        more = f"\n  … and {len(errors) - _MAX_SHOWN} more" if len(errors) > _MAX_SHOWN else ""
        raise ReviewFileError(
            f"{path}: {len(errors)} row(s) cannot be imported; nothing was changed:\n  " + "\n  ".join(shown) + more
        )
    return dataclasses.replace(_apply(records, changes), gone=gone_rows)


def _tests_problem(tests: str) -> str | None:
    """Why ``tests`` cannot grade a code answer (not Python; nothing asserted), or None."""
    try:
        module = ast.parse(tests)
    except (SyntaxError, ValueError) as exc:
        return f"are not Python ({exc.msg if isinstance(exc, SyntaxError) else exc}); write asserts, one per line"
    if not any(isinstance(node, ast.Assert) for node in ast.walk(module)):
        return "assert nothing; write asserts that call the function, e.g. assert f(2) == 4"
    return None


def _apply(records: Sequence[dict[str, Any]], changes: dict[str, tuple[str, str | None, str | None]]) -> ImportResult:
    out: list[dict[str, Any]] = []
    counts = {"accept": 0, "fix": 0, "drop": 0, "": 0}
    retyped = 0
    for record in records:
        change = changes.get(str(record["id"]))
        if change is None:
            out.append(record)
            continue
        verdict, reference, new_type = change
        if verdict == "drop":
            counts["drop"] += 1
            continue
        updated = dict(record)
        if new_type and new_type != record.get("task_type"):
            updated["task_type"] = new_type
            retyped += 1
        if verdict == "fix" and updated.get("task_type") == "code":  # the reference column held the tests
            updated.pop("reference", None)
            updated.update(tests=reference, reference_source="human")
        elif verdict == "fix":
            updated.update(reference=reference, reference_source="human")
        elif verdict == "accept":
            updated["reference_source"] = "human"
        counts[verdict if updated != record else ""] += 1  # a file applied again changes nothing
        out.append(updated)
    return ImportResult(
        records=out,
        accepted=counts["accept"],
        fixed=counts["fix"],
        dropped=counts["drop"],
        unchanged=counts[""],
        retyped=retyped,
    )
