"""The operating points of a λ sweep in a ``podium eval`` report, against one baseline method:
each point's λ, its cost as a multiple of the baseline's, its quality and the paired difference
(the report's ``paired`` section, so evaluate with ``--against BASELINE``). Used for the held-out
proof's "one operating point at ≤ 1.1× the best single worker's cost" (docs/learned-workflows.md).

    .venv/bin/python bench/sweep_points.py docs/eval/heldout-sweep/eval.json --prefix light:heldout-sweep@ \
        --out docs/eval/heldout-sweep/points.md
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def table(report: dict[str, Any], prefix: str) -> list[str]:
    """Markdown rows of every method whose name starts with ``prefix``. Raises KeyError when the
    report has no paired section (evaluate with --against)."""
    paired = report["paired"]
    base = report["methods"][paired["against"]]["summary"]
    cost = base["cost_usd"]["mean"]
    lines = [
        f"Against `{paired['against']}` (quality {base['quality']['mean']:.3f}, ${cost:.6f} per request):",
        "",
        "| version | λ (1/USD) | cost × baseline | quality | paired Δ (95 % CI) |",
        "|---|---|---|---|---|",
    ]
    for name, method in report["methods"].items():
        if not name.startswith(prefix):
            continue
        s, d = method["summary"], paired["methods"][name]
        lam = "–" if method["param"] is None else f"{method['param']:.4g}"
        lines.append(
            f"| {name} | {lam} | {s['cost_usd']['mean'] / cost:.2f} | {s['quality']['mean']:.3f} "
            f"| {d['diff']:+.3f} ({d['ci95'][0]:+.3f} to {d['ci95'][1]:+.3f}) |"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("report", type=Path)
    p.add_argument("--prefix", required=True, help="the sweep's method names start with this")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    text = "\n".join(table(json.loads(args.report.read_text(encoding="utf-8")), args.prefix)) + "\n"
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
