"""``podium tasks export | import | label`` and ``podium drift``.

Exit codes: 0 done (drift: no threshold crossed), 2 bad options or input (the message names
the fix; nothing is written), 3 drift: an input threshold was crossed (the traffic changed),
4 drift: an outcome threshold was crossed (podium does worse), with or without input shift.

The parsers live here; each command's code in :mod:`podium.traffic.tasks_cli` and
:mod:`podium.traffic.drift_cli`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console

from podium._args import MANY, SEED, WholeNumber
from podium.store.engine import store_location
from podium.trace import default_trace_path
from podium.traffic.drift_cli import cmd_drift
from podium.traffic.drift_options import DriftOptions
from podium.traffic.drift_run import DriftQuery
from podium.traffic.selection import ExportOptions
from podium.traffic.tasks_cli import cmd_tasks

__all__ = ["add_parsers", "cmd_drift", "cmd_tasks", "run"]

_STATUSES = (
    "traces: ok, fallback, error, running, cancelled; shadow: done, failed, over_budget, skipped_budget, dropped, error"
)


def add_parsers(sub: Any) -> None:
    """The ``tasks`` and ``drift`` subcommands."""
    from podium.serve.options import default_shadow_path

    tasks = sub.add_parser(
        "tasks", help="regression sets from traffic: export, and the labelling round trip"
    ).add_subparsers(dest="tasks_command", required=True, metavar="SUBCOMMAND")
    ex = tasks.add_parser(
        "export",
        help="a regression set (JSONL) from stored traces or shadow records",
        description=(
            "Write a regression set (the JSONL format podium eval reads, docs/eval.md) from stored traffic: one task "
            "per distinct question, with the client's reference or the upstream's (shadow) or podium's answer as a "
            "candidate reference, marked reference_source candidate:…. Questions and candidates are pseudonymized "
            "(offline Presidio, the pii extra) unless --allow-pii. See docs/loop.md."
        ),
    )
    ex.add_argument("--out", type=Path, required=True, metavar="SET.jsonl", help="the regression set to write")
    ex.add_argument("--append", action="store_true", help="add only requests not yet in --out (incremental)")
    ex.add_argument("--force", action="store_true", help="overwrite --out (and --review) if they exist")
    ex.add_argument("--review", type=Path, metavar="FILE.csv", help="also write a review file of the exported tasks")
    src = ex.add_argument_group("what to read")
    src.add_argument("--source", choices=["traces", "shadow"], default="traces", help="traces (default) or shadow")
    src.add_argument("--traces", type=Path, help=f"trace database (default: {default_trace_path()})")
    src.add_argument(
        "--store",
        type=store_location,
        metavar="FILE|URL",
        help=f"shadow store, a file or a database URL (default: $PODIUM_DATABASE_URL's store, else "
        f"{default_shadow_path()})",
    )
    src.add_argument("--since", metavar="WHEN", help="arrived at or after (ISO 8601 date or datetime, UTC)")
    src.add_argument("--until", metavar="WHEN", help="arrived before (a date alone includes that day)")
    src.add_argument("--tag", action="append", default=[], help="carries this tag (traces; repeatable: all of them)")
    src.add_argument("--use-case", metavar="NAME", help="this use case (shadow's X-Podium-Use-Case; traces: the tag)")
    src.add_argument("--status", help=f"request status ({_STATUSES})")
    how = ex.add_argument_group("how")
    how.add_argument(
        "--task-type",
        default=ExportOptions.task_type,
        help="task type of requests whose client and tags name none (default: %(default)s; math, choice, exact; "
        "code needs tests: retype rows in the review file)",
    )
    how.add_argument(
        "--candidate",
        choices=["auto", "podium", "upstream"],
        default=ExportOptions.candidate,
        help="whose answer is the candidate reference (default auto: the upstream's for shadow, podium's for traces)",
    )
    how.add_argument(
        "--similar",
        type=float,
        metavar="COSINE",
        help="also drop a question whose embedding's cosine similarity to a kept one is at least this (e.g. 0.95)",
    )
    how.add_argument(
        "--embedder",
        default=ExportOptions.embedder,
        help="for --similar: hash (no model), minilm, or a model id (default: %(default)s)",
    )
    how.add_argument("--limit", action=WholeNumber, low=1, high=MANY, help="keep the newest N new tasks")
    how.add_argument(
        "--allow-pii",
        action="store_true",
        help="write questions and answers as stored, personal data in clear (the default pseudonymizes them)",
    )
    ex.add_argument("--json", action="store_true", help="print the summary as JSON")

    im = tasks.add_parser(
        "import",
        help="read a filled-in review file back into its regression set as references",
        description=(
            "Apply a review file (from 'podium tasks export --review') to its regression set: verdict accept makes "
            "the candidate the reference, fix uses the reference column, drop removes the task; confirmed references "
            "are marked reference_source human. Every row is checked first; on any problem nothing is written."
        ),
    )
    im.add_argument("review", type=Path, metavar="FILE.csv", help="the filled-in review file")
    im.add_argument("--set", dest="set_path", type=Path, required=True, metavar="SET.jsonl", help="its regression set")
    im.add_argument("--out", type=Path, metavar="OUT.jsonl", help="write the result here (default: update --set)")
    im.add_argument("--json", action="store_true", help="print the summary as JSON")

    lb = tasks.add_parser(
        "label",
        help="confirm candidate references with a judge worker (marked judge-labelled)",
        description=(
            "Show each task whose reference is still a candidate to a judge worker of the pool (the eval loop's "
            "1-10 rubric); a pass (>= 7) marks it reference_source judge:WORKER, anything else leaves it a candidate "
            "for a person to review. Confirmed tasks are not sent again."
        ),
    )
    lb.add_argument("set_path", type=Path, metavar="SET.jsonl", help="the regression set")
    lb.add_argument("--judge", required=True, metavar="WORKER", help="the pool worker that judges")
    lb.add_argument("--pool", help="pool file or preset (default: the embedded local pool)")
    lb.add_argument("--out", type=Path, metavar="OUT.jsonl", help="write the result here (default: update the set)")
    lb.add_argument(
        "--cache",
        type=store_location,
        metavar="FILE|URL",
        help="request cache, as podium eval's and the loop's: a candidate judged before costs no call "
        "(default: ~/.cache/podium/eval/requests.sqlite3)",
    )
    lb.add_argument("--no-cache", action="store_true", help="call the judge afresh (nothing read or stored)")
    lb.add_argument("--json", action="store_true", help="print the summary as JSON")

    d = sub.add_parser(
        "drift",
        help="compare recent traffic with a reference window per tag: input and outcome shift",
        description=(
            "Compare a recent window of traced traffic with a reference window, for all requests and per tag: input "
            "shift (embedding MMD with a permutation test, mean-vector cosine distance, unseen terms, language and "
            "format mix, new tags) and outcome shift (cost, p95 latency, fallback, parse-failure and error rates, "
            "quality where --labels gives references, a judge's pass rate with --judge). Exit 0 when no threshold "
            "is crossed, 3 input shift only, "
            "4 outcome shift, 2 bad input. See docs/loop.md."
        ),
    )
    d.add_argument("--traces", type=Path, help=f"trace database (default: {default_trace_path()})")
    d.add_argument(
        "--source",
        choices=["traces", "shadow"],
        default="traces",
        help="traces (default) or shadow records (slices: --tag use-case:NAME; quality from the client's references)",
    )
    d.add_argument(
        "--store",
        type=store_location,
        metavar="FILE|URL",
        help="shadow store, a file or a database URL (--source shadow; default as podium shadow)",
    )
    w = d.add_argument_group("windows (UTC; default: the last --days days against the --days before)")
    w.add_argument(
        "--days", type=float, default=DriftQuery.days, help="length of each default window, days (default %(default)g)"
    )
    w.add_argument("--since", metavar="WHEN", help="recent window start")
    w.add_argument(
        "--until", metavar="WHEN", help="recent window end: a time, exclusive, or a date, which includes that day (now)"
    )
    w.add_argument("--reference-since", metavar="WHEN", help="reference window start")
    w.add_argument("--reference-until", metavar="WHEN", help="reference window end (default: the recent start)")
    c = d.add_argument_group("comparison")
    c.add_argument(
        "--use-case",
        metavar="NAME",
        help="only this use case's requests in both windows (shadow: the X-Podium-Use-Case; traces: tag use-case:NAME)",
    )
    c.add_argument(
        "--tag", action="append", default=[], help="report this tag's slice (repeatable; default: every tag)"
    )
    c.add_argument(
        "--embedder",
        default=DriftQuery.embedder,
        help="hash (no model), minilm, an embedded model id, or none (default: %(default)s)",
    )
    c.add_argument("--labels", type=Path, metavar="SET.jsonl", help="a labelled regression set (quality per window)")
    c.add_argument(
        "--allow-pii",
        action="store_true",
        help="list new terms as they are (default: a term is listed only if pseudonymization leaves it standing, so "
        "the report names no person the detector finds; the pii extra)",
    )
    c.add_argument(
        "--judge",
        metavar="WORKER",
        help="a pool worker that grades a seeded sample of each window's answers (its pass rate per slice; "
        "calls go through the request cache)",
    )
    c.add_argument(
        "--judge-sample",
        action=WholeNumber,
        low=1,
        high=MANY,
        default=DriftQuery.judge_sample,
        metavar="N",
        help="answers per slice and window the judge grades at most (%(default)s)",
    )
    c.add_argument("--pool", help="pool file or preset of --judge (default: the embedded local pool)")
    c.add_argument(
        "--cache",
        type=store_location,
        metavar="FILE|URL",
        help="request cache of the judge's calls (default: ~/.cache/podium/eval/requests.sqlite3)",
    )
    c.add_argument(
        "--threshold",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="change a threshold or turn it off (NAME=off); repeatable; names and defaults in docs/loop.md",
    )
    c.add_argument(
        "--min-requests",
        action=WholeNumber,
        low=2,
        high=MANY,
        default=DriftOptions.min_requests,
        help="requests per window before a slice alerts (%(default)s)",
    )
    c.add_argument(
        "--min-labels",
        action=WholeNumber,
        low=1,
        high=MANY,
        default=DriftOptions.min_labels,
        help="labelled (or, with --judge, judged) requests per window for a quality alert (%(default)s)",
    )
    c.add_argument(
        "--permutations",
        action=WholeNumber,
        low=1,
        high=1_000_000,
        default=DriftOptions.permutations,
        help="permutations of the MMD test (%(default)s)",
    )
    c.add_argument(
        "--max-sample",
        action=WholeNumber,
        low=2,
        high=1_000_000,
        default=DriftOptions.max_sample,
        help="questions per window in the MMD (%(default)s)",
    )
    c.add_argument("--seed", action=WholeNumber, low=SEED[0], high=SEED[1], default=DriftOptions.seed)
    o = d.add_argument_group("output")
    o.add_argument("--json", action="store_true", help="print the report as JSON (default: Markdown)")
    o.add_argument("--out", type=Path, metavar="FILE.md", help="also write the Markdown report here")
    o.add_argument("--plot", type=Path, metavar="FILE.png", help="draw the metrics over time")
    o.add_argument(
        "--bucket",
        choices=["auto", "minute", "hour", "day", "week"],
        default=DriftQuery.bucket,
        help="plot bucket (default: auto — minutes when both windows span under 6 hours, hours under 3 days, weeks "
        "over 90, else days)",
    )


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Run ``podium tasks`` or ``podium drift``; returns the exit code."""
    return (cmd_tasks if args.command == "tasks" else cmd_drift)(args, out, err)
