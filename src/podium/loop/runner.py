"""``podium loop run``: the weekly procedure of docs/loop.md, stage by stage, over a folder.

Before anything is written, everything that could be bad input is checked (:func:`_prepare`):
the folder and its state file, the settings against the ones the folder keeps, the judge
workers, the drift thresholds, the set, every review file the loop wrote (applied in memory, all
or nothing), and the traffic of the window (an unknown tag or use case, an empty window) — and
the export is computed. A ConfigError there leaves the folder exactly as it was (exit 2).

Then the stages run in order — 1 drift, 2 export, 3 labels, 4 record, 5 train, 6 promote — each
recorded in ``loop.json`` as it ends, and 7, the report of the run (``runs/NNNN/report.md`` and
``.json``). Exit status: 0 done (promoted, already promoted, or nothing new to decide),
:data:`~podium.train.promotion.EXIT_REFUSED` (3) the gate refused the new version,
:data:`~podium.loop.stages.EXIT_LABELS` (5) stopped for labels, 2 bad input.
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from podium.errors import ConfigError, ModelNotInstalled
from podium.loop.settings import RunOptions, Settings, resolve_settings
from podium.loop.stages import EXIT_LABELS, Context, apply_reviews, export_request
from podium.loop.state import Folder, atomic_write, load_state, locked, save_state

__all__ = ["EXIT_DONE", "run_loop"]

EXIT_DONE = 0


@dataclass(frozen=True)
class _Prepared:
    new: list[dict[str, Any]]
    export: dict[str, Any]


_SMALLEST = "qwen2.5-coder-0.5b-instruct"
"""The embedded model a missing sentence encoder's message suggests instead (the default local
pool's middle worker: its file is there where the pool runs)."""

_ENDED = ("done", "refused")
"""Statuses of a run that went through; after any other (stopped for labels, failed, killed)
the next run resumes it."""


def _window(settings: Settings, once: RunOptions, state: dict[str, Any]) -> tuple[str, str]:
    """This run's window, [since, until) in the store's UTC form: ``--since``/``--until``; else,
    when the last run did not go through, that run's window (resuming never changes what is
    exported); else the last ``days`` days up to now."""
    from podium.traffic.drift import windows_for

    last = state["runs"][-1] if state["runs"] else None
    if once.since is None and once.until is None and last is not None and last.get("status") not in _ENDED:
        return last["window"]["since"], last["window"]["until"]
    w = windows_for(since=once.since, until=once.until, reference_since=None, reference_until=None, days=settings.days)
    return w["recent"]


def _prepare(ctx: Context) -> _Prepared:
    """Every check that needs no write (module docstring), and the run's new tasks."""
    from podium.pool import load_pool
    from podium.pool_workers import judge_index
    from podium.traffic.drift import parse_thresholds
    from podium.traffic.export import read_set
    from podium.traffic.selection import export_records, read_requests
    from podium.traffic.source import task_id

    s = ctx.settings
    s.check()
    parse_thresholds(s.threshold)
    _check_reference_window(ctx)
    _check_encoder(s)
    if s.policy == "lm":  # an unknown or missing base conductor too
        from podium.local_models import resolve_model
        from podium.loop.outcomes import lm_config

        resolve_model(lm_config(s).model, verify=False)
    if s.bank:  # the bank's catalogue against the option: checked before anything is recorded
        from podium.loop.outcomes import bank_catalogue

        bank_catalogue(ctx.folder, s)
    config = load_pool(s.pool)
    for flag, name in (("--judge", s.judge), ("--eval-judge", s.eval_judge)):
        if name:
            judge_index(config, name, flag)
    records = read_set(ctx.folder.set) if ctx.folder.set.is_file() else []
    plan = apply_reviews(ctx.folder, ctx.state, records)
    selection, options = export_request(ctx)
    items = read_requests(selection)
    result = export_records(selection, options, items, [*plan.records, *plan.dropped])
    gone = {d["id"] for d in plan.dropped}
    again = sum(1 for item in items if task_id(item) in gone)
    opened = [r for r in (*plan.records, *result.records) if r.get("task_type") == "open"]
    if opened and not s.grader:
        raise ConfigError(_open_tasks_message(opened, items, s.task_type))
    summary = {
        "read": result.read,
        "already_in_set": result.existing - again,
        "dropped_before": again,
        "duplicates": result.duplicates,
        "similar": result.similar,
        "retyped_open": result.retyped,
        "without_reference": result.without_reference,
        "pii": "in clear (--allow-pii)" if result.pii is None else result.pii,
    }
    return _Prepared(result.records, summary)


def _check_reference_window(ctx: Context) -> None:
    """ConfigError when the folder's fixed drift reference window does not fit this run's window
    (it overlaps, or is empty), naming the remembered bounds and the ways out."""
    from podium.loop.stages import drift_request

    s, (since, until) = ctx.settings, ctx.window
    if not (s.reference_since or s.reference_until):
        return
    try:
        drift_request(ctx).windows()
    except ConfigError as exc:
        bounds = (("since", s.reference_since), ("until", s.reference_until))
        given = ", ".join(f"--reference-{end} {value}" for end, value in bounds if value)
        raise ConfigError(
            f"drift's reference window ({given}, remembered by the folder unless given now) does not fit this "
            f"run's window {since} → {until}: {exc}. Give this run's window (--since/--until), another reference, "
            "or --reference-since none --reference-until none to compare with the window as long before it"
        ) from None


def _check_encoder(s: Settings) -> None:
    """ConfigError for an unknown question encoder; ModelNotInstalled, naming an embedded model
    instead, for one that is not installed (the light and plan conductors embed the questions)."""
    from podium.embed import check_installed, encoder_choice

    encoder_choice(s.encoder)
    if s.policy == "lm":
        return
    try:
        check_installed(s.encoder)
    except ModelNotInstalled as exc:
        raise ModelNotInstalled(
            f"--embedder {s.encoder}: {exc}; or embed with a local model the pool already has, "
            f"e.g. --embedder {_SMALLEST}",
            model=exc.model,
            install_command=exc.install_command,
        ) from None


def _open_tasks_message(opened: list[dict[str, Any]], items: list[Any], default_type: str) -> str:
    """Why the set's open tasks need a judge, and how else to avoid them: those the client typed
    (task:math …) became open because their answers had no final answer to take."""
    from podium.traffic.export import declared_type
    from podium.traffic.source import task_id

    declared = {task_id(item): declared_type(item, default_type) for item in items}
    typed = Counter(declared.get(r["id"]) for r in opened) - Counter({"open": len(opened), None: len(opened)})
    why = (
        f" {sum(typed.values())} of them were sent as task:{'/'.join(sorted(str(k) for k in typed))} but their "
        "answers gave no final answer to take as the candidate (cut off at the worker's max_tokens, or an error): "
        "a larger max_tokens in the pool file keeps such answers whole."
        if typed
        else " Or, when the traffic's answers can be checked by a rule, tag requests task:math|choice|exact or "
        "give --task-type."
    )
    return (
        f"{len(opened)} task(s) of the set are open (graded by a judge worker in the eval): give --judge WORKER "
        f"(it also confirms candidate references) or --eval-judge WORKER (grading only).{why}"
    )


def _check_name_free(name: str) -> None:
    """A new loop folder left at the default registry name must not take over a conductor that
    has versions already (another loop folder's, or one trained by hand): ConfigError naming both
    ways on."""
    from podium.registry import Registry

    versions = Registry().versions(name)
    if versions:
        raise ConfigError(
            f"the registry already has a conductor {name!r} ({versions[0].ref}..{versions[-1].ref}), which another "
            f"loop folder or a hand-trained version uses; give --name NEW for this loop's own conductor, or --name "
            f"{name} to train and promote that one"
        )


def run_loop(
    root: Path, given: argparse.Namespace, once: RunOptions, say: Callable[[str], None]
) -> tuple[dict[str, Any], int]:
    """Run the loop in folder ``root`` with the options ``given`` on the command line (None for
    those not given) and this run's ``once``; progress lines go to ``say``. Returns the run's
    record (as ``loop.json`` and ``report.json`` keep it) and the exit status. Raises ConfigError
    for bad input; before the first stage, nothing is written then."""
    from podium.loop.outcomes import promote_stage, record_stage, train_stage
    from podium.loop.stages import drift_stage, export_stage, labels_stage
    from podium.records import utc_now
    from podium.train.promotion import EXIT_REFUSED

    folder = Folder(root)
    folder.check()
    with locked(folder):
        state = load_state(folder)
        settings = resolve_settings(state["settings"], given)
        if not state["settings"] and getattr(given, "name", None) is None:
            _check_name_free(settings.name)
        run_id = f"{max((int(r['id']) for r in state['runs']), default=0) + 1:04d}"
        window = _window(settings, once, state)
        ctx = Context(folder, settings, once, run_id, window, state, lambda line: None, lambda: None)
        prepared = _prepare(ctx)
        interrupted = [r["id"] for r in state["runs"] if r.get("status") == "running"]
        for r in state["runs"]:
            if r.get("status") == "running":
                r["status"] = "interrupted"
        last = state["runs"][-1] if state["runs"] else None
        run: dict[str, Any] = {"id": run_id, "started": utc_now(), "status": "running", "exit_code": None,
                               "window": {"since": window[0], "until": window[1]}, "stages": {}}  # fmt: skip
        if last is not None and last["status"] not in _ENDED:
            run["resumes"] = last["id"]
        state["settings"] = settings.to_json()
        state["runs"].append(run)
        ctx.say = lambda line: say(f"loop {run_id} · {line}")
        ctx.save = lambda: save_state(folder, state)
        ctx.save()
        if interrupted:
            ctx.say(f"run(s) {', '.join(interrupted)} ended without finishing; this run picks up from the files")
        if "resumes" in run and once.since is None and once.until is None:
            ctx.say(f"resuming run {run['resumes']}: the same traffic window, {window[0]} → {window[1]}")
        stages = run["stages"]
        try:
            stages["drift"] = drift_stage(ctx)
            ctx.save()
            stages["export"] = export_stage(ctx, prepared.new, prepared.export)
            ctx.save()
            stages["labels"] = labels_stage(ctx)
            ctx.save()
            if stages["labels"]["status"] == "stopped":
                return _finish(ctx, run, "stopped for labels", EXIT_LABELS), EXIT_LABELS
            stages["record"] = record_stage(ctx)
            ctx.save()
            stages["train"] = train_stage(ctx)
            ctx.save()
            stages["promote"] = promote_stage(ctx, stages["train"])
        except ConfigError as exc:
            run["error"] = str(exc)
            _finish(ctx, run, "failed", 2)
            raise
        refused = stages["promote"]["status"] == "refused"
        code = EXIT_REFUSED if refused else EXIT_DONE
        return _finish(ctx, run, "refused" if refused else "done", code), code


def _finish(ctx: Context, run: dict[str, Any], status: str, code: int) -> dict[str, Any]:
    """Stage 7: the run's report files, and the run recorded as ended."""
    import json

    from podium.eval.tasks import load_tasks
    from podium.loop.report import run_markdown
    from podium.records import utc_now
    from podium.registry import Registry

    folder = ctx.folder
    promoted = Registry().promoted(ctx.settings.name)
    run.update(
        status=status,
        exit_code=code,
        finished=utc_now(),
        set={"tasks": len(load_tasks(folder.set)) if folder.set.is_file() else 0, "file": folder.relative(folder.set)},
        promoted=promoted.ref if promoted else None,
        commands=ctx.commands,
        report=folder.relative(ctx.run_dir / "report.md"),
    )
    if "labels" in run["stages"] and "message" in run["stages"]["labels"]:
        run["message"] = run["stages"]["labels"]["message"]
    atomic_write(ctx.run_dir / "report.json", json.dumps({"dir": str(folder.root), **run}, indent=1) + "\n")
    atomic_write(ctx.run_dir / "report.md", run_markdown(run, folder))
    ctx.save()
    return {"dir": str(folder.root), **run}
