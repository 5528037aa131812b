"""Which local model should be the default conductor? Measure, don't guess.

For each candidate conductor model of the embedded local pool, on the first N GSM8K test
questions (data/), this runs the whole main job (conductor → workflow → workers) and
records: plan validity with and without the grammar, end-to-end accuracy, conductor latency,
request wall time and cost. Results go to a JSON file and a Markdown table (stdout).

    .venv/bin/python bench/conductor_choice.py --n 6 --out docs/bench/conductor-choice.json

Accuracy uses the last number in the answer against GSM8K's ``#### N`` (a quick check; the
eval loop's math verifier is the real one). Absolute times depend on the machine; compare the
candidates within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import re
import statistics
import tempfile
from pathlib import Path
from typing import Any

from rich.progress import Progress

from podium.builder import build_orchestrator
from podium.conductor.lm import LMConductor, LMConductorSettings
from podium.messages import worker_messages
from podium.pool import PoolConfig, load_pool
from podium.pool_workers import build_pool_workers
from podium.trace.store import TraceStore
from podium.workers import Call, Worker

ROOT = Path(__file__).resolve().parent.parent
GSM8K = ROOT / "data" / "benchmarks" / "gsm8k" / "test.jsonl"
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def last_number(text: str) -> float | None:
    found = _NUMBER.findall(text)
    if not found:
        return None
    try:
        return float(found[-1].replace(",", ""))
    except ValueError:
        return None


def conductors(config: PoolConfig, pool: list[Worker], name: str) -> tuple[LMConductor, LMConductor]:
    """The pool file's conductor settings on worker ``name``: grammar-constrained, and free (the
    same prompt read by the tolerant parser; a 400-token cap keeps it bounded)."""
    c = config.conductor
    settings = LMConductorSettings(
        temperature=c.temperature,
        seed=c.seed,
        reasoning_max_tokens=c.reasoning_max_tokens,
        subtask_chars=c.subtask_chars,
    )
    model = pool[config.worker_index(name)]
    return LMConductor(model, settings), LMConductor(
        model, dataclasses.replace(settings, max_tokens=400, constrained=False)
    )


async def measure(n: int, candidates: list[str], traces: TraceStore) -> list[dict[str, Any]]:
    config = load_pool()
    pool = build_pool_workers(config)
    rows = [json.loads(line) for line in GSM8K.read_text().splitlines()[:n]]
    results = []
    with Progress() as progress:
        task = progress.add_task("conductor candidates", total=len(candidates) * n)
        for name in candidates:
            conductor, free = conductors(config, pool, name)
            orch = build_orchestrator(config, traces=traces, conductor=conductor, workers=pool)
            per: list[dict[str, Any]] = []
            for row in rows:
                record = await orch.run(row["question"])
                unconstrained = await free.plan(row["question"], pool, max_steps=config.max_steps)
                reference = float(row["answer"].split("####")[-1].strip().replace(",", ""))
                got = last_number(record.answer)
                per.append(
                    {
                        "valid_first_try": record.attempts[0].workflow is not None,
                        "valid_unconstrained": unconstrained.workflow is not None,
                        "unconstrained_error": unconstrained.error_kind,
                        "correct": got is not None and abs(got - reference) < 1e-6,
                        "steps": len(record.workflow) if record.workflow else 0,
                        "workers": [s.worker for s in record.steps],
                        "conductor_s": sum(a.latency_s for a in record.attempts),
                        "wall_s": record.totals.wall_time_s,
                        "cost_usd": record.totals.total_cost_usd,
                        "status": record.status,
                        "trace": record.id,
                    }
                )
                progress.advance(task)
            results.append(
                {
                    "conductor": name,
                    "questions": n,
                    "valid_constrained": sum(p["valid_first_try"] for p in per) / n,
                    "valid_unconstrained": sum(p["valid_unconstrained"] for p in per) / n,
                    "accuracy": sum(p["correct"] for p in per) / n,
                    "mean_steps": statistics.mean(p["steps"] for p in per),
                    "mean_conductor_s": statistics.mean(p["conductor_s"] for p in per),
                    "mean_wall_s": statistics.mean(p["wall_s"] for p in per),
                    "mean_cost_usd": statistics.mean(p["cost_usd"] for p in per),
                    "per_question": per,
                }
            )
    return results


async def plan_only(n: int, candidates: list[str]) -> list[dict[str, Any]]:
    """Cheaper, larger sample: only the conductor, on N questions. Proxies for plan quality:
    whether the answer step goes to the strongest worker (Model 0) and whether any step goes
    to the tiny model the pool describes as unreliable at math."""
    config = load_pool()
    pool = build_pool_workers(config)
    rows = [json.loads(line) for line in GSM8K.read_text().splitlines()[:n]]
    out = []
    with Progress() as progress:
        task = progress.add_task("plans", total=len(candidates) * n)
        for name in candidates:
            conductor, free = conductors(config, pool, name)
            plans = []
            for row in rows:
                attempt = await conductor.plan(row["question"], pool, max_steps=config.max_steps)
                loose = await free.plan(row["question"], pool, max_steps=config.max_steps)
                wf = attempt.workflow
                plans.append(
                    {
                        "last_to_strongest": wf is not None and wf.steps[-1].worker == 0,
                        "uses_tiny": wf is not None and any(s.worker == len(pool) - 1 for s in wf.steps),
                        "steps": len(wf) if wf else 0,
                        "latency_s": attempt.latency_s,
                        "valid_unconstrained": loose.workflow is not None,
                    }
                )
                progress.advance(task)
            out.append(
                {
                    "conductor": name,
                    "questions": n,
                    "last_step_to_strongest": sum(p["last_to_strongest"] for p in plans) / n,
                    "uses_tiny_model": sum(p["uses_tiny"] for p in plans) / n,
                    "valid_unconstrained": sum(p["valid_unconstrained"] for p in plans) / n,
                    "mean_steps": statistics.mean(p["steps"] for p in plans),
                    "mean_conductor_s": statistics.mean(p["latency_s"] for p in plans),
                }
            )
    return out


async def single_worker(n: int, name: str) -> dict[str, Any]:
    """Baseline: the worker alone, with the fallback pipeline's subtask, on the same questions."""
    config = load_pool()
    pool = build_pool_workers(config)
    worker = pool[config.worker_index(name)]
    rows = [json.loads(line) for line in GSM8K.read_text().splitlines()[:n]]
    correct, seconds = 0, []
    for row in rows:
        messages = worker_messages(row["question"], [], config.fallback.subtask)
        result = await worker.complete(Call(messages))
        reference = float(row["answer"].split("####")[-1].strip().replace(",", ""))
        got = last_number(result.text)
        correct += got is not None and abs(got - reference) < 1e-6
        seconds.append(result.latency_s)
    return {"worker": name, "questions": n, "accuracy": correct / n, "mean_s": statistics.mean(seconds)}


def markdown(results: list[dict[str, Any]]) -> str:
    lines = [
        "| conductor | questions | valid plan (grammar) | valid plan (no grammar) | accuracy | mean steps "
        "| conductor s | request s | cost USD/request |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['conductor']} | {r['questions']} | {r['valid_constrained']:.0%} | {r['valid_unconstrained']:.0%} "
            f"| {r['accuracy']:.0%} | {r['mean_steps']:.1f} | {r['mean_conductor_s']:.1f} | {r['mean_wall_s']:.1f} "
            f"| {r['mean_cost_usd']:.6f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=6, help="GSM8K test questions (from the first)")
    parser.add_argument("--candidates", nargs="*", default=["qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b", "smollm2-135m"])
    parser.add_argument("--out", type=Path, help="write the JSON results here")
    parser.add_argument("--plan-only", type=int, metavar="N", help="only plan N questions per candidate")
    parser.add_argument("--single", metavar="WORKER", help="baseline: this worker alone on the --n questions")
    args = parser.parse_args()
    if args.plan_only or args.single:
        extra: Any = (
            asyncio.run(plan_only(args.plan_only, args.candidates))
            if args.plan_only
            else asyncio.run(single_worker(args.n, args.single))
        )
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(extra, indent=2))
        print(json.dumps(extra, indent=2))
        return
    with tempfile.TemporaryDirectory() as tmp:
        results = asyncio.run(measure(args.n, args.candidates, TraceStore(Path(tmp) / "bench.sqlite3")))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2))
    print(markdown(results))


if __name__ == "__main__":
    main()
