"""How much would checking code candidates against the question's own tests gain? An offline
estimate on recorded workflow banks, before building it (issue 16's code slice).

The idea (generate, then filter by the tests the question states — Li et al. 2022, "AlphaCode",
Science; Chen et al. 2023, "CodeT", ICLR): the tested cascade answers with the 1.5B worker's code
when its own tests pass; when they fail it falls back to one direct answer. Instead, run further
candidates (samples of the 1.5B, the 0.5B's answer) against the question's tests and answer with
the first that passes, else the fallback. The question's tests are what a ``check`` step runs
(:func:`podium.workers.python_tool.question_tests`): its ``assert`` lines (MBPP states them) or,
without any, its docstring examples (``>>> f(1)`` and the expected value, as HumanEval writes
them), through :mod:`doctest`.

Every candidate is really run in podium's sandbox (:func:`podium.sandbox.run_python`); its
score is the bank's recorded score of that candidate (the grader's verdict). No model is called.

**Caveat for MBPP**: the asserts the question states are the grader's tests, so passing them is
being right (the filter is an oracle there); HumanEval's grader tests are hidden, and its
docstring examples are a weaker filter. Read the two slices apart.

    .venv/bin/python bench/checked_selection.py data/banks/local docs/eval/shift/bank [--json OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from podium.answers import extract_code_answer, sandbox_passed
from podium.sandbox import run_python
from podium.workers.python_tool import question_tests

CANDIDATES = ("sample1@1.5b", "sample2@1.5b", "sample3@1.5b", "sample4@1.5b", "sample5@1.5b")
FALLBACK = "solve@0.5b"


async def passes(code: str | None, tests: str) -> bool:
    if not code:
        return False
    result = await run_python(f"{code}\n\n{tests}\n", timeout_s=10.0, memory_mb=512, output_chars=2000)
    return not result.timed_out and result.exit_code == 0


def _score(row: dict[str, str], column: str) -> float:
    try:
        return float(row[column])
    except (KeyError, ValueError):
        return 0.0


async def estimate(path: Path) -> dict[str, Any]:
    matrix = path / "matrix.csv" if path.is_dir() else path
    csv.field_size_limit(sys.maxsize)
    with matrix.open(encoding="utf-8", newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if "mbpp" in r["sample_id"] or "HumanEval" in r["sample_id"]]
    out: dict[str, Any] = {}
    for kind in ("mbpp", "HumanEval"):
        for split in ("train", "test"):
            rs = [r for r in rows if kind in r["sample_id"] and r["split"] == split]
            if not rs:
                continue
            base = tested = 0.0
            checked = {k: 0.0 for k in (1, 3, 5)}
            calls = {k: 0.0 for k in (1, 3, 5)}
            no_tests = 0
            for row in rs:
                base += _score(row, "solve@1.5b")
                if sandbox_passed(row["run(test@1.5b)|model_response"]):
                    tested += _score(row, "test@1.5b")
                    for k in checked:
                        checked[k] += _score(row, "test@1.5b")
                    continue
                tested += _score(row, FALLBACK)
                tests = question_tests(row["prompt"])
                no_tests += tests is None
                for k in checked:
                    chosen, used = FALLBACK, 0
                    for cand in CANDIDATES[:k]:
                        used += 1
                        code = extract_code_answer(row[f"{cand}|model_response"])
                        if tests is not None and await passes(code, tests):
                            chosen = cand
                            break
                    checked[k] += _score(row, chosen)
                    calls[k] += used
            n = len(rs)
            out[f"{kind}/{split}"] = {
                "n": n,
                "solve@1.5b": base / n,
                "tested cascade (→0.5b)": tested / n,
                **{f"checked ×{k} (→0.5b)": v / n for k, v in checked.items()},
                **{f"extra 1.5B calls ×{k}": v / n for k, v in calls.items()},
                "failed runs without tests in the question": no_tests,
            }
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("banks", nargs="+", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    report = {str(p): asyncio.run(estimate(p)) for p in args.banks}
    for bank, slices in report.items():
        for name, figures in slices.items():
            shown = ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in figures.items())
            print(f"{bank} {name}: {shown}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
