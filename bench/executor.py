"""Executor benchmark: per-step overhead and parallel efficiency (issue: executor).

1. Overhead: a 5-step chain (each step sees all earlier ones) on zero-latency fake workers,
   through the full stack (budget guard, retries, circuit breaker, trace store on a real SQLite
   file) — wall time per step, against calling the same fake worker directly in a loop
   (the baseline, measured in the same run).
2. Per request and per step: the same stack on a 1-step and on the 5-step chain; the 4 extra
   steps give the cost of a step, the rest of the 1-step request is the per-request cost
   (conductor call, budget, record, trace hand-off). Wall time on the request's path, and CPU of
   the whole process (the trace writer thread included, flushed at the end).
3. Parallel efficiency: a fan-out workflow — 4 independent steps, then an aggregator that sees
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
from podium.orchestrator import Fallback, Orchestrator, OrchestratorConfig
from podium.testing import ScriptedConductor, ScriptedWorker
from podium.trace.store import TraceStore
from podium.workers.base import Call
from podium.workers.resilience import ResiliencePolicy
from podium.workers.stack import stack

ONE = 'model_id = [0]\nsubtasks = ["a"]\naccess_list = [[]]'
CHAIN = (
    'model_id = [0, 0, 0, 0, 0]\nsubtasks = ["a", "b", "c", "d", "e"]\naccess_list = [[], "all", "all", "all", "all"]'
)
FAN_OUT = 'model_id = [0, 0, 0, 0, 0]\nsubtasks = ["a", "b", "c", "d", "agg"]\naccess_list = [[], [], [], [], "all"]'


def orchestrator(plan: str, latency_s: float, db: Path) -> Orchestrator:
    worker = stack(ScriptedWorker("w", reply="out", delay_s=latency_s), resilience=ResiliencePolicy())
    return Orchestrator(
        [worker],
        ScriptedConductor([plan]),
        Fallback(0, "Answer."),
        traces=TraceStore(db),
        config=OrchestratorConfig(limits=Limits(cost_cap_usd=10)),
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
    call = Call([{"role": "user", "content": "Q"}])
    started = time.perf_counter()
    for _ in range(repeats * 5):
        await direct.complete(call)
    return per_step, (time.perf_counter() - started) / (repeats * 5)


async def per_request_and_step(repeats: int, db: Path) -> dict[str, float]:
    """Seconds of wall and CPU per request (beyond its steps) and per step, from a 1-step and a
    5-step chain (cost = per_request + steps × per_step)."""
    measured: dict[int, tuple[float, float]] = {}
    for steps, plan in ((1, ONE), (5, CHAIN)):
        orch = orchestrator(plan, 0.0, db.with_suffix(f".{steps}.sqlite3"))
        await orch.run("warm-up")
        orch.close()
        wall0, cpu0 = time.perf_counter(), time.process_time()
        for i in range(repeats):
            await orch.run(f"Q{i}")
        wall = time.perf_counter() - wall0
        orch.close()  # the trace writer's work counts in the CPU
        measured[steps] = (wall / repeats, (time.process_time() - cpu0) / repeats)
    step_wall, step_cpu = ((measured[5][k] - measured[1][k]) / 4 for k in (0, 1))
    return {
        "per_request_wall": measured[1][0] - step_wall,
        "per_step_wall": step_wall,
        "per_request_cpu": measured[1][1] - step_cpu,
        "per_step_cpu": step_cpu,
    }


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
        split = asyncio.run(per_request_and_step(args.repeats * 5, Path(tmp) / "c.sqlite3"))
        ratios = asyncio.run(efficiency(args.repeats, args.latency, Path(tmp) / "b.sqlite3"))
    print("| measure | value |")
    print("|---|---|")
    print(f"| podium per step, zero-latency worker (5-step chain, traced) | {per_step * 1000:.2f} ms |")
    print(f"| direct fake-worker call (baseline) | {direct * 1000:.3f} ms |")
    print(f"| overhead per step | {(per_step - direct) * 1000:.2f} ms |")
    for what in ("request", "step"):
        wall, cpu = split[f"per_{what}_wall"], split[f"per_{what}_cpu"]
        print(f"| per {what} (1- and 5-step chains): wall / CPU | {wall * 1000:.2f} ms / {cpu * 1000:.2f} ms |")
    print(
        f"| fan-out 4+1, latency {args.latency:g} s: workflow time ÷ critical path | "
        f"median {statistics.median(ratios):.3f}, max {max(ratios):.3f} (sequential would be 2.5) |"
    )


if __name__ == "__main__":
    main()
