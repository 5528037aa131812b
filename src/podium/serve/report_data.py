"""What the UI's report pages read: stored ``podium eval`` runs, the shadow store and the
conductor registry — each through the code that wrote it (:func:`podium.eval.report.load_report`,
:func:`podium.eval.gate.gate`, :func:`podium.serve.shadow_report.shadow_report`,
:class:`podium.registry.Registry`); nothing here computes a metric of its own.

**Eval runs** are the folders ``podium eval --out DIR`` writes (``eval.json``, ``eval.md``,
``pareto.png``). The UI finds them under one folder, :attr:`ReportSources.eval_dir`: the folder
itself and its sub-folders two levels deep (``runs/nightly/2026-12-01/eval.json``), plus the held-out
reports the registry keeps of each conductor version (``podium conductor eval``). A run's id is
its folder relative to the eval folder (``.`` for the folder itself), or ``NAME@vN:FOLDER`` for a
registry version's report; pages look ids up among the runs found, so an id never becomes a path.

The pages themselves (routes, query checks) are :mod:`podium.serve.ui_reports`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from podium.errors import ConfigError

if TYPE_CHECKING:
    from podium.registry import Version

__all__ = [
    "EVAL_DIR_ENV",
    "EvalRun",
    "ReportSources",
    "compare_runs",
    "conductor_versions",
    "default_eval_dir",
    "eval_runs",
    "history_table",
    "load_run",
    "method_rows",
    "pareto_image",
    "run_summaries",
    "train_info",
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
            info = train_info(v)
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


def train_info(version: Version) -> dict[str, Any]:
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


_SUMMARIES: dict[Path, tuple[tuple[int, int], dict[str, Any]]] = {}
"""What the run list shows of each report, while its file is unchanged (small: kept for every
run listed, so the list does not parse every report again)."""


def run_summaries(runs: Mapping[str, EvalRun]) -> list[dict[str, Any]]:
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
