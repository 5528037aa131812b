"""How fast do the trace browser's pages load on a big trace file? Seeds N requests, then times
the pages of ``podium ui`` in-process (FastAPI's TestClient: the page's query, rendering and
HTTP handling, no network).

Seeding: N two-step requests (GSM8K test questions, so search words are real; statuses, workers,
conductors, costs, latencies and start times spread over 90 days) committed in batches of 1,000
through ``TraceStore._commit`` — the write-behind writer's own group commit (rows, steps and
search index, as a served request stores them), without the queue in between.

Pages timed (each ``--repeats`` times after one warm-up; median and p95, milliseconds):

* the first page (``GET /ui``, the newest 50);
* filtered pages: a rare status, a worker, a cost range, a conductor pattern, a day; and two
  filters nothing matches (the worst case: every request is looked at);
* a search (the search box: FTS5 over every text), alone and with a filter;
* an "older" page deep in the history (``before`` = the page cursor 90 % of the way back);
* one request's page.

    nice .venv/bin/python bench/ui_load.py [--n 100000] [--repeats 7] [--db FILE] [--json OUT]

``--db FILE`` keeps (or reuses, when it exists) the seeded file.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Literal

from fastapi import FastAPI
from fastapi.testclient import TestClient

from podium.records import PlanAttempt, RunRecord, StepRecord, Totals
from podium.serve.ui import PAGE_SIZE, ui_router
from podium.trace.store import TraceStore
from podium.workers.base import Usage
from podium.workflow import ALL, Step, Workflow

ROOT = Path(__file__).resolve().parent.parent
QUESTIONS = ROOT / "data" / "benchmarks" / "gsm8k" / "test.jsonl"
START = datetime(2026, 9, 1, tzinfo=UTC)
SPAN_S = 90 * 86_400
WORKERS = ("qwen-1.5b", "qwen-0.5b", "gpt-4o-mini", "claude-haiku", "python")
STATUSES: tuple[Literal["ok", "fallback", "error"], ...] = ("ok",) * 90 + ("fallback",) * 7 + ("error",) * 3


def _at(i: int, n: int) -> str:
    moment = START + timedelta(seconds=SPAN_S * i / n)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def record(i: int, n: int, question: str, answer: str) -> RunRecord:
    """Request ``i`` of ``n``: two steps on two of the five workers; 90 % ok, 7 % fallback, 3 % error."""
    at = _at(i, n)
    first, second = WORKERS[i % 5], WORKERS[(i // 5 + 1 + i) % 5]
    plan = Workflow((Step(0, "Solve step by step.", ()), Step(1, "Check and answer.", ALL)))
    steps = tuple(
        StepRecord(
            index=k,
            phase="workflow",
            worker_index=k,
            worker=worker,
            subtask=s.subtask,
            access=s.access,
            visible=tuple(range(k)),
            messages=({"role": "user", "content": question},),
            output=answer[:400],
            usage=Usage(120 + i % 50, 80 + i % 30),
            cost_usd=0.0001 * (1 + (i * 7 + k) % 40),
            latency_s=0.2 + (i * 13 + k) % 50 / 10,
            started_at=at,
            finished_at=at,
        )
        for k, (s, worker) in enumerate(zip(plan.steps, (first, second), strict=True))
    )
    attempt = PlanAttempt(0, ({"role": "user", "content": question},), "Solve, then check.", plan)
    cost, wall = sum(s.cost_usd for s in steps), sum(s.latency_s for s in steps)
    return RunRecord(
        f"{i:032x}", question, "bench", WORKERS, f"lm:bench@v{1 + i % 3}", "run", at, at, STATUSES[i % 100],
        answer[-80:], (attempt,), (plan,), steps, Totals(total_cost_usd=cost, wall_time_s=wall),
        tags=("bench",), subject=f"customer-{i % 1000}",
    )  # fmt: skip


def seed(store: TraceStore, n: int) -> float:
    rows = [json.loads(line) for line in QUESTIONS.read_text(encoding="utf-8").splitlines() if line.strip()]
    started = time.perf_counter()
    batch: list[RunRecord] = []
    for i in range(n):
        row = rows[i % len(rows)]
        batch.append(record(i, n, row["question"], row["answer"]))
        if len(batch) == 1000 or i == n - 1:
            store._commit(batch)  # the writer's group commit
            batch = []
            print(f"\rseeded {i + 1:,} / {n:,}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return time.perf_counter() - started


def timed(call: Callable[[], Any], repeats: int) -> tuple[list[float], Any]:
    call()  # warm-up: the page cache, Jinja's compiled template
    times, answer = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        answer = call()
        times.append((time.perf_counter() - t) * 1000)
    return times, answer


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[-1] if len(values) > 1 else values[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="requests to seed (default 100,000)")
    parser.add_argument("--repeats", type=int, default=7, help="timed loads per page (default 7)")
    parser.add_argument("--db", type=Path, help="keep the seeded trace file here (reused when it exists)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    folder = tempfile.TemporaryDirectory()
    path = args.db or Path(folder.name) / "traces.sqlite3"
    fresh = not path.exists()
    store = TraceStore(path, write_behind=False)
    seed_s = seed(store, args.n) if fresh else None
    total = store._db.execute("SELECT COUNT(*) FROM requests").fetchone()[0]
    store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    app = FastAPI()
    app.include_router(ui_router(SimpleNamespace(traces=store, keys=None)))  # type: ignore[arg-type]
    client = TestClient(app)
    deep = f"{_at(int(total * 0.1), total)}|{'f' * 32}"  # the page cursor 90 % of the way back from the newest
    cases: list[tuple[str, Callable[[], Any]]] = [
        ("first page (GET /ui)", lambda: client.get("/ui")),
        ("filter status=error (3 %)", lambda: client.post("/ui", data={"status": "error"})),
        ("filter worker=python", lambda: client.post("/ui", data={"worker": "python"})),
        ("filter cost ≥ $0.0075", lambda: client.post("/ui", data={"min_cost": "0.0075"})),
        ("filter conductor=lm:bench@v2", lambda: client.post("/ui", data={"conductor": "lm:bench@v2"})),
        (
            "filter since+until (one day)",
            lambda: client.post("/ui", data={"since": "2026-10-01", "until": "2026-10-01"}),
        ),
        ("filter status=running (none: all scanned)", lambda: client.post("/ui", data={"status": "running"})),
        ("filter worker=nobody (none: all scanned)", lambda: client.post("/ui", data={"worker": "nobody"})),
        ("search 'eggs'", lambda: client.post("/ui", data={"q": "eggs"})),
        ("search 'farmers market'", lambda: client.post("/ui", data={"q": "farmers market"})),
        ("search 'eggs' + status=fallback", lambda: client.post("/ui", data={"q": "eggs", "status": "fallback"})),
        ("older page, 90 % back (before=…)", lambda: client.post("/ui", data={"before": deep})),
        ("older page, worker=python, 90 % back", lambda: client.post("/ui", data={"before": deep, "worker": "python"})),
        ("a request's page", lambda: client.get(f"/ui/requests/{total // 2:032x}")),
    ]
    results = []
    print(
        f"\n{total:,} requests in {path.stat().st_size / 1e6:.0f} MB"
        + (f", seeded in {seed_s:.0f} s" if seed_s else "")
    )
    print(f"{'page':<42} {'rows':>5} {'median ms':>10} {'p95 ms':>8}")
    for label, call in cases:
        times, answer = timed(call, args.repeats)
        assert answer.status_code == 200, (label, answer.status_code, answer.text[:300])
        shown = 1 if label.startswith("a request") else answer.text.count('class="request"')
        row = {
            "page": label,
            "rows": shown,
            "median_ms": round(statistics.median(times), 1),
            "p95_ms": round(p95(times), 1),
        }
        results.append(row)
        print(f"{label:<42} {shown:>5} {row['median_ms']:>10.1f} {row['p95_ms']:>8.1f}", flush=True)
    if args.json:
        args.json.write_text(
            json.dumps({"n": total, "page_size": PAGE_SIZE, "seed_s": seed_s, "pages": results}, indent=1)
        )
    store.close()
    folder.cleanup()


if __name__ == "__main__":
    main()
