"""The shift proof's bank tasks (docs/loop.md, "The proof with plan conductors"): the exported,
labelled "after" set as training rows and the held-out "after" questions as test rows, open tasks
left out (the bank grades with the verifiers, no judge), and so are the slices ``--leave-out``
names (e.g. ``use-case:support-da``, which every method of the live proof answers right: no
gap to recover, hours of recording); and the order they are recorded in:
per kind, two after questions then one held-out, round after round — so a bank stopped at any
point has both, every kind in proportion.

    .venv/bin/python bench/shift_bank_tasks.py SET.jsonl HELDOUT.jsonl --out DIR [--leave-out TAG ...]
        # writes DIR/after.jsonl (split train), DIR/heldout.jsonl (split test), DIR/ids.txt
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def kind(record: dict[str, Any]) -> str:
    """A task's ``use-case:*`` tag (the shift's slice), or ``-``."""
    return next((t for t in record.get("tags") or () if t.startswith("use-case:")), "-")


def build(
    after: Sequence[dict[str, Any]], heldout: Sequence[dict[str, Any]], leave_out: Sequence[str] = ()
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    """(after rows with split train, held-out rows with split test, the ids in recording order),
    open tasks and the ``leave_out`` slices left out."""

    def keep(r: dict[str, Any]) -> bool:
        return r.get("task_type") != "open" and kind(r) not in leave_out

    train = [{**r, "split": "train"} for r in after if keep(r)]
    test = [{**r, "split": "test"} for r in heldout if keep(r)]
    kinds = sorted({kind(r) for r in (*train, *test)})
    queues = {k: ([r["id"] for r in train if kind(r) == k], [r["id"] for r in test if kind(r) == k]) for k in kinds}
    ids: list[str] = []
    while any(a or h for a, h in queues.values()):
        for a, h in queues.values():
            ids += [a.pop(0) for _ in range(min(2, len(a)))]
            ids += [h.pop(0)] if h else []
    return train, test, ids


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The shift proof's bank tasks and recording order.")
    parser.add_argument("set", type=Path, help="the labelled after set (podium tasks export + import)")
    parser.add_argument("heldout", type=Path, help="the held-out after questions (bench/shift_data.py)")
    parser.add_argument("--out", type=Path, required=True, help="folder for after.jsonl, heldout.jsonl, ids.txt")
    parser.add_argument("--leave-out", action="append", default=[], metavar="TAG", help="a use-case tag not to record")
    args = parser.parse_args(argv)
    train, test, ids = build(_read_jsonl(args.set), _read_jsonl(args.heldout), args.leave_out)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, rows in (("after.jsonl", train), ("heldout.jsonl", test)):
        (args.out / name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    (args.out / "ids.txt").write_text("\n".join(ids) + "\n", encoding="utf-8")
    print(f"{len(train)} after (train) and {len(test)} held-out (test) questions; order in {args.out / 'ids.txt'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
