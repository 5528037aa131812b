"""``podium shadow report``: shadow runs compared with the upstream's answers, per use case.

Reads the shadow store's rows (:mod:`podium.store.shadow`, written by
:class:`~podium.serve.shadow.ShadowProxy`) and gives, per use case: counts by status, how far
podium's answers agree with the upstream's (:func:`agreement`, 0–1), quality of both where the
client sent a reference (:func:`correct`: the eval loop's verifiers), mean cost per request (USD),
latency (p50/p95 seconds), podium's workers and the largest disagreements
(:func:`shadow_report`); :func:`report_markdown` renders it. Needs no server: the UI and
``podium drift --source shadow`` use it too.
"""

from __future__ import annotations

import asyncio
import difflib
import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

from podium.eval.metrics import percentile

__all__ = ["agreement", "correct", "report_markdown", "shadow_report"]


def agreement(row: Mapping[str, Any]) -> float | None:
    """How far podium's answer agrees with the upstream's, in [0, 1], or None (plan mode, or
    no answer on either side).

    By ``task_type``: ``math`` — 1 when the final numbers (extracted as the eval loop does)
    are equal as numbers, ``choice`` — the same letter, ``exact`` — equal after normalisation; anything
    else — difflib's similarity ratio of the two texts (1 = identical).
    """
    ours, theirs = row.get("podium_answer"), row.get("upstream_answer")
    if not ours or not theirs:
        return None
    from podium.eval import verifiers

    task_type = row.get("task_type")
    if task_type == "math":
        a, b = verifiers.extract_math_answer(ours), verifiers.extract_math_answer(theirs)
        return float(a is not None and b is not None and _same_number(a, b))
    if task_type == "choice":
        a, b = verifiers.extract_choice(ours), verifiers.extract_choice(theirs)
        return float(a is not None and a == b)
    if task_type == "exact":
        return float(verifiers.normalize_exact(ours) == verifiers.normalize_exact(theirs))
    return difflib.SequenceMatcher(None, ours, theirs).ratio()


def _same_number(a: str, b: str) -> bool:
    try:
        return abs(float(a.replace(",", "")) - float(b.replace(",", ""))) < 1e-9
    except ValueError:
        return a.strip() == b.strip()


def correct(answer: str | None, row: Mapping[str, Any]) -> float | None:
    """1/0 when the row has a reference and a task type a rule can check (``math``, ``choice``,
    ``exact``; none given: ``exact``), else None — by the eval loop's own verifiers
    (:func:`podium.eval.verifiers.verify`: math-verify for math), so a shadow report's quality and
    ``podium eval``'s agree on the same answer.

    Raises ConfigError when math-verify, the ``eval`` extra, is missing."""
    reference, task_type = row.get("reference"), row.get("task_type") or "exact"
    if not answer or not reference or task_type not in ("math", "choice", "exact"):
        return None
    from podium.eval import verifiers
    from podium.eval.tasks import Task, TaskType

    kind = cast("TaskType", task_type)
    task = Task(str(row.get("id") or "shadow"), str(row.get("question") or ""), kind, reference=str(reference))
    return asyncio.run(verifiers.verify(task, answer)).score


def shadow_report(rows: Sequence[Mapping[str, Any]], *, top: int = 5) -> dict[str, Any]:
    """Per use case: counts by status, agreement, quality (where references exist), cost (USD)
    and latency (p50/p95 seconds) of upstream and podium, and the ``top`` largest disagreements."""
    by_case: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        by_case.setdefault(str(row["use_case"]), []).append(row)
    cases = {}
    for case, group in sorted(by_case.items()):
        done = [r for r in group if r["status"] == "done"]
        scored = [(agreement(r), r) for r in done]
        agree = [a for a, _ in scored if a is not None]
        worst = sorted(((a, r) for a, r in scored if a is not None), key=lambda x: x[0])[:top]
        cases[case] = {
            "requests": len(group),
            "statuses": {s: sum(1 for r in group if r["status"] == s) for s in sorted({r["status"] for r in group})},
            "agreement": _mean(agree),
            "compared": len(agree),
            "quality": {
                "upstream": _mean([q for r in done if (q := correct(r.get("upstream_answer"), r)) is not None]),
                "podium": _mean([q for r in done if (q := correct(r.get("podium_answer"), r)) is not None]),
                "with_reference": sum(1 for r in done if r.get("reference")),
            },
            "cost_usd": {
                "upstream_mean": _mean(
                    [r["upstream_cost_usd"] for r in done if r.get("upstream_cost_usd") is not None]
                ),
                "podium_mean": _mean([r["podium_cost_usd"] for r in done if r.get("podium_cost_usd") is not None]),
            },
            "latency_s": {
                side: _percentiles([r[f"{side}_latency_s"] for r in done if r.get(f"{side}_latency_s") is not None])
                for side in ("upstream", "podium")
            },
            "podium_workers": _worker_counts(done),
            "largest_disagreements": [
                {
                    "at": r["at"],
                    "request_id": r["request_id"],
                    "agreement": round(a, 3),
                    "question": _clip(r.get("question")),
                    "upstream_answer": _clip(r.get("upstream_answer")),
                    "podium_answer": _clip(r.get("podium_answer")),
                }
                for a, r in worst
            ],
        }
    return {"use_cases": cases, "rows": len(rows)}


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _percentiles(values: Sequence[float]) -> dict[str, float | None]:
    return {"p50": percentile(values, 50) if values else None, "p95": percentile(values, 95) if values else None}


def _worker_counts(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in rows:
        for w in json.loads(r.get("podium_workers") or "[]"):
            counts[w] = counts.get(w, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def _clip(text: str | None, limit: int = 160) -> str | None:
    if text is None:
        return None
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def report_markdown(report: Mapping[str, Any]) -> str:
    """The report as Markdown: one table of all use cases, then the disagreements per case."""

    def f(value: Any, spec: str = ".3f") -> str:
        return "–" if value is None else format(value, spec)

    lines = [
        "| use case | requests | by status | agreement | quality upstream | quality podium | cost upstream | "
        "cost podium | p50 / p95 upstream (s) | p50 / p95 podium (s) | podium's workers |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for case, c in report["use_cases"].items():
        lat_u, lat_p = c["latency_s"]["upstream"], c["latency_s"]["podium"]
        cells = [
            case,
            str(c["requests"]),
            ", ".join(f"{status} {n}" for status, n in c["statuses"].items()),  # failed and skipped runs too
            f(c["agreement"]),
            f(c["quality"]["upstream"]),
            f(c["quality"]["podium"]),
            f(c["cost_usd"]["upstream_mean"], ".6f"),
            f(c["cost_usd"]["podium_mean"], ".6f"),
            f"{f(lat_u['p50'], '.2f')} / {f(lat_u['p95'], '.2f')}",
            f"{f(lat_p['p50'], '.2f')} / {f(lat_p['p95'], '.2f')}",
            ", ".join(f"{w} ×{n}" for w, n in c["podium_workers"].items()) or "–",
        ]
        lines.append(f"| {' | '.join(cells)} |")
    for case, c in report["use_cases"].items():
        if not c["largest_disagreements"]:
            continue
        lines += ["", f"### Largest disagreements: {case}", "", "| agreement | question | upstream | podium | trace |"]
        lines.append("|---|---|---|---|---|")
        for d in c["largest_disagreements"]:
            cells = [str(d["agreement"]), d["question"] or "", d["upstream_answer"] or "", d["podium_answer"] or ""]
            cells = [x.replace("|", "\\|") for x in cells]
            lines.append(f"| {' | '.join(cells)} | {d['request_id']} |")
    return "\n".join(lines) + "\n"
