"""The fresh held-out tests of the plan conductor, each and pooled (docs/learned-workflows.md):
per test and per task kind, the paired difference of the plan conductor with the 1.5B worker
alone (mean over questions, 95 % normal interval, :func:`podium.eval.metrics.paired_difference`),
its cost as a multiple of the 1.5B's, and the questions won and lost. Reads the ``eval.json`` of
each test (``scripts/eval-fresh.sh``: the methods ``single:qwen2.5-coder-1.5b`` and one ``light:``).

    .venv/bin/python bench/fresh_pooled.py docs/eval/fresh2/eval.json docs/eval/fresh3/eval.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from podium.eval.metrics import paired_difference

SINGLE = "single:qwen2.5-coder-1.5b"

Row = tuple[str, str, float, float, float, float]
"""(task id, kind, plan score, 1.5B score, plan cost USD, 1.5B cost USD)"""


def load(path: Path) -> list[Row]:
    """Per question both methods answered: its row."""
    results = json.loads(path.read_text(encoding="utf-8"))["results"]
    single = {r["task_id"]: r for r in results[SINGLE]}
    plan = {r["task_id"]: r for r in results[next(k for k in results if k.startswith("light:"))]}
    rows = []
    for i in (i for i in single if i in plan):
        kind = "gsm8k" if "gsm8k" in i else "humaneval" if i.startswith("HumanEval/") else "mbpp"
        scores = float(plan[i]["score"]), float(single[i]["score"])
        rows.append((i, kind, *scores, float(plan[i]["cost_usd"]), float(single[i]["cost_usd"])))
    return rows


def summary(rows: list[Row]) -> dict[str, Any]:
    """Paired difference, cost multiple, questions won and lost."""
    mean, low, high = paired_difference([r[2] for r in rows], [r[3] for r in rows])
    return {
        "n": len(rows),
        "mean": mean,
        "low": low,
        "high": high,
        "cost_x": sum(r[4] for r in rows) / sum(r[5] for r in rows),
        "won": sum(r[2] > r[3] for r in rows),
        "lost": sum(r[2] < r[3] for r in rows),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reports", type=Path, nargs="+", help="eval.json of each fresh test")
    parser.add_argument("--json", type=Path, help="write the result here")
    args = parser.parse_args()
    tests = {str(p): load(p) for p in args.reports}
    pooled = [r for rows in tests.values() for r in rows]
    result = {
        name: {
            "all": summary(rows),
            **{k: summary([r for r in rows if r[1] == k]) for k in sorted({r[1] for r in rows})},
        }
        for name, rows in [*tests.items(), ("pooled", pooled)]
    }
    for name, parts in result.items():
        for part, s in parts.items():
            interval = f"{s['mean']:+.3f} ({s['low']:+.3f} to {s['high']:+.3f})"
            print(f"{name} {part}: n={s['n']} {interval} cost {s['cost_x']:.2f}x, won {s['won']} lost {s['lost']}")
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
