#!/usr/bin/env python3
"""Draw a fresh held-out id list for the workflow bank's tests (docs/learned-workflows.md).

Every GSM8K test question (``gsm8k/test/N``), MBPP test question (``mbpp/N``, task ids
11–510; with ``--mbpp-all-splits`` 11–974) and HumanEval question (``HumanEval/N``) that appears in no id list under
``data/banks/`` and in no file under ``docs/eval/`` is a candidate; ``--gsm8k``, ``--mbpp`` and
``--humaneval`` of them are drawn with ``random.Random(seed)`` and written interleaved, two
GSM8K, one MBPP, one HumanEval, so any prefix keeps that mix. (HumanEval is drawn after the
other two, from the same generator: a draw without it is the same as before it existed.)

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
_ID = re.compile(r"\b(gsm8k/test/\d+|mbpp/\d+|HumanEval/\d+)\b")


def used_ids(roots: list[Path], skip: frozenset[Path] = frozenset()) -> set[str]:
    """Every question id written anywhere under ``roots`` (id lists, reports, matrices), but in
    the files of ``skip``."""
    seen: set[str] = set()
    for root in roots:
        for path in root.rglob("*"):
            if path.resolve() in skip:
                continue
            if path.is_file() and path.suffix in {".txt", ".json", ".jsonl", ".csv", ".md"}:
                seen.update(_ID.findall(path.read_text(encoding="utf-8", errors="replace")))
    return seen


def candidates(data: Path, mbpp_all: bool = False) -> tuple[list[str], list[str], list[str]]:
    """(GSM8K test ids, MBPP ids, HumanEval ids) in file order: MBPP's test split (task ids
    11–510), or with ``mbpp_all`` every split but the 10 few-shot prompts (11–974)."""
    with (data / "gsm8k" / "test.jsonl").open(encoding="utf-8") as f:
        gsm8k = [f"gsm8k/test/{i}" for i, line in enumerate(f) if line.strip()]
    mbpp = []
    with (data / "mbpp" / "mbpp.jsonl").open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                task = json.loads(line)["task_id"]
                if 11 <= task <= (974 if mbpp_all else 510):
                    mbpp.append(f"mbpp/{task}")
    with (data / "humaneval" / "HumanEval.jsonl").open(encoding="utf-8") as f:
        humaneval = [json.loads(line)["task_id"] for line in f if line.strip()]
    return gsm8k, mbpp, humaneval


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, required=True, help="the draw's seed (use one never used before)")
    parser.add_argument("--gsm8k", type=int, default=80, help="GSM8K test questions (default 80)")
    parser.add_argument("--mbpp", type=int, default=40, help="MBPP test questions (default 40)")
    parser.add_argument(
        "--mbpp-all-splits",
        action="store_true",
        help="draw MBPP questions from its test, validation and train splits (one pool of problems, split at "
        "random; the test split is nearly spent), not the test split alone",
    )
    parser.add_argument("--humaneval", type=int, default=0, help="HumanEval questions (default 0)")
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
    parser.add_argument(
        "--skip",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="a file whose ids do not count as used: one that names questions no model answered (e.g. a list of "
        "a conductor's plan choices per prompt); repeatable",
    )
    args = parser.parse_args()
    if args.out.exists():
        print(f"error: {args.out} exists; a drawn list is never redrawn — pick another --out", file=sys.stderr)
        return 2
    used = used_ids(
        [ROOT / "data" / "banks", ROOT / "docs" / "eval", *args.also], frozenset(p.resolve() for p in args.skip)
    )
    gsm8k, mbpp, humaneval = ([i for i in ids if i not in used] for ids in candidates(args.data, args.mbpp_all_splits))
    if len(gsm8k) < args.gsm8k or len(mbpp) < args.mbpp or len(humaneval) < args.humaneval:
        print(
            f"error: only {len(gsm8k)} GSM8K, {len(mbpp)} MBPP and {len(humaneval)} HumanEval questions are unused",
            file=sys.stderr,
        )
        return 2
    rng = random.Random(args.seed)
    g, m = rng.sample(gsm8k, args.gsm8k), rng.sample(mbpp, args.mbpp)
    h = rng.sample(humaneval, args.humaneval) if args.humaneval else []
    order: list[str] = []
    while g or m or h:
        order += [g.pop(0) for _ in range(2) if g]
        order += [m.pop(0)] if m else []
        order += [h.pop(0)] if h else []
    also = "".join(f"# nor under {d.name}/ (given with --also)\n" for d in args.also)
    also += "".join(f"# ({p.name} not counted: --skip)\n" for p in args.skip)
    header = (
        f"# {args.out.stem}: a held-out set drawn (random.Random({args.seed}), scripts/draw-fresh-ids.py) from the\n"
        f"# GSM8K test, MBPP {'(every split)' if args.mbpp_all_splits else 'test'} and HumanEval questions in no id "
        f"list under data/banks/ and no file under\n"
        f"# docs/eval/\n{also}# ({len(used)} ids excluded), two GSM8K, one MBPP, one HumanEval\n"
    )
    args.out.write_text(header + "\n".join(order) + "\n", encoding="utf-8")
    print(
        f"{args.out}: {args.gsm8k} GSM8K + {args.mbpp} MBPP + {args.humaneval} HumanEval ids "
        f"({len(gsm8k)} + {len(mbpp)} + {len(humaneval)} were unused)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
