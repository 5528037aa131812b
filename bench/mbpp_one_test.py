"""MBPP with its grader's tests hidden but one: a fairer code slice for checked plans.

MBPP states all three of its grader's asserts in the question, so a plan that runs the question's
tests (the ``check`` role, docs/learned-workflows.md) checks against the grader itself. This
writes a regression-set JSONL (docs/eval.md) of the same problems with **only the first assert
shown** — enough to name the function and its signature, as MBPP's own prompt intends — and all
of them graded: a check then runs one stated test, and the grader two it never saw. HumanEval,
whose tests are all hidden, is spent in this project (every one of its 164 questions has run).

    python3 bench/mbpp_one_test.py --ids data/banks/local/ids/LIST.txt --out runs/mbpp-one-test.jsonl

Each record: ``id`` ``mbpp/N/one-test`` (so an id list drawn over ``mbpp/N`` names it, and a
later draw counts ``mbpp/N`` as used), ``question`` (MBPP's text, the first assert, the reply
instruction of podium's MBPP loader), ``task_type`` ``code``, ``tests`` (all asserts), ``tags``.
Problems with ``test_setup_code`` are left out: the regression-set format has no setup field.

``--shown 0`` shows **no** test: the question names the function and shows the first assert's
call without its expected value (``Call it like this: f(3, 4)``), ids ``mbpp/N/no-test``; a
problem whose first assert does not call the reference solution's function by name is left
out. A check step then finds nothing to run, as with most code questions users write.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MBPP = ROOT / "data" / "benchmarks" / "mbpp" / "mbpp.jsonl"
SUFFIX = "/one-test"
NO_TEST = "/no-test"
_MBPP_ID = re.compile(r"^mbpp/(\d+)$")
_DEF = re.compile(r"^def\s+(\w+)\s*\(", re.MULTILINE)


def record(problem: dict[str, Any], shown: int = 1) -> dict[str, Any] | None:
    """The one-test record (``shown`` 1) or the no-test record (``shown`` 0) of one MBPP problem
    (a line of mbpp.jsonl), or None when it needs setup code or (no test) its first assert's call
    cannot be found."""
    if str(problem.get("test_setup_code") or "").strip():
        return None
    tests = [str(t) for t in problem["test_list"]]
    if shown:
        stated = f"Your code should pass this test:\n{tests[0]}"
    elif (call := first_call(problem)) is not None:
        stated = f"Call it like this: {call}"
    else:
        return None
    return {
        "id": f"mbpp/{int(problem['task_id'])}{SUFFIX if shown else NO_TEST}",
        "question": f"{problem['text']}\n{stated}\nReply with the Python code in one ```python code block.",
        "task_type": "code",
        "tests": "\n".join(tests),
        "tags": ["code", "mbpp-one-test" if shown else "mbpp-no-test"],
    }


def first_call(problem: dict[str, Any]) -> str | None:
    """The first assert's first call of a function the reference solution defines (the last
    defined one first), as written in the assert (read with ``ast``, so brackets inside strings
    are no end), or None."""
    names = _DEF.findall(str(problem.get("code", "")).replace("\r\n", "\n"))
    test = str(problem["test_list"][0])
    try:
        tree = ast.parse(test)
    except SyntaxError:
        return None
    calls = sorted(
        (
            (n.lineno, n.col_offset, n.func.id, n)
            for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
        ),
        key=lambda c: c[:2],
    )
    for name in reversed(names):
        for *_, called, call in calls:
            if called == name:
                return ast.get_source_segment(test, call)
    return None


def wanted(lines: Iterable[str]) -> list[int]:
    """MBPP task ids named ``mbpp/N`` or ``mbpp/N/one-test`` in an id list (comments and other
    benchmarks' ids ignored), in order."""
    out = []
    for line in lines:
        item = line.split("#", 1)[0].strip().removesuffix(SUFFIX).removesuffix(NO_TEST)
        match = _MBPP_ID.match(item)
        if match:
            out.append(int(match.group(1)))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="the regression-set JSONL to write")
    parser.add_argument("--ids", type=Path, help="an id list: only its MBPP problems (default: all)")
    parser.add_argument("--mbpp", type=Path, default=MBPP, help="mbpp.jsonl (default: the shipped one)")
    parser.add_argument("--shown", type=int, choices=(0, 1), default=1, help="asserts shown: 1 (default) or 0")
    args = parser.parse_args(argv)
    with args.mbpp.open(encoding="utf-8") as f:
        problems = {int(p["task_id"]): p for p in (json.loads(line) for line in f if line.strip())}
    ids = wanted(args.ids.read_text(encoding="utf-8").splitlines()) if args.ids else sorted(problems)
    unknown = [i for i in ids if i not in problems]
    if unknown:
        print(f"error: {args.ids}: no MBPP problem {unknown[:5]}", file=sys.stderr)
        return 2
    records = [r for r in (record(problems[i], args.shown) for i in ids) if r is not None]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    print(f"{args.out}: {len(records)} problems ({len(ids) - len(records)} left out: setup code, or no call to show)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
