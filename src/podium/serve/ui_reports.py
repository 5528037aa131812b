"""What the UI's report pages read: stored ``podium eval`` runs, the shadow store and the
conductor registry — each through the code that wrote it (:func:`podium.eval.report.load_report`,
:func:`podium.eval.gate.gate`, :func:`podium.serve.shadow.shadow_report`,
:class:`podium.registry.Registry`); nothing here computes a metric of its own.

**Eval runs** are the folders ``podium eval --out DIR`` writes (``eval.json``, ``eval.md``,
``pareto.png``). The UI finds them under one folder, :attr:`ReportSources.eval_dir`: the folder
itself and its sub-folders two levels deep (``runs/nightly/2026-12-01/eval.json``), plus the held-out
reports the registry keeps of each conductor version (``podium conductor eval``). A run's id is
its folder relative to the eval folder (``.`` for the folder itself), or ``NAME@vN:FOLDER`` for a
registry version's report; pages look ids up among the runs found, so an id never becomes a path.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request  # FastAPI reads the route signatures' annotations at run time
from fastapi.responses import HTMLResponse, Response

from podium.errors import ConfigError
from podium.store.engine import is_database_url, mask_url

if TYPE_CHECKING:
    from podium.registry import Version

__all__ = [
    "EVAL_DIR_ENV",
    "EvalRun",
    "ReportSources",
    "add_report_routes",
    "compare_runs",
    "conductor_versions",
    "default_eval_dir",
    "eval_runs",
    "history_table",
    "load_run",
    "method_rows",
    "pareto_image",
]

EVAL_DIR_ENV = "PODIUM_EVAL_DIR"
"""Environment variable naming the folder of eval runs (what ``podium serve``'s UI reads)."""

_MAX_RUNS = 2000
"""Most eval runs listed (newest first); a folder with more is a data store, not a run folder."""


def default_eval_dir() -> Path:
    """``$PODIUM_EVAL_DIR``, else ``./podium-eval`` — the folder ``podium eval`` writes by default
    (relative to the working directory)."""
    return Path(os.environ.get(EVAL_DIR_ENV) or "podium-eval")


@dataclass(frozen=True)
class ReportSources:
    """Where the report pages read from.

    Attributes:
        eval_dir: folder of ``podium eval --out`` folders (see the module docstring).
        shadow_store: the shadow store ``podium shadow`` writes — a SQLite file (never created by
            the UI) or the shared store's database URL.
        conductors: the conductor registry's folder (:class:`podium.registry.Registry`).
    """

    eval_dir: Path
    shadow_store: str | Path
    conductors: Path

    @classmethod
    def defaults(cls) -> ReportSources:
        """:func:`default_eval_dir`, the shadow store (the shared store's with
        ``$PODIUM_DATABASE_URL``, else the file in podium's data folder) and the registry."""
        from podium.registry import Registry
        from podium.serve.options import default_shadow_path
        from podium.store.shadow import shadow_location

        return cls(default_eval_dir(), shadow_location(None, default_shadow_path()), Registry().root)


@dataclass(frozen=True)
class EvalRun:
    """One stored eval run.

    Attributes:
        id: the run's id (module docstring).
        folder: the folder holding its ``eval.json`` (and ``pareto.png`` unless ``--no-plot``).
        conductor: the registry version it evaluates (``light@v3``), or None for an eval-folder run.
        modified: when its ``eval.json`` was written, UTC ISO 8601 to the second.
    """

    id: str
    folder: Path
    conductor: str | None
    modified: str

    @property
    def report_path(self) -> Path:
        return self.folder / "eval.json"


def _modified(path: Path) -> str:
    return datetime.fromtimestamp(path.stat().st_mtime, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def eval_runs(sources: ReportSources) -> dict[str, EvalRun]:
    """Every stored run the sources hold, newest ``eval.json`` first, by id (at most 2,000)."""
    found: dict[str, tuple[int, EvalRun]] = {}

    def add(run_id: str, file: Path, conductor: str | None) -> None:
        if run_id not in found and file.is_file():
            found[run_id] = (file.stat().st_mtime_ns, EvalRun(run_id, file.parent, conductor, _modified(file)))

    root = sources.eval_dir
    if root.is_dir():
        for pattern in ("eval.json", "*/eval.json", "*/*/eval.json"):
            for file in root.glob(pattern):
                add(file.parent.relative_to(root).as_posix(), file, None)
    if sources.conductors.is_dir():
        for file in sources.conductors.glob("*/v*/eval/*/eval.json"):
            version = file.parents[2]
            if version.name[1:].isdigit():
                ref = f"{version.parent.name}@{version.name}"
                add(f"{ref}:{file.parent.name}", file, ref)
    newest = sorted(found.values(), key=lambda f: (f[0], f[1].id), reverse=True)[:_MAX_RUNS]
    return {run.id: run for _, run in newest}


_CACHE: dict[Path, tuple[tuple[int, int], dict[str, Any]]] = {}
_CACHE_SIZE = 16


def load_run(run: EvalRun) -> dict[str, Any]:
    """The run's report (:func:`podium.eval.report.load_report`), cached while the file is
    unchanged. Raises ConfigError when it is not a podium eval report."""
    from podium.eval.report import load_report

    path = run.report_path
    try:
        stat = path.stat()
    except OSError as exc:
        raise ConfigError(f"cannot read eval report {path}: {exc}") from None
    stamp = (stat.st_mtime_ns, stat.st_size)
    cached = _CACHE.get(path)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    report = load_report(path)
    if len(_CACHE) >= _CACHE_SIZE:
        _CACHE.pop(next(iter(_CACHE)))
    _CACHE[path] = (stamp, report)
    return report


def method_rows(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per method of the report, as its summary stores it: ``name``, ``group`` (a
    sweep's name, or None), ``n``, ``quality`` and ``ci95`` (0–1), ``cost`` and ``total_cost``
    (USD: mean per request, sum), ``calls`` (worker calls per request), ``tokens_in`` /
    ``tokens_out`` (per request), ``p50`` / ``p95`` (latency seconds, None without latency),
    ``parse_fail`` / ``fallback`` (rates 0–1), ``pgr`` (None without weak/strong reference) and
    ``front`` (on the Pareto front, :func:`podium.eval.report.front_methods`)."""
    from podium.eval.report import front_methods

    front = front_methods(report)
    rows = []
    for name, method in report["methods"].items():
        s = method["summary"]
        latency = s.get("latency_s") or {}
        rows.append(
            {
                "name": name,
                "group": method.get("group"),
                "n": s["n"],
                "quality": s["quality"]["mean"],
                "ci95": s["quality"]["ci95"],
                "cost": s["cost_usd"]["mean"],
                "total_cost": s["cost_usd"]["total"],
                "calls": s["worker_calls"],
                "tokens_in": s["tokens"]["input"],
                "tokens_out": s["tokens"]["output"],
                "p50": latency.get("p50"),
                "p95": latency.get("p95"),
                "parse_fail": s["parse_failure_rate"],
                "fallback": s["fallback_rate"],
                "pgr": method.get("pgr"),
                "front": name in front,
            }
        )
    return rows


def pareto_image(run: EvalRun) -> bytes | None:
    """The run's Pareto plot as PNG bytes: its stored ``pareto.png``, else drawn from the report
    by :func:`podium.eval.report.pareto_png` (runs written with ``--no-plot``); None when the
    report has nothing to plot or matplotlib is missing."""
    stored = run.folder / "pareto.png"
    if stored.is_file():
        return stored.read_bytes()
    import tempfile

    from podium.eval.metrics import MetricInputError
    from podium.eval.report import pareto_png

    report = load_run(run)
    with tempfile.TemporaryDirectory() as folder:
        try:
            return pareto_png(report, Path(folder) / "pareto.png").read_bytes()
        except (MetricInputError, ImportError):
            return None


def compare_runs(new: Mapping[str, Any], baseline: Mapping[str, Any], margins: Any) -> dict[str, Any]:
    """Two reports side by side: ``methods`` (every method of either, with ``new`` and
    ``baseline`` rows of :func:`method_rows` or None), and ``gate`` — the regression gate's
    result (:func:`podium.eval.gate.gate` with ``margins``, a GateMargins) or ``gate_error``, the
    reason it refused (no shared method or question, different questions without results)."""
    from podium.eval.gate import gate

    rows_new = {r["name"]: r for r in method_rows(new)}
    rows_old = {r["name"]: r for r in method_rows(baseline)}
    names = list(rows_new) + [n for n in rows_old if n not in rows_new]
    comparison: dict[str, Any] = {
        "methods": [{"name": n, "new": rows_new.get(n), "baseline": rows_old.get(n)} for n in names],
        "gate": None,
        "gate_error": None,
    }
    try:
        comparison["gate"] = gate(new, baseline, margins)
    except ConfigError as exc:
        comparison["gate_error"] = str(exc)
    return comparison


def conductor_versions(root: Path) -> list[dict[str, Any]]:
    """The registry at ``root`` per conductor name: ``name``, ``promoted`` (the current version's
    number or None), ``versions`` (``ref``, ``number``, ``policy``, ``lam``, ``data``,
    ``steps`` — generations or GRPO steps recorded —, ``promoted``, ``curve`` — a stored
    learning curve —, ``created``, UTC ISO 8601) and ``history`` (every promotion and rollback,
    oldest first, as ``promotions.jsonl`` holds them)."""
    from podium.registry import Registry

    registry = Registry(root)
    names = []
    for name in registry.names():
        promoted = registry.promoted(name)
        versions = []
        for v in registry.versions(name):
            info = _train_info(v)
            cfg = info.get("config", {})
            versions.append(
                {
                    "ref": v.ref,
                    "number": v.number,
                    "policy": info.get("policy", "light"),
                    "lam": cfg.get("lam"),
                    "data": info.get("data", {}).get("matrix"),
                    "steps": len(info.get("history", [])),
                    "promoted": promoted is not None and promoted.number == v.number,
                    "curve": (v.path / "learning-curve.png").is_file(),
                    "created": _modified(v.path),
                }
            )
        names.append(
            {
                "name": name,
                "promoted": promoted.number if promoted else None,
                "versions": versions,
                "history": registry.history(name),
            }
        )
    return names


def _train_info(version: Version) -> dict[str, Any]:
    """A version's ``train.json`` as stored ({} when unreadable: the page says what it can)."""
    try:
        return version.training().to_json()
    except (OSError, ConfigError):
        return {}


def history_table(history: list[Mapping[str, Any]]) -> tuple[list[str], list[list[float | None]]]:
    """A version's per-step training history as columns (the numeric fields every entry shares,
    in their stored order) and rows — the numbers behind its learning curve."""
    if not history:
        return [], []
    columns = [
        k for k, v in history[0].items() if isinstance(v, int | float) and not isinstance(v, bool) and k != "seconds"
    ]
    columns = [c for c in columns if all(c in h for h in history)]
    rows = [[_finite(h[c]) for c in columns] for h in history]
    return columns, rows


def _finite(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


_Page = Callable[..., Response]


def add_report_routes(
    router: APIRouter, sources: ReportSources, refused: Callable[[Request], Response | None], page: _Page
) -> None:
    """Add the report pages (``/evals``, ``/shadow``, ``/conductors`` and their images) to the
    UI's ``router``; ``refused`` is the UI's access check, ``page`` renders a template."""
    shadow_stores: dict[str | Path, Any] = {}
    shown_store = mask_url(str(sources.shadow_store)) if is_database_url(sources.shadow_store) else sources.shadow_store

    def error(request: Request, status: int, message: str) -> Response:
        return page(request, "error.html", status=status, message=message)

    async def run_named(request: Request, key: str) -> EvalRun | Response:
        run_id = request.query_params.get(key, "")
        if not run_id:
            return error(request, 400, f"choose an eval run ({key}=RUN; the runs are listed on /ui/evals)")
        runs = await asyncio.to_thread(eval_runs, sources)
        if run_id not in runs:
            return error(request, 404, f"no eval run {run_id!r} in {sources.eval_dir} or the conductor registry")
        return runs[run_id]

    async def report_of(request: Request, run: EvalRun) -> dict[str, Any] | Response:
        try:
            return await asyncio.to_thread(load_run, run)
        except ConfigError as exc:
            return error(request, 422, str(exc))

    @router.get("/evals", response_class=HTMLResponse)
    async def evals(request: Request) -> Response:
        if (answer := refused(request)) is not None:
            return answer
        runs = await asyncio.to_thread(eval_runs, sources)
        listed = await asyncio.to_thread(_run_summaries, runs)
        return page(request, "evals.html", runs=listed, eval_dir=sources.eval_dir, env=EVAL_DIR_ENV)

    @router.get("/evals/run", response_class=HTMLResponse)
    async def eval_run(request: Request) -> Response:
        if (answer := refused(request)) is not None:
            return answer
        run = await run_named(request, "id")
        if isinstance(run, Response):
            return run
        report = await report_of(request, run)
        if isinstance(report, Response):
            return report
        names = [n for n, m in report["methods"].items() if not m["group"]]
        slices = [
            {"tag": tag, "n": max(v["n"] for v in per.values()), "cells": [per.get(name) for name in names]}
            for tag, per in report.get("slices", {}).items()
        ]
        return page(
            request, "eval_run.html", run=run, report=report, rows=method_rows(report), names=names, slices=slices
        )

    @router.get("/evals/pareto.png")
    async def pareto(request: Request) -> Response:
        if (answer := refused(request)) is not None:
            return answer
        run = await run_named(request, "id")
        if isinstance(run, Response):
            return run
        try:
            image = await asyncio.to_thread(pareto_image, run)
        except ConfigError as exc:
            return error(request, 422, str(exc))
        if image is None:
            return error(request, 404, f"run {run.id!r} has nothing to plot (or matplotlib is not installed)")
        return Response(image, media_type="image/png", headers={"Cache-Control": "no-cache"})

    @router.get("/evals/compare", response_class=HTMLResponse)
    async def compare(request: Request) -> Response:
        if (answer := refused(request)) is not None:
            return answer
        from podium.eval.gate import GateMargins

        runs = []
        for key in ("new", "baseline"):
            run = await run_named(request, key)
            if isinstance(run, Response):
                return run
            report = await report_of(request, run)
            if isinstance(report, Response):
                return report
            runs.append((run, report))
        defaults = GateMargins()
        try:
            margins = GateMargins(
                *(
                    _number(request.query_params.get(name, ""), name, getattr(defaults, field))
                    for name, field in _MARGINS
                )
            )
        except ConfigError as exc:
            return error(request, 400, str(exc))
        (new_run, new), (old_run, old) = runs
        comparison = await asyncio.to_thread(compare_runs, new, old, margins)
        return page(
            request, "eval_compare.html", new_run=new_run, old_run=old_run, new=new, old=old, margins=margins,
            **comparison,
        )  # fmt: skip

    def shadow_rows(since: str | None, until: str | None) -> list[dict[str, Any]] | None:
        from podium.store.shadow import ShadowStore

        path = sources.shadow_store
        if isinstance(path, Path) and not path.is_file():
            return None  # the UI never creates the file: podium shadow does
        if path not in shadow_stores:
            shadow_stores[path] = ShadowStore(path)
        rows: list[dict[str, Any]] = shadow_stores[path].rows(since=since, until=until)
        return rows

    async def shadow_report_for(request: Request) -> tuple[dict[str, Any] | None, dict[str, str]] | Response:
        from podium.serve.shadow_report import shadow_report
        from podium.trace.query import parse_utc

        form = {k: request.query_params.get(k, "").strip() for k in ("since", "until")}
        try:
            since = parse_utc(form["since"], flag="since") if form["since"] else None
            until = parse_utc(form["until"], flag="until", end_of_day=True) if form["until"] else None
        except ConfigError as exc:
            return error(request, 400, str(exc))
        if since is not None and until is not None and since >= until:
            return error(request, 400, f"since {form['since']} is not before until {form['until']}: swap them")
        try:  # the store cannot be opened, or math-verify (the eval extra) is missing
            rows = await asyncio.to_thread(shadow_rows, since, until)
            report = None if rows is None else await asyncio.to_thread(shadow_report, rows)
        except ConfigError as exc:
            return error(request, 503, str(exc))
        return report, form

    @router.get("/shadow", response_class=HTMLResponse)
    async def shadow(request: Request) -> Response:
        if (answer := refused(request)) is not None:
            return answer
        found = await shadow_report_for(request)
        if isinstance(found, Response):
            return found
        report, form = found
        return page(request, "shadow.html", report=report, form=form, store=shown_store)

    @router.get("/shadow.md")
    async def shadow_markdown(request: Request) -> Response:
        if (answer := refused(request)) is not None:
            return answer
        from podium.serve.shadow_report import report_markdown

        found = await shadow_report_for(request)
        if isinstance(found, Response):
            return found
        report, _ = found
        if report is None:
            return error(request, 404, f"no shadow store at {shown_store}")
        return Response(report_markdown(report), media_type="text/markdown; charset=utf-8")

    @router.get("/conductors", response_class=HTMLResponse)
    async def conductors(request: Request) -> Response:
        if (answer := refused(request)) is not None:
            return answer
        names = await asyncio.to_thread(conductor_versions, sources.conductors)
        return page(request, "conductors.html", names=names, root=sources.conductors)

    def version_named(request: Request) -> Any:
        from podium.registry import Registry

        ref = request.query_params.get("ref", "")
        if "@" not in ref:
            return error(request, 400, f"name a version as NAME@vN, got {ref!r}")
        try:
            return Registry(sources.conductors).get(ref)
        except ConfigError as exc:
            return error(request, 404, str(exc))

    @router.get("/conductors/version", response_class=HTMLResponse)
    async def conductor_version(request: Request) -> Response:
        if (answer := refused(request)) is not None:
            return answer
        version = version_named(request)
        if isinstance(version, Response):
            return version
        info = _train_info(version)
        columns, rows = history_table(info.get("history", []))
        runs = await asyncio.to_thread(eval_runs, sources)
        from podium.registry import Registry

        history = [
            h
            for h in Registry(sources.conductors).history(version.name)
            if version.number in (h.get("version"), h.get("from"))
        ]
        shown = {k: v for k, v in info.items() if k not in ("history", "warm_start_loss")}
        return page(
            request, "conductor_version.html", version=version, info=shown, columns=columns, rows=rows,
            curve=(version.path / "learning-curve.png").is_file(), history=history,
            evals=[r for r in runs.values() if r.conductor == version.ref],
            warm=info.get("warm_start_loss") or [],
        )  # fmt: skip

    @router.get("/conductors/curve.png")
    async def conductor_curve(request: Request) -> Response:
        if (answer := refused(request)) is not None:
            return answer
        version = version_named(request)
        if isinstance(version, Response):
            return version
        curve = version.path / "learning-curve.png"
        if not curve.is_file():
            return error(request, 404, f"{version.ref} has no stored learning curve")
        return Response(curve.read_bytes(), media_type="image/png", headers={"Cache-Control": "no-cache"})


_MARGINS = (("max_quality_drop", "quality_drop"), ("max_cost_rise", "cost_rise"), ("max_p95_rise", "p95_rise"))
"""The gate margins the compare page takes (query name, GateMargins field), as ``podium eval``'s flags."""


def _number(text: str, name: str, default: float) -> float:
    """A margin from the query, or its default. Raises ConfigError for a bad one."""
    if not text.strip():
        return default
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"{name.replace('_', ' ')} {text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"{name.replace('_', ' ')} must be a number ≥ 0, got {text!r}")
    return value


_SUMMARIES: dict[Path, tuple[tuple[int, int], dict[str, Any]]] = {}
"""What the run list shows of each report, while its file is unchanged (small: kept for every
run listed, so the list does not parse every report again)."""


def _run_summaries(runs: Mapping[str, EvalRun]) -> list[dict[str, Any]]:
    """What the run list shows of each run: tasks, mode, questions, methods, or the error."""
    listed = []
    for run in runs.values():
        try:
            stat = run.report_path.stat()
            stamp = (stat.st_mtime_ns, stat.st_size)
        except OSError:
            stamp = (0, 0)
        cached = _SUMMARIES.get(run.report_path)
        if cached is None or cached[0] != stamp:
            summary: dict[str, Any] = {"error": None}
            try:
                report = load_run(run)
            except ConfigError as exc:
                summary["error"] = str(exc)
            else:
                summary.update(
                    tasks=report.get("config", {}).get("tasks", ""),
                    replay=report.get("replay"),
                    n=(report.get("task_set") or {}).get("n"),
                    methods=[n for n, m in report["methods"].items() if not m["group"]],
                    results=bool(report.get("results")),
                )
            if len(_SUMMARIES) >= _MAX_RUNS:
                _SUMMARIES.pop(next(iter(_SUMMARIES)))
            _SUMMARIES[run.report_path] = cached = (stamp, summary)
        listed.append({"run": run, **cached[1]})
    return listed
