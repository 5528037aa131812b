#!/usr/bin/env python3
"""Compare two cost–quality curves of one ``podium eval`` report, at every cost.

    scripts/curve-gap.py EVAL.json REFERENCE CANDIDATE     # e.g. router light:plans@v1..v23

Each curve is what the report's AIQ and APGR integrate (docs/eval.md "Cost–quality curves"): the
non-decreasing concave hull (:func:`podium.eval.metrics.quality_hull`) of the curve's points
together with the weak and the strong single worker. For every operating point of REFERENCE it
prints the candidate's hull quality at that point's cost (linear interpolation,
:func:`podium.eval.metrics.hull_quality`) and the difference, then the largest shortfall of the
candidate's hull under the reference's over the whole cost range [weak, strong]: both hulls are
piecewise linear, so it is attained at a vertex of one of them, and every vertex is checked
(:func:`podium.eval.metrics.largest_shortfall`).
Prints Markdown.
"""

from __future__ import annotations

import sys

from podium.eval.metrics import Point, hull_quality, largest_shortfall, quality_hull
from podium.eval.report import load_report


def main(path: str, reference: str, candidate: str) -> int:
    report = load_report(path)
    ref = report["reference"]
    methods = report["methods"]

    def point(name: str) -> Point:
        s = methods[name]["summary"]
        return Point(s["cost_usd"]["mean"], s["quality"]["mean"], name)

    weak, strong = point(ref["weak"]), point(ref["strong"])
    curves = report["curves"]
    for name in (reference, candidate):
        if name not in curves:
            raise SystemExit(f"{path} has no curve {name!r}; it has {', '.join(curves)}")
    points = {n: [Point(c, q, label) for c, q, label in curves[n]["points"]] for n in (reference, candidate)}
    hulls = {n: quality_hull([*points[n], weak, strong]) for n in (reference, candidate)}
    print(f"| {reference} point | cost (USD) | its quality | {candidate} at that cost | difference |")
    print("|---|---|---|---|---|")
    for p in sorted(points[reference], key=lambda p: p.cost):
        other = hull_quality(hulls[candidate], p.cost)
        print(f"| {p.label} | {p.cost:.6f} | {p.quality:.4f} | {other:.4f} | {other - p.quality:+.4f} |")
    worst, at = largest_shortfall(points[reference], points[candidate], weak=weak, strong=strong)
    span = strong.cost - weak.cost
    for name in (reference, candidate):
        print(f"\n{name}: AIQ {curves[name]['aiq']:.4f}, APGR {curves[name]['apgr']:.4f}")
    if worst > 0:
        print(
            f"\nlargest shortfall of {candidate} under {reference}: {worst:.4f} at ${at:.6f} per request "
            f"({(at - weak.cost) / span:.1%} of the way from weak to strong)"
        )
    else:
        print(f"\n{candidate} is on or above {reference} at every cost (smallest margin {-worst:.4f} at ${at:.6f})")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    sys.exit(main(*sys.argv[1:]))
