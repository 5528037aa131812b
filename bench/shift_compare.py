"""The shift proof's final comparison (docs/loop.md, "The proof on a real shift"): paired
differences between methods of ``podium eval`` reports on the held-out "after" questions.

Several reports may be given — e.g. the live eval of the light conductors, the rule pipeline
and the single workers, and a replay on a workflow bank of the plan conductors — and are joined
by task id: the comparison keeps the questions every method answered (how many each method
answered beyond them is reported), and a question's slices are its ``use-case:*`` tags in any
report (a bank replay's rows carry none).

``podium eval`` gives each method's quality with its own 95 % interval; the methods answered the
same questions, so the comparison that counts is paired: per question, the retrained
conductor's score minus another method's, and the 95 % interval of that mean difference
(mean ± 1.96·s/√n of the per-question differences; with 0/1 scores, as the verifiers give here,
this is the normal approximation for paired proportions). Per slice (``use-case:*`` tag) and for
all questions, with the issue's target: the share of the gap between the old conductor and the
per-question best method (the best score any compared method got on that question) that the
retrained conductor recovers.

    .venv/bin/python bench/shift_compare.py runs/shift/final/eval.json [more eval.json ...] \
        --new light:shift@v2 --old light:shift@v1 --out docs/eval/shift/compare.md [--json compare.json]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from podium.eval.metrics import paired_difference


def compare(reports: Sequence[dict[str, Any]], new: str, old: str) -> dict[str, Any]:
    """Per slice: n, each method's mean quality and cost, the paired difference of ``new``
    against every other method, and the gap recovered, on the questions every method of
    ``reports`` answered. Raises KeyError for a method no report has, ValueError when a report
    has no per-request results, a method is in two reports, or no question is common to all."""
    by_method: dict[str, dict[str, dict[str, Any]]] = {}
    for report in reports:
        results: dict[str, list[dict[str, Any]]] = report.get("results") or {}
        if not results:
            raise ValueError("a report has no per-request results (run podium eval without --summary-only)")
        for m, rows in results.items():
            if m in by_method:
                raise ValueError(f"{m} is in two reports: keep it in one")
            by_method[m] = {r["task_id"]: r for r in rows}
    for name in (new, old):
        if name not in by_method:
            raise KeyError(f"no method {name!r} in the reports (they have {', '.join(by_method)})")
    ids = sorted(set.intersection(*(set(rows) for rows in by_method.values())))
    if not ids:
        raise ValueError("no question was answered by every method: nothing to pair")
    tags: dict[str, set[str]] = {t: set() for t in ids}
    for answered in by_method.values():
        for t in ids:
            tags[t] |= {g for g in answered[t].get("tags") or () if g.startswith("use-case:")}
    slices: dict[str, list[str]] = {"all": ids}
    for task_id in ids:
        for tag in sorted(tags[task_id]):
            slices.setdefault(tag, []).append(task_id)
    beyond = {m: len(rows) - len(ids) for m, rows in by_method.items() if len(rows) > len(ids)}
    out: dict[str, Any] = {
        "new": new,
        "old": old,
        "common_questions": len(ids),
        "answered_beyond": beyond,
        "slices": {},
    }
    for name, members in slices.items():
        score = {m: [float(by_method[m][t]["score"]) for t in members] for m in by_method}
        cost = {m: sum(float(by_method[m][t]["cost_usd"]) for t in members) / len(members) for m in by_method}
        best = [max(score[m][k] for m in by_method) for k in range(len(members))]
        mean = {m: sum(v) / len(v) for m, v in score.items()}
        q_best = sum(best) / len(best)
        gap = q_best - mean[old]
        out["slices"][name] = {
            "n": len(members),
            "quality": mean,
            "mean_cost_usd": cost,
            "per_question_best": q_best,
            "gap_recovered": (mean[new] - mean[old]) / gap if gap > 0 else None,
            "paired": {
                m: dict(zip(("diff", "low", "high"), paired_difference(score[new], score[m]), strict=True))
                for m in by_method
                if m != new
            },
        }
    return out


def markdown(result: dict[str, Any]) -> str:
    new, old = result["new"], result["old"]
    lines = [
        f"# Held-out 'after' questions: {new} against the others (paired)",
        "",
        f"Old conductor: `{old}`. Paired difference = {new}'s score minus the method's, per question; "
        "95 % interval mean ± 1.96·s/√n. Gap recovered = (new − old) / (per-question best − old).",
        "",
    ]
    if result.get("answered_beyond"):
        extra = ", ".join(f"{m} {n}" for m, n in result["answered_beyond"].items())
        lines += [
            f"Only the {result['common_questions']} questions every method answered are compared "
            f"(questions answered beyond them: {extra}).",
            "",
        ]
    for name, s in result["slices"].items():
        recovered = "–" if s["gap_recovered"] is None else f"{s['gap_recovered']:.2f}"
        lines += [
            f"## {name} (n = {s['n']})",
            "",
            f"Per-question best of these methods: {s['per_question_best']:.3f}; gap recovered: {recovered}",
            "",
            f"| method | quality | mean cost (USD) | {new} − method (95 % CI) |",
            "|---|---|---|---|",
        ]
        for m, q in s["quality"].items():
            if m == new:
                diff = "—"
            else:
                p = s["paired"][m]
                diff = f"{p['diff']:+.3f} ({p['low']:+.3f} … {p['high']:+.3f})"
            lines.append(f"| {m} | {q:.3f} | {s['mean_cost_usd'][m]:.6f} | {diff} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Paired differences of one method against the others in eval.json files."
    )
    parser.add_argument("reports", type=Path, nargs="+", help="eval.json of podium eval (with per-request results)")
    parser.add_argument("--new", required=True, help="the retrained conductor's method name")
    parser.add_argument("--old", required=True, help="the old conductor's method name")
    parser.add_argument("--out", type=Path, help="write the Markdown here too")
    parser.add_argument("--json", type=Path, help="write the figures as JSON here")
    args = parser.parse_args(argv)
    try:
        result = compare([json.loads(p.read_text(encoding="utf-8")) for p in args.reports], args.new, args.old)
    except (KeyError, ValueError) as exc:
        parser.error(str(exc).strip("'\""))
    text = markdown(result)
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
