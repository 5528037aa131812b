"""The statistics of ``podium drift`` (:mod:`podium.traffic.drift`, whose docstring gives the
method): the MMD² permutation test on question vectors, the mean vectors' cosine distance, the
unseen-term rate and its permutation test, language and format shares and their distances, and
the outcome summary of a window (cost per request in USD, p95 wall time in seconds, fallback,
parse-failure and error rates, mean quality of the labelled requests).

Seeded (``numpy.random.default_rng``): the same windows and options give the same numbers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from podium.eval.metrics import percentile
from podium.traffic.drift_options import DriftOptions
from podium.traffic.features import FORMATS, formats, terms
from podium.traffic.source import TrafficItem

__all__ = [
    "cosine_distance",
    "format_shares",
    "mmd_test",
    "outcomes",
    "sample",
    "shares",
    "tvd",
    "unseen_terms",
]


def mmd_test(
    x: npt.NDArray[np.float32], y: npt.NDArray[np.float32], *, permutations: int, seed: int
) -> tuple[float, float]:
    """(unbiased MMD², permutation p-value) of samples ``x`` (m × d) and ``y`` (n × d), m, n ≥ 2,
    with a Gaussian kernel of median-heuristic width (:mod:`podium.traffic.drift`)."""
    pooled = np.concatenate([x, y]).astype(np.float64)
    m, total = len(x), len(pooled)
    sq = np.sum(pooled**2, axis=1)
    dist2 = np.maximum(sq[:, None] + sq[None, :] - 2 * pooled @ pooled.T, 0.0)
    off = dist2[~np.eye(total, dtype=bool)]
    median = float(np.median(off[off > 0])) if np.any(off > 0) else 1.0
    kernel = np.exp(-dist2 / median)  # exp(-d² / (2σ²)) with σ² = median(d²) / 2
    np.fill_diagonal(kernel, 0.0)  # the unbiased estimator leaves out k(x_i, x_i)
    rng = np.random.default_rng(seed)
    labels = np.zeros((total, permutations + 1))
    labels[:m, 0] = 1.0
    for k in range(1, permutations + 1):
        labels[rng.permutation(total)[:m], k] = 1.0
    n = total - m
    kx = kernel @ labels  # column k: row sums of the kernel over that labelling's x side
    xx = np.sum(labels * kx, axis=0)
    xy = np.sum((1.0 - labels) * kx, axis=0)
    yy = kernel.sum() - xx - 2 * xy
    stats = xx / (m * (m - 1)) + yy / (n * (n - 1)) - 2 * xy / (m * n)
    observed = float(stats[0])
    p = (1 + int(np.sum(stats[1:] >= observed - 1e-12))) / (1 + permutations)
    return observed, p


def cosine_distance(x: npt.NDArray[np.float32], y: npt.NDArray[np.float32]) -> float:
    """1 − cosine similarity of the mean vectors of ``x`` (m × d) and ``y`` (n × d); 0 when either
    mean is the zero vector."""
    a, b = x.mean(axis=0), y.mean(axis=0)
    denom = float(np.linalg.norm(a) * np.linalg.norm(b))
    return 1.0 - float(a @ b) / denom if denom > 0 else 0.0


def shares(labels: Sequence[str]) -> dict[str, float]:
    """Each label's share of ``labels`` (0–1, 4 decimals), most common first; {} for none."""
    counts = Counter(labels)
    return {k: round(v / len(labels), 4) for k, v in counts.most_common()} if labels else {}


def tvd(p: Mapping[str, float], q: Mapping[str, float]) -> float:
    """Total variation distance of two share maps (0–1): half the sum of the absolute differences."""
    return 0.5 * sum(abs(p.get(k, 0.0) - q.get(k, 0.0)) for k in set(p) | set(q))


def format_shares(items: Sequence[TrafficItem]) -> dict[str, float]:
    """The share of ``items`` whose question has each format (:data:`~podium.traffic.features.FORMATS`),
    0–1, 4 decimals."""
    flags = [formats(i.question) for i in items]
    return {f: round(sum(f in s for s in flags) / len(items), 4) if items else 0.0 for f in FORMATS}


def _unseen_rate(words: Sequence[str], vocabulary: set[str]) -> float | None:
    return sum(1 for t in words if t not in vocabulary) / len(words) if words else None


def unseen_terms(
    reference: Sequence[TrafficItem], recent: Sequence[TrafficItem], opts: DriftOptions, enough: bool
) -> dict[str, Any]:
    """The unseen-term rate of ``recent`` against ``reference`` (:mod:`podium.traffic.drift`): ``rate`` on
    the whole windows, the ``new_terms`` most recent requests use, and (with ``enough``
    requests) the permutation test on the subsampled windows: ``expected`` (the mean rate over
    permuted labellings), ``excess`` (observed − expected) and ``p_value``."""
    ref_terms = [terms(i.question) for i in reference]
    rec_terms = [terms(i.question) for i in recent]
    vocabulary = {t for words in ref_terms for t in words}
    rate = _unseen_rate([t for words in rec_terms for t in words], vocabulary)
    spread = Counter(t for words in rec_terms for t in set(words) if t not in vocabulary)
    ranked = [[t, n] for t, n in sorted(spread.items(), key=lambda kv: (-kv[1], kv[0])) if n >= 2]
    new = (
        ranked[: opts.new_terms]
        if opts.mask is None
        else _unmasked(ranked, recent, rec_terms, opts.mask, opts.new_terms)
    )
    out: dict[str, Any] = {"rate": _round(rate), "expected": None, "excess": None, "p_value": None, "p_adjusted": None}
    out["new_terms"] = new
    if not enough or rate is None:
        return out
    rng = np.random.default_rng(opts.seed + 1)
    x = [ref_terms[k] for k in sample(len(ref_terms), opts.max_sample, rng)]
    y = [rec_terms[k] for k in sample(len(rec_terms), opts.max_sample, rng)]
    pooled, m = [*x, *y], len(x)

    def rate_of(order: Sequence[int]) -> float:
        vocab = {t for k in order[:m] for t in pooled[k]}
        return _unseen_rate([t for k in order[m:] for t in pooled[k]], vocab) or 0.0

    observed = rate_of(range(len(pooled)))
    permuted = [rate_of(rng.permutation(len(pooled)).tolist()) for _ in range(opts.permutations)]
    expected = sum(permuted) / len(permuted)
    p = (1 + sum(1 for r in permuted if r >= observed - 1e-12)) / (1 + len(permuted))
    out.update(expected=_round(expected), excess=_round(observed - expected), p_value=_round(p, 5))
    return out


def _unmasked(
    ranked: list[list[Any]],
    recent: Sequence[TrafficItem],
    rec_terms: list[list[str]],
    mask: Callable[[str], str],
    limit: int,
) -> list[list[Any]]:
    """The first ``limit`` of ``ranked`` that ``mask`` leaves standing in every recent question
    using them (each question masked once, and only when a candidate needs it)."""
    masked: dict[int, set[str]] = {}
    shown: list[list[Any]] = []
    for term, n in ranked:
        if len(shown) == limit:
            break
        users = [k for k, words in enumerate(rec_terms) if term in words]
        for k in users:
            if k not in masked:
                masked[k] = set(terms(mask(recent[k].question)))
        if all(term in masked[k] for k in users):
            shown.append([term, n])
    return shown


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def outcomes(
    items: Sequence[TrafficItem], scores: Mapping[str, float], judged: Mapping[str, float] | None = None
) -> dict[str, Any]:
    """A window's outcome summary: ``requests``; ``quality``, the mean score of the labelled requests
    (``scores``: ``origin`` → score in [0, 1]), and ``labelled``; ``judged_quality``, the judge's
    pass rate on the judged requests (``judged``: ``origin`` → 1.0 or 0.0), and ``judged``;
    ``agreement``, the mean agreement of podium's answer with the upstream's on shadow rows
    that have both (:func:`podium.serve.shadow_report.agreement`, as ``podium shadow report``
    computes it), and ``compared``; ``cost_usd``, mean per request (USD); ``p95_s``, wall time
    (seconds); ``fallback_rate``, ``parse_failure_rate``, ``error_rate`` (0–1). None where
    there is nothing to measure."""
    costs = [i.cost_usd for i in items if i.cost_usd is not None]
    agreed = _agreements(items)
    walls = [i.latency_s for i in items if i.latency_s is not None]
    labelled = [scores[i.origin] for i in items if i.origin in scores]
    passed = [judged[i.origin] for i in items if i.origin in judged] if judged else []
    n = len(items)
    return {
        "requests": n,
        "quality": round(sum(labelled) / len(labelled), 4) if labelled else None,
        "labelled": len(labelled),
        "judged_quality": round(sum(passed) / len(passed), 4) if passed else None,
        "judged": len(passed),
        "agreement": round(sum(agreed) / len(agreed), 4) if agreed else None,
        "compared": len(agreed),
        "cost_usd": sum(costs) / len(costs) if costs else None,
        "p95_s": round(percentile(walls, 95), 3) if walls else None,
        "fallback_rate": round(sum(i.fallback for i in items) / n, 4) if n else None,
        "parse_failure_rate": round(sum(i.parse_failures > 0 for i in items) / n, 4) if n else None,
        "error_rate": round(sum(i.status == "error" for i in items) / n, 4) if n else None,
    }


def _agreements(items: Sequence[TrafficItem]) -> list[float]:
    """Agreement in [0, 1] of podium's answer with the upstream's, per item that has both."""
    both = [i for i in items if i.answer and i.upstream_answer]
    if not both:
        return []
    from podium.serve.shadow_report import agreement

    rows = ({"podium_answer": i.answer, "upstream_answer": i.upstream_answer, "task_type": i.task_type} for i in both)
    return [a for a in map(agreement, rows) if a is not None]


def sample(n: int, cap: int, rng: np.random.Generator) -> npt.NDArray[np.int64]:
    """Sorted indices of ``cap`` of ``n`` items drawn without replacement by ``rng`` (all ``n`` when
    ``n <= cap``)."""
    return np.sort(rng.choice(n, size=cap, replace=False)) if n > cap else np.arange(n)
