"""Task sets: what ``podium eval`` and ``podium train`` run on.

A task is one question with what its verifier needs (a reference answer, or tests). Loaders read:

* a **regression set** — a team's own JSONL, one object per line::

      {"id": "refund-17", "question": "...", "task_type": "exact", "reference": "14 days",
       "tags": ["support", "danish"]}

  Fields: ``id`` (unique text), ``question`` (text), ``task_type`` (one of :data:`TASK_TYPES`),
  ``reference`` (the expected answer; required except for ``code`` and ``open``), ``tests``
  (``code`` only: Python asserts run after the answer's code), ``entry_point`` (optional: the
  function under test; when the tests define ``check(candidate)``, HumanEval-style,
  ``check(entry_point)`` is called after them),
  ``choices`` (``choice`` only, optional: the options' texts), ``tags`` (list of text),
  ``split`` (optional text), ``reference_source`` (optional: who gave the reference —
  ``candidate:podium`` / ``candidate:upstream`` for an unconfirmed answer exported from traffic,
  ``client``, ``human``, ``judge:<worker>``; see :mod:`podium.traffic.export`), ``origin``
  (optional: the stored request a task came from, ``trace:<id>`` or ``shadow:<row>``).
* the shipped benchmarks in their own formats — GSM8K (``question``/``answer`` with
  ``#### n``), HumanEval (``task_id``/``prompt``/``test``/``entry_point``), MBPP
  (``task_id``/``text``/``test_list``; splits by task_id: test 11–510, validation 511–600,
  train 601–974, prompt 1–10, as in Austin et al. 2021).

The format is detected from the first record's fields. Bad input raises :class:`TaskSetError`
naming the file, the line and the fix; nothing is half-loaded.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from podium.errors import ConfigError

__all__ = [
    "TASK_TYPES",
    "Task",
    "TaskSetError",
    "TaskType",
    "has_tag",
    "load_tasks",
    "mbpp_split",
    "select",
    "split_sizes",
]

TaskType = Literal["math", "code", "choice", "exact", "open"]
TASK_TYPES: tuple[str, ...] = ("math", "code", "choice", "exact", "open")
"""``math``: numeric/symbolic answer (math-verify equivalence); ``code``: Python run against
``tests``; ``choice``: a multiple-choice letter; ``exact``: normalised exact match; ``open``:
graded by an LLM judge (or a recorded score in replay)."""


class TaskSetError(ConfigError):
    """A task set file is missing, unreadable or malformed."""


@dataclass(frozen=True)
class Task:
    """One evaluation question.

    Attributes:
        id: unique within its set (e.g. ``"gsm8k/test/17"``, ``"HumanEval/0"``, ``"mbpp/11"``).
        question: exactly what the conductor and workers are asked.
        task_type: one of :data:`TASK_TYPES`; picks the verifier.
        reference: the expected answer (GSM8K: the number after ``####``), or None.
        tests: Python test code for ``code`` tasks (asserts; HumanEval's ``check``), or None.
        entry_point: function name passed to ``check`` (HumanEval), or None.
        setup: code run before the answer's code (MBPP's ``test_setup_code``), or None.
        choices: the options of a ``choice`` task, in letter order, or ().
        tags: slice labels (task type, source, and any of the set's own tags).
        split: ``"train"``, ``"test"``, ``"validation"``… or None.
        source: the set it came from (``"gsm8k"``, ``"humaneval"``, ``"mbpp"``, a file stem).
        reference_source: who gave ``reference`` (a regression set's ``reference_source``:
            ``candidate:…`` marks an unconfirmed answer exported from traffic), or None.
        origin: the stored request the task came from (``trace:<id>``, ``shadow:<row>``), or None.
    """

    id: str
    question: str
    task_type: TaskType
    reference: str | None = None
    tests: str | None = None
    entry_point: str | None = None
    setup: str | None = None
    choices: tuple[str, ...] = ()
    tags: tuple[str, ...] = field(default=())
    split: str | None = None
    source: str = ""
    reference_source: str | None = None
    origin: str | None = None


def load_tasks(path: str | Path, *, split: str | None = None) -> list[Task]:
    """Every task in ``path`` (JSONL), format detected from the first record.

    Args:
        path: a regression set, or one of the shipped benchmark files.
        split: keep only this split (MBPP's task-id ranges; a regression set's ``split``
            field; GSM8K's split is its file name ``train``/``test``). None keeps all.

    Raises:
        TaskSetError: missing file, invalid JSON, unknown format, bad fields, duplicate ids,
            or no task left after the split filter.
    """
    file = Path(path)
    if not file.is_file():
        what = "is a folder" if file.is_dir() else "does not exist"
        raise TaskSetError(f"task set {file} {what} (pass a JSONL file: a regression set or a benchmark)")
    records = list(_read_jsonl(file))
    if not records:
        raise TaskSetError(f"task set {file} is empty")
    first = records[0][1]
    if "question" in first and "answer" in first and "id" not in first:
        tasks = [_gsm8k(rec, n, file.stem) for n, (_, rec) in enumerate(records)]
    elif {"task_id", "prompt", "test", "entry_point"} <= first.keys():
        tasks = [_humaneval(rec) for _, rec in records]
    elif {"task_id", "text", "test_list"} <= first.keys():
        tasks = [_mbpp(rec) for _, rec in records]
    elif {"id", "question"} <= first.keys():
        tasks = [_regression(rec, file, line) for line, rec in records]
    else:
        raise TaskSetError(
            f"{file}: unknown task set format (fields {sorted(first)}); a regression set needs "
            "'id', 'question', 'task_type' and 'reference' or 'tests' (see docs/eval.md)"
        )
    seen: set[str] = set()
    for task in tasks:
        if task.id in seen:
            raise TaskSetError(f"{file}: duplicate task id {task.id!r}; ids must be unique")
        seen.add(task.id)
    if split is not None:
        chosen = [t for t in tasks if t.split == split]
        if not chosen:
            splits = split_sizes(t.split for t in tasks)
            raise TaskSetError(f"{file}: no task in split {split!r}; its splits: {splits}")
        tasks = chosen
    return tasks


def has_tag(task: Task, wanted: Iterable[str]) -> bool:
    """Whether ``task`` carries any of the ``wanted`` tags (``--tag``). A request's ``task:TYPE``
    tag becomes its task's type when traffic is exported (a set has no ``task:`` tags), so
    ``task:math`` also matches a task of type ``math``."""
    return any(t in task.tags or t == f"task:{task.task_type}" for t in wanted)


def select(tasks: Sequence[Task], *, limit: int | None = None, sample: int | None = None, seed: int = 0) -> list[Task]:
    """The first ``limit`` tasks, or a seeded random ``sample`` of them (order kept)."""
    chosen = list(tasks)
    if sample is not None and sample < len(chosen):
        keep = sorted(random.Random(seed).sample(range(len(chosen)), sample))
        chosen = [chosen[i] for i in keep]
    if limit is not None:
        chosen = chosen[:limit]
    return chosen


def mbpp_split(task_id: int) -> str:
    """MBPP's standard split of ``task_id`` (Austin et al. 2021)."""
    if task_id <= 10:
        return "prompt"
    if task_id <= 510:
        return "test"
    if task_id <= 600:
        return "validation"
    return "train"


_CSV_HEADER = re.compile(r"^\s*\"?id\"?\s*[,;\t]", re.IGNORECASE)
"""The header of a CSV file whose first column is id (a review file's)."""


def split_sizes(splits: Iterable[str | None]) -> str:
    """The splits named, with how many of each, for an error message: ``test (4), train (10)``."""
    have = Counter(s or "(none)" for s in splits)
    return ", ".join(f"{name} ({n})" for name, n in sorted(have.items()))


def _read_jsonl(file: Path) -> Iterable[tuple[int, dict[str, Any]]]:
    try:
        text = file.read_text(encoding="utf-8-sig")  # a byte-order mark, as some editors write, is skipped
    except UnicodeDecodeError as exc:
        raise TaskSetError(
            f"task set {file} is not UTF-8 text (byte {exc.start}); pass a JSONL file, one JSON object per line"
        ) from exc
    except OSError as exc:
        raise TaskSetError(f"cannot read task set {file}: {exc.strerror or exc}") from exc
    for line_no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            if line_no == 1 and (file.suffix.lower() in (".csv", ".tsv") or _CSV_HEADER.match(line)):
                raise TaskSetError(
                    f"{file} is a CSV file (a review file?), not a task set: a task set is JSONL, one JSON object "
                    "per line ('podium tasks export' writes one); a filled review file is imported with "
                    "'podium tasks import REVIEW.csv --set SET.jsonl'"
                ) from exc
            raise TaskSetError(f"{file}:{line_no}: invalid JSON ({exc.msg}); one JSON object per line") from exc
        if not isinstance(record, dict):
            raise TaskSetError(f"{file}:{line_no}: expected a JSON object, got {type(record).__name__}")
        yield line_no, record


_GSM8K_ANSWER = re.compile(r"####\s*(.+?)\s*$", re.DOTALL)


def _gsm8k(rec: dict[str, Any], n: int, split: str) -> Task:
    match = _GSM8K_ANSWER.search(str(rec["answer"]))
    reference = match.group(1).replace(",", "") if match else None
    return Task(
        id=f"gsm8k/{split}/{n}",
        question=str(rec["question"]),
        task_type="math",
        reference=reference,
        tags=("math", "gsm8k"),
        split=split,
        source="gsm8k",
    )


def _humaneval(rec: dict[str, Any]) -> Task:
    return Task(
        id=str(rec["task_id"]),
        question=(
            "Complete the following Python function. Reply with the whole function in one "
            f"```python code block.\n\n```python\n{rec['prompt']}```"
        ),
        task_type="code",
        tests=str(rec["test"]),
        entry_point=str(rec["entry_point"]),
        setup=str(rec["prompt"]),
        tags=("code", "humaneval"),
        split="test",
        source="humaneval",
    )


def _mbpp(rec: dict[str, Any]) -> Task:
    task_id = int(rec["task_id"])
    tests = "\n".join(str(t) for t in rec["test_list"])
    return Task(
        id=f"mbpp/{task_id}",
        question=(
            f"{rec['text']}\nYour code should pass these tests:\n{tests}\n"
            "Reply with the Python code in one ```python code block."
        ),
        task_type="code",
        tests=tests,
        setup=str(rec.get("test_setup_code") or "") or None,
        tags=("code", "mbpp"),
        split=mbpp_split(task_id),
        source="mbpp",
    )


def _regression(rec: dict[str, Any], file: Path, line: int) -> Task:
    where = f"{file}:{line}"
    unknown = set(rec) - {
        "id",
        "question",
        "task_type",
        "reference",
        "tests",
        "entry_point",
        "choices",
        "tags",
        "split",
        "reference_source",
        "origin",
    }
    if unknown:
        raise TaskSetError(f"{where}: unknown field(s) {sorted(unknown)}")
    for key in ("id", "question"):
        if not isinstance(rec.get(key), str) or not rec[key].strip():
            raise TaskSetError(f"{where}: {key!r} must be non-empty text")
    task_type = rec.get("task_type")
    if task_type not in TASK_TYPES:
        raise TaskSetError(f"{where}: 'task_type' must be one of {', '.join(TASK_TYPES)}; got {task_type!r}")
    reference = rec.get("reference")
    tests = rec.get("tests")
    if task_type == "code" and tests is None:
        raise TaskSetError(f"{where}: a code task needs 'tests' (Python asserts as text)")
    if tests is not None and not isinstance(tests, str):
        raise TaskSetError(
            f"{where}: 'tests' must be text (Python asserts, one per line, e.g. \"assert f(2) == 4\\n...\"), "
            f"not {type(tests).__name__}"
        )
    if task_type in ("math", "choice", "exact") and not isinstance(reference, str | int | float):
        raise TaskSetError(f"{where}: a {task_type} task needs 'reference' (the expected answer)")
    tags = rec.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise TaskSetError(f"{where}: 'tags' must be a list of text")
    choices = rec.get("choices", [])
    if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
        raise TaskSetError(f"{where}: 'choices' must be a list of text")
    for key in ("reference_source", "origin"):
        if rec.get(key) is not None and not isinstance(rec[key], str):
            raise TaskSetError(f"{where}: {key!r} must be text")
    return Task(
        id=rec["id"],
        question=rec["question"],
        task_type=task_type,
        reference=None if reference is None else str(reference),
        tests=tests,
        entry_point=rec.get("entry_point"),
        choices=tuple(choices),
        tags=tuple(dict.fromkeys((task_type, *tags))),  # each once: a tag equal to the type is no second slice
        split=rec.get("split"),
        source=file.stem,
        reference_source=rec.get("reference_source"),
        origin=rec.get("origin"),
    )
