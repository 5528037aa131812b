"""How fast are trace search and purge on a file of realistic size? Measure, don't guess.

Writes N requests (GSM8K test questions from data/, a 3-step workflow whose outputs are
~1.5 KB each) into a fresh trace file through TraceStore.begin/write, then times a few searches,
a filtered listing, and a purge of the oldest tenth (delete, FTS5 merge, VACUUM, WAL truncate).

    .venv/bin/python bench/traces.py --n 5000

Times depend on the machine; the file sizes do not.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable, Sized
from pathlib import Path

from podium.records import PlanAttempt, RunRecord, StepRecord, Totals
from podium.trace.query import TraceFilter
from podium.trace.store import TraceStore
from podium.workers.base import Usage
from podium.workflow import ALL, Step, Workflow

DATA = Path(__file__).resolve().parents[1] / "data" / "benchmarks" / "gsm8k" / "test.jsonl"


def record(i: int, n: int, question: str, solution: str) -> RunRecord:
    day = f"2026-{1 + i * 12 // n:02d}-{1 + i % 28:02d}T{i % 24:02d}:00:00.000Z"
    plan = Workflow((Step(0, "Solve step by step.", ()), Step(1, "Check the solution.", ALL), Step(2, "Answer.", ALL)))
    output = (solution + "\n") * max(1, 1500 // max(1, len(solution)))
    steps = tuple(
        StepRecord(
            index=k,
            phase="workflow",
            worker_index=k,
            worker=f"worker-{k}",
            subtask=s.subtask,
            access=s.access,
            visible=tuple(range(k)),
            messages=({"role": "user", "content": question + "\n" + output[:800]},),
            output=output,
            usage=Usage(400, 300),
            cost_usd=0.0004,
            latency_s=1.5,
            started_at=day,
            finished_at=day,
        )
        for k, s in enumerate(plan.steps)
    )
    attempt = PlanAttempt(0, ({"role": "user", "content": question},), "Reasoning: solve, check, answer.", plan)
    return RunRecord(
        f"{i:032x}", question, "bench", ("w0", "w1", "w2"), "lm:bench", "run", day, day,
        "ok", output[:200], (attempt,), (plan,), steps, Totals(total_cost_usd=0.0012 * (1 + i % 5), wall_time_s=4.5),
        tags=("bench",), subject=f"customer-{i % 100}",
    )  # fmt: skip


def timed(label: str, fn: Callable[[], Sized]) -> float:
    started = time.perf_counter()
    found = len(fn())
    elapsed = time.perf_counter() - started
    print(f"{label:<48} {elapsed * 1000:9.1f} ms  ({found} found)")
    return elapsed


def main(n: int) -> None:
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "traces.sqlite3"
        store = TraceStore(path)
        started = time.perf_counter()
        for i in range(n):
            row = rows[i % len(rows)]
            r = record(i, n, row["question"], row["answer"])
            store.begin(r.id, r.question, started_at=r.started_at, pool="bench", conductor=r.conductor, mode="run")
            store.write(r)
        write_s = time.perf_counter() - started
        store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        print(f"wrote {n} requests in {write_s:.1f} s ({write_s / n * 1000:.2f} ms per begin+write)")
        print(f"file: {path.stat().st_size / 1e6:.1f} MB")
        timed("search 'eggs' (limit 20)", lambda: store.search("eggs"))
        timed("search 'farmers market' (limit 20)", lambda: store.search("farmers market"))
        timed(
            "search 'eggs' --subject customer-7", lambda: store.search("eggs", where=TraceFilter(subject="customer-7"))
        )
        timed("search 'eggs' --field question", lambda: store.search("eggs", fields=["question"]))
        timed("list --worker worker-2 --min-cost 0.005", lambda: store.list(
            where=TraceFilter(worker="worker-2", min_cost_usd=0.005)))  # fmt: skip
        cut = f"2026-{1 + 12 // 10:02d}-06T00:00:00.000Z"
        doomed = len(store.select(before=cut))
        elapsed = timed(f"purge --before {cut[:10]} ({doomed} requests)", lambda: store.purge(before=cut).request_ids)
        print(f"file after purge: {path.stat().st_size / 1e6:.1f} MB ({elapsed:.1f} s)")
        timed("purge --subject customer-3", lambda: store.purge(subject="customer-3").request_ids)
        print(f"file after purge: {path.stat().st_size / 1e6:.1f} MB")
        store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=5000, help="requests to write (default 5000)")
    main(parser.parse_args().n)
