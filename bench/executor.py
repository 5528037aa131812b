"""Executor benchmark: per-step overhead and parallel efficiency (issue: executor).

1. Overhead: a 5-step chain (each step sees all earlier ones) on zero-latency fake workers,
   through the full stack (budget guard, retries, circuit breaker, trace store on a real SQLite
   file) — wall time per step, against calling the same fake worker directly in a loop
   (the baseline, measured in the same run).
2. Parallel efficiency: a fan-out workflow — 4 independent steps, then an aggregator that sees
   all of them — on workers with a fixed latency L. The critical path is 2·L; efficiency =
   wall time ÷ critical path (1.0 is ideal; fully sequential execution would be 2.5).

    .venv/bin/python bench/executor.py [--repeats 20] [--latency 0.2]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from podium.budget import Limits
from podium.orchestrator import Fallback, Orchestrator
from podium.testing import ScriptedConductor, ScriptedWorker
from podium.trace.store import TraceStore
from podium.workers.resilience import ResiliencePolicy, harden

CHAIN = (
    'model_id = [0, 0, 0, 0, 0]\nsubtasks = ["a", "b", "c", "d", "e"]\naccess_list = [[], "all", "all", "all", "all"]'
)
FAN_OUT = 'model_id = [0, 0, 0, 0, 0]\nsubtasks = ["a", "b", "c", "d", "agg"]\naccess_list = [[], [], [], [], "all"]'


def orchestrator(plan: str, latency_s: float, db: Path) -> Orchestrator:
    worker = harden(ScriptedWorker("w", reply="out", delay_s=latency_s), ResiliencePolicy())
    return Orchestrator(
        [worker],
        ScriptedConductor([plan]),
        Fallback(0, "Answer."),
        traces=TraceStore(db),
        limits=Limits(cost_cap_usd=10),
    )


async def overhead(repeats: int, db: Path) -> tuple[float, float]:
    """(seconds per step through podium, seconds per direct fake-worker call)."""
    orch = orchestrator(CHAIN, 0.0, db)
    await orch.run("warm-up")
    started = time.perf_counter()
    for i in range(repeats):
        await orch.run(f"Q{i}")
    per_step = (time.perf_counter() - started) / (repeats * 5)
    direct = ScriptedWorker("w", reply="out")
    msgs = [{"role": "user", "content": "Q"}]
    started = time.perf_counter()
    for _ in range(repeats * 5):
        await direct.complete(msgs)  # type: ignore[arg-type]
    return per_step, (time.perf_counter() - started) / (repeats * 5)


async def efficiency(repeats: int, latency_s: float, db: Path) -> list[float]:
    orch = orchestrator(FAN_OUT, latency_s, db)
    ratios = []
    for i in range(repeats):
        record = await orch.run(f"Q{i}")
        workflow_s = max(_t(s.finished_at) for s in record.steps) - min(_t(s.started_at) for s in record.steps)
        ratios.append(workflow_s / (2 * latency_s))
    return ratios


def _t(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--latency", type=float, default=0.2, help="fixed worker latency for the fan-out, seconds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        per_step, direct = asyncio.run(overhead(args.repeats, Path(tmp) / "a.sqlite3"))
        ratios = asyncio.run(efficiency(args.repeats, args.latency, Path(tmp) / "b.sqlite3"))
    print("| measure | value |")
    print("|---|---|")
    print(f"| podium per step, zero-latency worker (5-step chain, traced) | {per_step * 1000:.2f} ms |")
    print(f"| direct fake-worker call (baseline) | {direct * 1000:.3f} ms |")
    print(f"| overhead per step | {(per_step - direct) * 1000:.2f} ms |")
    print(
        f"| fan-out 4+1, latency {args.latency:g} s: workflow time ÷ critical path | "
        f"median {statistics.median(ratios):.3f}, max {max(ratios):.3f} (sequential would be 2.5) |"
    )


if __name__ == "__main__":
    main()
