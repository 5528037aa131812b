#!/usr/bin/env python3
"""Draw a fresh held-out id list for the workflow bank's tests (docs/learned-workflows.md).

Every GSM8K test question (``gsm8k/test/N``) and MBPP test question (``mbpp/N``, task ids
11–510) that appears in no id list under ``data/banks/`` and in no file under ``docs/eval/``
is a candidate; ``--gsm8k`` and ``--mbpp`` of them are drawn with ``random.Random(seed)`` and
written interleaved, two GSM8K then one MBPP, so any prefix keeps that mix.

    python3 scripts/draw-fresh-ids.py --seed 2028 --out data/banks/local/ids/fresh2.txt

``--also DIR`` counts the ids of the files under another folder as used too: the shift data of
``bench/shift_data.py``, which lives outside the repository.

Refuses to overwrite an existing list (a spent held-out set stays as it was drawn).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_ID = re.compile(r"\b(gsm8k/test/\d+|mbpp/\d+)\b")


def used_ids(roots: list[Path]) -> set[str]:
    """Every question id written anywhere under ``roots`` (id lists, reports, matrices)."""
    seen: set[str] = set()
    for root in roots:
        for path in root.rglob("*"):
            if path.is_file() and path.suffix in {".txt", ".json", ".jsonl", ".csv", ".md"}:
                seen.update(_ID.findall(path.read_text(encoding="utf-8", errors="replace")))
    return seen


def candidates(data: Path) -> tuple[list[str], list[str]]:
    """(GSM8K test ids, MBPP test ids) in file order."""
    with (data / "gsm8k" / "test.jsonl").open(encoding="utf-8") as f:
        gsm8k = [f"gsm8k/test/{i}" for i, line in enumerate(f) if line.strip()]
    mbpp = []
    with (data / "mbpp" / "mbpp.jsonl").open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                task = json.loads(line)["task_id"]
                if 11 <= task <= 510:
                    mbpp.append(f"mbpp/{task}")
    return gsm8k, mbpp


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, required=True, help="the draw's seed (use one never used before)")
    parser.add_argument("--gsm8k", type=int, default=80, help="GSM8K test questions (default 80)")
    parser.add_argument("--mbpp", type=int, default=40, help="MBPP test questions (default 40)")
    parser.add_argument("--out", type=Path, required=True, help="the id list to write")
    parser.add_argument("--data", type=Path, default=ROOT / "data" / "benchmarks")
    parser.add_argument(
        "--also",
        type=Path,
        action="append",
        default=[],
        metavar="DIR",
        help="a folder whose files' ids count as used too (e.g. the shift data of bench/shift_data.py); repeatable",
    )
    args = parser.parse_args()
    if args.out.exists():
        print(f"error: {args.out} exists; a drawn list is never redrawn — pick another --out", file=sys.stderr)
        return 2
    used = used_ids([ROOT / "data" / "banks", ROOT / "docs" / "eval", *args.also])
    gsm8k, mbpp = candidates(args.data)
    gsm8k = [i for i in gsm8k if i not in used]
    mbpp = [i for i in mbpp if i not in used]
    if len(gsm8k) < args.gsm8k or len(mbpp) < args.mbpp:
        print(f"error: only {len(gsm8k)} GSM8K and {len(mbpp)} MBPP questions are unused", file=sys.stderr)
        return 2
    rng = random.Random(args.seed)
    g, m = rng.sample(gsm8k, args.gsm8k), rng.sample(mbpp, args.mbpp)
    order: list[str] = []
    while g or m:
        order += [g.pop(0) for _ in range(2) if g]
        order += [m.pop(0)] if m else []
    also = "".join(f"# nor under {d.name}/ (given with --also)\n" for d in args.also)
    header = (
        f"# {args.out.stem}: a held-out set drawn (random.Random({args.seed}), scripts/draw-fresh-ids.py) from the\n"
        f"# GSM8K test and MBPP test questions in no id list under data/banks/ and no file under docs/eval/\n"
        f"{also}# ({len(used)} ids excluded), two GSM8K then one MBPP\n"
    )
    args.out.write_text(header + "\n".join(order) + "\n", encoding="utf-8")
    print(f"{args.out}: {args.gsm8k} GSM8K + {args.mbpp} MBPP ids ({len(gsm8k)} + {len(mbpp)} were unused)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
