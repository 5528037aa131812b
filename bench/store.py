"""SQLite against PostgreSQL, in the same run: traces written per second, what storing a trace
adds to a request, and what a shared budget reservation costs.

For each engine — the embedded SQLite trace file and key store, and a PostgreSQL database
(``--database-url``, or a throwaway server started here as the tests start theirs, from
Debian's ``postgresql`` package) — and for 1 and 64 requests in flight:

* **traces** — N one-step requests stored as the orchestrator stores them (``begin`` at the
  start, ``write`` at the end, ``in_flight`` overlapping), through the write-behind writer:
  traces committed per second (wall time until the last commits), and the p95 time the
  request's own thread spends in ``begin`` + ``write`` (what the request is delayed by);
* **ledger** — ``threads`` callers each reserving and settling M calls on one shared key budget
  (:class:`podium.store.ledger.SharedPeriodBudget`; on the request path: a reservation is a
  transaction before every worker call): reservations per second and p95 reserve + settle, ms.

The ratios are PostgreSQL / SQLite of the same run (rounds alternate the engines).

    .venv/bin/python bench/store.py [--n 2000] [--calls 300] [--repeats 3] [--database-url URL] [--json OUT]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "bench"), str(ROOT)]

from trace_writes import template  # noqa: E402  (bench/trace_writes.py: the one-step record)

from podium.store.engine import open_store, sqlite_url  # noqa: E402
from podium.store.ledger import SharedPeriodBudget  # noqa: E402
from podium.trace.postgres import PostgresTraceStore  # noqa: E402
from podium.trace.store import TraceStore  # noqa: E402


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1] if len(values) >= 20 else max(values)


def traces(store: Any, n: int, in_flight: int) -> dict[str, float]:
    base = template()
    records = [dataclasses.replace(base, id=f"{time.monotonic_ns():020x}{i:012x}") for i in range(n)]
    added: list[float] = []
    started: dict[int, float] = {}
    wall0 = time.perf_counter()
    for i in range(n + in_flight):
        if i < n:
            r = records[i]
            t = time.perf_counter()
            store.begin(r.id, r.question, started_at=r.started_at, pool=r.pool, conductor=r.conductor, mode="run")
            started[i] = time.perf_counter() - t
        if i >= in_flight:
            j = i - in_flight
            t = time.perf_counter()
            store.write(records[j])
            added.append(started.pop(j) + time.perf_counter() - t)
    store.flush()
    wall = time.perf_counter() - wall0
    assert store.stats().lost == 0
    return {"traces_per_s": round(n / wall, 1), "p95_added_ms": round(p95(added) * 1e3, 4)}


def ledger(engine: Any, threads: int, calls: int) -> dict[str, float]:
    budget = SharedPeriodBudget(engine, 1e9, scope=f"key:bench-{time.monotonic_ns()}/day")
    times: list[float] = []
    lock = threading.Lock()

    def caller() -> None:
        mine = []
        for _ in range(calls):
            t = time.perf_counter()
            budget.settle_hold(budget.hold(0.001), 0.0008)
            mine.append(time.perf_counter() - t)
        with lock:
            times.extend(mine)

    wall0 = time.perf_counter()
    workers = [threading.Thread(target=caller) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    wall = time.perf_counter() - wall0
    return {"reservations_per_s": round(threads * calls / wall, 1), "p95_reserve_settle_ms": round(p95(times) * 1e3, 3)}


def one_round(engine_name: str, folder: Path, url: str, args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for in_flight in (1, 64):
        if engine_name == "sqlite":
            store: Any = TraceStore(folder / f"t-{time.monotonic_ns()}.sqlite3")
        else:
            store = PostgresTraceStore(url)
        out[f"traces@{in_flight}"] = traces(store, args.n, in_flight)
        store.close()
    engine = open_store(sqlite_url(folder / "keys.sqlite3") if engine_name == "sqlite" else url, migrate=True)
    for threads in (1, 64):
        out[f"ledger@{threads}"] = ledger(engine, threads, max(2, args.calls // threads))
    engine.dispose()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="traces per engine, in-flight level and round")
    parser.add_argument("--calls", type=int, default=300, help="reservations per engine and level (split by threads)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--database-url", help="a PostgreSQL database (default: a throwaway local server)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    server = None
    folder = Path(tempfile.mkdtemp(prefix="podium-bench-store-"))
    try:
        url = args.database_url
        if url is None:
            from tests.postgres_support import PostgresServer, find_bindir

            bindir, why = find_bindir()
            if bindir is None:
                sys.exit(f"bench/store.py: {why}; or pass --database-url")
            server = PostgresServer(bindir, Path(tempfile.mkdtemp(prefix="podium-pg-")))
            url = server.new_database()
        open_store(url, migrate=True).dispose()
        rounds: dict[str, list[dict[str, Any]]] = {"sqlite": [], "postgresql": []}
        one_round("sqlite", folder, url, argparse.Namespace(n=100, calls=40))  # warm-up
        for r in range(args.repeats):
            for name in ("sqlite", "postgresql") if r % 2 == 0 else ("postgresql", "sqlite"):
                rounds[name].append(one_round(name, folder, url, args))
    finally:
        if server is not None:
            server.stop()
            shutil.rmtree(server.root, ignore_errors=True)
        shutil.rmtree(folder, ignore_errors=True)
    result: dict[str, Any] = {"config": {k: v for k, v in vars(args).items() if k not in ("json", "database_url")}}
    for name, runs in rounds.items():
        result[name] = {
            level: {k: statistics.median(run[level][k] for run in runs) for k in runs[0][level]} for level in runs[0]
        }
    result["postgresql/sqlite"] = {
        level: {k: round(result["postgresql"][level][k] / result["sqlite"][level][k], 2) for k in values}
        for level, values in result["sqlite"].items()
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
