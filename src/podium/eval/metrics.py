"""Metrics of ``podium eval``: confidence intervals, percentiles, cost–quality frontiers.

Shapes and units used throughout:

* a **score** is one task's grade in [0, 1] (1 = solved); a method's **quality** is its mean score;
* a **cost** is a method's mean US dollars per request (``float``, USD, ≥ 0);
* a :class:`Point` is one operating point ``(cost, quality)`` — a baseline, or one setting of a
  router (e.g. one λ of a cost-penalty sweep).

Frontier metrics follow two papers:

* RouterBench (Hu et al. 2024, arXiv:2403.12031, §3): the *non-decreasing convex hull*
  :func:`quality_hull` and *Average Improvement in Quality* :func:`aiq`;
* RouteLLM (Ong et al. 2024, arXiv:2406.18665, evaluation metrics): *performance gap recovered*
  :func:`pgr`, its average :func:`apgr`, and *call-performance threshold* :func:`cpt`.

Integrals are exact (the hull is piecewise linear), never sampled. Only the standard library is
used, so ``podium eval`` needs no extra beyond the core install. Bad input raises
:class:`MetricInputError`, a :class:`~podium.errors.ConfigError` that is also a ``ValueError``.
"""

from __future__ import annotations

import itertools
import math
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

from podium.errors import ConfigError

__all__ = [
    "MetricInputError",
    "Point",
    "aiq",
    "apgr",
    "cpt",
    "cpt_usd",
    "hull_quality",
    "largest_shortfall",
    "mean_ci",
    "paired_difference",
    "paired_summary",
    "pareto_front",
    "percentile",
    "pgr",
    "quality_hull",
]


class MetricInputError(ConfigError, ValueError):
    """A metric was given input it cannot be computed from (empty, NaN, out of range, an empty
    interval). The caller's fault: the message names the argument and the fix."""


@dataclass(frozen=True)
class Point:
    """One operating point on the cost–quality plane.

    Raises MetricInputError when ``cost`` is negative or either value is not finite.
    """

    cost: float
    """Mean cost per request, US dollars (≥ 0)."""
    quality: float
    """Mean score over the task set (usually in [0, 1])."""
    label: str = ""
    """Name shown in tables and plots, e.g. ``"gpt-4o"`` or ``"router λ=0.3"``."""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.cost) and math.isfinite(self.quality)):
            raise MetricInputError(f"Point {self.label!r}: cost and quality must be finite, got {self!r}")
        if self.cost < 0:
            raise MetricInputError(f"Point {self.label!r}: cost is USD per request and cannot be negative")


# --- intervals and percentiles -----------------------------------------------------------------


def mean_ci(scores: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """Mean of ``scores`` with a two-sided confidence interval: ``(mean, low, high)``.

    ``scores``: per-task scores in [0, 1]. ``confidence``: in (0, 1); z = Φ⁻¹((1 + confidence)/2)
    (1.959964 at 0.95).

    * **Binary scores** (every score is 0 or 1): the Wilson score interval (Wilson 1927; the
      interval Brown, Cai & DasGupta 2001 recommend for small n), with p̂ the share of 1s::

          centre = (p̂ + z²/(2n)) / (1 + z²/n)
          half   = z / (1 + z²/n) · √(p̂(1−p̂)/n + z²/(4n²))

      It stays inside [0, 1] and is not degenerate at p̂ = 0 or 1 (e.g. 1/1 → [0.207, 1]).
    * **Other scores**: the normal approximation mean ± z·s/√n, s the sample standard deviation
      (n − 1 in the denominator), clipped to [0, 1]. It uses z, not Student's t, so for n < 30 it
      is somewhat narrow; and equal scores give a zero-width interval.
    * **A single non-binary score** x: s is undefined, so the interval is the whole score range,
      ``(x, 0.0, 1.0)`` — one sample says nothing about spread, and a zero-width interval would
      claim certainty (a single binary score gets Wilson's wide interval the same way).

    Raises MetricInputError for no scores, a score outside [0, 1] or NaN, or confidence ∉ (0, 1).
    """
    xs = [float(s) for s in scores]
    n = len(xs)
    if n == 0:
        raise MetricInputError("mean_ci: no scores — a confidence interval needs at least one score")
    if not 0.0 < confidence < 1.0:
        raise MetricInputError(f"mean_ci: confidence must be in (0, 1), got {confidence}")
    if not all(0.0 <= x <= 1.0 for x in xs):  # also rejects NaN
        bad = next(x for x in xs if not 0.0 <= x <= 1.0)
        raise MetricInputError(f"mean_ci: scores must lie in [0, 1], got {bad}")
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    mean = math.fsum(xs) / n
    if all(x in (0.0, 1.0) for x in xs):
        z2n = z * z / n
        centre = (mean + z2n / 2) / (1 + z2n)
        half = z / (1 + z2n) * math.sqrt(mean * (1 - mean) / n + z2n / (4 * n))
        # the exact interval contains p̂; at p̂ = 0 or 1 rounding can miss it by an ulp
        return mean, max(0.0, min(centre - half, mean)), min(1.0, max(centre + half, mean))
    if n == 1:
        return mean, 0.0, 1.0
    var = math.fsum((x - mean) ** 2 for x in xs) / (n - 1)
    half = z * math.sqrt(var / n)
    return mean, max(0.0, mean - half), min(1.0, mean + half)


def paired_difference(a: Sequence[float], b: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """Mean per-task difference ``a − b`` of two methods' scores on the same tasks, with a
    two-sided confidence interval: ``(mean, low, high)``.

    The normal approximation mean ± z·s/√n of the per-task differences (s with n − 1; with
    0/1 scores this is the usual interval for paired proportions). Pairing removes the
    between-question variance that each method's own interval (:func:`mean_ci`) carries, so two
    methods whose intervals overlap can still differ clearly. One task gives ``(d, d, d)``
    widened to the whole range ``(d, -1, 1)``, since one difference says nothing about spread.

    Raises MetricInputError for no scores, sequences of different lengths, a score outside
    [0, 1], or confidence ∉ (0, 1).
    """
    xs, ys = [float(x) for x in a], [float(y) for y in b]
    if not xs or len(xs) != len(ys):
        raise MetricInputError(
            f"paired_difference: needs two equally long, non-empty score lists (got {len(xs)} and {len(ys)})"
        )
    if not all(0.0 <= v <= 1.0 for v in (*xs, *ys)):  # also rejects NaN
        raise MetricInputError("paired_difference: scores must lie in [0, 1]")
    if not 0.0 < confidence < 1.0:
        raise MetricInputError(f"paired_difference: confidence must be in (0, 1), got {confidence}")
    diffs = [x - y for x, y in zip(xs, ys, strict=True)]
    n = len(diffs)
    mean = math.fsum(diffs) / n
    if n == 1:
        return mean, -1.0, 1.0
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    half = z * math.sqrt(math.fsum((d - mean) ** 2 for d in diffs) / (n - 1) / n)
    return mean, max(-1.0, mean - half), min(1.0, mean + half)


def paired_summary(a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    """:func:`paired_difference` of ``a − b`` as reports store it: ``diff``, ``ci95`` ([low,
    high]), and on how many tasks ``a`` scored ``higher`` and ``lower`` than ``b``. Same errors."""
    diff, low, high = paired_difference(a, b)
    pairs = list(zip(a, b, strict=True))
    return {
        "diff": diff,
        "ci95": [low, high],
        "higher": sum(x > y for x, y in pairs),
        "lower": sum(x < y for x, y in pairs),
    }


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile of ``values`` by linear interpolation between order statistics —
    numpy's default (``method="linear"``, Hyndman & Fan 1996 type 7), same arithmetic.

    With v sorted ascending and h = q/100 · (n − 1): v[⌊h⌋] + (h − ⌊h⌋)·(v[⌊h⌋+1] − v[⌊h⌋]).
    Units are those of ``values`` (e.g. seconds for latency p95: ``percentile(latencies, 95)``).

    Raises MetricInputError for no values, a non-finite value, or q outside [0, 100].
    """
    xs = sorted(float(v) for v in values)
    if not xs:
        raise MetricInputError("percentile: no values")
    if not all(math.isfinite(x) for x in xs):
        raise MetricInputError("percentile: values must be finite (no NaN or inf)")
    if not 0.0 <= q <= 100.0:  # also rejects NaN
        raise MetricInputError(f"percentile: q must be in [0, 100], got {q}")
    h = (q / 100) * (len(xs) - 1)
    lo = math.floor(h)
    hi = min(lo + 1, len(xs) - 1)
    a, b, t = xs[lo], xs[hi], h - lo
    # numpy's _lerp: interpolate from the nearer end, so t = 1 returns b exactly.
    return b - (b - a) * (1 - t) if t >= 0.5 else a + (b - a) * t


# --- frontiers ---------------------------------------------------------------------------------


def pareto_front(points: Sequence[Point]) -> list[Point]:
    """The non-dominated points, sorted by cost (ascending).

    p dominates r when p.cost ≤ r.cost and p.quality ≥ r.quality with at least one strict
    (lower cost and higher quality are better). Exact duplicates (same cost and quality) do not
    dominate each other, so all of them are kept, in input order. Along the result quality rises
    strictly with cost. No points → ``[]``.
    """
    front: list[Point] = []
    for p in sorted(points, key=lambda p: (p.cost, -p.quality)):
        # quality above every cheaper point's, or an exact duplicate of the last kept point
        if not front or p.quality > front[-1].quality or (p.quality, p.cost) == (front[-1].quality, front[-1].cost):
            front.append(p)
    return front


def quality_hull(points: Sequence[Point]) -> list[Point]:
    """RouterBench's non-decreasing convex hull (Hu et al. 2024, §3): the vertices of the upper
    concave envelope of ``points`` that is non-decreasing in cost, sorted by cost.

    Why concave: answering each request with operating point a with probability t and with b
    otherwise costs t·a.cost + (1−t)·b.cost and scores t·a.quality + (1−t)·b.quality on average,
    so every convex combination is achievable. Why non-decreasing: spending less than a budget is
    allowed, so a point with higher cost and lower quality than another adds nothing.

    Built as the upper monotone-chain hull (Andrew 1979) of :func:`pareto_front`. Points under a
    chord, and points on a chord between two vertices, are dropped; of exact duplicates the first
    in input order is kept. The vertices are input points (labels kept); cost and quality both
    rise strictly along them. No points → ``[]``; one point → that point.
    """
    hull: list[Point] = []
    for p in pareto_front(points):
        if hull and p.cost == hull[-1].cost:  # a duplicate (the front has no other equal costs)
            continue
        while len(hull) >= 2 and _cross(hull[-2], hull[-1], p) >= 0:
            hull.pop()  # hull[-1] lies on or under the chord hull[-2] → p
        hull.append(p)
    return hull


def _cross(o: Point, a: Point, b: Point) -> float:
    """z of (a − o) × (b − o): > 0 when a is under the chord o → b, 0 when on it."""
    return (a.cost - o.cost) * (b.quality - o.quality) - (a.quality - o.quality) * (b.cost - o.cost)


def hull_quality(hull: Sequence[Point], cost: float) -> float:
    """R̃(c): the quality reachable at mean cost ``cost`` (USD per request) on ``hull`` — as
    returned by :func:`quality_hull` (vertices with strictly increasing cost).

    * between two vertices: linear interpolation (the random mix of the two);
    * at or above the last vertex: the last vertex's quality (spending more is never required);
    * below the cheapest vertex: 0.0 — nothing is reachable there, so it scores as doing nothing.
      The step at the cheapest vertex is what makes :func:`aiq` over a range that starts below a
      method's cost penalise it.

    Raises MetricInputError for an empty hull, unsorted vertices, or a non-finite cost.
    """
    costs = _hull_costs(hull)
    if not math.isfinite(cost):
        raise MetricInputError(f"hull_quality: cost must be finite, got {cost}")
    i = bisect_right(costs, cost)
    if i == 0:
        return 0.0
    if i == len(hull):
        return hull[-1].quality
    a, b = hull[i - 1], hull[i]
    return a.quality + (cost - a.cost) / (b.cost - a.cost) * (b.quality - a.quality)


def largest_shortfall(
    reference: Sequence[Point], candidate: Sequence[Point], *, weak: Point, strong: Point
) -> tuple[float, float]:
    """How far ``candidate``'s curve falls below ``reference``'s at its worst, over the cost
    range [weak.cost, strong.cost] (USD per request): ``(gap, cost)``, the largest
    R̃_reference(c) − R̃_candidate(c) and the cost where it is attained. Each curve is
    :func:`quality_hull` of its points with ``weak`` and ``strong`` added (what :func:`aiq` and
    :func:`apgr` integrate); both hulls are piecewise linear, so every vertex of either is checked
    and the maximum is exact. A gap ≤ 0 means on or above everywhere (its size the smallest margin).

    Raises MetricInputError unless strong costs more and scores higher than weak.
    """
    _check_pair(weak, strong, "largest_shortfall")
    ref, cand = quality_hull([*reference, weak, strong]), quality_hull([*candidate, weak, strong])
    costs = sorted({v.cost for hull in (ref, cand) for v in hull if weak.cost <= v.cost <= strong.cost})
    return max((hull_quality(ref, c) - hull_quality(cand, c), c) for c in costs)


def _hull_costs(hull: Sequence[Point]) -> list[float]:
    if not hull:
        raise MetricInputError("the hull is empty: pass at least one point")
    costs = [v.cost for v in hull]
    if any(b <= a for a, b in itertools.pairwise(costs)):
        raise MetricInputError("hull vertices must have strictly increasing cost: pass quality_hull(points)")
    return costs


def _hull_integral(hull: Sequence[Point], lo: float, hi: float) -> float:
    """∫_lo^hi R̃(c) dc, exactly: R̃ is affine between consecutive breakpoints (the vertices and
    the bounds), so each piece's integral is its width times R̃ at its midpoint."""
    cuts = sorted({lo, hi, *(c for c in _hull_costs(hull) if lo < c < hi)})
    return math.fsum((b - a) * hull_quality(hull, (a + b) / 2) for a, b in itertools.pairwise(cuts))


def _nonempty(points: Sequence[Point], fn: str) -> list[Point]:
    hull = quality_hull(points)
    if not hull:
        raise MetricInputError(f"{fn}: no points — pass at least one operating point")
    return hull


def aiq(points: Sequence[Point], c_min: float, c_max: float) -> float:
    """Average Improvement in Quality (RouterBench, Hu et al. 2024, §3)::

        AIQ = 1/(c_max − c_min) · ∫_{c_min}^{c_max} R̃(c) dc

    with R̃ = :func:`hull_quality` of :func:`quality_hull` ``(points)``: the mean quality (score
    units) over a cost budget range in USD per request. Exact piecewise-linear integration.
    Costs below the cheapest point count as quality 0, above the last vertex as its quality;
    points outside [c_min, c_max] still shape the hull inside it. Compare methods over the same
    range (RouterBench: from the cheapest to the most expensive model in the pool).

    Raises MetricInputError for no points, non-finite bounds or c_max ≤ c_min.
    """
    if not (math.isfinite(c_min) and math.isfinite(c_max)):
        raise MetricInputError(f"aiq: c_min and c_max must be finite, got {c_min}, {c_max}")
    if c_max <= c_min:
        raise MetricInputError(f"aiq: need c_max > c_min, got [{c_min}, {c_max}]")
    hull = _nonempty(points, "aiq")
    return _hull_integral(hull, c_min, c_max) / (c_max - c_min)


def pgr(quality: float, weak: float, strong: float) -> float:
    """Performance gap recovered (RouteLLM, Ong et al. 2024)::

        PGR = (quality − weak) / (strong − weak)

    0 = the weak model's quality, 1 = the strong model's; not clipped (below 0 or above 1 when a
    method does worse than weak or better than strong). Raises MetricInputError when strong == weak.
    """
    if strong == weak:
        raise MetricInputError(f"pgr: strong and weak quality are equal ({strong}): there is no gap to recover")
    return (quality - weak) / (strong - weak)


def _check_pair(weak: Point, strong: Point, fn: str) -> None:
    if not strong.cost > weak.cost:
        raise MetricInputError(f"{fn}: the strong model must cost more than the weak one, got {strong} vs {weak}")
    if not strong.quality > weak.quality:
        raise MetricInputError(f"{fn}: the strong model must score higher than the weak one, got {strong} vs {weak}")


def apgr(points: Sequence[Point], *, weak: Point, strong: Point) -> float:
    """Average performance gap recovered (RouteLLM, Ong et al. 2024), over normalised cost::

        x(c)  = (c − weak.cost) / (strong.cost − weak.cost)        ∈ [0, 1]
        APGR  = ∫_0^1 PGR(R̃(x)) dx
              = PGR( 1/(strong.cost − weak.cost) · ∫_{weak.cost}^{strong.cost} R̃(c) dc )
              = pgr(aiq(points, weak.cost, strong.cost), weak.quality, strong.quality)

    (PGR is affine in quality, so it commutes with the average.) RouteLLM integrates over the
    share of calls sent to the strong model; for a two-model, single-step router whose per-request
    costs are constant, x equals that share, so the numbers agree. podium's multi-step workflows
    have no such share, hence cost.

    R̃ is the hull of ``points`` only: ``weak`` and ``strong`` define the scale and are not added
    — include them in ``points`` if the method can fall back to them (a router's λ sweep usually
    ends at both). Below the cheapest point R̃ = 0, i.e. PGR = −weak/(strong − weak) there.

    Raises MetricInputError for no points, or unless strong costs more and scores higher than weak.
    """
    _check_pair(weak, strong, "apgr")
    return pgr(aiq(points, weak.cost, strong.cost), weak.quality, strong.quality)


def cpt(points: Sequence[Point], *, weak: Point, strong: Point, target: float) -> float | None:
    """Call-performance threshold (RouteLLM, Ong et al. 2024) on normalised cost: the smallest
    x ∈ [0, 1] (x as in :func:`apgr`) at which the hull's PGR reaches ``target`` — e.g.
    ``target=0.5`` gives CPT(50%). Solved exactly on the linear hull segment that crosses the
    target quality weak.quality + target·(strong.quality − weak.quality).

    Returns None when the hull never reaches the target within [0, 1]. In USD per request:
    c = weak.cost + x·(strong.cost − weak.cost) — :func:`cpt_usd` returns that c, computed
    directly (converting x back can round to just below a vertex, where R̃ steps up).

    Raises MetricInputError for no points, a non-finite target, or unless strong costs more and
    scores higher than weak.
    """
    c = _cpt_cost(points, weak, strong, target, "cpt")
    return None if c is None else (c - weak.cost) / (strong.cost - weak.cost)


def cpt_usd(points: Sequence[Point], *, weak: Point, strong: Point, target: float) -> float | None:
    """:func:`cpt` in US dollars per request: the smallest cost c ∈ [weak.cost, strong.cost] at
    which the hull's PGR reaches ``target``, or None. Same errors as :func:`cpt`."""
    return _cpt_cost(points, weak, strong, target, "cpt_usd")


def _cpt_cost(points: Sequence[Point], weak: Point, strong: Point, target: float, fn: str) -> float | None:
    _check_pair(weak, strong, fn)
    if not math.isfinite(target):
        raise MetricInputError(f"{fn}: target must be finite, got {target}")
    hull = _nonempty(points, fn)
    lo, hi = weak.cost, strong.cost
    need = weak.quality + target * (strong.quality - weak.quality)
    if hull_quality(hull, lo) >= need:
        return lo
    # R̃ is non-decreasing from lo on (0 below the hull, then the hull), so the first vertex at or
    # above `need` closes the crossing segment; the cheapest vertex crosses by R̃'s step up to it.
    for i, v in enumerate(hull):
        if v.quality >= need:
            if i == 0:
                c = v.cost
            else:
                a = hull[i - 1]
                c = a.cost + (need - a.quality) / (v.quality - a.quality) * (v.cost - a.cost)
            c = max(c, lo)
            return c if c <= hi else None
    return None
