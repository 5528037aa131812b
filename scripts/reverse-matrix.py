"""Write an outcome matrix with its model columns in reverse order (each model keeps its
``|model_response`` and ``|total_cost`` columns). A replay pool lists workers in column order, so
evaluating a conductor on both orders shows whether it reads the workers' descriptions or only
their positions (docs/training.md, "GRPO on the local pool").

    python scripts/reverse-matrix.py docs/eval/local-pool/outcomes.csv docs/eval/local-pool/outcomes-reversed.csv
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("matrix", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    with args.matrix.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    header = rows[0]
    models = [c for c in header if "|" not in c and c not in ("sample_id", "eval_name", "split", "prompt")]
    fixed = [c for c in header if c in ("sample_id", "eval_name", "split", "prompt")]
    columns = fixed + [c for m in reversed(models) for c in header if c == m or c.startswith(m + "|")]
    index = [header.index(c) for c in columns]
    with args.out.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerows([row[i] for i in index] for row in rows)
    print(f"{args.out}: models in the order {', '.join(reversed(models))}")


if __name__ == "__main__":
    main()
