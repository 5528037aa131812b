"""``podium bank record``: execute a catalogue on task sets, live, into a workflow bank.

For each question, every column of the catalogue (:mod:`podium.eval.bank`) is executed as its
sub-workflow through the executor over the pool's workers, each call through the request cache
(:mod:`podium.workers.cache`) — so a column's dependencies, recorded just before, are cache hits
and only its own step calls a model. The step's output is scored by the task's verifier as if it
were the final answer (an ``open`` task's by a judge worker, through the cache too). When every
column of a question is done, its row is appended to ``matrix.csv`` and flushed: an interrupted
recording resumes at the next question, and a bank can be committed while it grows.

A step that fails (a worker error, the step timeout) is recorded with its error and score 0, as
a conductor would meet it; only configuration errors (a model not installed) stop the recording.
"""

from __future__ import annotations

import asyncio
import csv
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from podium.conductor.compose import plan_workflow, sub_workflow
from podium.errors import ConfigError
from podium.eval.bank import Bank, Catalogue, column_order, read_rows, write_rows, write_sidecar
from podium.eval.tasks import Task
from podium.executor import WorkflowFailed, execute
from podium.messages import GrantedStep, worker_messages
from podium.records import StepRecord
from podium.roles import step_settings
from podium.store.request_cache import RequestCache
from podium.workers.base import Completion, Usage, Worker
from podium.workers.cache import request_key

__all__ = [
    "RecordProgress",
    "check_open_tasks",
    "critical_path",
    "record_bank",
    "record_local_bank",
    "restore_cache",
    "revise_bank",
]


@dataclass(frozen=True)
class RecordProgress:
    """One question recorded: its task id, seconds it took, calls answered by the cache."""

    task_id: str
    seconds: float
    cache_hits: int
    done: int
    total: int


def critical_path(records: Sequence[StepRecord]) -> float:
    """Seconds until the last of ``records`` finishes when every step starts as soon as the steps
    it sees are done (each taking its recorded ``latency_s``)."""
    finish: dict[int, float] = {}
    for r in sorted(records, key=lambda r: r.index):
        finish[r.index] = r.latency_s + max((finish.get(j, 0.0) for j in r.visible), default=0.0)
    return max(finish.values(), default=0.0)


async def _record_task(
    task: Task,
    catalogue: Catalogue,
    pool: Sequence[Worker],
    score: Callable[[Task, str], Any],
    step_timeout_s: float,
) -> dict[str, str]:
    names = [w.info.name for w in pool]
    row = {"sample_id": task.id, "eval_name": _eval_name(task), "split": task.split or "", "prompt": task.question}
    for cid in column_order(catalogue):
        workflow = plan_workflow([cid], catalogue.columns, names)
        n = len(sub_workflow(cid, catalogue.columns))
        try:
            records = await execute(workflow, task.question.strip(), pool, timeout_s=step_timeout_s * n)
            error = ""
        except WorkflowFailed as exc:
            records, error = exc.records, str(exc)
        last = next((r for r in records if r.index == len(workflow) - 1), None)
        if last is not None and last.error:
            error = last.error
        output = last.output if last is not None and not error else ""
        verdict = await score(task, output) if output else None
        usage = last.usage if last is not None else None
        row |= {
            cid: repr(float(verdict.score)) if verdict is not None else "0.0",
            f"{cid}|model_response": output,
            f"{cid}|total_cost": repr(sum(r.cost_usd for r in records)),
            f"{cid}|latency_s": repr(critical_path(records)),
            f"{cid}|step_cost": repr(last.cost_usd if last is not None else 0.0),
            f"{cid}|step_latency_s": repr(last.latency_s if last is not None else 0.0),
            f"{cid}|input_tokens": str(usage.input_tokens if usage else 0),
            f"{cid}|output_tokens": str(usage.output_tokens if usage else 0),
            f"{cid}|cached_input_tokens": str(usage.cached_input_tokens if usage else 0),
            f"{cid}|finish_reason": last.finish_reason if last is not None else "",
            f"{cid}|error": error,
        }
    return row


def _eval_name(task: Task) -> str:
    return task.source or task.id.split("/", 1)[0]


def record_bank(
    catalogue: Catalogue,
    tasks: Sequence[Task],
    pool: Sequence[Worker],
    out: Path,
    *,
    score: Callable[[Task, str], Any],
    step_timeout_s: float = 600.0,
    cache_hits: Callable[[], int] = lambda: 0,
    on_start: Callable[[int, int], None] | None = None,
    on_progress: Callable[[RecordProgress], None] | None = None,
) -> int:
    """Record ``tasks`` (those not yet in ``out/matrix.csv``) into the bank at ``out``.

    Args:
        catalogue: the columns to record.
        tasks: questions; ones already recorded in the matrix are skipped (resume).
        pool: the workers, by name (the catalogue's workers must all be there), normally each
            behind the request cache.
        score: async ``(task, answer) -> Verdict`` (the verifiers).
        step_timeout_s: time limit per step, seconds (a sub-workflow of n steps gets n times it).
        cache_hits: returns the request cache's hit count so far (for progress).
        on_start: called with (questions to record, questions already in the bank).
        on_progress: called after each question's row is written.

    Returns the number of questions in the bank afterwards.

    Raises ConfigError when the pool lacks a catalogue worker, the matrix has another header,
    or a worker cannot be set up (e.g. a model not installed).
    """
    names = {w.info.name for w in pool}
    missing = [w for w in catalogue.workers() if w not in names]
    if missing:
        raise ConfigError(
            f"catalogue {catalogue.name!r} needs worker(s) {', '.join(missing)}, which the pool lacks "
            f"(it has {', '.join(sorted(names))})"
        )
    path = out / "matrix.csv"
    header, rows = read_rows(path)
    expected = catalogue.header()
    if header and header != expected:
        raise ConfigError(f"{path} has other columns than catalogue {catalogue.name!r}: use another --out")
    write_sidecar(out, catalogue)
    done = {r["sample_id"] for r in rows}
    todo = [t for t in tasks if t.id not in done]
    if on_start:
        on_start(len(todo), len(done))
    for n, task in enumerate(todo, 1):
        started, hits = time.perf_counter(), cache_hits()
        row = asyncio.run(_record_task(task, catalogue, pool, score, step_timeout_s))
        _append(path, expected, row)
        if on_progress:
            on_progress(RecordProgress(task.id, time.perf_counter() - started, cache_hits() - hits, n, len(todo)))
    return len(done) + len(todo)


def revise_bank(
    out: Path,
    *,
    rescore: Sequence[Task] = (),
    drop: Collection[str] = (),
    score: Callable[[Task, str], Any],
) -> tuple[int, int]:
    """Bring a bank in line with its task set after a review: the rows of ``rescore`` (tasks
    whose reference, tests or type changed) are scored again from their recorded responses —
    no worker is called, a step recorded with an error keeps score 0 — and the rows of ``drop``
    (task ids) are removed. ``matrix.csv`` is rewritten once, atomically. Returns (rows
    rescored, rows dropped).

    Raises ConfigError when the matrix cannot be read, and what ``score`` raises (e.g. a task
    with no reference)."""
    path = out / "matrix.csv"
    header, rows = read_rows(path)
    by_id = {t.id: t for t in rescore}
    columns = [c for c in header if f"{c}|model_response" in header]
    kept = [r for r in rows if r["sample_id"] not in drop]

    async def again(row: dict[str, str]) -> None:
        task = by_id[row["sample_id"]]
        for cid in columns:
            output = "" if row[f"{cid}|error"] else row[f"{cid}|model_response"]
            verdict = await score(task, output) if output else None
            row[cid] = repr(float(verdict.score)) if verdict is not None else "0.0"

    async def all_rows() -> None:
        for row in kept:
            if row["sample_id"] in by_id:
                await again(row)

    asyncio.run(all_rows())
    rescored = sum(1 for r in kept if r["sample_id"] in by_id)
    if rescored or len(kept) < len(rows):
        write_rows(path, header, kept)
    return rescored, len(rows) - len(kept)


def _append(path: Path, header: Sequence[str], row: Mapping[str, str]) -> None:
    """Append one row to the matrix at ``path`` (the header first when the file is new). The file
    is opened for each row, never held open across questions: a file replaced meanwhile (a git
    checkout, a copy) gets the row, where a held handle would write into the replaced, deleted one."""
    new = not path.exists()
    with path.open("a", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(header))
        if new:
            writer.writeheader()
        writer.writerow(row)


def restore_cache(bank: Bank, pool: Sequence[Worker], cache: RequestCache) -> int:
    """Put every recorded call of ``bank`` into ``cache`` as the request cache would have stored
    it, so that executing a workflow over the bank's columns on ``pool`` (the pool the bank was
    recorded on, unwrapped workers) answers from the cache — a live run of what was recorded,
    on a machine whose cache is gone. Each step's request is rebuilt exactly as the executor
    builds it (:func:`podium.messages.worker_messages` from the question, the outputs of the steps
    it sees and its subtask; :func:`podium.roles.step_settings` for its decoding settings), keyed
    by :func:`podium.workers.cache.request_key`. Steps recorded with an error are skipped (errors
    are never cached). Returns the number of calls stored.

    Raises ConfigError when the pool lacks a worker of the bank's catalogue."""
    by_name = {w.info.name: w for w in pool}
    missing = [w for w in bank.catalogue.workers() if w not in by_name]
    if missing:
        raise ConfigError(f"the pool lacks worker(s) {', '.join(missing)} that bank {bank.path} was recorded with")
    columns = bank.catalogue.columns
    stored = 0
    for row in bank.rows:
        question = row["prompt"].strip()
        for cid in column_order(bank.catalogue):
            if row[f"{cid}|error"]:
                continue
            sub = sub_workflow(cid, columns)
            workflow = plan_workflow(sub[-1:], columns, [w.info.name for w in pool])
            index = len(sub) - 1
            step = workflow.steps[index]
            worker = by_name[columns[cid].worker]
            granted = [
                GrantedStep(j, workflow.steps[j].subtask, row[f"{sub[j]}|model_response"]) for j in step.visible(index)
            ]
            messages = worker_messages(question, granted, step.subtask, system_prompt=worker.info.system_prompt)
            settings = step_settings(workflow.steps, index, worker.info.settings) or worker.info.settings
            usage = Usage(
                int(row[f"{cid}|input_tokens"] or 0),
                int(row[f"{cid}|output_tokens"] or 0),
                int(row[f"{cid}|cached_input_tokens"] or 0),
            )
            completion = Completion(
                text=row[f"{cid}|model_response"],
                usage=usage,
                cost_usd=float(row[f"{cid}|step_cost"] or 0.0),
                latency_s=float(row[f"{cid}|step_latency_s"] or 0.0),
                finish_reason=row[f"{cid}|finish_reason"] or "stop",
            )
            cache.put(request_key(worker, {"messages": messages, "settings": settings}), worker.info.name, completion)
            stored += 1
    return stored


def check_open_tasks(tasks: Sequence[Task], *, judged: bool) -> None:
    """ConfigError when ``tasks`` hold ``open`` tasks and no judge grades them (``judged``
    False): checked before anything is called or written."""
    opened = [t.id for t in tasks if t.task_type == "open"]
    if opened and not judged:
        raise ConfigError(
            f"{len(opened)} open task(s), e.g. {opened[0]!r}: their answers are graded by a judge worker; give "
            "--judge WORKER (a model worker of --judge-pool, default --pool), or leave them out with --ids"
        )


def record_local_bank(
    tasks: Sequence[Task],
    out: Path,
    *,
    pool: str | Path,
    cache: RequestCache,
    step_timeout_s: float = 600.0,
    judge: Worker | None = None,
    on_start: Callable[[int, int], None] | None = None,
    on_progress: Callable[[RecordProgress], None] | None = None,
    catalogue: Catalogue | None = None,
) -> int:
    """``podium bank record``: record ``catalogue`` (default: the local catalogue,
    :func:`podium.eval.bank.local_catalogue`) of ``tasks`` not yet in the bank at ``out``, live
    on the pool file ``pool``, every call through ``cache`` and scored by the verifiers;
    ``judge`` grades the answers of ``open`` tasks (:func:`podium.eval.verifiers.verify`: the
    1-10 rubric's score over 10). Returns the number of questions in the bank.

    Raises ConfigError for a step timeout that is not positive, open tasks without a judge
    (before any call), an unknown pool, and what :func:`record_bank` raises."""
    from podium.eval.bank import local_catalogue
    from podium.eval.verifiers import verify
    from podium.pool import load_pool
    from podium.pool_workers import build_pool_workers
    from podium.workers.stack import stack

    if not step_timeout_s > 0:
        raise ConfigError(f"--step-timeout must be a number of seconds above 0 (e.g. 600), got {step_timeout_s:g}")
    check_open_tasks(tasks, judged=judge is not None)
    workers = [stack(w, cache=cache) for w in build_pool_workers(load_pool(pool))]  # as called: no budget guard
    return record_bank(
        catalogue or local_catalogue(),
        tasks,
        workers,
        out,
        score=lambda task, answer: verify(task, answer, judge=judge),
        step_timeout_s=step_timeout_s,
        cache_hits=lambda: cache.hits,
        on_start=on_start,
        on_progress=on_progress,
    )
