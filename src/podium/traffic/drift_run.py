"""Drift as a query and a run: :class:`DriftQuery` (what ``podium drift`` compares, as typed
options) and :func:`drift_run` (read the two windows — traces, or shadow records — score the
labelled requests, compare with :func:`podium.traffic.drift.drift_report`, write the report and
the plot). ``podium drift`` (:mod:`podium.traffic.drift_cli`) and the loop's drift stage
(:mod:`podium.loop.stages`) both run it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from podium.errors import ConfigError
from podium.trace import default_trace_path
from podium.traffic.drift_options import DriftOptions, term_mask
from podium.traffic.options import check_tags as _check_tags
from podium.traffic.options import embedder_for as _embedder

if TYPE_CHECKING:
    from collections.abc import Callable

    from podium.traffic.source import TrafficItem
    from podium.workers.base import Worker

__all__ = ["DriftQuery", "drift_run", "plot_bucket"]


@dataclass(frozen=True)
class DriftQuery:
    """What one drift report compares (``podium drift``'s options; the retrain loop builds one
    for its window).

    Attributes:
        source: ``traces`` (a trace database) or ``shadow`` (shadow records; slices are
            ``use-case:NAME`` tags, quality comes from the client's references).
        traces: the trace database file (None: the default, or the shared store's URL); traces only.
        store: the shadow store (file or URL; None: the default); shadow only.
        since, until, reference_since, reference_until: the windows' bounds (UTC, as
            :func:`podium.traffic.drift_options.windows_for` reads them); None: the default.
        days: length of each default window, days.
        use_case: only this use case's requests, in both windows (shadow rows' use case; traces
            tagged ``use-case:NAME``), or None for all.
        tags: the slices to report (besides ``all``); empty: every tag seen.
        embedder: ``hash`` (no model), ``minilm``, an embedded model id, or ``none``.
        labels: a labelled regression set (quality per window), or None.
        judge: a worker of ``pool`` that grades a sample of each window's answers
            (:func:`podium.traffic.drift.judge_sample`), or None; judge_sample: answers per slice
            and window it grades at most; pool: the pool file or preset (None: the embedded
            local pool); cache: the request cache its calls go through (None: the default).
        options: thresholds, minimum counts, the permutation test's settings.
        out: also write the Markdown report here; plot: draw the metrics over time here, with
            ``bucket`` (``hour``, ``day`` or ``week``) per point; ``auto`` picks by the span of
            both windows (:func:`plot_bucket`).
    """

    source: Literal["traces", "shadow"] = "traces"
    traces: Path | None = None
    store: str | Path | None = None
    since: str | None = None
    until: str | None = None
    reference_since: str | None = None
    reference_until: str | None = None
    days: float = 7.0
    use_case: str | None = None
    tags: tuple[str, ...] = ()
    embedder: str = "hash"
    labels: Path | None = None
    judge: str | None = None
    judge_sample: int = 30
    pool: str | None = None
    cache: str | Path | None = None
    options: DriftOptions = field(default_factory=DriftOptions)
    out: Path | None = None
    plot: Path | None = None
    bucket: Literal["auto", "minute", "hour", "day", "week"] = "auto"
    allow_pii: bool = False

    def windows(self) -> dict[str, tuple[str, str]]:
        """The two windows this query compares (:func:`podium.traffic.drift_options.windows_for`:
        ``reference`` and ``recent``, store-form UTC); ConfigError when one is empty or they
        overlap."""
        from podium.traffic.drift import windows_for

        return windows_for(
            since=self.since,
            until=self.until,
            reference_since=self.reference_since,
            reference_until=self.reference_until,
            days=self.days,
        )


def drift_run(
    query: DriftQuery,
    on_judged: Callable[[int, int], None] | None = None,
    warn: Callable[[str], None] = lambda _line: None,
) -> dict[str, Any]:
    """The drift report ``query`` asks for (its ``exit_code`` says which thresholds were
    crossed), with the Markdown report written to ``query.out`` and the plot to ``query.plot``
    when given; ``on_judged(done, total)`` follows the judge's calls; ``warn`` gets a line when
    new terms cannot be checked for personal data (and so are not listed). Raises ConfigError for bad
    input (an empty window, an unknown tag, overlapping windows, a store of the other source, a
    judge that is not a worker of the pool); what a judge's call raises stops it."""
    from podium.traffic import source
    from podium.traffic.drift import drift_report, label_scores, report_markdown

    judge = _judge_worker(query) if query.judge is not None else None  # a bad --judge fails before any work
    windows = query.windows()
    if query.source == "shadow":
        reference, recent = _shadow_windows(query, windows)
    else:
        if query.store is not None:
            raise ConfigError("--store names a shadow store: add --source shadow, or use --traces FILE for traces")
        store = source.open_traces(query.traces or default_trace_path())
        try:
            case = [f"use-case:{query.use_case}"] if query.use_case else []
            if query.tags or case:
                _check_tags(store, [*query.tags, *case])
            reference = source.read_traces(
                store, since=windows["reference"][0], until=windows["reference"][1], tags=case
            )
            recent = source.read_traces(store, since=windows["recent"][0], until=windows["recent"][1], tags=case)
        finally:
            store.close()
    from podium.traffic.drift import check_windows

    store_flag = "--store" if query.source == "shadow" else "--traces"
    check_windows(reference, recent, windows, query.options, store_flag)  # before any judge call
    scores: dict[str, float] = {}
    if query.labels is not None:
        from podium.eval.tasks import load_tasks

        scores = label_scores([*reference, *recent], load_tasks(query.labels), judge=judge)
    elif query.source == "shadow":
        from podium.traffic.drift import reference_scores

        scores = reference_scores([*reference, *recent])
    judged: dict[str, float] = {}
    judging: dict[str, Any] | None = None
    if judge is not None:
        import asyncio

        from podium.traffic.drift import judge_sample
        from podium.traffic.label import judge_answers

        sample = judge_sample(reference, recent, per_slice=query.judge_sample, options=query.options, skip=scores)
        verdicts = asyncio.run(judge_answers(sample, judge, on_done=on_judged))
        judged = verdicts.scores
        judging = {
            "worker": query.judge,
            "per_slice": query.judge_sample,
            "judged": len(judged),
            "unscored": len(verdicts.unscored),
        }
    embedder = _embedder(query.embedder)
    options = dataclasses.replace(query.options, mask=term_mask(query.allow_pii, warn))
    report = drift_report(
        reference, recent, windows=windows, embedder=embedder, options=options, scores=scores, judged=judged
    )
    if judging is not None:
        report["judge"] = judging
    markdown = report_markdown(report)
    if query.out is not None:
        try:
            query.out.parent.mkdir(parents=True, exist_ok=True)
            query.out.write_text(markdown, encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot write {query.out}: {exc.strerror or exc}") from None
    if query.plot is not None:
        from podium.traffic.plot import drift_plot

        questions = sorted({i.question for i in (*reference, *recent)})
        vectors = dict(zip(questions, embedder.embed(questions), strict=True)) if embedder is not None else {}
        bucket = plot_bucket(windows) if query.bucket == "auto" else query.bucket
        drift_plot(query.plot, reference, recent, windows=windows, vectors=vectors, slices=query.tags, bucket=bucket)
        report["plot"], report["plot_bucket"] = str(query.plot), bucket
    return report


def plot_bucket(windows: dict[str, tuple[str, str]]) -> Literal["minute", "hour", "day", "week"]:
    """The plot's bucket for ``windows`` (``reference`` and ``recent``: UTC bounds as
    :func:`~podium.traffic.drift_options.windows_for` gives them): minutes when both span under 6
    hours, hours under 3 days (a longer bucket would put a short window in one point, outside its
    own shading, or both windows in one), weeks over 90 days, else days."""
    bounds = [datetime.fromisoformat(b.replace("Z", "+00:00")) for w in windows.values() for b in w]
    span = max(bounds) - min(bounds)
    if span < timedelta(hours=6):
        return "minute"
    return "hour" if span < timedelta(days=3) else "week" if span > timedelta(days=90) else "day"


def _judge_worker(query: DriftQuery) -> Worker:
    """The judge as ``podium tasks label`` calls it, behind the request cache."""
    from podium.builder import judge_worker
    from podium.store.request_cache import RequestCache, default_cache_path

    assert query.judge is not None
    return judge_worker(query.pool, query.judge, cache=RequestCache(query.cache or default_cache_path()))


def _shadow_windows(
    query: DriftQuery, windows: dict[str, tuple[str, str]]
) -> tuple[list[TrafficItem], list[TrafficItem]]:
    """The reference and recent windows' shadow rows; ``--tag`` must name use cases the store has."""
    from podium.serve.options import default_shadow_path
    from podium.store.shadow import shadow_location
    from podium.traffic import source as source_module

    if query.traces is not None:
        raise ConfigError("--traces names a trace database: drop --source shadow, or use --store for the shadow store")
    path = shadow_location(query.store, default_shadow_path())
    case = query.use_case
    reference = source_module.read_shadow(
        path, since=windows["reference"][0], until=windows["reference"][1], use_case=case
    )
    recent = source_module.read_shadow(path, since=windows["recent"][0], until=windows["recent"][1], use_case=case)
    cases = source_module.shadow_use_cases(path) if case is not None or query.tags else set()
    if case is not None and case not in cases:
        raise ConfigError(
            f"--use-case {case!r}: no shadow record has it; use cases: {', '.join(sorted(cases)) or 'none'}"
        )
    if query.tags:
        known = {f"use-case:{u}" for u in cases}
        unknown = [t for t in query.tags if t not in known]
        if unknown:
            raise ConfigError(
                f"no shadow record has {', '.join(map(repr, unknown))}; shadow slices are use cases: "
                f"{', '.join(sorted(known)) or 'none yet'}"
            )
    return reference, recent
