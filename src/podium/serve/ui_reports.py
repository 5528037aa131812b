"""The UI's report pages: ``/evals`` (stored eval runs, one run, its Pareto plot, two runs side by
side with the regression gate's flips), ``/shadow`` (the shadow report, also as Markdown) and
``/conductors`` (the registry, one version, its learning curve), added to the trace browser's
router by :func:`add_report_routes`.

What they read, and how (eval runs, the shadow store, the conductor registry, each through the
code that wrote it): :mod:`podium.serve.report_data`, whose names are re-exported here. A bad
query is a page with status 400, a missing run or version 404, an unreadable report 422, a shadow
store that cannot be read 503.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request  # FastAPI reads the route signatures' annotations at run time
from fastapi.responses import HTMLResponse, Response

from podium.errors import ConfigError
from podium.serve.report_data import (
    EVAL_DIR_ENV,
    EvalRun,
    ReportSources,
    compare_runs,
    conductor_versions,
    default_eval_dir,
    eval_runs,
    history_table,
    load_run,
    method_rows,
    pareto_image,
)
from podium.serve.report_data import run_summaries as _run_summaries
from podium.serve.report_data import train_info as _train_info
from podium.store.engine import is_database_url, mask_url

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
