"""What does ``podium run`` cost beside its workers' own model work? The whole command against a
plain llama-cpp-python script that makes exactly the same model calls, in the same run.

1. One ``podium run --json`` of the question (the warm-up) records which workers the conductor
   chose and the exact messages each step sent.
2. A direct script is written that loads the same model files with the same llama.cpp settings
   (``n_ctx``, threads) and repeats those calls with the same decoding settings (the pool's
   ``max_tokens``, temperature, top_p, seed), one after another. It checks that every output
   equals podium's, so both ways did the same model work.
3. The two commands alternate, ``--runs`` times each; wall time, CPU (user + system) and peak
   memory (the process's maximum resident set) come from the operating system's accounting of
   each finished child. podium's fixed cost is the difference, pair by pair: start-up, the pool,
   the conductor (for the embedded pool: the light conductor's SmolLM2 embedding of the
   question), budgets, the trace write — everything but the model calls themselves.

    .venv/bin/python bench/run_overhead.py [--runs 5] [--pool local] [--question TEXT] [--no-teardown] [--json OUT]

Steps that ran in parallel in podium run one after another in the direct script, so with a
multi-step workflow on several models the difference understates podium's cost; the report says
how many steps there were. Models come from podium's model cache (``podium models install``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

QUESTION = (
    "Janet’s ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes muffins for her "
    "friends every day with four. She sells the remainder at the farmers' market daily for $2 per fresh duck "
    "egg. How much in dollars does she make every day at the farmers' market?"
)  # the first GSM8K test question, `make run`'s default

DIRECT = """\
import json, os, sys
import llama_cpp
spec = json.load(open(sys.argv[1], encoding="utf-8"))
loaded = {}
for call in spec["calls"]:
    key = (call["path"], call["n_ctx"])
    if key not in loaded:
        loaded[key] = llama_cpp.Llama(model_path=call["path"], n_ctx=call["n_ctx"],
                                      n_threads=os.cpu_count() or 1, verbose=False)
    out = loaded[key].create_chat_completion(messages=call["messages"], max_tokens=call["max_tokens"],
                                             temperature=call["temperature"], top_p=call["top_p"],
                                             seed=call["seed"])
    text = out["choices"][0]["message"]["content"] or ""
    if text.strip() != call["expected"].strip():
        print("DIFFERENT OUTPUT", file=sys.stderr)
        sys.exit(3)
if os.environ.get("DIRECT_NO_TEARDOWN"):  # end as podium run does: without freeing the models one by one
    sys.stdout.flush()
    os._exit(0)
"""


def timed(argv: list[str], env: dict[str, str]) -> dict[str, float]:
    """Wall s, CPU s and peak RSS MiB of one run of ``argv`` (the child's own accounting)."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{argv[:3]} failed with exit code {proc.returncode}:\n{stderr[-2000:]}")
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "rss_mib": usage.ru_maxrss / 1024}


def direct_calls(record: dict[str, Any], pool_name: str) -> list[dict[str, Any]]:
    """The model calls of ``record``'s steps, as the direct script makes them."""
    from podium.local_models import resolve_model
    from podium.pool import load_pool

    pool = load_pool(pool_name)
    calls = []
    for step in record["steps"]:
        worker = pool.merged(pool.workers[pool.worker_index(step["worker"])])
        if worker.backend != "llama_cpp" or worker.model is None:
            raise SystemExit(f"step {step['index']} ran on {step['worker']!r}, not a llama_cpp worker: no direct way")
        calls.append({
            "path": str(resolve_model(worker.model)),
            "n_ctx": worker.n_ctx or 4096,
            "messages": [{"role": m["role"], "content": m["content"]} for m in step["messages"]],
            "max_tokens": worker.max_tokens or 512,
            "temperature": worker.temperature if worker.temperature is not None else 0.2,
            "top_p": worker.top_p if worker.top_p is not None else 0.95,
            "seed": worker.seed or 0,
            "expected": step["output"] or "",
        })  # fmt: skip
    return calls


def summary(rows: list[dict[str, float]], key: str) -> dict[str, float]:
    values = [r[key] for r in rows]
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3), "max": round(max(values), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each way (default 5)")
    parser.add_argument("--pool", default="local", help="pool preset or file (default: local)")
    parser.add_argument("--question", default=QUESTION)
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument(
        "--threads",
        action="store_true",
        help="podium run twice per round: computing on the main thread and on a helper thread "
        "(PODIUM_COMPUTE_THREAD=main / helper; podium.workers.offload)",
    )
    parser.add_argument(
        "--no-teardown",
        action="store_true",
        help="also time the direct script ending as podium run does, without freeing its models one by one "
        "(podium.llama_runtime.exit_without_teardown); the fixed cost is then given against both",
    )
    args = parser.parse_args()
    podium = [str(Path(sys.executable).with_name("podium"))]
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as tmp:
        traces = str(Path(tmp) / "traces.sqlite3")
        run = [*podium, "run", "--pool", args.pool, "--traces", traces, args.question]
        warm = subprocess.run([*run[:2], "--json", *run[2:]], env=env, capture_output=True, text=True)
        if warm.returncode != 0:
            raise SystemExit(f"podium run failed ({warm.returncode}):\n{warm.stderr[-2000:]}")
        record = json.loads(warm.stdout)
        spec = Path(tmp) / "calls.json"
        spec.write_text(json.dumps({"calls": direct_calls(record, args.pool)}), encoding="utf-8")
        script = Path(tmp) / "direct.py"
        script.write_text(DIRECT, encoding="utf-8")
        direct = [sys.executable, str(script), str(spec)]
        timed(direct, env)  # warm-up (page cache) and the output check
        if args.threads:
            order = [("podium run (main thread)", run, {"PODIUM_COMPUTE_THREAD": "main"}),
                     ("podium run (helper thread)", run, {"PODIUM_COMPUTE_THREAD": "helper"}),
                     ("direct", direct, {})]  # fmt: skip
        else:
            order = [("podium run", run, {}), ("direct", direct, {})]
        if args.no_teardown:
            order.append(("direct (no teardown)", direct, {"DIRECT_NO_TEARDOWN": "1"}))
        ways: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in order}
        for i in range(args.runs):
            for name, argv, extra in order[i % len(order) :] + order[: i % len(order)]:  # rotated per round
                ways[name].append(timed(argv, {**env, **extra}))
                print(f"run {i + 1}/{args.runs} {name}: {ways[name][-1]['wall_s']:.2f} s", file=sys.stderr)
    result = {
        "question_chars": len(args.question),
        "pool": args.pool,
        "steps": len(record["steps"]),
        "workers": [s["worker"] for s in record["steps"]],
        "output_tokens": sum(s["usage"]["output_tokens"] for s in record["steps"]),
        "runs": args.runs,
        "load_average": os.getloadavg(),
        **{name: {k: summary(rows, k) for k in ("wall_s", "cpu_s", "rss_mib")} for name, rows in ways.items()},
        "fixed_cost": {
            name: {
                k: summary([{"d": a[k] - b[k]} for a, b in zip(rows, ways["direct"], strict=True)], "d")
                for k in ("wall_s", "cpu_s", "rss_mib")
            }
            for name, rows in ways.items()
            if not name.startswith("direct")
        },
        **(
            {
                "fixed_cost_vs_direct_without_teardown": {
                    name: {
                        k: summary(
                            [{"d": a[k] - b[k]} for a, b in zip(rows, ways["direct (no teardown)"], strict=True)], "d"
                        )
                        for k in ("wall_s", "cpu_s", "rss_mib")
                    }
                    for name, rows in ways.items()
                    if not name.startswith("direct")
                }
            }
            if args.no_teardown
            else {}
        ),
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
