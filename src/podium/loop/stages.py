"""Stages 1–3 of ``podium loop run``: drift, export (and the review file of what is new), labels.

Each stage runs the code of the command it stands for, called with typed options built from the
loop's settings (the options' defaults are the command's own: one dataclass each), and the
command line an operator would type for the same work is recorded in the report. Stages 4–6 are in
:mod:`podium.loop.outcomes`; the order and the state in :mod:`podium.loop.runner`.
"""

from __future__ import annotations

import dataclasses
import json
import random
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from podium.errors import ConfigError, ModelBehaviourError, ProviderError
from podium.loop.settings import RunOptions, Settings
from podium.loop.state import Folder, atomic_write
from podium.store.engine import store_location
from podium.traffic.export import CANDIDATE_SOURCES

if TYPE_CHECKING:
    from podium.traffic.drift_run import DriftQuery
    from podium.traffic.selection import ExportOptions, Selection

__all__ = [
    "EXIT_LABELS",
    "Context",
    "ReviewPlan",
    "apply_reviews",
    "candidates",
    "drift_argv",
    "drift_request",
    "drift_stage",
    "export_argv",
    "export_request",
    "export_stage",
    "labels_stage",
]

EXIT_LABELS = 5
"""Exit status of ``podium loop run`` when it stopped for labels: candidate references are left
unconfirmed, no judge was given, and not ``--allow-unconfirmed``."""


@dataclass
class Context:
    """One run: the folder, its settings, this run's options and id, the window, the state,
    where progress lines go (``say``), how the state is saved (``save``), and the command lines
    the stages stood for."""

    folder: Folder
    settings: Settings
    once: RunOptions
    run_id: str
    window: tuple[str, str]
    state: dict[str, Any]
    say: Callable[[str], None]
    save: Callable[[], None]
    commands: dict[str, list[str]] = field(default_factory=dict)

    @property
    def run_dir(self) -> Path:
        return self.folder.run(self.run_id)

    def ran(self, stage: str, argv: Sequence[str]) -> None:
        """Record the command line ``stage`` stands for."""
        self.commands.setdefault(stage, []).append(shlex.join(["podium", *argv]))


def candidates(records: Sequence[dict[str, Any]]) -> list[str]:
    """Ids of the tasks whose reference is still an unconfirmed candidate."""
    return [str(r["id"]) for r in records if r.get("reference_source") in CANDIDATE_SOURCES]


# ------------------------------------------------------------------------------------ 1. drift


def drift_stage(ctx: Context) -> dict[str, Any]:
    """``podium drift`` over this run's window against the reference window (the settings'
    ``reference_since``/``reference_until``, else the window as long before it); its report
    and plot (``drift.md``, ``drift.json``, ``drift.png``) saved in the run's folder. Bad input
    (e.g. no traffic in the reference window, as on a first run) is recorded with exit 2, never
    fatal: drift informs, it does not gate."""
    from podium.traffic.drift_run import drift_run

    ctx.ran("drift", drift_argv(ctx))  # the command an operator would type for the same report
    query, judge_error = drift_request(ctx), None
    try:
        try:
            report = drift_run(query, warn=ctx.say)
        except (ProviderError, ModelBehaviourError) as exc:  # only the judge calls a worker here
            judge_error = f"{type(exc).__name__}: {exc}"
            ctx.say(f"drift: the judge {query.judge} failed ({judge_error}); compared without it")
            report = drift_run(dataclasses.replace(query, judge=None), warn=ctx.say)
    except ConfigError as exc:
        ctx.say(f"drift: not compared ({exc}); recorded, the loop goes on")
        return {"status": "not compared", "exit_code": 2, "error": str(exc)}
    atomic_write(ctx.run_dir / "drift.json", json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    code, alerts = int(report["exit_code"]), report["alerts"]
    kinds = sorted({a["kind"] for a in alerts})
    ctx.say(f"drift: exit {code}, {len(alerts)} alert(s){' (' + ', '.join(kinds) + ' shift)' if kinds else ''}")
    result: dict[str, Any] = {
        "status": "done",
        "exit_code": code,
        "alerts": len(alerts),
        "kinds": kinds,
        "compared": sorted(name for name, entry in report["slices"].items() if entry.get("enough")),
        "report": ctx.folder.relative(_drift_report(ctx)),
        "plot": ctx.folder.relative(_drift_plot(ctx)),
    }
    if "judge" in report:
        result["judge"] = report["judge"]
    if judge_error is not None:
        result["judge_error"] = judge_error
    return result


def _locations(s: Settings) -> tuple[Path | None, str | Path | None]:
    """The trace database (traces) or the shadow store (shadow) the settings name, as the
    commands' ``--traces`` / ``--store`` read them; None for the other source and when unset."""
    traces = Path(s.traces) if s.traces and s.source == "traces" else None
    return traces, store_location(s.store) if s.store and s.source == "shadow" else None


def _drift_report(ctx: Context) -> Path:
    """Where the run's drift report goes."""
    return ctx.run_dir / "drift.md"


def _drift_plot(ctx: Context) -> Path:
    """Where the run's drift plot goes."""
    return ctx.run_dir / "drift.png"


def _window_days(ctx: Context) -> float:
    """The run's window's length, days."""
    from datetime import datetime

    since, until = (datetime.fromisoformat(t.replace("Z", "+00:00")) for t in ctx.window)
    return (until - since).total_seconds() / 86400


def drift_argv(ctx: Context) -> list[str]:
    """``podium drift`` of this run's window against the reference window, per tag, with the set's
    labels, the report written to the run's folder."""
    s, (since, until) = ctx.settings, ctx.window
    argv = ["drift", "--source", s.source, "--since", since, "--until", until, "--days", f"{_window_days(ctx):g}"]
    argv += ["--reference-since", s.reference_since] if s.reference_since else []
    argv += ["--reference-until", s.reference_until] if s.reference_until else []
    argv += ["--traces", s.traces] if s.traces and s.source == "traces" else []
    argv += ["--store", s.store] if s.store and s.source == "shadow" else []
    argv += ["--use-case", s.use_case] if s.use_case else []
    for tag in s.tag:
        argv += ["--tag", tag]
    for threshold in s.threshold:
        argv += ["--threshold", threshold]
    if ctx.folder.set.is_file():
        argv += ["--labels", str(ctx.folder.set)]
    argv += ["--allow-pii"] if s.allow_pii else []
    if judge := _drift_judge(s):
        argv += ["--judge", judge, "--judge-sample", str(s.drift_judge_sample)]
        argv += ["--pool", s.pool] if s.pool else []
        argv += ["--cache", s.cache] if s.cache else []
    return [*argv, "--out", str(_drift_report(ctx)), "--plot", str(_drift_plot(ctx))]


def _drift_judge(s: Settings) -> str | None:
    """The worker that grades unlabelled answers in the drift report: the eval's grader
    (``--eval-judge``, else ``--judge``), unless ``--drift-judge-sample 0``."""
    return s.grader if s.drift_judge_sample > 0 else None


def drift_request(ctx: Context) -> DriftQuery:
    """What :func:`drift_argv`'s command compares, as typed options; ConfigError for a bad
    threshold."""
    from podium.traffic.drift_options import DriftOptions, parse_thresholds
    from podium.traffic.drift_run import DriftQuery

    s, (since, until) = ctx.settings, ctx.window
    traces, store = _locations(s)
    return DriftQuery(
        source=s.source,
        traces=traces,
        store=store,
        since=since,
        until=until,
        reference_since=s.reference_since,
        reference_until=s.reference_until,
        days=_window_days(ctx),
        use_case=s.use_case,
        tags=tuple(s.tag),
        labels=ctx.folder.set if ctx.folder.set.is_file() else None,
        judge=_drift_judge(s),
        judge_sample=s.drift_judge_sample if _drift_judge(s) else DriftQuery.judge_sample,
        pool=s.pool,
        cache=store_location(s.cache) if s.cache else None,
        options=DriftOptions(thresholds=parse_thresholds(s.threshold), slices=tuple(s.tag)),
        out=_drift_report(ctx),
        plot=_drift_plot(ctx),
        allow_pii=s.allow_pii,
    )


# ----------------------------------------------------------------------------------- 2. export


def export_argv(ctx: Context) -> list[str]:
    """``podium tasks export --append`` of this run's window into the folder's set."""
    s, (since, until) = ctx.settings, ctx.window
    argv = ["tasks", "export", "--out", str(ctx.folder.set), "--append", "--source", s.source]
    argv += ["--since", since, "--until", until, "--task-type", s.task_type, "--candidate", s.candidate]
    argv += ["--traces", s.traces] if s.traces and s.source == "traces" else []
    argv += ["--store", s.store] if s.store and s.source == "shadow" else []
    for tag in s.tag:
        argv += ["--tag", tag]
    argv += ["--use-case", s.use_case] if s.use_case else []
    argv += ["--status", s.status] if s.status else []
    if s.similar is not None:
        argv += ["--similar", f"{s.similar:g}", "--embedder", s.similar_embedder]
    argv += ["--limit", str(s.limit)] if s.limit else []
    argv += ["--allow-pii"] if s.allow_pii else []
    return argv


def export_request(ctx: Context) -> tuple[Selection, ExportOptions]:
    """What :func:`export_argv`'s command reads and how it makes tasks, as typed options."""
    from podium.traffic.selection import ExportOptions, Selection

    s, (since, until) = ctx.settings, ctx.window
    traces, store = _locations(s)
    selection = Selection(
        source=s.source,
        traces=traces,
        store=store,
        since=since,
        until=until,
        tags=tuple(s.tag),
        use_case=s.use_case or None,
        status=s.status or None,
    )
    options = ExportOptions(
        task_type=s.task_type,
        candidate=s.candidate,
        allow_pii=s.allow_pii,
        similar=s.similar,
        embedder=s.similar_embedder,
        limit=s.limit or None,
    )
    return selection, options


@dataclass
class ReviewPlan:
    """The set with every review file of the folder applied (:func:`apply_reviews`).

    Attributes:
        records: the set afterwards.
        files: per review file whose verdicts changed the set: what they did.
        dropped: ``{"id", "question"}`` of every task a review file dropped (now or before), so
            the export never brings it back.
        missing: review files the state names that are not on disk.
    """

    records: list[dict[str, Any]]
    files: list[dict[str, Any]]
    dropped: list[dict[str, Any]]
    missing: list[str]


def apply_reviews(folder: Folder, state: dict[str, Any], records: list[dict[str, Any]]) -> ReviewPlan:
    """Every review file the loop wrote, applied in order to ``records`` (all or nothing: a bad
    row in any file is a ReviewFileError and nothing is returned). A file applied before
    changes nothing again (its dropped tasks are ``gone``), so only files filled since show."""
    from podium.traffic.review import import_review, read_review

    files: list[dict[str, Any]] = []
    dropped: list[dict[str, Any]] = []
    missing: list[str] = []
    for entry in state["reviews"]:
        path = folder.root / entry["file"]
        if not path.is_file():
            missing.append(entry["file"])
            continue
        before = {str(r["id"]): r for r in records}
        gone = set(entry["ids"]) - set(before)
        result = import_review(path, records, set_name=str(folder.set), gone=gone)
        after = {str(r["id"]): r for r in result.records}
        removed = [i for i in before if i not in after]
        changed = [(before[i], r) for i, r in after.items() if before.get(i) != r]
        if changed or removed:  # filled (or filled further) since the last run; counts of what changed now
            files.append(
                {
                    "file": entry["file"],
                    "changed": len(changed),
                    "accepted": sum(1 for old, new in changed if new.get("reference") == old.get("reference")
                                    and new.get("reference_source") != old.get("reference_source")),
                    "fixed": sum(1 for old, new in changed if new.get("reference") != old.get("reference")),
                    "dropped": len(removed),
                    "retyped": sum(1 for old, new in changed if new.get("task_type") != old.get("task_type")),
                }
            )  # fmt: skip
        questions = {row.get("id", ""): row.get("question", "") for row in read_review(path)}
        dropped += [{"id": i, "question": questions.get(i, "")} for i in sorted(gone | set(removed))]
        records = result.records
    return ReviewPlan(records, files, dropped, missing)


def export_stage(ctx: Context, new: Sequence[dict[str, Any]], summary: dict[str, Any]) -> dict[str, Any]:
    """Append the run's new tasks (computed before any stage ran) to the set, then write a
    review file of every task no review file of the loop names yet (this run's new ones, or
    ones an interrupted run added), and any review file the state names that is missing."""
    from podium.traffic.export import read_set, write_jsonl
    from podium.traffic.review import write_review

    ctx.ran("export", export_argv(ctx))
    existing = read_set(ctx.folder.set) if ctx.folder.set.is_file() else []
    if new:
        write_jsonl(ctx.folder.set, [*existing, *new])
    records = [*existing, *new]
    by_id = {str(r["id"]): r for r in records}
    named = {i for entry in ctx.state["reviews"] for i in entry["ids"]}
    rewritten = []
    for entry in ctx.state["reviews"]:
        path = ctx.folder.root / entry["file"]
        if not path.is_file():  # named by the state, lost (an interruption right after the state was saved)
            write_review(path, [by_id[i] for i in entry["ids"] if i in by_id])
            rewritten.append(entry["file"])
    unreviewed = [r for r in records if str(r["id"]) not in named]
    review = None
    if unreviewed:
        path = ctx.folder.review(ctx.run_id)
        from podium.records import utc_now

        ctx.state["reviews"].append(
            {"file": ctx.folder.relative(path), "run": ctx.run_id, "ids": [str(r["id"]) for r in unreviewed],
             "written": utc_now()}
        )  # fmt: skip
        ctx.save()  # the state names the file before it exists: a lost file is rewritten, never orphaned
        write_review(path, unreviewed)
        review = ctx.folder.relative(path)
    written = f"; review file {review} ({len(unreviewed)} row(s))" if review else ""
    ctx.say(
        f"export: {len(new)} new task(s) of {summary['read']} request(s) read; {len(records)} in "
        f"{ctx.folder.relative(ctx.folder.set)}{written}"
    )
    return {
        "status": "done",
        **summary,
        "added": len(new),
        "in_set": len(records),
        "review": review,
        "review_rows": len(unreviewed),
        "review_candidates": len(candidates(unreviewed)),
        "rewritten_reviews": rewritten,
    }


# ----------------------------------------------------------------------------------- 3. labels


def labels_stage(ctx: Context) -> dict[str, Any]:
    """Import the review files filled since the last run (all or nothing), let ``--judge``
    confirm what it can (through the request cache: a candidate it already judged costs no call),
    and stop when candidates remain unconfirmed, unless ``--allow-unconfirmed``."""
    from podium.eval.tasks import load_tasks
    from podium.traffic.export import read_set, write_jsonl

    records = read_set(ctx.folder.set)
    plan = apply_reviews(ctx.folder, ctx.state, records)
    for f in plan.files:
        ctx.ran("labels", ["tasks", "import", str(ctx.folder.root / f["file"]), "--set", str(ctx.folder.set)])
    if plan.files:
        write_jsonl(ctx.folder.set, plan.records)
        load_tasks(ctx.folder.set)
    records = plan.records
    result: dict[str, Any] = {"reviews": plan.files, "judge": None}
    if ctx.settings.judge and candidates(records):
        result["judge"], records = _judge(ctx, records)
    left = candidates(records)
    result["candidates_left"] = len(left)
    done = sum(f["changed"] + f["dropped"] for f in plan.files)
    judged = result["judge"]["confirmed"] if result["judge"] else 0
    ctx.say(f"labels: {done} task(s) changed by {len(plan.files)} review file(s), {judged} confirmed by a judge; "
            f"{len(left)} candidate reference(s) unconfirmed")  # fmt: skip
    if not left:
        return {"status": "done", **result}
    if ctx.once.allow_unconfirmed:
        return {"status": "unconfirmed allowed", **result}
    return {"status": "stopped", **result, "files": _where(ctx, left), "message": _stop_message(ctx, left)}


def _judge(ctx: Context, records: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    import asyncio

    from podium.builder import judge_worker
    from podium.eval.session import EvalSpec
    from podium.store.request_cache import RequestCache
    from podium.traffic.export import write_jsonl
    from podium.traffic.label import judge_label

    s = ctx.settings
    assert s.judge is not None
    argv = ["tasks", "label", str(ctx.folder.set), "--judge", s.judge, *(["--pool", s.pool] if s.pool else [])]
    ctx.ran("labels", argv)
    location = s.cache if s.cache is not None else EvalSpec().cache
    cache = RequestCache(location) if location is not None else None
    judge = judge_worker(s.pool, s.judge, cache=cache)

    def progress(done: int, total: int) -> None:
        if done == total or done % 10 == 0:
            ctx.say(f"labels: judged {done}/{total}")

    before = {r["id"]: r.get("reference_source") for r in records}
    result = asyncio.run(judge_label(records, judge, on_done=progress))
    if result.confirmed:
        write_jsonl(ctx.folder.set, result.records)
    summary = {
        "worker": s.judge,
        "confirmed": result.confirmed,
        "rejected": result.rejected,
        "unscored": result.unscored,
        "calls": cache.misses if cache is not None else None,
    }
    confirmed = [r for r in result.records if r.get("reference_source") != before.get(r["id"])]
    if confirmed:  # a judge agrees with what it is shown (docs/loop.md): a person should look at some
        picked = random.Random(f"{s.seed}:{ctx.run_id}").sample(confirmed, min(_SPOT_CHECK, len(confirmed)))
        summary["spot_check"] = [
            {"id": r["id"], "question": _clip(str(r["question"]), 100), "reference": _clip(str(r["reference"]), 60)}
            for r in sorted(picked, key=lambda r: str(r["id"]))
        ]
    if result.unscored_example:
        summary["unscored_example"] = result.unscored_example
    return summary, result.records


_SPOT_CHECK = 5
"""How many of a run's judge confirmations its report lists for a person to check."""


def _clip(text: str, size: int) -> str:
    """``text`` on one line, cut to ``size`` characters with an ellipsis."""
    line = " ".join(text.split())
    return line if len(line) <= size else line[: size - 1] + "…"


def _where(ctx: Context, left: Sequence[str]) -> dict[str, int]:
    """Per review file, how many of its rows are unconfirmed candidates."""
    wanted = set(left)
    return {e["file"]: n for e in ctx.state["reviews"] if (n := len(wanted & set(e["ids"])))}


def _stop_message(ctx: Context, left: Sequence[str]) -> str:
    files = "\n".join(f"  {ctx.folder.root / f}: {n} row(s) to confirm" for f, n in _where(ctx, left).items())
    return (
        f"{len(left)} task(s) of {ctx.folder.set} still have an unconfirmed candidate reference (podium's or the "
        f"upstream's own answer, which would measure agreement, not quality):\n{files}\n"
        "fill in verdict (accept / fix / drop) and reference there, then resume with: "
        f"podium loop run --dir {ctx.folder.root}\n"
        + (
            "(or go on with them unconfirmed: --allow-unconfirmed)"
            if ctx.settings.judge is not None  # the judge has had its say on them
            else "(or let a judge confirm what it can: --judge WORKER; "
            "or go on with them unconfirmed: --allow-unconfirmed)"
        )
    )
