"""``podium loop run | status``: the weekly procedure of docs/loop.md as one command.

Exit codes of ``loop run``: 0 done (the new version promoted, or nothing new to decide), 2 bad
input (nothing written), 3 the gate refused the new version (the current one stays), 5 stopped
for labels (fill the review file named, then run again); 1 an unexpected podium error.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from podium._args import MANY, SEED, BoundedNumber, ClusterCount, PositiveNumber, WholeNumber
from podium.loop.settings import PLANS_EMBEDDER

__all__ = ["add_parsers", "run"]

_HELP = "the weekly procedure as one command: drift, export, labels, record, train, promote"


def add_parsers(sub: Any) -> None:
    """The ``loop`` subcommands."""
    loop = sub.add_parser("loop", help=_HELP).add_subparsers(dest="loop_command", required=True, metavar="SUBCOMMAND")
    r = loop.add_parser(
        "run",
        allow_abbrev=False,  # its options are remembered: a typo such as --judg must not become --judge for good
        help="run the loop over a folder: every stage idempotent and incremental, safe to rerun",
        description=(
            "Run the weekly procedure over the folder --dir: 1 drift (recorded, never fatal), 2 export the window's "
            "new requests into set.jsonl and write a review file of them, 3 import the review files filled since "
            "(and/or --judge), stopping while candidates are unconfirmed, 4 record every worker's outcomes "
            "(podium eval --methods single, through the request cache) into set.csv, 5 train, 6 promote through "
            "the gate, 7 report. Options are remembered in DIR/loop.json: later runs need only --dir. "
            "Exit 0 done, 2 bad input, 3 refused by the gate, 5 stopped for labels. See docs/loop.md."
        ),
    )
    r.add_argument("--dir", type=Path, required=True, metavar="DIR", help="the loop's folder (it must exist)")
    r.add_argument("--json", action="store_true", help="print the run's report as JSON")
    once = r.add_argument_group("this run only")
    once.add_argument("--since", metavar="WHEN", help="traffic window start (default: --days before --until)")
    once.add_argument(
        "--until",
        metavar="WHEN",
        help="traffic window end: a time, exclusive, or a date, which includes that day (now)",
    )
    once.add_argument(
        "--allow-unconfirmed",
        action="store_true",
        help="go on to record, train and promote with candidate references nobody confirmed",
    )
    once.add_argument(
        "--allow-quality-drop", action="store_true", help="promote even if the gate's quality guard fails"
    )
    w = r.add_argument_group("what to read (remembered)")
    w.add_argument("--source", choices=["traces", "shadow"], help="traces (default) or shadow records")
    w.add_argument("--traces", help="trace database (default: podium's)")
    w.add_argument("--store", help="shadow store (--source shadow)")
    w.add_argument("--tag", action="append", help="only requests with this tag (repeatable: all of them)")
    w.add_argument("--use-case", help="only this use case")
    w.add_argument("--status", help="only requests of this status")
    w.add_argument("--days", type=float, help="window length when --since is not given (default 7)")
    ex = r.add_argument_group("export and labels (remembered)")
    ex.add_argument("--task-type", help="type of requests that name none (default open)")
    ex.add_argument("--candidate", choices=["auto", "podium", "upstream"], help="whose answer is the candidate")
    ex.add_argument("--similar", type=float, metavar="COSINE", help="also drop near-duplicate questions")
    ex.add_argument("--similar-embedder", help="embedder of --similar (default hash)")
    ex.add_argument("--limit", action=WholeNumber, low=1, high=MANY, help="the newest N new tasks a run")
    ex.add_argument("--allow-pii", action="store_true", default=None, help="questions in clear (fixed per folder)")
    ex.add_argument("--judge", metavar="WORKER", help="pool worker that confirms candidates and grades open tasks")
    dr = r.add_argument_group("drift (remembered)")
    dr.add_argument("--threshold", action="append", metavar="NAME=VALUE", help="a drift threshold (repeatable)")
    for end, default in (("since", "the window as long before this run's"), ("until", "this run's window's start")):
        dr.add_argument(
            f"--reference-{end}",
            metavar="WHEN",
            help=f"the reference window's {'start' if end == 'since' else 'end'} that drift compares every run "
            f"with, e.g. the week the conductor was trained on (default: {default}; none: back to the default)",
        )
    dr.add_argument(
        "--drift-judge-sample",
        action=WholeNumber,
        low=0,
        high=MANY,
        metavar="N",
        help="answers per slice and window that the grader (--eval-judge, else --judge) grades in the drift report "
        "where nobody labelled them (30; 0: none)",
    )
    rec = r.add_argument_group("record (remembered)")
    rec.add_argument("--pool", help="pool file or preset (fixed per folder; default: the embedded local pool)")
    rec.add_argument("--eval-judge", metavar="WORKER", help="the worker that grades open tasks (default: --judge)")
    rec.add_argument("--seed", action=WholeNumber, low=SEED[0], high=SEED[1], help="split and training seed (0)")
    rec.add_argument("--matrix-split", type=float, metavar="SHARE", help="share of questions to train on (0.8)")
    rec.add_argument("--cache", metavar="FILE|URL", help="request cache (default: podium eval's)")
    rec.add_argument("--concurrency", action=WholeNumber, low=1, high=10_000, help="eval requests in flight")
    rec.add_argument(
        "--bank", action=argparse.BooleanOptionalAction, help="also record the new questions into DIR/bank"
    )
    rec.add_argument("--bank-pool", help="pool of the bank's catalogue (default local-tools)")
    rec.add_argument(
        "--bank-catalogue",
        choices=["local", "local-checked"],
        help="the bank's steps: local-checked (default) adds a check of four code answers against the question's "
        "own tests, which the shipped conductor's code plan uses; local leaves it out. Fixed once the bank has rows",
    )
    rec.add_argument("--step-timeout", type=float, metavar="SECONDS", help="bank step time limit (600)")
    t = r.add_argument_group("train and promote (remembered; as podium train and conductor promote)")
    t.add_argument("--name", help="registry name (default light)")
    t.add_argument(
        "--policy",
        choices=["light", "plans", "lm"],
        help="light (default: worker and role per step, on set.csv), plans (a composition of the bank's steps per "
        "question, on DIR/bank; needs --bank) or lm (an LM conductor trained by GRPO on set.csv: a GPU's work, see "
        "--preset); fixed per folder",
    )
    t.add_argument("--lam", action=BoundedNumber, help="cost penalty λ, 1/USD (0)")
    t.add_argument("--mu", action=BoundedNumber, help="latency penalty μ, 1/second (0)")
    t.add_argument(
        "--generations",
        action=WholeNumber,
        low=0,
        high=MANY,
        help="CMA-ES generations (60; 0: the untrained policy, which the gate refuses)",
    )
    t.add_argument("--popsize", action=WholeNumber, low=2, high=100_000, help="candidates per generation")
    t.add_argument("--dims", action=WholeNumber, low=1, high=100_000, help="PCA dimensions (16)")
    t.add_argument(
        "--clusters",
        action=ClusterCount,
        metavar="K|auto",
        help="--policy plans: a cluster table, one plan per k-means cluster of the questions (auto, the default: "
        "the shipped recipe, K by silhouette), or 0 for the linear head",
    )
    t.add_argument(
        "--max-cost-ratio",
        action=PositiveNumber,
        metavar="R",
        help="--policy plans --clusters: the best table whose training cost is ≤ R × the best single worker's",
    )
    t.add_argument(
        "--embedder",
        help="the question encoder: minilm or an embedded model id (default: minilm for --policy light, "
        f"{PLANS_EMBEDDER} for plans, as the shipped plan tables)",
    )
    t.add_argument("--max-steps", action=WholeNumber, low=1, high=20, help="workflow length limit (3)")
    t.add_argument(
        "--max-quality-drop", action=BoundedNumber, high=1.0, metavar="Q", help="the gate's quality margin (0 to 1)"
    )
    t.add_argument("--model", help="--policy lm: the base conductor, an embedded model id (default: the preset's)")
    t.add_argument("--steps", action=WholeNumber, low=0, high=MANY, help="--policy lm: GRPO steps (the preset's)")
    t.add_argument(
        "--preset", choices=["cpu", "paper"], help="--policy lm: cpu (default: small and short) or the paper's recipe"
    )

    s = loop.add_parser("status", help="the loop folder's state: runs, review files, the set and the promoted version")
    s.add_argument("--dir", type=Path, required=True, metavar="DIR", help="the loop's folder")
    s.add_argument("--json", action="store_true", help="print the state as JSON")


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Run ``podium loop run`` or ``podium loop status``; returns the exit code."""
    if args.loop_command == "status":
        return _status(args, out)
    from podium.loop.report import stage_lines
    from podium.loop.runner import run_loop
    from podium.loop.settings import RunOptions

    once = RunOptions(args.since, args.until, args.allow_unconfirmed, args.allow_quality_drop)

    def say(line: str) -> None:
        err.print(Text(line, style="dim"), highlight=False)

    record, code = run_loop(args.dir, args, once, say)
    if args.json:
        print(json.dumps(record, indent=1, ensure_ascii=False))
    else:
        for name, text in stage_lines(record):
            out.print(Text(f"{name}: {text}"), highlight=False)
        style = {0: "green", 3: "bold red", 5: "bold yellow"}.get(code, "")
        out.print(Text(f"loop run {record['id']}: {record['status']} (exit {code}); report {record['report']}", style))
    if record.get("message"):  # what to fill and how to resume: said on stderr, with --json too
        err.print(Text(record["message"], style="yellow"), highlight=False)
    return code


def _status(args: argparse.Namespace, out: Console) -> int:
    from podium.loop.report import status_json, status_markdown
    from podium.loop.state import Folder, load_state

    folder = Folder(args.dir)
    folder.check(new_ok=False)
    status = status_json(load_state(folder), folder)
    if args.json:
        print(json.dumps(status, indent=1, ensure_ascii=False))
    else:
        out.print(Text(status_markdown(status)), highlight=False, end="")
    return 0
