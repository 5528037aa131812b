"""Which questions does a plan policy call unlike its training questions? Per question set, the
share outside the policy's radius (:meth:`podium.conductor.plans.PlanPolicy.outside`), which
then gets the policy's fallback plan.

    .venv/bin/python bench/plan_gate.py src/podium/pools/local-plans.npz \\
        --tasks data/benchmarks/gsm8k/test.jsonl --tasks data/benchmarks/mbpp/mbpp.jsonl \\
        --ids data/banks/local/ids/fresh.txt --ids data/banks/local/ids/fresh2.txt \\
        --ids data/banks/local/ids/test.txt --matrix data/outcomes/routellm-gpt4-mixtral.csv \\
        --prefix mmlu --sample 80 [--json OUT.json]

A set of everyday requests (a poem, an email, short arithmetic…) is always measured too.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import sys
from pathlib import Path

import numpy as np

from podium.conductor.plans import PlanPolicy
from podium.embed import Embedder, encoder_for
from podium.eval.session import EvalSpec
from podium.eval.tasks import load_tasks

EVERYDAY = [
    "What is 2+2?",
    "What is 17 * 23?",
    "If x + 3 = 10, what is x?",
    "Write a haiku about autumn.",
    "Summarise the plot of Hamlet in two sentences.",
    "My order #1234 arrived damaged. How do I get a refund?",
    "Translate 'good morning' into French.",
    "What is the capital of Australia?",
    "Explain the difference between TCP and UDP.",
    "Draft a polite email declining a meeting invitation.",
    "Which is larger, 9.11 or 9.9?",
    "Hvad koster en billet til København?",
    "List three benefits of unit testing.",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("policy", type=Path, help="a plan policy file (.npz) with a gate")
    parser.add_argument("--tasks", type=Path, action="append", default=[], help="a task set (repeatable)")
    parser.add_argument("--ids", type=Path, action="append", default=[], help="keep these task ids (repeatable)")
    parser.add_argument("--matrix", type=Path, help="an outcome matrix whose prompts to sample (RouterBench CSV)")
    parser.add_argument("--prefix", default="mmlu", help="keep the matrix rows whose eval_name starts with this")
    parser.add_argument("--sample", type=int, default=80, help="matrix rows to sample (seeded, 0)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    policy = PlanPolicy.load(args.policy)
    if not len(policy.support):
        print(f"{args.policy} has no gate (a policy file from before it): retrain it", file=sys.stderr)
        return 2
    wanted: set[str] = set()
    for path in args.ids:
        wanted |= {s for line in path.read_text().splitlines() if (s := line.split("#")[0].strip())}
    sets = {"tasks": [t.question for path in args.tasks for t in load_tasks(path) if not wanted or t.id in wanted]}
    if args.matrix:
        csv.field_size_limit(1 << 30)
        with args.matrix.open(newline="") as f:
            rows = [r for r in csv.DictReader(f) if r.get("eval_name", "").startswith(args.prefix)]
        random.Random(0).shuffle(rows)
        sets[f"{args.matrix.name}:{args.prefix}"] = [r["prompt"] for r in rows[: args.sample]]
    sets["everyday"] = EVERYDAY
    embedder = Embedder(EvalSpec().embeddings, encoder=encoder_for(policy.embedder))
    fallback = policy.plans[policy.fallback].id if policy.fallback >= 0 else None
    print(f"radius {policy.radius:.3f} (cosine distance), fallback {fallback}")
    report: dict[str, object] = {"radius": policy.radius, "fallback": fallback, "sets": {}}
    for name, questions in sets.items():
        if not questions:
            continue
        outside = policy.outside(np.asarray(embedder.embed(questions)))
        print(f"{name}: {int(outside.sum())} of {len(questions)} outside ({outside.mean():.1%})")
        report["sets"][name] = {"questions": len(questions), "outside": int(outside.sum())}  # type: ignore[index]
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
