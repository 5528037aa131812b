"""The shifted traffic of the shift proof (docs/loop.md, "The proof on a real shift"), built
deterministically from the public data the project ships (data/benchmarks: GSM8K test, MBPP,
HumanEval) — no download, no model.

Three disjoint question sets, each in podium's regression-set format (docs/eval.md, "Task sets"),
every task tagged with its kind (``use-case:KIND``):

* ``before.jsonl`` — the traffic the old conductor was built for: GSM8K math word problems
  (``use-case:math``) and MBPP coding problems (``use-case:code``), half each;
* ``after.jsonl`` — the shifted traffic, the loop's export / labelling / training pool (at most
  200): other GSM8K and MBPP questions plus two new kinds, HumanEval function completions
  (``use-case:humaneval``) and a Danish support-desk question over a Markdown table
  (``use-case:support-da``, :func:`danish_table`, a rewrite of yet other GSM8K questions), a
  quarter each;
* ``heldout.jsonl`` — more "after" questions of the same four kinds, never served or trained
  on, for the final comparison (at least 100 at full size);
* ``heldout2.jsonl`` (only with ``--heldout2 N``) — a second held-out set, dealt after all the
  others, so the three sets above stay byte for byte what they are without it: fresh questions
  for checking a recipe that was chosen after the first held-out set had been seen.

Which questions: GSM8K test questions, MBPP test and validation problems (task ids 11–600,
without ``test_setup_code``: the regression-set format has no setup field) and all HumanEval
problems, minus every question of ``docs/eval/local-pool/outcomes.csv`` (the matrix the old
conductor is trained on, so that nothing served or held out was trained on). Each source's
questions are shuffled by ``random.Random(seed)`` and dealt out in order: before, after,
held-out (GSM8K: math before, after, held-out, then the Danish rewrites after, held-out), then
the second held-out set (GSM8K: math, then Danish).

References are the datasets' own: GSM8K's ``####`` number; MBPP's asserts; HumanEval's
``check`` made self-contained (:func:`humaneval_tests`); the Danish question's total is the sum
of the numbers in its table (:func:`danish_reference`). Each task also carries a ``task:math``
or ``task:code`` tag, which the client sends so that ``podium tasks export`` types the math
traffic (code traffic is exported ``open``: a trace has no tests).

    .venv/bin/python bench/shift_data.py --out runs/shift/data [--before 200 --after 200 --heldout 120 --seed 0]

writes the three files and ``manifest.json`` (sizes per kind, seed, sha256 of each file).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import random
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "src") not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(ROOT / "src"))

from podium.eval.tasks import Task, load_tasks  # noqa: E402

BENCHMARKS = ROOT / "data" / "benchmarks"
TRAINED_ON = ROOT / "docs" / "eval" / "local-pool" / "outcomes.csv"
"""The outcome matrix the old conductor is trained on: its questions are left out of every set."""

KINDS = ("math", "code", "humaneval", "support-da")
"""The kinds of traffic; each task's tag is ``use-case:KIND``."""

BEFORE_KINDS = ("math", "code")
AFTER_KINDS = KINDS


def danish_table(question: str, n: int) -> str:
    """A support-desk question in Danish over a Markdown table (a deterministic rewrite of a
    GSM8K question's numbers into a table, for a shift in language and format): the first three
    whole numbers of ``question`` (or 3, 4, 5 when it has none) become the table's rows; ``n``
    is the case number shown. The expected answer is their sum (:func:`danish_reference`)."""
    rows = "\n".join(f"| vare {i + 1} | {value} |" for i, value in enumerate(_table_numbers(question)))
    return (
        f"Hej, kunden har bestilt følgende (sag {n}):\n\n| vare | antal |\n|---|---|\n{rows}\n\n"
        "Hvor mange varer er der i alt, og hvad skal jeg svare kunden? Svar venligst på dansk."
    )


def danish_reference(question: str) -> str:
    """The right answer to :func:`danish_table`'s rewrite of ``question``: the sum of its rows."""
    return str(sum(int(v) for v in _table_numbers(question)))


def _table_numbers(question: str) -> list[str]:
    return [w.strip(".,?$") for w in question.split() if w.strip(".,?$").isdigit()][:3] or ["3", "4", "5"]


def humaneval_tests(tests: str, entry_point: str) -> str:
    """HumanEval's ``check(candidate)`` as self-contained asserts on ``entry_point``: the
    parameter renamed to the function's name and the call appended, so the tests run without an
    ``entry_point`` field (which a review file cannot carry) and name the function under test
    (:func:`podium.answers.function_under_test` finds it in the first assert)."""
    renamed = re.sub(r"\bcandidate\b", entry_point, tests)
    return f"{renamed.rstrip()}\n\ncheck({entry_point})\n"


def _sizes(total: int, kinds: Sequence[str]) -> dict[str, int]:
    """``total`` dealt over ``kinds`` as evenly as possible, the first kinds getting the rest."""
    base, extra = divmod(total, len(kinds))
    return {kind: base + (1 if i < extra else 0) for i, kind in enumerate(kinds)}


def _trained_on(path: Path) -> set[str]:
    if not path.is_file():
        return set()
    with path.open(encoding="utf-8", newline="") as handle:
        return {row["sample_id"] for row in csv.DictReader(handle)}


def _record(task: Task, kind: str, *, question: str | None = None, reference: str | None = None) -> dict[str, Any]:
    """One regression-set record of ``task`` as the kind ``kind``."""
    task_type = "code" if kind in ("code", "humaneval") else "math"
    record: dict[str, Any] = {
        "id": f"shift/{kind}/{task.id}",
        "question": question or task.question,
        "task_type": task_type,
    }
    if task_type == "code":
        assert task.tests is not None  # the loaders give every code task its tests
        record["tests"] = humaneval_tests(task.tests, task.entry_point) if task.entry_point else task.tests
    else:
        record["reference"] = reference if reference is not None else task.reference
    record["tags"] = [f"use-case:{kind}", f"task:{task_type}"]
    return record


def build(
    before: int = 200,
    after: int = 200,
    heldout: int = 120,
    seed: int = 0,
    trained_on: Path = TRAINED_ON,
    heldout2: int = 0,
) -> dict[str, list[dict[str, Any]]]:
    """The sets (``before``, ``after``, ``heldout`` and, when ``heldout2`` > 0, ``heldout2``:
    lists of regression-set records), of the given sizes, dealt from the shipped benchmarks as
    the module docstring says.

    Raises ValueError when a source has too few questions for the sizes asked."""
    skip = _trained_on(trained_on)
    rng = random.Random(seed)

    def pool(tasks: list[Task]) -> list[Task]:
        kept = [t for t in tasks if t.id not in skip]
        rng.shuffle(kept)
        return kept

    gsm8k = pool(load_tasks(BENCHMARKS / "gsm8k" / "test.jsonl"))
    mbpp = pool(
        [t for t in load_tasks(BENCHMARKS / "mbpp" / "mbpp.jsonl") if t.split in ("test", "validation") and not t.setup]
    )
    humaneval = pool(load_tasks(BENCHMARKS / "humaneval" / "HumanEval.jsonl"))
    sources = {"math": gsm8k, "code": mbpp, "humaneval": humaneval, "support-da": gsm8k}
    plan = {
        "before": _sizes(before, BEFORE_KINDS),
        "after": _sizes(after, AFTER_KINDS),
        "heldout": _sizes(heldout, AFTER_KINDS),
    }
    # GSM8K feeds two kinds: math first (before, after, held-out), then the Danish rewrites
    order = [(name, kind) for kind in KINDS for name in ("before", "after", "heldout") if kind in plan[name]]
    if heldout2 > 0:  # dealt last: the sets above do not change
        plan["heldout2"] = _sizes(heldout2, AFTER_KINDS)
        order += [("heldout2", kind) for kind in KINDS]
    sets: dict[str, list[dict[str, Any]]] = {name: [] for name in plan}
    offset = {"math": 0, "code": 0, "humaneval": 0}
    for name, kind in order:
        count = plan[name][kind]
        source = "math" if kind == "support-da" else kind
        start = offset[source]
        chosen = sources[kind][start : start + count]
        if len(chosen) < count:
            raise ValueError(f"{kind}: {count} questions asked for {name}, only {len(chosen)} left in the source")
        offset[source] += count
        for task in chosen:
            if kind == "support-da":
                n = int(task.id.rsplit("/", 1)[1])
                sets[name].append(
                    _record(
                        task, kind, question=danish_table(task.question, n), reference=danish_reference(task.question)
                    )
                )
            else:
                sets[name].append(_record(task, kind))
    for records in sets.values():  # kinds interleaved as traffic arrives, still seeded
        random.Random(seed).shuffle(records)
    return sets


def write(out: Path, sets: dict[str, list[dict[str, Any]]], seed: int) -> dict[str, Any]:
    """Write ``NAME.jsonl`` per set and ``manifest.json`` into ``out``; returns the manifest."""
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {"seed": seed, "sets": {}}
    for name, records in sets.items():
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
        (out / f"{name}.jsonl").write_text(text, encoding="utf-8")
        kinds: dict[str, int] = {}
        for r in records:
            kind = r["tags"][0].split(":", 1)[1]
            kinds[kind] = kinds.get(kind, 0) + 1
        manifest["sets"][name] = {
            "file": f"{name}.jsonl",
            "questions": len(records),
            "kinds": kinds,
            "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
        }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, required=True, help="folder for before/after/heldout.jsonl")
    parser.add_argument("--before", type=int, default=200, help="before-traffic questions (default 200)")
    parser.add_argument("--after", type=int, default=200, help="after-traffic questions, the loop's pool (default 200)")
    parser.add_argument("--heldout", type=int, default=120, help="held-out after questions (default 120)")
    parser.add_argument(
        "--heldout2", type=int, default=0, help="a second held-out set, dealt after the others (default 0: none)"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if min(args.before, args.after, args.heldout) < 1 or args.heldout2 < 0:
        parser.error("every set needs at least one question (--heldout2: 0 or more)")
    sets = build(args.before, args.after, args.heldout, args.seed, heldout2=args.heldout2)
    manifest = write(args.out, sets, args.seed)
    for name, info in manifest["sets"].items():
        kinds = ", ".join(f"{k} {v}" for k, v in info["kinds"].items())
        print(f"{name}: {info['questions']} questions ({kinds}) -> {args.out / info['file']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
