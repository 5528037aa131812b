"""The promotion gate of trained conductors: evaluate a registry version on a held-out split
against baselines, and promote it iff the rule of :func:`podium.registry.promotion_verdict`
holds, recording the evidence in the registry.

``podium conductor eval | promote`` (:mod:`podium.train.conductor_cli`) and the retrain loop's
promote stage (:mod:`podium.loop.outcomes`) both call :func:`promote_version`; neither holds
any of the rule.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from podium.errors import ConfigError
from podium.registry import Registry, Version
from podium.train.reward import workflow_reward

__all__ = ["EXIT_REFUSED", "GateSpec", "Promotion", "decide", "eval_method", "evaluate_version", "promote_version"]

EXIT_REFUSED = 3
"""Exit status of ``podium conductor promote`` when the promotion is refused: the candidate did
not beat the current conductor's reward on the held-out split, or its quality fell more than the
guard allows."""

_Status = Callable[[str], AbstractContextManager[Any]]
"""Shows a message while a long step runs (e.g. ``rich.console.Console.status``)."""


@dataclass(frozen=True)
class GateSpec:
    """What the gate evaluates on and how strictly (``podium conductor eval | promote``'s options).

    Attributes:
        replay: the outcome matrix (CSV) whose split is evaluated.
        split: the held-out split (default ``test``).
        tags: only questions with one of these tags (empty: all).
        limit: only the first N questions (None: all; at least 1).
        lam: λ of the promotion reward, 1/USD (None: the candidate's training λ).
        max_quality_drop: the most mean quality the candidate may lose (None: the registry's
            default against a promoted version, no guard against a single worker).
        allow_quality_drop: promote even if the quality guard fails (logged as an override).
    """

    replay: Path
    split: str = "test"
    tags: tuple[str, ...] = ()
    limit: int | None = None
    lam: float | None = None
    max_quality_drop: float | None = None
    allow_quality_drop: bool = False


@dataclass(frozen=True)
class Promotion:
    """What ``podium conductor promote`` decided.

    Attributes:
        candidate: the version's ref (``light@v3``).
        against: what it was compared with: the promoted version's ref, or the best single
            worker (``single:NAME``) for a name never promoted.
        promoted: it is the promoted version now (recorded in the registry).
        already: it was the promoted version before (nothing compared or recorded).
        overridden: promoted only because of ``--allow-quality-drop``.
        line: the one line saying why, with λ, the costs and the data.
        report: the held-out eval report; ``folder``: where it is kept.
    """

    candidate: str
    against: str
    promoted: bool
    already: bool
    overridden: bool
    line: str
    report: dict[str, Any]
    folder: Path


def eval_method(version: Version) -> str:
    """The eval method name of a stored version: ``lm:REF`` (GRPO) or ``light:REF``."""
    return f"{'lm' if version.training().policy == 'lm' else 'light'}:{version.ref}"


def evaluate_version(
    candidate: Version, current: Version | None, spec: GateSpec, *, status: _Status | None = None
) -> tuple[dict[str, Any], Path]:
    """The held-out report of ``candidate`` (and ``current``, when another version) against the
    single workers and random, kept beside the version; (report, its folder).

    Raises ConfigError for a limit below 1, and what :func:`podium.eval.session.run_eval` raises."""
    from podium.eval.report import write_report
    from podium.eval.session import EvalSpec, run_eval

    if spec.limit is not None and spec.limit < 1:
        raise ConfigError(f"the question limit (--limit) must be at least 1, got {spec.limit}")
    methods = [eval_method(candidate), "single", "random"]
    if current is not None and current.number != candidate.number:
        methods.insert(1, eval_method(current))
    asked = EvalSpec(replay=spec.replay, split=spec.split, tags=spec.tags, methods=tuple(methods), limit=spec.limit)
    replay = Path(spec.replay)
    with (status or _quiet)(f"evaluating on {replay.name} ({spec.split})"):
        report = run_eval(asked)
    folder = candidate.path / "eval" / f"{replay.stem}-{spec.split}"
    write_report(report, folder, results=False)
    return report, folder


def promote_version(registry: Registry, ref: str, spec: GateSpec, *, status: _Status | None = None) -> Promotion:
    """Evaluate ``ref`` (its latest version for a bare name) on the held-out split of
    ``spec.replay`` and promote it iff the rule holds (:func:`decide`), recording the evidence in
    the registry. Raises ConfigError (unknown ref, bad spec) and what the evaluation raises."""
    candidate = registry.get(ref, bare="latest")
    current = registry.promoted(candidate.name)
    report, folder = evaluate_version(candidate, current, spec, status=status)
    return decide(registry, candidate, current, report, folder, spec)


def decide(
    registry: Registry,
    candidate: Version,
    current: Version | None,
    report: dict[str, Any],
    folder: Path,
    spec: GateSpec,
) -> Promotion:
    """Promote iff the candidate's held-out reward — the training objective, 0.5 + 0.5 · quality
    − λ · cost (USD), at the candidate's λ unless ``spec.lam`` — beats the current conductor's (for a
    name never promoted: the best single worker's by the same reward), and its quality, on the same
    questions, is not more than ``spec.max_quality_drop`` (default :data:`~podium.registry.QUALITY_MARGIN`)
    below the current promoted version's, unless ``spec.allow_quality_drop`` (the rule:
    :func:`~podium.registry.promotion_verdict`). The line says why."""
    from podium.registry import QUALITY_MARGIN, promotion_verdict

    methods = report["methods"]
    lam = spec.lam if spec.lam is not None else candidate.training().lam

    def reward(summary: dict[str, Any]) -> float:
        return workflow_reward(float(summary["quality"]["mean"]), float(summary["cost_usd"]["mean"]), lam=lam)

    cand = methods[eval_method(candidate)]["summary"]
    promoted = current is not None and current.number != candidate.number
    if current is not None and promoted:
        against_name = eval_method(current)
    else:
        singles = {n: m["summary"] for n, m in methods.items() if n.startswith("single:")}
        against_name = max(singles, key=lambda n: reward(singles[n]))
    if current is not None and current.number == candidate.number:
        line = f"{candidate.ref} is already the promoted version"
        return Promotion(candidate.ref, current.ref, True, True, False, line, report, folder)
    against = methods[against_name]["summary"]
    q_new, q_old = cand["quality"]["mean"], against["quality"]["mean"]
    c_new, c_old = cand["cost_usd"]["mean"], against["cost_usd"]["mean"]
    r_new, r_old = reward(cand), reward(against)
    verdict = promotion_verdict(
        candidate=candidate.ref,
        against=current.ref if current is not None and promoted else against_name,
        against_promoted=promoted,
        reward=(r_new, r_old),
        quality=(q_new, q_old),
        questions=int(cand["n"]),
        margin=spec.max_quality_drop,
        override=spec.allow_quality_drop,
    )
    details = f" · λ = {lam:g}; cost ${c_new:.6f} vs ${c_old:.6f}; {report['config'].get('tasks', '')}"
    against_ref = current.ref if current is not None and promoted else against_name
    if not verdict.promote:
        return Promotion(candidate.ref, against_ref, False, False, False, verdict.line + details, report, folder)
    margin = spec.max_quality_drop if spec.max_quality_drop is not None else (QUALITY_MARGIN if promoted else None)
    evidence = {
        "against": against_name,
        "split": spec.split,
        "data": report["config"].get("tasks", ""),
        "lam": lam,
        "candidate": {"quality": q_new, "cost_usd": c_new, "reward": r_new},
        "current": {"quality": q_old, "cost_usd": c_old, "reward": r_old},
        "max_quality_drop": margin,
        "quality_guard_overridden": verdict.overridden,
        "reason": verdict.line,
    }
    registry.promote(candidate, evidence=evidence)
    line = verdict.line + details
    return Promotion(candidate.ref, against_ref, True, False, verdict.overridden, line, report, folder)


def _quiet(_message: str) -> AbstractContextManager[Any]:
    return nullcontext()
