"""What does storing a trace cost the request, and the process? Write-behind against writing in
the caller's thread, in the same run.

N one-step requests are stored as the orchestrator stores them — ``begin`` when a request
starts, ``write`` when it ends — with ``--in-flight`` requests overlapping (request i starts,
and request i - in_flight ends, at each tick), into a fresh trace file per way:

* **inline** — ``TraceStore(write_behind=False)``: each write commits in the caller's thread
  (podium before the write-behind);
* **behind** — the default: the caller queues, the writer thread group-commits.

Reported per request: the caller's thread CPU (what the event loop pays), the whole process's
CPU (the writer thread included), the wall time, and for ``behind`` the writer's batches. Ways
alternate over ``--repeats`` rounds, and the ratios are behind / inline of each round's medians.

    .venv/bin/python bench/trace_writes.py [--n 2000] [--in-flight 64] [--repeats 3] [--json OUT]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from podium.records import RunRecord, StepRecord, Totals
from podium.trace.store import TraceStore
from podium.workers.base import Usage
from podium.workflow import Step, Workflow


def template() -> RunRecord:
    """A one-step request as ``podium serve`` with a single-worker conductor stores it."""
    at = "2026-12-01T00:00:00.000Z"
    step = StepRecord(
        index=0,
        phase="workflow",
        worker_index=0,
        worker="upstream",
        subtask="Answer the question.",
        access=(),
        visible=(),
        messages=({"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "Q"}),
        output="42",
        usage=Usage(20, 2),
        cost_usd=0.000024,
        latency_s=0.05,
        started_at=at,
        finished_at=at,
    )
    return RunRecord(
        "0" * 32, "What is 6 * 7?", "bench", ("upstream",), "single:upstream", "run", at, at, "ok", "42",
        (), (Workflow((Step(0, "Answer the question.", ()),)),), (step,), Totals(total_cost_usd=0.000024),
        tags=("model:podium",),
    )  # fmt: skip


def one_way(folder: Path, behind: bool, n: int, in_flight: int) -> dict[str, Any]:
    path = folder / f"{'behind' if behind else 'inline'}-{time.monotonic_ns()}.sqlite3"
    store = TraceStore(path, write_behind=behind)
    base = template()
    records = [dataclasses.replace(base, id=f"{i:032x}") for i in range(n)]
    wall0, cpu0, thread0 = time.perf_counter(), time.process_time(), time.thread_time()
    for i in range(n + in_flight):
        if i < n:
            r = records[i]
            store.begin(r.id, r.question, started_at=r.started_at, pool=r.pool, conductor=r.conductor, mode="run")
        if i >= in_flight:
            store.write(records[i - in_flight])
    caller = time.thread_time() - thread0
    store.flush()
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    stats = store.stats()
    stored = len(store.list(limit=n + 1))
    store.close()
    assert stored == n, f"{stored} of {n} records stored"
    return {
        "caller_cpu_us_per_request": round(caller / n * 1e6, 1),
        "process_cpu_us_per_request": round(cpu / n * 1e6, 1),
        "wall_us_per_request": round(wall / n * 1e6, 1),
        "batches": stats.batches,
        "mean_batch": round(stats.written / stats.batches, 1) if stats.batches else None,
        "full_waits": stats.full_waits,
        "lost": stats.lost,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="requests per way and round")
    parser.add_argument("--in-flight", type=int, default=64, help="requests overlapping")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rounds: dict[str, list[dict[str, Any]]] = {"inline": [], "behind": []}
    with tempfile.TemporaryDirectory() as tmp:
        one_way(Path(tmp), True, 50, 8)  # warm-up: imports, SQLite's caches
        for r in range(args.repeats):
            order = ("inline", "behind") if r % 2 == 0 else ("behind", "inline")
            for way in order:
                rounds[way].append(one_way(Path(tmp), way == "behind", args.n, args.in_flight))
    keys = ("caller_cpu_us_per_request", "process_cpu_us_per_request", "wall_us_per_request")
    result: dict[str, Any] = {"config": {k: v for k, v in vars(args).items() if k != "json"}}
    for way, runs in rounds.items():
        result[way] = {k: statistics.median(run[k] for run in runs) for k in keys}
        result[way]["runs"] = runs
    result["behind/inline"] = {
        k: round(statistics.median(b[k] / i[k] for b, i in zip(rounds["behind"], rounds["inline"], strict=True)), 3)
        for k in keys
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
