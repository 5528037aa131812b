"""Evaluation reports: per-method summaries, cost–quality curves and slices (the regression gate
that compares two reports is :mod:`podium.eval.gate`).

A report is one JSON document (``eval.json``) from which the Markdown table (``eval.md``) and
the Pareto plot (``pareto.png``) are rendered; ``podium eval --from eval.json`` re-renders or
gates a stored report without running anything. The formulas are in :mod:`podium.eval.metrics`
and ``docs/eval.md``.

Reference points for the curve metrics: among the ``single:*`` methods, **weak** is the one
with the lowest mean cost and **strong** the one with the highest quality (RouteLLM's weak and
strong models); AIQ integrates over [weak cost, strong cost] — the pool's cost range.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from podium.errors import ConfigError
from podium.eval.gate import task_set
from podium.eval.metrics import Point, aiq, apgr, cpt, mean_ci, paired_summary, pareto_front, percentile, pgr
from podium.eval.runner import Method, TaskResult

__all__ = [
    "REPORT_VERSION",
    "build_report",
    "front_methods",
    "load_report",
    "markdown",
    "pareto_png",
    "summarize",
    "write_report",
]

REPORT_VERSION = 1


def summarize(results: Sequence[TaskResult], *, replay: bool) -> dict[str, Any]:
    """One method's figures over its requests (costs USD, latencies seconds)."""
    n = len(results)
    if n == 0:
        raise ValueError("no results to summarise")
    mean, low, high = mean_ci([r.score for r in results])
    attempts = sum(r.plan_attempts for r in results)
    summary: dict[str, Any] = {
        "n": n,
        "quality": {"mean": mean, "ci95": [low, high]},
        "accuracy": sum(r.correct for r in results) / n,
        "format_ok": sum(r.parsed for r in results) / n,
        "cost_usd": {"mean": sum(r.cost_usd for r in results) / n, "total": sum(r.cost_usd for r in results)},
        "worker_calls": sum(r.worker_calls for r in results) / n,
        "tokens": {
            "input": sum(r.input_tokens for r in results) / n,
            "output": sum(r.output_tokens for r in results) / n,
        },
        "latency_s": None,
        "wall_s": {
            "p50": percentile([r.wall_s for r in results], 50),
            "p95": percentile([r.wall_s for r in results], 95),
        },
        "parse_failure_rate": (sum(r.plan_failures for r in results) / attempts) if attempts else 0.0,
        "fallback_rate": sum(r.status == "fallback" for r in results) / n,
        "error_rate": sum(r.status == "error" for r in results) / n,
    }
    if not replay:
        lat = [r.latency_s for r in results]
        summary["latency_s"] = {"p50": percentile(lat, 50), "p95": percentile(lat, 95)}
    return summary


def build_report(
    methods: Sequence[Method],
    results: Mapping[str, Sequence[TaskResult]],
    *,
    replay: bool,
    config: Mapping[str, Any],
    replay_latency: bool = False,
) -> dict[str, Any]:
    """The report document (see the module docstring for the reference points). ``replay_latency``:
    the replayed matrix recorded latencies (``|latency_s``), so replay reports give latency too."""
    summaries = {m.name: summarize(results[m.name], replay=replay and not replay_latency) for m in methods}
    report: dict[str, Any] = {
        "podium_eval": REPORT_VERSION,
        "config": dict(config),
        "task_set": task_set(r.task_id for rows in results.values() for r in rows),
        "replay": replay,
        "scoring": (
            "replay: quality = recorded score of the worker that wrote the final answer; cost = every "
            "step's recorded cost; "
            + (
                "latency = critical path of the recorded request latencies plus the conductor's own planning"
                if replay_latency
                else "no latency"
            )
            + " (see podium.eval.replay)"
            + (
                "; on a workflow bank, plan and LM conductors are scored by their whole workflow, replayed "
                "step by step on the recorded steps (see podium.eval.bank_replay)"
                if config.get("bank")
                else ""
            )
            if replay
            else "live: the task's verifier on the final answer; latency = critical path of recorded call latencies"
        ),
        "methods": {
            m.name: {"conductor": m.conductor.name, "group": m.group, "param": m.param, "summary": summaries[m.name]}
            for m in methods
        },
        "reference": None,
        "curves": {},
        "slices": _slices(methods, results),
        "paired": _paired(methods, results, summaries, config.get("against")),
        "results": {m.name: [r.to_json() for r in results[m.name]] for m in methods},
    }
    _curves(report)
    return report


def _paired(
    methods: Sequence[Method],
    results: Mapping[str, Sequence[TaskResult]],
    summaries: Mapping[str, Any],
    against: str | None = None,
) -> dict[str, Any] | None:
    """Every method against ``against`` (default: the best single worker) on the same questions: the mean per-question
    score difference with its 95 % interval (:func:`~podium.eval.metrics.paired_difference`),
    and on how many questions it scored higher or lower. The baseline is the ``single:*`` method
    with the highest quality on these very questions (ties: the cheaper), which favours the
    baseline. None without a single worker or when methods answered other questions."""
    singles = [m.name for m in methods if m.name.startswith("single:")]
    if against is not None and against in summaries:
        best = against
    elif singles and len(methods) > 1:
        best = _strongest({n: summaries[n] for n in singles})
    else:
        return None
    base = {r.task_id: r.score for r in results[best]}
    out: dict[str, Any] = {"against": best, "methods": {}}
    for method in methods:
        if method.name == best:
            continue
        mine = {r.task_id: r.score for r in results[method.name]}
        if mine.keys() != base.keys():
            return None
        ids = sorted(base)
        out["methods"][method.name] = paired_summary([mine[i] for i in ids], [base[i] for i in ids])
    return out


def _strongest(summaries: Mapping[str, Any]) -> str:
    """The method of highest mean quality among ``summaries`` (ties: the cheaper, then the first)."""
    return max(summaries, key=lambda n: (summaries[n]["quality"]["mean"], -summaries[n]["cost_usd"]["mean"]))


def _point(name: str, summary: Mapping[str, Any]) -> Point:
    return Point(summary["cost_usd"]["mean"], summary["quality"]["mean"], name)


def _curves(report: dict[str, Any]) -> None:
    """Fill ``reference`` (weak/strong), per-method PGR, and AIQ/APGR/CPT per sweep group."""
    methods: dict[str, Any] = report["methods"]
    singles = {n: m["summary"] for n, m in methods.items() if n.startswith("single:")}
    if len(singles) < 2:
        return
    weak_name = min(singles, key=lambda n: (singles[n]["cost_usd"]["mean"], n))
    strong_name = _strongest(singles)
    weak, strong = _point(weak_name, singles[weak_name]), _point(strong_name, singles[strong_name])
    if strong.quality <= weak.quality or strong.cost <= weak.cost:
        report["reference"] = {
            "weak": weak_name,
            "strong": strong_name,
            "note": "no cost–quality gap; no curve metrics",
        }
        return
    report["reference"] = {"weak": weak_name, "strong": strong_name, "c_min": weak.cost, "c_max": strong.cost}
    for method in methods.values():
        method["pgr"] = pgr(method["summary"]["quality"]["mean"], weak.quality, strong.quality)
    groups: dict[str, list[Point]] = {}
    for name, method in methods.items():
        if method["group"]:
            groups.setdefault(method["group"], []).append(_point(name, method["summary"]))
        elif name not in singles:
            groups[name] = [_point(name, method["summary"])]
    for group, points in groups.items():
        report["curves"][group] = _curve_metrics(points, weak, strong)


def _curve_metrics(method_points: Sequence[Point], weak: Point, strong: Point) -> dict[str, Any]:
    """AIQ, APGR and CPT of the hull of the method's points together with weak and strong: a
    deployment can always mix in either single worker per request, so a method is credited
    with what it adds to that mix (a random router then scores APGR ≈ 0.5, as in RouteLLM)."""
    points = [*method_points, weak, strong]

    def usd(x: float | None) -> float | None:
        return None if x is None else weak.cost + x * (strong.cost - weak.cost)

    c50 = cpt(points, weak=weak, strong=strong, target=0.5)
    c80 = cpt(points, weak=weak, strong=strong, target=0.8)
    return {
        "points": [[p.cost, p.quality, p.label] for p in sorted(method_points, key=lambda p: p.cost)],
        "aiq": aiq(points, weak.cost, strong.cost),
        "apgr": apgr(points, weak=weak, strong=strong),
        "cpt50": c50,
        "cpt80": c80,
        "cpt50_usd": usd(c50),
        "cpt80_usd": usd(c80),
    }


def _slices(methods: Sequence[Method], results: Mapping[str, Sequence[TaskResult]]) -> dict[str, Any]:
    slices: dict[str, dict[str, Any]] = {}
    for method in methods:
        by_tag: dict[str, list[TaskResult]] = {}
        for r in results[method.name]:
            for tag in dict.fromkeys(r.tags):  # a result counts once per slice, even if a tag repeats
                by_tag.setdefault(tag, []).append(r)
        for tag, rs in by_tag.items():
            mean, low, high = mean_ci([r.score for r in rs])
            slices.setdefault(tag, {})[method.name] = {
                "n": len(rs),
                "quality": mean,
                "ci95": [low, high],
                "cost_usd": sum(r.cost_usd for r in rs) / len(rs),
            }
    return dict(sorted(slices.items()))


def write_report(report: Mapping[str, Any], out: Path, *, plot: bool = True, results: bool = True) -> list[Path]:
    """Write ``eval.json``, ``eval.md`` and (``plot``) ``pareto.png`` into ``out``; the paths.
    ``results=False`` leaves the per-request results out of ``eval.json`` (summaries, curves,
    slices and the question set stay: enough for the gate on the same questions, not for its
    flips or for comparing different question sets, :mod:`podium.eval.gate`)."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "eval.json", out / "eval.md"]
    kept = report if results else {k: v for k, v in report.items() if k != "results"}
    paths[0].write_text(json.dumps(kept, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    paths[1].write_text(markdown(report), encoding="utf-8")
    if plot:
        paths.append(pareto_png(report, out / "pareto.png"))
    return paths


def pareto_png(report: Mapping[str, Any], path: Path) -> Path:
    """Draw the report's cost–quality plot (:func:`podium.eval.plot.pareto_plot`: every method
    that is not a sweep point with its 95 % interval, each sweep group's curve, the Pareto front
    without the oracle) as a PNG at ``path``; returns ``path``.

    Raises MetricInputError when there is nothing to plot; ImportError without matplotlib."""
    from podium.eval.plot import MethodPoint, pareto_plot

    methods = report["methods"]
    standalone = [
        MethodPoint(
            n, m["summary"]["cost_usd"]["mean"], m["summary"]["quality"]["mean"], *m["summary"]["quality"]["ci95"]
        )
        for n, m in methods.items()
        if not m["group"]
    ]
    curves = {
        group: [Point(c, q, label) for c, q, label in curve["points"]]
        for group, curve in report["curves"].items()
        if len(curve["points"]) > 1
    }
    front = [_point(n, m["summary"]) for n, m in methods.items() if n != "oracle"]  # the oracle is an upper bound
    config = report.get("config", {})
    title = f"{config.get('tasks', '')} ({'replay' if report['replay'] else 'live'}, n={config.get('n', '?')})"
    return pareto_plot(path, standalone, curves=curves, title=title, front=front)


def _f(x: float | None, spec: str = ".3f") -> str:
    return "–" if x is None else format(x, spec)


def front_methods(report: Mapping[str, Any]) -> set[str]:
    """Names of the methods on the report's Pareto front of mean cost against mean quality (the
    oracle left out: it is an upper bound, not a method)."""
    points = [_point(n, m["summary"]) for n, m in report["methods"].items() if n != "oracle"]
    return {p.label for p in pareto_front(points)}


def markdown(report: Mapping[str, Any]) -> str:
    """The report as Markdown tables (methods, curves, slices)."""
    lines = [f"# podium eval: {report.get('config', {}).get('tasks', '')}", "", f"Scoring: {report['scoring']}.", ""]
    lines += [
        "| method | n | quality (95 % CI) | mean cost (USD) | total cost (USD) | calls | tokens in / out "
        "| latency p50 / p95 (s) | parse fail | fallback | front |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    methods = report["methods"]
    front = front_methods(report)
    for name, method in methods.items():
        s = method["summary"]
        lat = "–" if s["latency_s"] is None else f"{s['latency_s']['p50']:.1f} / {s['latency_s']['p95']:.1f}"
        lines.append(
            f"| {name} | {s['n']} | {s['quality']['mean']:.3f} ({s['quality']['ci95'][0]:.3f}–"
            f"{s['quality']['ci95'][1]:.3f}) | {s['cost_usd']['mean']:.6f} | {s['cost_usd']['total']:.4f} "
            f"| {s['worker_calls']:.2f} | {s['tokens']['input']:.0f} / {s['tokens']['output']:.0f} "
            f"| {lat} "
            f"| {s['parse_failure_rate']:.1%} | {s['fallback_rate']:.1%} | {'★' if name in front else ''} |"
        )
    ref = report.get("reference")
    if ref and report["curves"]:
        lines += [
            "",
            f"Curve metrics against weak = `{ref['weak']}` and strong = `{ref['strong']}` "
            "(each curve is the hull of the method's points with weak and strong; AIQ over the pool's cost "
            "range; APGR and CPT on normalised cost; see docs/eval.md).",
            "",
            "| curve | points | AIQ | APGR | CPT(50 %) | CPT(80 %) | CPT(50 %) USD | CPT(80 %) USD |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for label, m in report["curves"].items():
            lines.append(
                f"| {label} | {len(m['points'])} | {_f(m['aiq'])} | {_f(m['apgr'])} | {_f(m['cpt50'], '.1%')} "
                f"| {_f(m['cpt80'], '.1%')} | {_f(m['cpt50_usd'], '.6f')} | {_f(m['cpt80_usd'], '.6f')} |"
            )
    paired = report.get("paired")
    if paired and paired["methods"]:
        lines += [
            "",
            f"Paired against `{paired['against']}` (per question: method − it; 95 % interval of the mean difference):",
            "",
            "| method | quality − baseline (95 % CI) | questions higher | questions lower |",
            "|---|---|---|---|",
        ]
        for name, d in paired["methods"].items():
            low, high = d["ci95"]
            lines.append(f"| {name} | {d['diff']:+.3f} ({low:+.3f} to {high:+.3f}) | {d['higher']} | {d['lower']} |")
    names = [n for n, m in methods.items() if not m["group"]]
    if report["slices"] and names:
        lines += ["", "Quality per slice (tag):", "", "| tag | n | " + " | ".join(names) + " |"]
        lines.append("|---|---|" + "---|" * len(names))
        for tag, per in report["slices"].items():
            n = max(v["n"] for v in per.values())
            cells = [_f(per[name]["quality"]) if name in per else "–" for name in names]
            lines.append(f"| {tag} | {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def load_report(path: str | Path) -> dict[str, Any]:
    """Read an ``eval.json``; ConfigError naming the problem when it is not one."""
    file = Path(path)
    hint = "pass the eval.json that `podium eval --out DIR` wrote in DIR"
    if file.is_dir():
        raise ConfigError(f"{file} is a folder; {hint}")
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"no eval report at {file}; {hint}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read eval report {file}: {exc}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError):
        data = None
    if not isinstance(data, dict) or data.get("podium_eval") != REPORT_VERSION:
        raise ConfigError(f"{file} is not a podium eval report (version {REPORT_VERSION}); {hint}")
    return data
