"""How long does the CLI take to start? ``podium --help`` and ``podium trace list`` (over a small
trace file) as whole processes, against a bare ``python -c pass`` and, with ``--baseline-src``,
against another checkout's ``src`` (e.g. a ``git worktree`` of an older commit), in the same run:
the commands alternate, ``--runs`` times each after a warm-up, and the medians of wall and CPU
(user + system, the child's own accounting) are reported with the ratios pair by pair.

    .venv/bin/python bench/startup.py [--runs 7] [--baseline-src DIR] [--json OUT]

For where the time goes: ``python -X importtime -m podium --help 2> imports.txt``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

COMMANDS = {"help": ["-m", "podium", "--help"], "trace list": ["-m", "podium", "trace", "list"]}


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall s, CPU s) of one run of ``python ARGV``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, *argv], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def fill(home: Path) -> None:
    """A trace file of 50 one-step requests in ``home`` (the default place for PODIUM_HOME)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from trace_writes import template

    from podium.trace import default_trace_path
    from podium.trace.store import TraceStore

    os.environ["PODIUM_HOME"] = str(home)
    store = TraceStore(default_trace_path())
    for i in range(50):
        store.write(dataclasses.replace(template(), id=f"{i:032x}"))
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--baseline-src", type=Path, help="another checkout's src/ (way 'before')")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        fill(Path(tmp))
        env = {**os.environ, "PODIUM_HOME": tmp}
        ways = {"now": env, **({"before": {**env, "PYTHONPATH": str(args.baseline_src.resolve())}}
                               if args.baseline_src else {})}  # fmt: skip
        result: dict[str, Any] = {"runs": args.runs}
        bare = [timed(["-c", "pass"], env) for _ in range(args.runs + 1)][1:]
        result["python -c pass"] = {"wall_s": statistics.median(w for w, _ in bare),
                                    "cpu_s": statistics.median(c for _, c in bare)}  # fmt: skip
        for name, argv in COMMANDS.items():
            runs: dict[str, list[tuple[float, float]]] = {way: [] for way in ways}
            for k in range(args.runs + 1):  # the first round warms the caches and is dropped
                for way, way_env in ways.items():
                    measured = timed(argv, way_env)
                    if k:
                        runs[way].append(measured)
            entry: dict[str, Any] = {}
            for way, values in runs.items():
                entry[way] = {"wall_s": round(statistics.median(w for w, _ in values), 4),
                              "cpu_s": round(statistics.median(c for _, c in values), 4)}  # fmt: skip
            if "before" in runs:
                pairs = list(zip(runs["now"], runs["before"], strict=True))
                entry["now/before"] = {"wall": round(statistics.median(n[0] / b[0] for n, b in pairs), 3),
                                       "cpu": round(statistics.median(n[1] / b[1] for n, b in pairs), 3)}  # fmt: skip
            result[name] = entry
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
