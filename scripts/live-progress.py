"""How far a cached live eval has got: the number of leading sampled questions whose single-worker
calls are all in the request cache (a task-major run finishes a question's other methods before
the next question's singles, so every question before the last counted one is complete).
No model is called.

    .venv/bin/python scripts/live-progress.py data/benchmarks/gsm8k/test.jsonl 50
    # then re-render: the eval command with --limit (that number - 1, or that number if its MoA ran)
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from podium.conductor.baselines import ANSWER
from podium.eval.tasks import load_tasks, select
from podium.messages import worker_messages
from podium.pool import load_pool
from podium.pool_workers import build_pool_workers
from podium.store.request_cache import RequestCache
from podium.workers.cache import request_key


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tasks", type=Path, help="task set file the eval ran on")
    parser.add_argument("sample", type=int, help="the eval's --sample N")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--split", help="the eval's --split (MBPP)")
    parser.add_argument("--pool", help="the eval's pool (default: the local pool)")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache/podium/eval/requests.sqlite3")
    args = parser.parse_args()
    tasks = select(load_tasks(args.tasks, split=args.split), sample=args.sample, seed=args.seed)
    workers = build_pool_workers(load_pool(args.pool))  # lazy: no model is loaded
    cache = RequestCache(args.cache)
    for done, task in enumerate(tasks):
        for worker in workers:
            messages = worker_messages(task.question, [], ANSWER, system_prompt=getattr(worker, "system_prompt", None))
            payload = {"messages": [dict(m) for m in messages], "settings": dataclasses.asdict(worker.settings)}
            if cache.get(request_key(worker, "complete", payload)) is None:
                print(f"{done} of {len(tasks)} sampled questions have all single-worker calls cached")
                return
    print(f"all {len(tasks)} sampled questions have all single-worker calls cached")


if __name__ == "__main__":
    main()
