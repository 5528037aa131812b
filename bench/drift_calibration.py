"""How often does ``podium drift`` alert on traffic that did not change, and does it see traffic
that did? The input statistics of :func:`podium.traffic.drift.drift_report` on real questions.

* **null** — disjoint windows of GSM8K test questions (a reference window of n questions, a
  recent window of the next n), ``--pairs`` pairs per size from different offsets;
* **shift** — the reference window against a recent window where a share of the GSM8K
  questions is replaced by MBPP problems (another task kind, still English prose) or by the
  Danish, table-formatted rewrite of other GSM8K questions (bench/shift_data.danish_table:
  another language and format).

For each case: MMD² and its permutation p-value (hashed character n-grams, the default encoder),
the unseen-term rate, its expectation under permutation, excess and p-value, the language TVD,
the largest format change, and the input alerts the default thresholds raise. Questions come
from data/benchmarks (GSM8K MIT, MBPP CC BY 4.0); nothing is called.

    .venv/bin/python bench/drift_calibration.py [--sizes 20,40,100,300] [--pairs 4] [--json OUT]

Measured: docs/eval/drift-calibration/ (table.md is this script's output, rows.json its --json).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from shift_data import danish_table
from tests.traffic_support import gsm8k_questions, mbpp_questions

from podium.embed import Embedder
from podium.traffic.drift import DriftOptions, drift_report
from podium.traffic.features import HashingEncoder
from podium.traffic.source import TrafficItem

WINDOWS = {"reference": ("2026-11-01", "2026-11-08"), "recent": ("2026-11-08", "2026-11-15")}


def items(questions: list[str], prefix: str) -> list[TrafficItem]:
    return [
        TrafficItem(origin=f"{prefix}:{k}", request_id=None, at="2026-11-01T00:00:00.000Z", question=q, status="ok")
        for k, q in enumerate(questions)
    ]


def measure(reference: list[str], recent: list[str], embedder: Embedder) -> dict[str, Any]:
    started = time.perf_counter()
    report = drift_report(
        items(reference, "ref"), items(recent, "rec"), windows=WINDOWS, embedder=embedder, options=DriftOptions()
    )
    s = report["slices"]["all"]["input"]
    return {
        "mmd2": s["embedding"]["mmd2"],
        "mmd_p": s["embedding"]["p_value"],
        "unseen": s["unseen_terms"]["rate"],
        "expected": s["unseen_terms"]["expected"],
        "excess": s["unseen_terms"]["excess"],
        "unseen_p": s["unseen_terms"]["p_value"],
        "language": s["language"]["tvd"],
        "format": s["format"]["max_change"],
        "alerts": sorted(a["metric"] for a in report["alerts"]),
        "seconds": round(time.perf_counter() - started, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="20,40,100,300", help="questions per window")
    parser.add_argument("--pairs", type=int, default=4, help="null pairs per size")
    parser.add_argument("--json", type=Path, help="write every row here")
    args = parser.parse_args()
    embedder = Embedder(None, encoder=HashingEncoder())
    rows: list[dict[str, Any]] = []
    gsm8k = gsm8k_questions(0, 1319)
    for n in (int(x) for x in args.sizes.split(",")):
        for pair in range(args.pairs):
            start = (pair * 2 * n) % (1319 - 2 * n)
            rows.append(
                {
                    "case": "null",
                    "n": n,
                    **measure(gsm8k[start : start + n], gsm8k[start + n : start + 2 * n], embedder),
                }
            )
        reference = gsm8k[:n]
        for share in (0.2, 0.5):
            new = round(n * share)
            kept = gsm8k[n : 2 * n - new]
            mbpp = mbpp_questions(0, new)
            danish = [danish_table(q, k) for k, q in enumerate(gsm8k[1319 - new :])]
            rows.append({"case": f"mbpp {share:.0%}", "n": n, **measure(reference, kept + mbpp, embedder)})
            rows.append({"case": f"danish-table {share:.0%}", "n": n, **measure(reference, kept + danish, embedder)})
    header = "| case | n | MMD² (p) | unseen rate / expected | excess (p) | language TVD | format Δ | alerts |"
    print(header)
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['case']} | {r['n']} | {r['mmd2']:.4f} ({r['mmd_p']:.3f}) | "
            f"{r['unseen']:.3f} / {r['expected']:.3f} | "
            f"{r['excess']:+.3f} ({r['unseen_p']:.3f}) | {r['language']:.3f} | {r['format']:.3f} | "
            f"{', '.join(r['alerts']) or '–'} |"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
