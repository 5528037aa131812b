"""The shift proof's simulated labeller (docs/loop.md, "The proof on a real shift"): fills a
``podium tasks export --review`` file with the dataset's own answers, as a person who knew them
would — GSM8K's number and the Danish total as a ``fix`` reference, the MBPP / HumanEval tests
as the reference of a row retyped to ``code``. The labels therefore come from the datasets, not
from a person's judgement; the review file goes back through ``podium tasks import`` unchanged
in form. Rows are matched to the set by their question (whitespace-normalised); a row whose
question is in no set is left empty and counted.

    .venv/bin/python bench/shift_label.py runs/shift/review.csv --from runs/shift/data/after.jsonl
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from collections.abc import Sequence
from pathlib import Path


def _key(text: str) -> str:
    return " ".join(text.split())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fill a review file with the datasets' references.")
    parser.add_argument("review", type=Path, help="the review file of podium tasks export --review (rewritten)")
    parser.add_argument(
        "--from", dest="sets", type=Path, action="append", required=True, help="bench/shift_data.py set"
    )
    args = parser.parse_args(argv)
    known = {}
    for path in args.sets:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                known[_key(record["question"])] = record
    rows = list(csv.reader(io.StringIO(args.review.read_text(encoding="utf-8-sig"))))
    header, body = rows[0], rows[1:]
    col = {name: header.index(name) for name in ("task_type", "question", "verdict", "reference")}
    labelled = missing = 0
    for row in body:
        record = known.get(_key(row[col["question"]]))
        if record is None:
            missing += 1
            continue
        row[col["verdict"]] = "fix"
        row[col["task_type"]] = record["task_type"]
        row[col["reference"]] = record["tests"] if record["task_type"] == "code" else str(record["reference"])
        labelled += 1
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\r\n").writerows([header, *body])
    args.review.write_text(buffer.getvalue(), encoding="utf-8-sig")
    print(f"{args.review}: {labelled} rows labelled from the datasets, {missing} questions not found", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
