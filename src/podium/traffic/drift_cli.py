"""``podium drift``: read the two windows (traces, or shadow records with ``--source shadow``),
score the labelled requests, compare (:func:`podium.traffic.drift.drift_report`), print or write
the report and the plot, and return the alerts' exit status (0, 3 input shift, 4 outcome shift).
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.text import Text

from podium.errors import ConfigError
from podium.trace import default_trace_path
from podium.traffic.options import check_tags as _check_tags
from podium.traffic.options import embedder_for as _embedder

if TYPE_CHECKING:
    from podium.traffic.source import TrafficItem

__all__ = ["cmd_drift", "drift_run"]


def cmd_drift(args: argparse.Namespace, out: Console, err: Console) -> int:
    """``podium drift``: the report, the plot, and the exit code of the alerts."""
    from podium.traffic.drift import report_markdown

    report = drift_run(args)
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        print(report_markdown(report), end="")
    code = int(report["exit_code"])
    if code:
        kinds = sorted({a["kind"] for a in report["alerts"]})
        err.print(Text(f"drift: {len(report['alerts'])} alert(s) ({', '.join(kinds)} shift); exit {code}", "yellow"))
    return code


def drift_run(args: argparse.Namespace) -> dict[str, Any]:
    """The drift report ``podium drift``'s options ask for (its ``exit_code`` says which
    thresholds were crossed), with the Markdown report written to ``args.out`` and the plot to
    ``args.plot`` when given. Raises ConfigError for bad input (an empty window, an unknown tag,
    overlapping windows, a bad threshold)."""
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
    return report


def _shadow_windows(
    args: argparse.Namespace, windows: dict[str, tuple[str, str]]
) -> tuple[list[TrafficItem], list[TrafficItem]]:
    """The reference and recent windows' shadow rows; ``--tag`` must name use cases the store has."""
    from podium.serve.options import default_shadow_path
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
