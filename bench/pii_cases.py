"""Recall and precision of podium's offline PII detection, per entity type.

On a JSONL case file (``{"id", "text", "entities": [{"type", "value"}]}``, default
``../shared/data/pii/cases.jsonl``) it counts, per entity type, detections whose type and text
match a listed entity exactly (true positives), detections that match none (false positives) and
listed entities not found (false negatives). It also checks the privacy property directly: after
pseudonymization, does any listed value still appear in the masked text ("leaks"), and does
restoring the masked text give the original back. With ``--probe FILE.jsonl`` it runs detection
over the ``question`` field of a benchmark file (e.g. GSM8K) that has no real PII, and reports
what was flagged — false positives that would reach external workers as placeholders.

    PYTHONPATH=src python bench/pii_cases.py
    PYTHONPATH=src python bench/pii_cases.py --probe ../shared/data/benchmarks/gsm8k/test.jsonl --limit 500
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from podium.pii.detect import Detector
from podium.pii.mask import Pseudonymizer
from podium.pii.vault import Vault

ROOT = Path(__file__).resolve().parent.parent


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def score_cases(cases: list[dict[str, Any]], detector: Detector) -> dict[str, Any]:
    """Per-type TP/FP/FN, leaks after masking, exact restores and detection time."""
    tp: Counter[str] = Counter()
    fp: Counter[str] = Counter()
    fn: Counter[str] = Counter()
    misses: list[str] = []
    leaks, restored, seconds = 0, 0, 0.0
    pseudonymizer = Pseudonymizer(detector)
    for case in cases:
        started = time.perf_counter()
        found = Counter((d.kind, d.text) for d in detector.detect(case["text"]))
        seconds += time.perf_counter() - started
        expected = Counter((e["type"], e["value"]) for e in case["entities"])
        for kind, value in found | expected:
            hit = min(found[(kind, value)], expected[(kind, value)])
            tp[kind] += hit
            fp[kind] += found[(kind, value)] - hit
            fn[kind] += expected[(kind, value)] - hit
            if found[(kind, value)] != expected[(kind, value)]:
                misses.append(
                    f"{case['id']}: {kind} {value!r} found {found[(kind, value)]}, listed {expected[(kind, value)]}"
                )
        vault = Vault()
        masked, _ = pseudonymizer.mask(case["text"], vault)
        leaks += sum(1 for e in case["entities"] if e["value"] in masked)
        restored += vault.restore(masked) == case["text"]
    types = sorted(set(tp) | set(fp) | set(fn))
    rows = []
    for kind in types:
        p = tp[kind] / (tp[kind] + fp[kind]) if tp[kind] + fp[kind] else None
        r = tp[kind] / (tp[kind] + fn[kind]) if tp[kind] + fn[kind] else None
        rows.append({"type": kind, "listed": tp[kind] + fn[kind], "tp": tp[kind], "fp": fp[kind], "fn": fn[kind],
                     "precision": p, "recall": r})  # fmt: skip
    return {
        "cases": len(cases),
        "entities": sum(len(c["entities"]) for c in cases),
        "rows": rows,
        "leaks": leaks,
        "exact_restores": restored,
        "ms_per_text": 1000 * seconds / max(1, len(cases)),
        "mismatches": misses,
    }


def probe(questions: list[str], detector: Detector) -> dict[str, Any]:
    """What detection flags in texts without real PII."""
    flagged: Counter[str] = Counter()
    examples: dict[str, list[str]] = {}
    texts_flagged = 0
    for q in questions:
        found = detector.detect(q)
        texts_flagged += bool(found)
        for d in found:
            flagged[d.kind] += 1
            examples.setdefault(d.kind, []).append(d.text)
    return {
        "texts": len(questions),
        "texts_flagged": texts_flagged,
        "by_type": dict(flagged),
        "examples": {k: v[:8] for k, v in examples.items()},
    }


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.0f} %"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--cases", type=Path, default=ROOT.parent / "shared" / "data" / "pii" / "cases.jsonl")
    parser.add_argument("--probe", type=Path, help="a JSONL file with a 'question' field and no real PII")
    parser.add_argument("--limit", type=int, default=500, help="probe: first N questions")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    detector = Detector()
    started = time.perf_counter()
    detector.warm_up()
    report: dict[str, Any] = {"warm_up_s": time.perf_counter() - started}
    report["cases"] = score_cases(_read(args.cases), detector)
    if args.probe:
        report["probe"] = probe([r["question"] for r in _read(args.probe)[: args.limit]], detector)
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
        return 0
    c = report["cases"]
    print(f"{args.cases.name}: {c['cases']} texts, {c['entities']} listed entities\n")
    print("| entity type | listed | found (TP) | false positives | missed | precision | recall |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in c["rows"]:
        cells = [r["type"], r["listed"], r["tp"], r["fp"], r["fn"], _pct(r["precision"]), _pct(r["recall"])]
        print("| " + " | ".join(str(x) for x in cells) + " |")
    total_tp = sum(r["tp"] for r in c["rows"])
    total_fp = sum(r["fp"] for r in c["rows"])
    total_fn = sum(r["fn"] for r in c["rows"])
    print(
        f"| all | {total_tp + total_fn} | {total_tp} | {total_fp} | {total_fn} | "
        f"{_pct(total_tp / max(1, total_tp + total_fp))} | {_pct(total_tp / max(1, total_tp + total_fn))} |"
    )
    print(f"\nvalues left in the masked text: {c['leaks']}; texts restored exactly: {c['exact_restores']}/{c['cases']}")
    print(f"detection: {c['ms_per_text']:.1f} ms per text (after a {report['warm_up_s']:.1f} s warm-up)")
    for m in c["mismatches"]:
        print(f"  mismatch: {m}")
    if "probe" in report:
        p = report["probe"]
        print(f"\nprobe {args.probe.name}: {p['texts_flagged']} of {p['texts']} texts flagged; by type {p['by_type']}")
        for kind, examples in p["examples"].items():
            print(f"  {kind}: {examples}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
