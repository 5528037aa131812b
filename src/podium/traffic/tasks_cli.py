"""``podium tasks export | import | label``: regression sets from traffic, and the labelling round
trip (:mod:`podium.traffic.export`, :mod:`podium.traffic.review`, :mod:`podium.traffic.label`).

``export`` reads the requests the options select (traces or shadow records), pseudonymizes them
unless ``--allow-pii``, and writes a JSONL set (and a review file); ``import`` applies a filled-in
review file to the set; ``label`` has a judge worker confirm candidate references. Raises
ConfigError for bad options or input (nothing is written then).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.text import Text

from podium.errors import ConfigError
from podium.traffic.options import check_target
from podium.traffic.selection import ExportOptions, Selection, export_records, read_requests

if TYPE_CHECKING:
    pass

__all__ = [
    "cmd_tasks",
    "export_options_of",
    "export_selection",
]


def export_selection(args: argparse.Namespace) -> Selection:
    """The :class:`Selection` of ``podium tasks export``'s parsed options."""
    if args.use_case is not None and not args.use_case.strip():
        raise ConfigError("--use-case '': name a use case (or leave the option out for every request)")
    return Selection(
        source=args.source,
        traces=args.traces,
        store=args.store,
        since=args.since,
        until=args.until,
        tags=tuple(args.tag),
        use_case=args.use_case,
        status=args.status,
    )


def export_options_of(args: argparse.Namespace) -> ExportOptions:
    """The :class:`ExportOptions` of ``podium tasks export``'s parsed options."""
    return ExportOptions(
        task_type=args.task_type,
        candidate=args.candidate,
        allow_pii=args.allow_pii,
        similar=args.similar,
        embedder=args.embedder,
        limit=args.limit,
    )


def _cmd_export(args: argparse.Namespace, out: Console) -> int:
    from podium.traffic.export import read_set, write_jsonl
    from podium.traffic.review import write_review

    check_target(args.out, "--out")
    check_target(args.review, "--review")
    if args.review is not None and args.review.resolve() == args.out.resolve():
        raise ConfigError(f"--review {args.review} is the set itself (--out); name another file, e.g. review.csv")
    if args.out.exists() and not (args.append or args.force):
        raise ConfigError(f"{args.out} exists; --append adds only new requests to it, --force overwrites it")
    if args.append and args.force:
        raise ConfigError("--append and --force exclude each other")
    if args.review is not None and args.review.exists() and not args.force:
        raise ConfigError(
            f"--review {args.review} exists and may hold a person's labels; name a new file (e.g. with the date), "
            "or --force overwrites it"
        )
    existing = read_set(args.out) if args.append and args.out.exists() else []
    selection = export_selection(args)
    result = export_records(selection, export_options_of(args), read_requests(selection), existing)
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
        "cut_off": result.cut_off,
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
    if result.cut_off:
        out.print(
            Text(
                f"{result.cut_off} answer(s) stopped at their token limit: no candidate taken from them (a cut-off "
                "answer's last number is no final answer); give their references in the review",
                style="yellow",
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


def _no_set(path: Path) -> str:
    """What is wrong with a --set that is not a file."""
    return f"{path} is a folder, not a regression set file" if path.is_dir() else f"no regression set at {path}"


def _cmd_import(args: argparse.Namespace, out: Console) -> int:
    from podium.eval.tasks import load_tasks
    from podium.traffic.export import read_set, write_jsonl
    from podium.traffic.review import import_review

    if not args.set_path.is_file():
        raise ConfigError(f"{_no_set(args.set_path)}; pass the set the review file was exported with")
    check_target(args.out, "--out")
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
        "already_dropped": result.gone,
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
            f"{result.unchanged} unchanged, {result.retyped} retyped"
            + (f", {result.gone} dropped before" if result.gone else "")
            + f"; {len(result.records)} task(s), "
            f"{summary['candidates_left']} candidate reference(s) still unconfirmed"
        )
    )
    return 0


def _cmd_label(args: argparse.Namespace, out: Console, err: Console) -> int:
    import asyncio

    from podium.traffic.export import read_set, write_jsonl
    from podium.traffic.label import judge_label

    if not args.set_path.is_file():
        raise ConfigError(f"{_no_set(args.set_path)}; write one with 'podium tasks export'")
    check_target(args.out, "--out")
    records = read_set(args.set_path)
    from podium.store.request_cache import RequestCache, default_cache_path

    cache = None if args.no_cache else RequestCache(args.cache or default_cache_path())
    from podium.builder import judge_worker

    judge = judge_worker(args.pool, args.judge, cache=cache)

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
        "unscored_example": result.unscored_example,
    }
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    out.print(
        Text(
            f"{target}: the judge {args.judge} confirmed {result.confirmed} candidate(s) (marked judge:{args.judge}); "
            f"{result.rejected} scored below the pass mark and {result.unscored} got no score: they stay candidates "
            f"to review; {result.skipped} task(s) were not candidates (a confirmed reference, or none): not sent"
        )
    )
    if result.unscored_example:
        err.print(Text(f"first unscored reply: {result.unscored_example}"), style="yellow")
    return 0


def cmd_tasks(args: argparse.Namespace, out: Console, err: Console) -> int:
    """``podium tasks export | import | label``."""
    if args.tasks_command == "export":
        return _cmd_export(args, out)
    if args.tasks_command == "label":
        return _cmd_label(args, out, err)
    return _cmd_import(args, out)
