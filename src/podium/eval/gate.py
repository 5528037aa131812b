"""The regression gate: a new eval report against a baseline report (``podium eval --baseline``).

Per method present in both reports, three checks:

- quality: new mean ≥ baseline mean − ``quality_drop`` (absolute, e.g. 0.02 = two points);
- mean cost per request (USD): new ≤ baseline · (1 + ``cost_rise``);
- p95 latency (seconds, when both reports have latency): new ≤ baseline · (1 + ``p95_rise``).

**Same questions.** A gate is only meaningful on the same questions. Reports record their question
set (``task_set``: count and a sha256 of the sorted task ids). When the sets differ (a team added
queries to its regression set), the checks are recomputed from the per-request results on the
questions both reports share, and the result says how many were left out; without per-request
results (``--summary-only``) in both reports that is impossible and the gate refuses (ConfigError)
rather than compare different questions. Reports written before ``task_set`` existed are
compared by their ids when they have results, else taken as they are.

**Flips.** With per-request results in both reports the gate also lists, per method, the
questions that were correct in the baseline and are not now (newly failing) and the reverse —
where a team looks first when quality drops.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from podium.errors import ConfigError
from podium.eval.metrics import percentile

__all__ = [
    "Check",
    "Flips",
    "GateMargins",
    "GateResult",
    "gate",
    "task_set",
]


@dataclass(frozen=True)
class GateMargins:
    """What counts as a regression against the baseline report.

    Attributes:
        quality_drop: absolute drop in mean quality allowed (e.g. 0.02 = two points).
        cost_rise: relative rise in mean cost per request allowed (0.10 = +10 %).
        p95_rise: relative rise in p95 latency allowed (0.25 = +25 %; reports with latency only).
    """

    quality_drop: float = 0.02
    cost_rise: float = 0.10
    p95_rise: float = 0.25


@dataclass(frozen=True)
class Check:
    """One metric of one method: baseline and new value (quality 0–1, cost USD, latency s)."""

    method: str
    metric: str
    baseline: float
    new: float
    ok: bool


@dataclass(frozen=True)
class Flips:
    """Task ids whose correctness changed between the baseline and the new report (sorted)."""

    newly_failing: tuple[str, ...]
    newly_passing: tuple[str, ...]


@dataclass
class GateResult:
    """The gate's verdict.

    Attributes:
        checks: every check, per shared method (a regression is a check with ``ok`` False).
        compared_on: questions the checks cover.
        only_new, only_baseline: questions in only one report (left out of the checks).
        unmatched_methods: methods in only one report (not gated).
        flips: per method, when both reports have per-request results.
    """

    checks: list[Check]
    compared_on: int
    only_new: int = 0
    only_baseline: int = 0
    unmatched_methods: list[str] = field(default_factory=list)
    flips: dict[str, Flips] = field(default_factory=dict)

    @property
    def regressions(self) -> int:
        return sum(not c.ok for c in self.checks)

    @property
    def methods(self) -> int:
        return len({c.method for c in self.checks})

    def to_json(self) -> dict[str, Any]:
        return {
            "regressions": self.regressions,
            "methods": self.methods,
            "compared_on": self.compared_on,
            "only_new": self.only_new,
            "only_baseline": self.only_baseline,
            "unmatched_methods": self.unmatched_methods,
            "checks": [asdict(c) for c in self.checks],
            "flips": {m: asdict(f) for m, f in self.flips.items()},
        }


def task_set(task_ids: Iterable[str]) -> dict[str, Any]:
    """What a report records of its questions: ``{"n": count, "sha256": digest of the sorted ids}``."""
    ids = sorted(set(task_ids))
    return {"n": len(ids), "sha256": hashlib.sha256("\n".join(ids).encode()).hexdigest()}


def gate(new: Mapping[str, Any], old: Mapping[str, Any], margins: GateMargins) -> GateResult:
    """Check ``new`` against the baseline ``old`` (both :func:`podium.eval.report.build_report`
    documents) within ``margins``.

    Raises ConfigError when the reports share no method, share no question, or ran on different
    questions without the per-request results needed to compare the shared ones.
    """
    shared = [n for n in new["methods"] if n in old["methods"]]
    if not shared:
        raise ConfigError("the baseline report shares no method with this one; compare like with like")
    unmatched = sorted(set(new["methods"]) ^ set(old["methods"]))
    new_ids, old_ids = _ids(new), _ids(old)
    if _same_questions(new, old, new_ids, old_ids):
        common = None  # the stored summaries cover the same questions
        compared, only_new, only_baseline = int(new["methods"][shared[0]]["summary"]["n"]), 0, 0
    elif new_ids is None or old_ids is None:
        raise ConfigError(
            "the two reports ran on different questions and one or both have no per-request results to "
            "compare the shared ones; rerun the baseline on the same questions, or write both reports without "
            "--summary-only"
        )
    else:
        common = new_ids & old_ids
        if not common:
            raise ConfigError("the baseline report shares no question with this one; compare like with like")
        compared, only_new, only_baseline = len(common), len(new_ids - common), len(old_ids - common)

    def figures(report: Mapping[str, Any], name: str) -> _Figures:
        return _summary(report, name) if common is None else _summary_on(report, name, common)

    both = new_ids is not None and old_ids is not None
    return GateResult(
        checks=[c for name in shared for c in _checks(name, figures(new, name), figures(old, name), margins)],
        compared_on=compared,
        only_new=only_new,
        only_baseline=only_baseline,
        unmatched_methods=unmatched,
        flips={name: _flips(new, old, name) for name in shared} if both else {},
    )


def _ids(report: Mapping[str, Any]) -> set[str] | None:
    """The report's task ids, from its per-request results (None: written with --summary-only)."""
    results = report.get("results") or {}
    if not results:
        return None
    return {r["task_id"] for rows in results.values() for r in rows}


def _same_questions(
    new: Mapping[str, Any], old: Mapping[str, Any], new_ids: set[str] | None, old_ids: set[str] | None
) -> bool:
    if new_ids is not None and old_ids is not None:
        return new_ids == old_ids
    a, b = new.get("task_set"), old.get("task_set")
    if a is None or b is None:  # a report from before task_set, without results: nothing to compare by
        return True
    return bool(a["sha256"] == b["sha256"])


@dataclass(frozen=True)
class _Figures:
    """What the gate checks of one method: quality (0–1), mean cost (USD), p95 latency (s)."""

    quality: float
    cost: float
    p95: float | None


def _summary(report: Mapping[str, Any], method: str) -> _Figures:
    s = report["methods"][method]["summary"]
    return _Figures(s["quality"]["mean"], s["cost_usd"]["mean"], s["latency_s"]["p95"] if s["latency_s"] else None)


def _summary_on(report: Mapping[str, Any], method: str, ids: set[str]) -> _Figures:
    """The gated figures recomputed from ``method``'s per-request results on the questions ``ids``."""
    rows = [r for r in report["results"][method] if r["task_id"] in ids]
    if not rows:
        raise ConfigError(f"method {method!r} has no per-request results on the questions both reports share")
    has_latency = bool(report["methods"][method]["summary"]["latency_s"])
    return _Figures(
        sum(r["score"] for r in rows) / len(rows),
        sum(r["cost_usd"] for r in rows) / len(rows),
        percentile([r["latency_s"] for r in rows], 95) if has_latency else None,
    )


def _checks(method: str, new: _Figures, old: _Figures, margins: GateMargins) -> list[Check]:
    checks = [
        Check(method, "quality", old.quality, new.quality, new.quality >= old.quality - margins.quality_drop - 1e-12),
        Check(method, "mean cost (USD)", old.cost, new.cost, new.cost <= old.cost * (1 + margins.cost_rise) + 1e-12),
    ]
    if old.p95 is not None and new.p95 is not None:
        ok = new.p95 <= old.p95 * (1 + margins.p95_rise) + 1e-9
        checks.append(Check(method, "p95 latency (s)", old.p95, new.p95, ok))
    return checks


def _flips(new: Mapping[str, Any], old: Mapping[str, Any], method: str) -> Flips:
    before = {r["task_id"]: bool(r["correct"]) for r in old["results"].get(method, [])}
    after = {r["task_id"]: bool(r["correct"]) for r in new["results"].get(method, [])}
    common = before.keys() & after.keys()
    return Flips(
        newly_failing=tuple(sorted(t for t in common if before[t] and not after[t])),
        newly_passing=tuple(sorted(t for t in common if after[t] and not before[t])),
    )
