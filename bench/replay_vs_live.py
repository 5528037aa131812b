"""Do a bank replay and a live run agree? Per method and question, two ``podium eval`` reports'
scores and costs side by side (docs/learned-workflows.md, "Replay and live agree").

A workflow bank's replay scores a workflow from its recorded steps; a live run (over the pool,
with the request cache the bank's calls were recorded into) executes the same workflow — the
model calls come back from the cache, the sandbox, the vote tool and the verifiers run again.
If the bank is what it claims, both give every question the same score and cost.

    .venv/bin/python bench/replay_vs_live.py docs/eval/heldout/eval.json docs/eval/heldout-live/eval.json \
        --same single:solve@1.5b=single:qwen2.5-coder-1.5b

Exit 0 when every compared question agrees, 1 otherwise (the differing questions are listed).
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def compare(replay: dict[str, Any], live: dict[str, Any], same: dict[str, str]) -> dict[str, Any]:
    """Per method present in both reports (``same`` maps a replay name to its live name): how many
    questions agree on score and on cost (to 1e-9 USD), and the ones that differ."""
    out: dict[str, Any] = {}
    for name, rows in replay["results"].items():
        other = same.get(name, name)
        if other not in live["results"]:
            continue
        theirs = {r["task_id"]: r for r in live["results"][other]}
        both = [(r, theirs[r["task_id"]]) for r in rows if r["task_id"] in theirs]
        differ = [
            {"task_id": a["task_id"], "replay": [a["score"], a["cost_usd"]], "live": [b["score"], b["cost_usd"]]}
            for a, b in both
            if a["score"] != b["score"] or not math.isclose(a["cost_usd"], b["cost_usd"], abs_tol=1e-9)
        ]
        out[name] = {"live_name": other, "questions": len(both), "agree": len(both) - len(differ), "differ": differ}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("replay", type=Path, help="eval.json of the bank replay")
    p.add_argument("live", type=Path, help="eval.json of the live run")
    p.add_argument("--same", action="append", default=[], metavar="REPLAY=LIVE", help="one method under two names")
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    same = dict(s.split("=", 1) for s in args.same)
    reports = [json.loads(path.read_text(encoding="utf-8")) for path in (args.replay, args.live)]
    result = compare(reports[0], reports[1], same)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    if not result:
        print("no method is in both reports (or no per-request results: run podium eval without --summary-only)")
        return 1
    for name, r in result.items():
        print(f"{name}: {r['agree']} of {r['questions']} questions agree (score and cost)")
        for d in r["differ"][:5]:
            print(f"   {d['task_id']}: replay {d['replay']}, live {d['live']}")
    return 0 if all(not r["differ"] for r in result.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
