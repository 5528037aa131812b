"""``podium tasks export | import | label`` and ``podium drift``.

Exit codes: 0 done (drift: no threshold crossed), 2 bad options or input (the message names
the fix; nothing is written), 3 drift: an input threshold was crossed (the traffic changed),
4 drift: an outcome threshold was crossed (podium does worse), with or without input shift.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.text import Text

from podium._args import MANY, SEED, WholeNumber
from podium.errors import ConfigError
from podium.trace import default_trace_path

if TYPE_CHECKING:
    from podium.embed import Embedder
    from podium.traffic.export import Pseudonymize
    from podium.traffic.source import TrafficItem

__all__ = ["add_parsers", "cmd_drift", "cmd_tasks", "run"]

_STATUSES = "traces: ok, fallback, error, running; shadow: done, failed, over_budget, skipped_budget, dropped, error"


def add_parsers(sub: Any) -> None:
    """The ``tasks`` and ``drift`` subcommands."""
    from podium.serve.cli import default_shadow_path

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
    ex.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    ex.add_argument("--review", type=Path, metavar="FILE.csv", help="also write a review file of the exported tasks")
    src = ex.add_argument_group("what to read")
    src.add_argument("--source", choices=["traces", "shadow"], default="traces", help="traces (default) or shadow")
    src.add_argument("--traces", type=Path, help=f"trace database (default: {default_trace_path()})")
    src.add_argument(
        "--store",
        type=Path,
        help=f"shadow store file (default: $PODIUM_DATABASE_URL's store, else {default_shadow_path()})",
    )
    src.add_argument("--since", metavar="WHEN", help="arrived at or after (ISO 8601 date or datetime, UTC)")
    src.add_argument("--until", metavar="WHEN", help="arrived before (a date alone includes that day)")
    src.add_argument("--tag", action="append", default=[], help="carries this tag (traces; repeatable: all of them)")
    src.add_argument("--use-case", metavar="NAME", help="this use case (shadow's X-Podium-Use-Case; traces: the tag)")
    src.add_argument("--status", help=f"request status ({_STATUSES})")
    how = ex.add_argument_group("how")
    how.add_argument(
        "--task-type",
        default="open",
        help="task type of requests whose client and tags name none (default: open; math, choice, exact)",
    )
    how.add_argument(
        "--candidate",
        choices=["auto", "podium", "upstream"],
        default="auto",
        help="whose answer is the candidate reference (default auto: the upstream's for shadow, podium's for traces)",
    )
    how.add_argument(
        "--similar",
        type=float,
        metavar="COSINE",
        help="also drop a question whose embedding's cosine similarity to a kept one is at least this (e.g. 0.95)",
    )
    how.add_argument(
        "--embedder", default="hash", help="for --similar: hash (default, no model), minilm, or a model id"
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
    lb.add_argument("--json", action="store_true", help="print the summary as JSON")

    d = sub.add_parser(
        "drift",
        help="compare recent traffic with a reference window per tag: input and outcome shift",
        description=(
            "Compare a recent window of traced traffic with a reference window, for all requests and per tag: input "
            "shift (embedding MMD with a permutation test, mean-vector cosine distance, unseen terms, language and "
            "format mix, new tags) and outcome shift (cost, p95 latency, fallback, parse-failure and error rates, "
            "quality where --labels gives references). Exit 0 when no threshold is crossed, 3 input shift only, "
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
    d.add_argument("--store", metavar="FILE|URL", help="shadow store (--source shadow; default as podium shadow)")
    w = d.add_argument_group("windows (UTC; default: the last --days days against the --days before)")
    w.add_argument("--days", type=float, default=7.0, help="length of each default window, days (default 7)")
    w.add_argument("--since", metavar="WHEN", help="recent window start")
    w.add_argument("--until", metavar="WHEN", help="recent window end, exclusive (default: now)")
    w.add_argument("--reference-since", metavar="WHEN", help="reference window start")
    w.add_argument("--reference-until", metavar="WHEN", help="reference window end (default: the recent start)")
    c = d.add_argument_group("comparison")
    c.add_argument(
        "--tag", action="append", default=[], help="report this tag's slice (repeatable; default: every tag)"
    )
    c.add_argument("--embedder", default="hash", help="hash (default: no model), minilm, an embedded model id, or none")
    c.add_argument("--labels", type=Path, metavar="SET.jsonl", help="a labelled regression set (quality per window)")
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
        default=10,
        help="requests per window before a slice alerts (10)",
    )
    c.add_argument(
        "--min-labels",
        action=WholeNumber,
        low=1,
        high=MANY,
        default=5,
        help="labelled requests per window for quality (5)",
    )
    c.add_argument(
        "--permutations",
        action=WholeNumber,
        low=1,
        high=1_000_000,
        default=500,
        help="permutations of the MMD test (500)",
    )
    c.add_argument(
        "--max-sample",
        action=WholeNumber,
        low=2,
        high=1_000_000,
        default=300,
        help="questions per window in the MMD (300)",
    )
    c.add_argument("--seed", action=WholeNumber, low=SEED[0], high=SEED[1], default=0)
    o = d.add_argument_group("output")
    o.add_argument("--json", action="store_true", help="print the report as JSON (default: Markdown)")
    o.add_argument("--out", type=Path, metavar="FILE.md", help="also write the Markdown report here")
    o.add_argument("--plot", type=Path, metavar="FILE.png", help="draw the metrics over time")
    o.add_argument("--bucket", choices=["hour", "day", "week"], default="day", help="plot bucket (default: day)")


# -------------------------------------------------------------------------------------- tasks


def _embedder(choice: str) -> Embedder | None:
    """``--embedder``: hash, minilm, an embedded model id, or none."""
    from podium.embed import Embedder, LlamaCppEncoder, MiniLMEncoder
    from podium.local_models import EMBEDDED_MODELS, cache_dir
    from podium.traffic.features import HashingEncoder

    if choice == "none":
        return None
    if choice == "hash":
        return Embedder(None, encoder=HashingEncoder())
    cache = cache_dir() / "traffic" / "embeddings.sqlite3"
    if choice == "minilm":
        return Embedder(cache, encoder=MiniLMEncoder())
    if choice in EMBEDDED_MODELS:
        return Embedder(cache, encoder=LlamaCppEncoder(choice))
    raise ConfigError(
        f"--embedder {choice!r}: use hash, minilm, none or an embedded model id ({', '.join(EMBEDDED_MODELS)})"
    )


def _pseudonymizer() -> Pseudonymize:
    """Masks one request's texts with one vault (:mod:`podium.pii`); ConfigError without the extra."""
    from podium.pii.session import PIIProtection
    from podium.pii.vault import Vault

    try:
        protection = PIIProtection()
    except ConfigError as exc:
        raise ConfigError(f"{exc}; or pass --allow-pii to export personal data in clear") from None
    masker = protection.pseudonymizer()

    def mask(texts: Sequence[str]) -> tuple[list[str], Counter[str]]:
        vault = Vault()
        counts: Counter[str] = Counter()
        masked = []
        for text in texts:
            out, found = masker.mask(text, vault)
            masked.append(out)
            counts.update(found)
        return masked, counts

    return mask


def _window(args: argparse.Namespace) -> tuple[str | None, str | None]:
    from podium.trace.query import parse_utc

    since = parse_utc(args.since, flag="--since") if args.since else None
    until = parse_utc(args.until, flag="--until", end_of_day=True) if args.until else None
    if since and until and since >= until:
        raise ConfigError(f"--since {since} is not before --until {until}; nothing could match")
    return since, until


def _read(args: argparse.Namespace) -> list[Any]:
    """The requests ``tasks export`` selected; ConfigError for an unknown tag or use case, or an
    empty selection."""
    from podium.traffic import source

    since, until = _window(args)
    if args.source == "shadow":
        from podium.serve.cli import default_shadow_path
        from podium.store.shadow import shadow_location

        if args.tag:
            raise ConfigError("--tag filters traces; the shadow store has use cases: use --use-case NAME")
        path = shadow_location(args.store, default_shadow_path())
        items = source.read_shadow(path, since=since, until=until, status=args.status, use_case=args.use_case)
        if not items and args.use_case and args.use_case not in (cases := source.shadow_use_cases(path)):
            raise ConfigError(
                f"no shadow record has use case {args.use_case!r}; use cases: {', '.join(sorted(cases)) or 'none'}"
            )
        return items
    from podium.trace.query import STATUSES

    if args.status is not None and args.status not in STATUSES:
        raise ConfigError(f"--status {args.status!r}: a trace's status is one of {', '.join(STATUSES)}")
    store = source.open_traces(args.traces or default_trace_path())
    try:
        tags = [*args.tag, *([f"use-case:{args.use_case}"] if args.use_case else [])]
        items = source.read_traces(store, since=since, until=until, status=args.status, tags=tags)
        if not items and tags:
            _check_tags(store, tags)
    finally:
        store.close()
    return items


def _check_tags(store: Any, tags: Sequence[str]) -> None:
    """ConfigError naming the tags no stored request carries, and the tags there are."""
    from podium.traffic import source

    known = source.known_tags(store)
    unknown = source.unknown_tags(tags, known)
    if unknown:
        raise ConfigError(
            f"no stored request carries tag(s) {', '.join(map(repr, unknown))}; tags in the store: "
            f"{', '.join(sorted(known)) or 'none'}"
        )


def _cmd_export(args: argparse.Namespace, out: Console) -> int:
    from podium.traffic.export import build_set, read_set, write_jsonl
    from podium.traffic.review import write_review

    if args.out.exists() and not (args.append or args.force):
        raise ConfigError(f"{args.out} exists; --append adds only new requests to it, --force overwrites it")
    if args.append and args.force:
        raise ConfigError("--append and --force exclude each other")
    existing = read_set(args.out) if args.append and args.out.exists() else []
    items = _read(args)
    if not items:
        window = f"{args.since or 'the beginning'} → {args.until or 'now'}"
        what = "shadow record" if args.source == "shadow" else "stored request"
        raise ConfigError(
            f"no {what} passes the filters (window {window}"
            + (f", status {args.status}" if args.status else "")
            + "); widen --since/--until or drop a filter"
        )
    result = build_set(
        items,
        existing=existing,
        task_type=args.task_type,
        candidate=args.candidate,
        pseudonymize=None if args.allow_pii else _pseudonymizer(),
        embedder=_embedder(args.embedder) if args.similar is not None else None,
        similarity=args.similar,
        limit=args.limit,
    )
    if result.records or not args.append:
        write_jsonl(args.out, [*existing, *result.records])
    if args.review is not None:
        write_review(args.review, result.records)
    candidates = sum(1 for r in result.records if str(r.get("reference_source", "")).startswith("candidate:"))
    summary: dict[str, Any] = {
        "out": str(args.out),
        "written": len(result.records),
        "in_set": len(existing) + len(result.records),
        "read": result.read,
        "duplicates": result.duplicates,
        "similar": result.similar,
        "already_in_set": result.existing,
        "retyped_open": result.retyped,
        "without_reference": result.without_reference,
        "candidates": candidates,
        "pii": "in clear (--allow-pii)" if result.pii is None else result.pii,
        "review": str(args.review) if args.review else None,
    }
    if args.json:
        print(json.dumps(summary, indent=2, ensure_ascii=False))
        return 0
    dropped = f"{result.duplicates} duplicate(s)" + (f", {result.similar} similar" if args.similar is not None else "")
    already = f", {result.existing} already in the set" if args.append else ""
    out.print(
        Text(
            f"{'added' if args.append else 'wrote'} {len(result.records)} task(s) to {args.out} "
            f"({summary['in_set']} in the set; read {result.read} request(s); dropped {dropped}{already})"
        )
    )
    out.print(
        Text(
            f"references: {candidates} candidate(s) to confirm, "
            f"{len(result.records) - candidates - result.without_reference} from the client, "
            f"{result.without_reference} none; {result.retyped} task(s) exported as open (code, or no final answer)"
        )
    )
    if result.pii is None:
        out.print(Text("personal data: kept in clear (--allow-pii)", style="yellow"))
    else:
        found = ", ".join(f"{k} {v}" for k, v in result.pii.items()) or "none found"
        out.print(Text(f"personal data: pseudonymized ({found})"))
    if args.review is not None:
        out.print(
            Text(
                f"review file {args.review} ({len(result.records)} row(s)): fill in verdict (accept / fix / drop) and "
                f"reference, then: podium tasks import {args.review} --set {args.out}"
            )
        )
    return 0


def _cmd_import(args: argparse.Namespace, out: Console) -> int:
    from podium.eval.tasks import load_tasks
    from podium.traffic.export import read_set, write_jsonl
    from podium.traffic.review import import_review

    if not args.set_path.is_file():
        raise ConfigError(f"no regression set at {args.set_path}; pass the set the review file was exported with")
    records = read_set(args.set_path)
    result = import_review(args.review, records, set_name=str(args.set_path))
    target = args.out or args.set_path
    write_jsonl(target, result.records)
    load_tasks(target)  # the written file loads (write_jsonl replaced it atomically)
    summary = {
        "out": str(target),
        "tasks": len(result.records),
        "accepted": result.accepted,
        "fixed": result.fixed,
        "dropped": result.dropped,
        "unchanged": result.unchanged,
        "retyped": result.retyped,
        "candidates_left": sum(
            1 for r in result.records if str(r.get("reference_source", "")).startswith("candidate:")
        ),
    }
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    out.print(
        Text(
            f"{target}: {result.accepted} accepted, {result.fixed} fixed, {result.dropped} dropped, "
            f"{result.unchanged} unchanged, {result.retyped} retyped; {len(result.records)} task(s), "
            f"{summary['candidates_left']} candidate reference(s) still unconfirmed"
        )
    )
    return 0


def _cmd_label(args: argparse.Namespace, out: Console, err: Console) -> int:
    import asyncio

    from podium.pool import load_pool
    from podium.runtime import data_policy, pii_protection
    from podium.traffic.export import read_set, write_jsonl
    from podium.traffic.label import judge_label
    from podium.workers import build_worker
    from podium.workers.stack import stack

    if not args.set_path.is_file():
        raise ConfigError(f"no regression set at {args.set_path}; write one with 'podium tasks export'")
    records = read_set(args.set_path)
    config = load_pool(args.pool)
    names = [w.name for w in config.workers]
    if args.judge not in names:
        raise ConfigError(f"--judge {args.judge!r} is not a worker of pool {config.name!r} ({', '.join(names)})")
    index = names.index(args.judge)
    raw = build_worker(config.merged(config.workers[index]))
    judge = stack(raw, policy=data_policy(config, index), protection=pii_protection(config))

    def progress(done: int, total: int) -> None:
        if done == total or done % 10 == 0:
            err.print(f"judged {done}/{total}", highlight=False)

    result = asyncio.run(judge_label(records, judge, on_done=progress))
    target = args.out or args.set_path
    write_jsonl(target, result.records)
    summary = {
        "out": str(target),
        "judge": args.judge,
        "confirmed": result.confirmed,
        "rejected": result.rejected,
        "unscored": result.unscored,
        "skipped": result.skipped,
    }
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    out.print(
        Text(
            f"{target}: the judge {args.judge} confirmed {result.confirmed} candidate(s) (marked judge:{args.judge}); "
            f"{result.rejected} scored below the pass mark and {result.unscored} got no score: they stay candidates "
            f"to review; {result.skipped} task(s) had no candidate"
        )
    )
    return 0


def cmd_tasks(args: argparse.Namespace, out: Console, err: Console) -> int:
    """``podium tasks export | import | label``."""
    if args.tasks_command == "export":
        return _cmd_export(args, out)
    if args.tasks_command == "label":
        return _cmd_label(args, out, err)
    return _cmd_import(args, out)


# -------------------------------------------------------------------------------------- drift


def cmd_drift(args: argparse.Namespace, out: Console, err: Console) -> int:
    """``podium drift``: the report, the plot, and the exit code of the alerts."""
    from podium.traffic import source
    from podium.traffic.drift import (
        DriftOptions,
        drift_report,
        label_scores,
        parse_thresholds,
        report_markdown,
        windows_for,
    )

    thresholds = parse_thresholds(args.threshold)
    windows = windows_for(
        since=args.since,
        until=args.until,
        reference_since=args.reference_since,
        reference_until=args.reference_until,
        days=args.days,
    )
    if args.source == "shadow":
        reference, recent = _shadow_windows(args, windows)
    else:
        if args.store is not None:
            raise ConfigError("--store names a shadow store: add --source shadow, or use --traces FILE for traces")
        store = source.open_traces(args.traces or default_trace_path())
        try:
            if args.tag:
                _check_tags(store, args.tag)
            reference = source.read_traces(store, since=windows["reference"][0], until=windows["reference"][1])
            recent = source.read_traces(store, since=windows["recent"][0], until=windows["recent"][1])
        finally:
            store.close()
    scores: dict[str, float] = {}
    if args.labels is not None:
        from podium.eval.tasks import load_tasks

        scores = label_scores([*reference, *recent], load_tasks(args.labels))
    elif args.source == "shadow":
        from podium.traffic.drift import reference_scores

        scores = reference_scores([*reference, *recent])
    embedder = _embedder(args.embedder)
    options = DriftOptions(
        thresholds=thresholds,
        min_requests=args.min_requests,
        min_labels=args.min_labels,
        max_sample=args.max_sample,
        permutations=args.permutations,
        seed=args.seed,
        slices=tuple(args.tag),
    )
    report = drift_report(reference, recent, windows=windows, embedder=embedder, options=options, scores=scores)
    markdown = report_markdown(report)
    if args.out is not None:
        try:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(markdown, encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot write {args.out}: {exc.strerror or exc}") from None
    if args.plot is not None:
        from podium.traffic.plot import drift_plot

        questions = sorted({i.question for i in (*reference, *recent)})
        vectors = dict(zip(questions, embedder.embed(questions), strict=True)) if embedder is not None else {}
        drift_plot(
            args.plot, reference, recent, windows=windows, vectors=vectors, slices=tuple(args.tag), bucket=args.bucket
        )
        report["plot"] = str(args.plot)
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        print(markdown, end="")
    code = int(report["exit_code"])
    if code:
        kinds = sorted({a["kind"] for a in report["alerts"]})
        err.print(Text(f"drift: {len(report['alerts'])} alert(s) ({', '.join(kinds)} shift); exit {code}", "yellow"))
    return code


def _shadow_windows(
    args: argparse.Namespace, windows: dict[str, tuple[str, str]]
) -> tuple[list[TrafficItem], list[TrafficItem]]:
    """The reference and recent windows' shadow rows; ``--tag`` must name use cases the store has."""
    from podium.serve.cli import default_shadow_path
    from podium.store.shadow import shadow_location
    from podium.traffic import source as source_module

    if args.traces is not None:
        raise ConfigError("--traces names a trace database: drop --source shadow, or use --store for the shadow store")
    path = shadow_location(args.store, default_shadow_path())
    reference = source_module.read_shadow(path, since=windows["reference"][0], until=windows["reference"][1])
    recent = source_module.read_shadow(path, since=windows["recent"][0], until=windows["recent"][1])
    if args.tag:
        known = {f"use-case:{u}" for u in source_module.shadow_use_cases(path)}
        unknown = [t for t in args.tag if t not in known]
        if unknown:
            raise ConfigError(
                f"no shadow record has {', '.join(map(repr, unknown))}; shadow slices are use cases: "
                f"{', '.join(sorted(known)) or 'none yet'}"
            )
    return reference, recent


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Run ``podium tasks`` or ``podium drift``; returns the exit code."""
    return (cmd_tasks if args.command == "tasks" else cmd_drift)(args, out, err)
