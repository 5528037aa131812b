"""The example of docs/loop.md: a trace file with a shift, and ``podium drift`` on it.

Two weeks of traffic through the real orchestrator over podium.testing's scripted fake workers
(tests/traffic_support.py; no model is called): 40 GSM8K and 20 MBPP questions in the first week
(tags ``use-case:math``, ``use-case:code``); 40 other GSM8K, 20 other MBPP and 20 Danish support
questions over tables (``use-case:support-da``, a deterministic rewrite of GSM8K questions) in
the second. Then ``podium drift`` compares the weeks, prints the Markdown report and draws the
plot.

    .venv/bin/python bench/drift_example.py [--out DIR]   # DIR/traces.sqlite3, drift.md, drift.png
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from shift_data import danish_table
from tests.traffic_support import Request, at, gsm8k_questions, mbpp_questions, run_requests

from podium.cli import cli


def spread(questions: list[str], first_day: int, tag: str) -> list[Request]:
    """One request per question over the seven days from ``first_day``, hourly."""
    return [Request(q, at(first_day + k % 7, 8 + k // 7), (tag,)) for k, q in enumerate(questions)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("drift-example"), help="folder (default ./drift-example)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    traces = args.out / "traces.sqlite3"
    traces.unlink(missing_ok=True)
    danish = [danish_table(q, k) for k, q in enumerate(gsm8k_questions(600, 20))]
    run_requests(
        traces,
        [
            *spread(gsm8k_questions(0, 40), 1, "use-case:math"),
            *spread(mbpp_questions(20, 20), 1, "use-case:code"),
            *spread(gsm8k_questions(40, 40), 8, "use-case:math"),
            *spread(mbpp_questions(40, 20), 8, "use-case:code"),
            *spread(danish, 8, "use-case:support-da"),
        ],
    )
    windows = ["--reference-since", "2026-11-01", "--reference-until", "2026-11-07"]
    windows += ["--since", "2026-11-08", "--until", "2026-11-14"]
    code = cli(
        ["drift", "--traces", str(traces), *windows, "--out", str(args.out / "drift.md"),
         "--plot", str(args.out / "drift.png")]
    )  # fmt: skip
    sys.exit(code)


if __name__ == "__main__":
    main()
