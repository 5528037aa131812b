"""``podium drift``: its options as a :class:`~podium.traffic.drift_run.DriftQuery`, the run
(:func:`~podium.traffic.drift_run.drift_run`), the report printed or written, and the alerts'
exit status (0, 3 input shift, 4 outcome shift).
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

from podium.errors import ConfigError
from podium.traffic.drift_options import DriftOptions
from podium.traffic.drift_run import DriftQuery, drift_run
from podium.traffic.options import check_target

if TYPE_CHECKING:
    pass

__all__ = ["cmd_drift", "drift_query"]


def drift_query(args: argparse.Namespace) -> DriftQuery:
    """The :class:`DriftQuery` of ``podium drift``'s parsed options; ConfigError for a bad
    ``--threshold``."""
    from podium.traffic.drift_options import parse_thresholds

    options = DriftOptions(
        thresholds=parse_thresholds(args.threshold),
        min_requests=args.min_requests,
        min_labels=args.min_labels,
        max_sample=args.max_sample,
        permutations=args.permutations,
        seed=args.seed,
        slices=tuple(args.tag),
    )
    return DriftQuery(
        source=args.source,
        traces=args.traces,
        store=args.store,
        since=args.since,
        until=args.until,
        reference_since=args.reference_since,
        reference_until=args.reference_until,
        days=args.days,
        use_case=args.use_case,
        tags=tuple(args.tag),
        embedder=args.embedder,
        labels=args.labels,
        judge=args.judge,
        judge_sample=args.judge_sample,
        pool=args.pool,
        cache=args.cache,
        options=options,
        out=args.out,
        plot=args.plot,
        bucket=args.bucket,
        allow_pii=args.allow_pii,
    )


def cmd_drift(args: argparse.Namespace, out: Console, err: Console) -> int:
    """``podium drift``: the report, the plot, and the exit code of the alerts."""
    from podium.traffic.drift import report_markdown

    def progress(done: int, total: int) -> None:
        if done == total or done % 10 == 0:
            err.print(f"judged {done}/{total}", highlight=False)

    check_target(args.out, "--out")  # the loop's drift writes into a run folder it made; a person's typo is refused
    check_target(args.plot, "--plot")
    if args.plot is not None and args.plot.suffix.lower() != ".png":
        raise ConfigError(f"--plot {args.plot}: the plot is a PNG image; name a .png file")
    report = drift_run(drift_query(args), on_judged=progress, warn=lambda line: err.print(line, highlight=False))
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        print(report_markdown(report), end="")
    code = int(report["exit_code"])
    if code:
        kinds = sorted({a["kind"] for a in report["alerts"]})
        err.print(Text(f"drift: {len(report['alerts'])} alert(s) ({', '.join(kinds)} shift); exit {code}", "yellow"))
    return code
