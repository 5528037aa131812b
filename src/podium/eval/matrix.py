"""Outcome matrices from live runs: what each single worker scored and cost, per question, in
RouterBench's column convention (docs/eval.md, "Replay pools") — so conductors can be trained and evaluated in
replay on a team's own pool (``podium train --replay``, ``podium eval --replay``).

``podium eval --methods single … --matrix local.csv`` writes (or extends) the file from the run's
``single:NAME`` results:

* ``sample_id`` = the task id, ``eval_name`` = its set (``gsm8k``, ``mbpp``, ``HumanEval``, a
  regression set's name), ``split`` = from the id (``gsm8k/train/12``; MBPP by its standard
  task-id ranges) or the run's ``--split``, ``prompt`` = the question, ``tags`` = its tags (a JSON
  list: podium's extension, so a gate or a training can take one slice with ``--tag``);
* per worker: the verifier's score, ``|model_response`` (the answer), ``|total_cost`` (USD) and
  ``|latency_s`` (the request's recorded critical path, seconds: podium's extension, read by the
  −μ·latency training reward).

A question is written only when every worker has a result for it. Rows already in the file are
kept (a train-split run and a test-split run go into one file); the same ``sample_id`` is
replaced by the newer result. All runs written to one file must have the same workers.

A team's own task set usually has no splits, so every row would be ``test`` while ``podium
train`` trains on ``train``. ``--matrix-split SHARE`` (with ``--seed``) assigns the whole file's
rows afresh: a seeded shuffle of the sample ids (in sorted order, so the row order does not
matter) puts ``round(SHARE · n)`` of them in ``train`` and the rest in ``test`` — at least one in
each when there are two rows or more (:func:`assign_splits`). The split is **stratified** by kind
of question: a row's tags (``math``, ``table``, …; its ``eval_name`` when it has none) name its
stratum, and each stratum gets its proportional share of the train rows (largest remainder), so
a small test split does not come out all of one kind, where a router can only tie the best
single worker.
"""

from __future__ import annotations

import csv
import json
import os
import random
import tempfile
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from podium.errors import ConfigError
from podium.eval.replay import MATRIX_FIXED_COLUMNS
from podium.eval.tasks import mbpp_split

__all__ = ["assign_new_splits", "assign_splits", "matrix_rows", "split_counts", "write_matrix"]

_FIXED = MATRIX_FIXED_COLUMNS


def _split(task_id: str, default: str | None) -> str:
    parts = task_id.split("/")
    if len(parts) >= 3 and parts[1] in ("train", "test", "validation"):
        return parts[1]
    if parts[0] == "mbpp" and len(parts) == 2 and parts[1].isdigit():
        return mbpp_split(int(parts[1]))
    return default or "test"


def matrix_rows(report: Mapping[str, Any]) -> tuple[tuple[str, ...], list[dict[str, str]], int]:
    """(worker names, rows, questions left out) from a live report's ``single:NAME`` results.

    Raises ConfigError when the report has no per-request results (written with
    ``--summary-only``) or no single-worker method."""
    results = report.get("results")
    if not results:
        raise ConfigError("the report has no per-request results (it was written with --summary-only); rerun it")
    singles = {name.split(":", 1)[1]: rs for name, rs in results.items() if name.startswith("single:")}
    if not singles:
        raise ConfigError("the report has no single-worker results: run it with --methods single")
    workers = tuple(singles)
    by_task: dict[str, dict[str, Mapping[str, Any]]] = {}
    for worker, rs in singles.items():
        for r in rs:
            by_task.setdefault(r["task_id"], {})[worker] = r
    default_split = report.get("config", {}).get("split")
    rows, left_out = [], 0
    for task_id, per_worker in by_task.items():
        if len(per_worker) < len(workers):
            left_out += 1
            continue
        first = next(iter(per_worker.values()))
        row = {
            "sample_id": task_id,
            "eval_name": task_id.split("/", 1)[0],
            "split": _split(task_id, default_split),
            "prompt": first.get("question") or "",
            "tags": json.dumps(list(first.get("tags") or ()), ensure_ascii=False),
        }
        for worker in workers:
            r = per_worker[worker]
            row[worker] = repr(float(r["score"]))
            row[f"{worker}|model_response"] = r.get("answer") or ""
            row[f"{worker}|total_cost"] = repr(float(r["cost_usd"]))
            row[f"{worker}|latency_s"] = repr(float(r.get("latency_s") or 0.0))
        rows.append(row)
    return workers, rows, left_out


def assign_splits(
    sample_ids: Iterable[str], train_share: float, seed: int = 0, strata: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``train`` or ``test`` per sample id: the ids sorted, shuffled with ``seed``, the first
    ``round(train_share · n)`` train (at least one train and one test row when n ≥ 2). With
    ``strata`` (sample id → kind; ids it lacks form one kind ``""``), that many train rows are
    shared out between the kinds in proportion to their sizes (largest remainder, ties to the
    kind named first in sorted order), each kind's rows shuffled on their own.

    Raises ConfigError unless 0 < ``train_share`` < 1."""
    if not 0.0 < train_share < 1.0:
        raise ConfigError(f"--matrix-split is the share of questions for training, between 0 and 1; got {train_share}")
    ordered = sorted(set(sample_ids))
    n_train = round(train_share * len(ordered))
    if len(ordered) >= 2:
        n_train = min(max(n_train, 1), len(ordered) - 1)
    return _draw(ordered, n_train, seed, strata)


def _draw(ordered: list[str], n_train: int, seed: int, strata: Mapping[str, str] | None) -> dict[str, str]:
    """``n_train`` of the sorted ids ``ordered`` to train, the rest to test: a seeded shuffle,
    within each stratum when ``strata`` is given (:func:`assign_splits`)."""
    rng = random.Random(seed)
    if not strata:
        rng.shuffle(ordered)
        return {sample_id: "train" if i < n_train else "test" for i, sample_id in enumerate(ordered)}
    groups: dict[str, list[str]] = {}
    for sample_id in ordered:
        groups.setdefault(strata.get(sample_id, ""), []).append(sample_id)
    kinds = sorted(groups)
    exact = {kind: n_train * len(groups[kind]) / len(ordered) for kind in kinds}
    quota = {kind: int(exact[kind]) for kind in kinds}
    for kind in sorted(kinds, key=lambda k: -(exact[k] - quota[k]))[: n_train - sum(quota.values())]:
        quota[kind] += 1
    splits: dict[str, str] = {}
    for kind in kinds:
        rng.shuffle(groups[kind])
        splits.update({s: "train" if i < quota[kind] else "test" for i, s in enumerate(groups[kind])})
    return splits


def split_counts(path: Path) -> dict[str, int]:
    """Rows per split of a matrix file (``{"train": 40, "test": 10}``)."""
    with path.open(encoding="utf-8", newline="") as handle:
        return dict(sorted(Counter(row["split"] for row in csv.DictReader(handle)).items()))


def write_matrix(
    report: Mapping[str, Any],
    path: Path,
    *,
    train_share: float | None = None,
    seed: int = 0,
    keep_splits: bool = False,
    only: Collection[str] | None = None,
) -> tuple[int, int]:
    """Write or extend ``path`` with the report's single-worker outcomes; returns (questions in
    the file, questions of this report left out for a missing worker result). With
    ``train_share``, every row of the file is assigned to train or test afresh
    (:func:`assign_splits` with ``seed``) — or, with ``keep_splits``, only the rows new to the
    file are (:func:`assign_new_splits`), so a question never moves between train and test as
    the file grows. With ``only``, rows whose sample id it lacks are removed (a task dropped
    from the set). The file is replaced atomically.

    Raises ConfigError when the file's workers differ from the report's, or for a share outside
    (0, 1)."""
    if train_share is not None:
        assign_splits((), train_share)  # a bad share fails before the file is touched
    workers, rows, left_out = matrix_rows(report)
    existing: dict[str, dict[str, str]] = {}
    if path.exists():
        with path.open(encoding="utf-8", newline="") as handle:
            reader = csv.DictReader(handle)
            theirs = tuple(c for c in (reader.fieldnames or ()) if "|" not in c and c not in _FIXED)
            if theirs != workers:
                raise ConfigError(
                    f"{path} has workers {', '.join(theirs)}; this run has {', '.join(workers)}: write another file"
                )
            existing = {rec["sample_id"]: rec for rec in reader}
    before = {sample_id: row["split"] for sample_id, row in existing.items()}
    for row in rows:
        existing[row["sample_id"]] = _keep_recorded_latency(row, existing.get(row["sample_id"]), workers)
    if only is not None:
        existing = {sample_id: row for sample_id, row in existing.items() if sample_id in only}
    if train_share is not None:
        kinds = {r["task_id"]: tuple(r.get("tags") or ()) for rs in report["results"].values() for r in rs}
        strata = {sample_id: _stratum(row, kinds) for sample_id, row in existing.items()}
        if keep_splits:
            kept = {s: split for s, split in before.items() if s in existing and split in ("train", "test")}
            new = [s for s in existing if s not in kept]
            splits = {**kept, **assign_new_splits(kept, new, train_share, seed, strata)}
        else:
            splits = assign_splits(existing, train_share, seed, strata)
        for sample_id, row in existing.items():
            row["split"] = splits[sample_id]
    columns = [*_FIXED]
    for worker in workers:
        columns += [worker, f"{worker}|model_response", f"{worker}|total_cost", f"{worker}|latency_s"]
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=columns)
            writer.writeheader()
            writer.writerows(existing.values())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return len(existing), left_out


def _keep_recorded_latency(
    row: dict[str, str], old: Mapping[str, str] | None, workers: Sequence[str]
) -> dict[str, str]:
    """``row`` with each worker's ``|latency_s`` taken from ``old`` (the file's row for the same
    question) where that worker's answer is the same: a rerun from the request cache reports the
    backend's time of the first call, a live run the whole call's wall time, so the same answer
    would otherwise change the file's bytes once — and the loop, which trains only on a changed
    matrix, would train again on the same outcomes."""
    if old is None:
        return row
    kept = dict(row)
    for worker in workers:
        column = f"{worker}|latency_s"
        same = old.get(f"{worker}|model_response") == row.get(f"{worker}|model_response")
        if same and old.get(column) and old.get(worker) == row.get(worker):
            kept[column] = old[column]
    return kept


def assign_new_splits(
    kept: Mapping[str, str],
    new_ids: Iterable[str],
    train_share: float,
    seed: int = 0,
    strata: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """``train`` or ``test`` for each of ``new_ids``, leaving ``kept`` (sample id → split) as it
    is: as many new ids go to train as bring the whole file's train share closest to
    ``train_share`` (``round(share · n)`` minus the train rows kept, within 0 … the new ids; at
    least one row of each split in the file when it can), the ids sorted and shuffled with
    ``seed`` to choose which — within each stratum when ``strata`` is given, as
    :func:`assign_splits` does. With nothing kept it is :func:`assign_splits`.

    Raises ConfigError unless 0 < ``train_share`` < 1."""
    if not kept:
        return assign_splits(new_ids, train_share, seed, strata)
    assign_splits((), train_share)
    ordered = sorted(set(new_ids) - set(kept))
    total = len(kept) + len(ordered)
    n_train = round(train_share * total) - sum(1 for split in kept.values() if split == "train")
    n_train = min(max(n_train, 0), len(ordered))
    if ordered and "test" not in kept.values() and n_train == len(ordered):
        n_train -= 1  # at least one test row, as assign_splits keeps
    if ordered and "train" not in kept.values() and n_train == 0:
        n_train = 1
    return _draw(ordered, n_train, seed, strata)


def _stratum(row: Mapping[str, str], kinds: Mapping[str, tuple[str, ...]]) -> str:
    """A matrix row's kind of question for a stratified split: its task's tags in this report,
    else its ``eval_name`` (a row kept from an earlier run)."""
    tags = kinds.get(row["sample_id"])
    return ",".join(sorted(tags)) if tags else row.get("eval_name", "")
