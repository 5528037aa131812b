"""``podium bank``: record and inspect workflow outcome banks (:mod:`podium.eval.bank`).

``podium bank record`` executes a catalogue on a task set, live, appending one row per question
(resumable: rerun the same command to continue); ``podium bank show`` summarises a bank: per
column the mean score, cost and latency over the recorded questions; ``podium bank merge`` writes
a new bank from the rows of several (e.g. more training rows, a held-out set left out).

Exit codes: 0 done, 2 bad options or input.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from podium._args import MANY, SEED, PositiveNumber, WholeNumber
from podium.errors import ConfigError
from podium.store.engine import store_location

__all__ = ["add_parsers", "cmd_bank", "record_command", "run"]

_CACHE_HELP = "request cache: a SQLite file or a shared database's URL (default: podium's eval cache)"


def add_parsers(sub: Any) -> None:
    """Register ``podium bank`` on the top-level subparsers."""
    bank = sub.add_parser("bank", help="record and inspect workflow outcome banks").add_subparsers(
        dest="bank_command", required=True, metavar="SUBCOMMAND"
    )
    rec = bank.add_parser(
        "record",
        help="execute a catalogue of role steps on questions, live, into a bank (resumable)",
        description=(
            "Execute every column of a catalogue (role steps: solve, sample, program, run, state, verify) "
            "on each question, live through the request cache, and append one row per question to "
            "OUT/matrix.csv (sidecar OUT/workflows.json). Rerun the same command to resume."
        ),
    )
    rec.add_argument(
        "--tasks",
        type=Path,
        action="append",
        required=True,
        help="task set (JSONL): a benchmark or a regression set; repeat for several",
    )
    rec.add_argument("--out", type=Path, required=True, help="the bank's folder")
    rec.add_argument("--ids", type=Path, help="record only these task ids (a file, one id per line), in file order")
    rec.add_argument("--split", help="keep this split of the task set")
    rec.add_argument("--sample", action=WholeNumber, low=1, high=MANY, help="a seeded random sample of this many tasks")
    rec.add_argument(
        "--seed", action=WholeNumber, low=SEED[0], high=SEED[1], default=0, help="seed of --sample (default 0)"
    )
    rec.add_argument("--limit", action=WholeNumber, low=1, high=MANY, help="at most this many tasks")
    rec.add_argument(
        "--pool", default="local-tools", help="pool file or preset with the catalogue's workers (default local-tools)"
    )
    rec.add_argument(
        "--catalogue",
        default="local",
        choices=["local", "local-checked"],
        help="which catalogue (default: local; local-checked adds a check of 4 answers with the question's tests)",
    )
    rec.add_argument("--cache", type=store_location, help=_CACHE_HELP)
    rec.add_argument(
        "--step-timeout", action=PositiveNumber, default=600.0, metavar="SECONDS", help="per step (default 600)"
    )
    rec.add_argument(
        "--judge",
        metavar="WORKER",
        help="the worker that grades open tasks' answers (1-10 rubric, through the cache); needed when the set has any",
    )
    rec.add_argument(
        "--judge-pool", metavar="POOL", help="the pool file or preset --judge is a worker of (default --pool)"
    )
    restore = bank.add_parser(
        "restore-cache",
        help="put a bank's recorded calls into the request cache (a warm cache on a new machine)",
        description=(
            "Rebuild every recorded call of a bank as the request cache stores it, so that workflows over the "
            "bank's steps run from the cache: what was recorded, replayed through the real executor."
        ),
    )
    restore.add_argument("bank", type=Path, help="the bank's folder")
    restore.add_argument(
        "--pool", default="local-tools", help="the pool the bank was recorded on (default local-tools)"
    )
    restore.add_argument("--cache", type=store_location, help=_CACHE_HELP)
    merge = bank.add_parser(
        "merge",
        help="combine banks recorded with one catalogue into a new bank (e.g. more training rows)",
        description=(
            "Write a new bank at --out from the rows of BANK..., in order, each keeping its split: only one "
            "split with --split, none whose id an --exclude list names (a held-out set), each question once."
        ),
    )
    merge.add_argument("banks", type=Path, nargs="+", metavar="BANK", help="a bank's folder (or its matrix.csv)")
    merge.add_argument("--out", type=Path, required=True, help="the new bank's folder (must not hold a bank)")
    merge.add_argument("--split", help="keep only the rows of this split (e.g. train)")
    merge.add_argument(
        "--exclude",
        type=Path,
        action="append",
        default=[],
        metavar="IDS",
        help="leave out the task ids this file lists (one per line; repeat for several)",
    )
    show = bank.add_parser("show", help="per column: mean score, cost and latency of a bank")
    show.add_argument("bank", type=Path, help="the bank's folder (or its matrix.csv)")
    show.add_argument("--split", help="only the questions of this split (e.g. train or test)")
    show.add_argument("--json", action="store_true", help="machine-readable output")


def cmd_bank(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Run ``podium bank record`` / ``restore-cache`` / ``merge`` / ``show``."""
    if args.bank_command == "record":
        return record_command(args, err)
    if args.bank_command == "restore-cache":
        return _restore(args, err)
    if args.bank_command == "merge":
        return _merge(args, err)
    return _show(args, out)


def _restore(args: argparse.Namespace, err: Console) -> int:
    from podium.eval.bank import read_bank
    from podium.eval.record import restore_cache
    from podium.pool import load_pool
    from podium.pool_workers import build_pool_workers
    from podium.store.request_cache import RequestCache, default_cache_path

    bank = read_bank(args.bank)
    cache = RequestCache(args.cache or default_cache_path())
    stored = restore_cache(bank, build_pool_workers(load_pool(args.pool)), cache)
    err.print(Text(f"stored {stored} recorded calls of {len(bank.rows)} question(s) in {cache.path}", style="green"))
    return 0


def _merge(args: argparse.Namespace, err: Console) -> int:
    from podium.eval.bank import merge_banks

    exclude = {i for path in args.exclude for i in _read_ids(path, "--exclude")}
    result = merge_banks(args.banks, args.out, split=args.split, exclude=exclude)
    left = ", ".join(f"{n} {why}" for why, n in result.left_out.items() if n) or "none"
    err.print(Text(f"bank {args.out}: {result.rows} question(s) (left out: {left})", style="green"))
    return 0


def _read_ids(path: Path, option: str = "--ids") -> list[str]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(
            f"cannot read {option} {path}: {exc.strerror or exc}; give a text file, one task id per line"
        ) from None
    except UnicodeDecodeError:
        raise ConfigError(f"{option} {path} is not UTF-8 text; give a text file, one task id per line") from None
    ids = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    if not ids:
        raise ConfigError(f"{option} {path} lists no task id (one per line)")
    return ids


def record_command(args: argparse.Namespace, err: Console) -> int:
    """``podium bank record`` with its options ``args``: record the tasks not yet in the bank;
    progress lines on ``err``. Raises ConfigError for bad options or input."""
    from podium.eval.bank import local_catalogue
    from podium.eval.record import RecordProgress, check_open_tasks, record_local_bank
    from podium.eval.tasks import load_tasks, select
    from podium.store.request_cache import RequestCache, default_cache_path

    tasks = [t for path in args.tasks for t in load_tasks(path, split=args.split)]
    if args.ids is not None:
        wanted = _read_ids(args.ids)
        by_id = {t.id: t for t in tasks}
        unknown = [i for i in wanted if i not in by_id]
        if unknown:
            files = ", ".join(str(p) for p in args.tasks)
            raise ConfigError(f"--ids: {len(unknown)} id(s) not in {files}, e.g. {unknown[0]!r}")
        tasks = [by_id[i] for i in wanted]
    tasks = select(tasks, limit=args.limit, sample=args.sample, seed=args.seed)
    if not tasks:
        raise ConfigError("no task left after --ids/--sample/--limit")
    if args.judge_pool is not None and args.judge is None:
        raise ConfigError("--judge-pool names the pool of --judge: give --judge WORKER too")
    check_open_tasks(tasks, judged=args.judge is not None)  # these checks come before the cache file is made
    if args.judge is not None:
        from podium.pool import load_pool
        from podium.pool_workers import judge_index

        judge_index(load_pool(args.judge_pool or args.pool), args.judge)
    catalogue = local_catalogue(name=args.catalogue)
    columns = len(catalogue.columns)
    cache = RequestCache(args.cache or default_cache_path())
    judge = None
    if args.judge is not None:
        from podium.builder import judge_worker

        judge = judge_worker(args.judge_pool or args.pool, args.judge, cache=cache)
    plain = not err.is_terminal
    started = time.perf_counter()
    state: dict[str, Any] = {}

    def on_start(todo: int, done: int) -> None:
        state["todo"] = todo
        err.print(
            f"bank {args.out}: {done} question(s) recorded, {todo} to go · {columns} columns "
            f"per question · cache {cache.path}",
            highlight=False,
        )

    def on_progress(p: RecordProgress) -> None:
        elapsed = time.perf_counter() - started
        # an estimate over fewer than 3 questions is mostly whether they were cached
        eta = _hms(elapsed / p.done * (p.total - p.done)) if p.done >= 3 else "after 3 questions"
        line = (
            f"[{p.done}/{p.total}] {p.task_id}: {p.seconds:.0f} s ({p.cache_hits} cache hits) · "
            f"elapsed {_hms(elapsed)} · ETA {eta}"
        )
        if plain:
            print(line, file=sys.stderr, flush=True)
        else:
            err.print(line, highlight=False)

    total = record_local_bank(
        tasks,
        args.out,
        catalogue=catalogue,
        pool=args.pool,
        cache=cache,
        step_timeout_s=args.step_timeout,
        judge=judge,
        on_start=on_start,
        on_progress=on_progress,
    )
    err.print(Text(f"bank {args.out}: {total} question(s)", style="green"))
    return 0


def _hms(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def _show(args: argparse.Namespace, out: Console) -> int:
    from podium.eval.bank import read_bank

    bank = read_bank(args.bank)
    splits = dict(sorted(Counter(r["split"] for r in bank.rows).items()))
    if args.split is not None:
        if args.split not in splits:
            known = ", ".join(f"{k} ({n})" for k, n in splits.items()) or "none"
            raise ConfigError(f"bank {args.bank} has no question in split {args.split!r}; its splits: {known}")
        bank = dataclasses.replace(bank, rows=[r for r in bank.rows if r["split"] == args.split])
    stats = bank.column_stats()
    if args.json:
        doc = {"bank": str(args.bank), "questions": len(bank.rows), "splits": splits, "split": args.split}
        print(json.dumps({**doc, "columns": stats}, indent=1))
        return 0
    shown = ", ".join(f"{n} {k}" for k, n in splits.items())
    which = f"split {args.split}: {len(bank.rows)} question(s)" if args.split else f"{len(bank.rows)} question(s)"
    table = Table(title=f"bank {args.bank} · {which} (of {shown})")
    table.add_column("column", overflow="fold", min_width=20)
    for col in ("score", "$/question", "latency s", "errors"):
        table.add_column(col, justify="right", no_wrap=True)
    for cid, s in stats.items():
        table.add_row(cid, f"{s['score']:.3f}", f"{s['total_cost']:.6f}", f"{s['latency_s']:.1f}", str(s["errors"]))
    out.print(table)
    return 0


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Run ``podium bank``; returns the exit code."""
    return cmd_bank(args, out, err)
