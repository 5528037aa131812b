"""How often the LM conductor's embedded-instruction rule fires, on attacks and on ordinary questions.

The rule (:func:`podium.conductor.prompt.unsafe_subtask`, fourth rule) refuses a subtask that
carries an instruction embedded in the question after a role or override marker (``SYSTEM:``,
``ignore your instructions`` …). A rule like this is only worth having if it leaves ordinary
traffic alone, so this counts, per question file:

- ``questions``: distinct questions read (the ``question``, ``prompt`` or ``text`` field);
- ``with a marker``: questions in which :func:`embedded_instructions` finds an embedded
  instruction at all;
- ``restated refused``: questions whose worst-case subtask, the whole question restated
  (``QUESTION End with the answer.``), is refused by ``unsafe_subtask`` — the conductor's plan
  would be re-sampled, then replaced by the fallback pipeline.

Usage::

    PYTHONPATH=src python bench/injection_markers.py                       # the benchmark files in data/
    PYTHONPATH=src python bench/injection_markers.py FILE.jsonl [...] --json

The counts are exact (no timing), so they do not depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from podium.conductor.prompt import FEW_SHOT, conductor_messages, embedded_instructions, unsafe_subtask

DEFAULT = [
    Path("data/benchmarks/gsm8k/test.jsonl"),
    Path("data/benchmarks/gsm8k/train.jsonl"),
    Path("data/benchmarks/mbpp/mbpp.jsonl"),
    Path("data/benchmarks/humaneval/HumanEval.jsonl"),
    Path("data/pii/cases.jsonl"),
    Path("data/adversarial/cases.jsonl"),
]


def questions(path: Path) -> list[str]:
    """The distinct non-empty questions of a JSONL file, in file order."""
    seen: dict[str, None] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        text = next((row[k] for k in ("question", "prompt", "text") if isinstance(row.get(k), str)), "")
        if text.strip():
            seen.setdefault(text, None)
    return list(seen)


def count(path: Path) -> dict[str, object]:
    """The three counts of the module docstring for one file."""
    marked = refused = 0
    for question in questions(path):
        marked += bool(embedded_instructions(question)[0])
        messages = conductor_messages(question, ["a", "b", "c"], max_steps=3, tool=None, few_shot=FEW_SHOT, roles=())
        refused += unsafe_subtask([question + " End with the answer."], messages, question) is not None
    return {"file": str(path), "questions": len(questions(path)), "with a marker": marked, "restated refused": refused}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path, help="JSONL question files (default: the benchmark files)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    missing = [str(f) for f in args.files or DEFAULT if not f.is_file()]
    if missing:
        print(f"no such file: {', '.join(missing)} (run from the repository root)", file=sys.stderr)
        return 2
    rows = [count(f) for f in args.files or DEFAULT]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print("| file | questions | with a marker | restated refused |\n|---|---:|---:|---:|")
    for r in rows:
        print(f"| {r['file']} | {r['questions']} | {r['with a marker']} | {r['restated refused']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
