"""The drift report (:func:`podium.traffic.drift.drift_report`) as Markdown: what ``podium
drift`` prints and ``--out`` writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from podium.traffic.drift_options import EXIT_INPUT, EXIT_OUTCOME

__all__ = ["mix", "report_markdown"]


def mix(shares: Mapping[str, float]) -> str:
    """The three largest shares, e.g. ``da 60% en 30% de 10%`` (``–`` for none)."""
    return " ".join(f"{k} {v:.0%}" for k, v in list(shares.items())[:3]) or "–"


def _f(value: Any, spec: str = ".3f") -> str:
    return "–" if value is None else format(value, spec)


def report_markdown(report: Mapping[str, Any]) -> str:
    """The report as Markdown: the windows, the alerts, one table of input shift and one of
    outcomes (a row per slice), then each slice's new terms, languages and formats."""
    ref_w, rec_w = report["windows"]["reference"], report["windows"]["recent"]
    code = report["exit_code"]
    verdict = {0: "no threshold crossed", EXIT_INPUT: "input shift", EXIT_OUTCOME: "outcome shift"}[code]
    lines = [
        "# Drift report",
        "",
        f"Recent window {rec_w[0]} → {rec_w[1]} against reference window {ref_w[0]} → {ref_w[1]}. "
        f"Embedding: {report['encoder'] or 'off'}. A slice needs {report['min_requests']} requests in each "
        "window to raise an alert.",
        "",
        f"**{len(report['alerts'])} alert(s): {verdict}** (exit {code}).",
        "",
    ]
    for a in report["alerts"]:
        lines.append(
            f"- `{a['slice']}` {a['kind']} · {a['metric']}: {a['value']:g} (threshold {a['threshold']:g}) {a['detail']}"
        )
    lines += [
        "",
        "## Input",
        "",
        "| slice | requests ref → recent | MMD² (adj. p) | mean-cos dist | unseen terms (excess) | language TVD | "
        "format Δ (which) | median chars |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, s in report["slices"].items():
        inp = s["input"]
        emb = inp["embedding"] or {}
        mmd = (
            f"{_f(emb.get('mmd2'), '.4f')} ({_f(emb.get('p_adjusted'), '.3f')})" if emb.get("mmd2") is not None else "–"
        )
        fmt = inp["format"]
        moved = _f(fmt["max_change"], ".2f") + (f" ({fmt['moved']})" if fmt["moved"] else "")
        chars = inp["median_chars"]
        cells = [
            f"`{name}`",
            f"{s['requests']['reference']} → {s['requests']['recent']}",
            mmd,
            _f(emb.get("mean_cosine_distance"), ".4f"),
            f"{_f(inp['unseen_terms']['rate'], '.3f')} ({_f(inp['unseen_terms']['excess'], '+.3f')})",
            _f(inp["language"]["tvd"], ".3f"),
            moved,
            f"{_f(chars['reference'], '.0f')} → {_f(chars['recent'], '.0f')}",
        ]
        lines.append(f"| {' | '.join(cells)} |")
    judge = report.get("judge")
    lines += ["", "## Outcomes", ""]
    if judge:
        lines += [
            f"Judge `{judge['worker']}` graded {judge['judged']} sampled answer(s) (up to {judge['per_slice']} per "
            f"slice and window; {judge['unscored']} reply(ies) without a score left out); its pass rate is not "
            "comparable with the labelled quality.",
            "",
        ]
    shadow = any(s["outcome"][w]["compared"] for s in report["slices"].values() for w in ("reference", "recent"))
    lines += [
        "| slice | quality (labelled) | judge pass rate (judged) | "
        + ("agreement with upstream (compared) | " if shadow else "")
        + "cost / request USD | p95 s | fallback rate | parse-failure rate | error rate |",
        "|---|---|---|---|---|---|---|---|" + ("---|" if shadow else ""),
    ]
    for name, s in report["slices"].items():
        ref, rec = s["outcome"]["reference"], s["outcome"]["recent"]

        def pair(key: str, spec: str, ref: Mapping[str, Any] = ref, rec: Mapping[str, Any] = rec) -> str:
            return f"{_f(ref[key], spec)} → {_f(rec[key], spec)}"

        quality = f"{pair('quality', '.3f')} ({ref['labelled']}, {rec['labelled']})"
        judged = f"{pair('judged_quality', '.3f')} ({ref['judged']}, {rec['judged']})" if judge else "–"
        agreed = [f"{pair('agreement', '.3f')} ({ref['compared']}, {rec['compared']})"] if shadow else []
        cells = [
            f"`{name}`",
            quality,
            judged,
            *agreed,
            pair("cost_usd", ".6f"),
            pair("p95_s", ".2f"),
            pair("fallback_rate", ".3f"),
            pair("parse_failure_rate", ".3f"),
            pair("error_rate", ".3f"),
        ]
        lines.append(f"| {' | '.join(cells)} |")
    lines += ["", "## Per slice", ""]
    for name, s in report["slices"].items():
        inp = s["input"]
        new = ", ".join(f"{t} ({n})" for t, n in inp["unseen_terms"]["new_terms"]) or "–"
        fmt_ref = ", ".join(f"{k} {v:.0%}" for k, v in inp["format"]["reference"].items() if v) or "prose"
        fmt_rec = ", ".join(f"{k} {v:.0%}" for k, v in inp["format"]["recent"].items() if v) or "prose"
        lines += [
            f"- `{name}`: new terms (recent requests using them): {new}; languages "
            f"{mix(inp['language']['reference'])} → {mix(inp['language']['recent'])}; formats {fmt_ref} → {fmt_rec}",
        ]
    return "\n".join(lines) + "\n"
