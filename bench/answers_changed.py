"""Two runs of the same ``light:`` method on the same questions (``podium eval`` outputs), e.g.
before and after a change to a plan's semantics, re-run through the request cache: how many
final answers changed, each changed question's score in both runs, and whether every cost is
the same (the same calls were made).

    .venv/bin/python bench/answers_changed.py docs/eval/fresh8/eval.json docs/eval/fresh8/round2-vote/eval.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    args = parser.parse_args()
    runs = [json.loads(p.read_text(encoding="utf-8"))["results"] for p in (args.before, args.after)]
    method = next(k for k in runs[0] if k.startswith("light:"))
    before, after = ({r["task_id"]: r for r in run[method]} for run in runs)
    changed = [i for i in before if i in after and before[i]["answer"] != after[i]["answer"]]
    print(f"{method}: {len(changed)} of {len(before)} final answers changed")
    for i in changed:
        print(f"  {i}: score {before[i]['score']} -> {after[i]['score']}")
    same_cost = all(
        abs(float(before[i]["cost_usd"]) - float(after[i]["cost_usd"])) < 1e-12 for i in before if i in after
    )
    print(f"every cost the same: {same_cost}")


if __name__ == "__main__":
    main()
