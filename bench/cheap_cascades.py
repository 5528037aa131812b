"""Cheap compositions on a workflow bank's training rows: is there a plan at ≤ 1.1× the best
single worker's cost that beats it (docs/learned-workflows.md, "The second fresh test")?

Every candidate is built from steps the bank already recorded, so it is scored exactly by replay
(:func:`podium.eval.plans.plan_outcomes`: a vote picks the recorded answer it selects, a cascade
pays for its second round only where its first disagrees) at no worker cost. Only the training
rows are read (``--split``), so the held-out rows stay unseen. Prints, per task kind, each
candidate's quality, its cost as a multiple of ``--against``'s, and how often it escalated.

    .venv/bin/python bench/cheap_cascades.py data/banks/local [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from podium.conductor.compose import Plan
from podium.eval.plans import load_source, plan_outcomes

S15, S05, P15, P05 = "solve@1.5b", "solve@0.5b", "run(program@1.5b)", "run(program@0.5b)"

CANDIDATES = [
    Plan(S15, (S15,)),
    Plan(S05, (S05,)),
    Plan(P15, (P15,)),
    # two cheap answers; the 1.5B's direct answer only where they disagree
    Plan(f"cascade(vote({P15},{P05})→{S15})", (P15, P05), S15),
    Plan(f"cascade(vote({P15},{S05})→{S15})", (P15, S05), S15),
    # two 0.5B answers; the 1.5B's program (about half a direct answer's cost) on disagreement
    Plan(f"cascade(vote({S05},{P05})→{P15})", (S05, P05), P15),
    Plan(f"cascade(vote({S05},sample1@0.5b)→{P15})", (S05, "sample1@0.5b"), P15),
    # the same pairs, the second round voting over all three answers
    Plan(f"cascade(vote({P15},{P05})→+{S15})", (P15, P05), None, 1.0, (S15,)),
    Plan(f"cascade(vote({S05},{P05})→+{S15},{P15})", (S05, P05), None, 1.0, (S15, P15)),
    # checked cascades: a program's printed answer when it is a whole number, else the 1.5B's
    Plan(f"check({P15})→{S15}", (P15,), S15, gate="whole-number"),
    Plan(f"check({P05})→{S15}", (P05,), S15, gate="whole-number"),
    Plan(f"check({P15})→+{S15},sample×2@1.5b", (P15,), adds=(S15, "sample1@1.5b", "sample2@1.5b"), gate="whole-number"),
    # tested cascades: the 1.5B's code written with its tests when they pass, else a direct answer
    Plan(f"check(run(test@1.5b))→{S15}", ("run(test@1.5b)",), S15, gate="tests-pass"),
    Plan(f"check(run(test@1.5b))→{S05}", ("run(test@1.5b)",), S05, gate="tests-pass"),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bank", type=Path, help="a workflow bank folder (matrix.csv, workflows.json)")
    parser.add_argument("--split", default="train", help="the rows to read (default: train)")
    parser.add_argument(
        "--against", default=S15, choices=[p.id for p in CANDIDATES], help=f"the plan whose cost is 1× (default {S15})"
    )
    parser.add_argument("--json", type=Path, help="also write the table here")
    args = parser.parse_args(argv)
    _, columns, rows, _ = load_source(args.bank)
    rows = [r for r in rows if r.get("split") == args.split]
    if not rows:
        print(f"{args.bank}: no rows of split {args.split!r}", file=sys.stderr)
        return 2
    against = [p.id for p in CANDIDATES].index(args.against)
    table: list[dict[str, Any]] = []
    for kind in sorted({r["eval_name"] for r in rows}):
        part = [r for r in rows if r["eval_name"] == kind]
        out = plan_outcomes(CANDIDATES, columns, part)
        base = out.cost[:, against].mean()
        print(f"{kind} ({len(part)} {args.split} questions)")
        for j, plan in enumerate(CANDIDATES):
            entry = {
                "kind": kind,
                "plan": plan.id,
                "quality": round(float(out.score[:, j].mean()), 4),
                "cost_x": round(float(out.cost[:, j].mean() / base), 3),
                "escalated": round(float(out.escalated[:, j].mean()), 3),
            }
            table.append(entry)
            print(f"  {entry['quality']:.3f}  {entry['cost_x']:5.2f}×  esc {entry['escalated']:.2f}  {plan.id}")
    if args.json:
        args.json.write_text(json.dumps({"bank": str(args.bank), "split": args.split, "rows": table}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
