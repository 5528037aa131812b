"""Do two plan policies choose the same plan? Per question of the given task sets (and of any
extra questions), each policy's chosen plan, and the questions where they differ.

Use it before swapping one shipped policy for another that should decide alike — e.g. the same
cluster table on another embedder (docs/learned-workflows.md, "The default conductor's
embedder"): where both choose the same plan on every question a result was measured on, that
result holds for the new policy unchanged, since a plan's workflow and cost depend only on the plan.

    .venv/bin/python bench/policy_agreement.py OLD.npz NEW.npz \
        --tasks data/benchmarks/gsm8k/test.jsonl --tasks data/benchmarks/mbpp/mbpp.jsonl \
        --ids data/banks/local/ids/fresh2.txt --question "What is 2+2?" [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from podium.conductor.plans import PlanPolicy
from podium.embed import Embedder, encoder_for
from podium.eval.session import EvalSpec
from podium.eval.tasks import load_tasks


def choices(policy: PlanPolicy, questions: list[str]) -> list[str]:
    """The id of the plan ``policy`` chooses for each question (every plan allowed); embeddings
    through the evaluation's embedding cache."""
    embedder = Embedder(EvalSpec().embeddings, encoder=encoder_for(policy.embedder))
    vectors = embedder.embed(questions) if policy.reads_question else None
    return [policy.plans[i].id for i in policy.choose(questions, vectors)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", type=Path, help="a plan policy file (.npz)")
    parser.add_argument("new", type=Path, help="another plan policy file (.npz)")
    parser.add_argument("--tasks", type=Path, action="append", default=[], help="a task set (repeatable)")
    parser.add_argument("--ids", type=Path, action="append", default=[], help="keep these task ids (files, repeatable)")
    parser.add_argument("--question", action="append", default=[], help="an extra question (repeatable)")
    parser.add_argument("--json", type=Path, help="also write every question's two choices here")
    args = parser.parse_args(argv)
    wanted: set[str] = set()
    for path in args.ids:
        wanted |= {s for line in path.read_text().splitlines() if (s := line.split("#")[0].strip())}
    tasks = [t for path in args.tasks for t in load_tasks(path) if not wanted or t.id in wanted]
    items = [(t.id, t.question) for t in tasks] + [(f"extra/{i}", q) for i, q in enumerate(args.question)]
    if not items:
        print("no questions: give --tasks (and --ids) or --question", file=sys.stderr)
        return 2
    questions = [q for _, q in items]
    old, new = choices(PlanPolicy.load(args.old), questions), choices(PlanPolicy.load(args.new), questions)
    rows = [{"id": i, "old": a, "new": b} for (i, _), a, b in zip(items, old, new, strict=True)]
    differ = [r for r in rows if r["old"] != r["new"]]
    measured = [r for r in rows if not r["id"].startswith("extra/")]
    same = sum(r["old"] == r["new"] for r in measured)
    print(f"{same} of {len(measured)} task questions get the same plan from both policies")
    text = dict(items)
    for r in differ:
        question = text[r["id"]].replace("\n", " ")[:70]
        print(f"  {r['id']}: {r['old']} -> {r['new']}   {question}")
    if args.json:
        args.json.write_text(json.dumps({"old": str(args.old), "new": str(args.new), "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
