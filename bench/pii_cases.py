"""Recall and precision of podium's offline PII detection, per entity type, and leaks.

On a JSONL case file (``{"id", "text", "entities": [{"type", "value"}]}``, default
``data/pii/cases.jsonl``) it counts, per entity type, detections whose type and text
match a listed entity exactly (true positives), detections that match none (false positives) and
listed entities not found (false negatives).

It then checks the privacy property directly — after pseudonymization, can a value still be read
in the masked text, and does restoring give the original back exactly — on four sets:

- ``as written``: the case texts;
- ``other forms``: the same texts with each value written another way (a CPR as ``DD.MM.YY-SSSS``
  and ``DD/MM/YY-SSSS``, an IBAN in lower case without spaces, a card with hyphens, a phone
  number regrouped, a name in capitals, an e-mail address in capitals);
- ``glued together``: per case with two or more values, its values glued with nothing between
  them (``Mette Kjærgaard070491-2846Vesterbrogade 112, …``);
- ``generated``: ``--generated`` texts (seed ``--seed``) from :mod:`podium.pii.samples` — 2–4
  values of any kind in any written form, glued or set in prose.

A value is *masked* when none of its letters and digits is left outside a placeholder (whatever
kind the placeholder has: a glued run may be covered as a whole); *leaked* when it can still be read in
the masked text (numbers: their digits in order whatever separates them; names: any token;
addresses: any word; e-mail addresses: the address or its local part before ``@``; see
:func:`podium.pii.samples.leaked`). Restoration is checked on the masked text and after a
simulated worker rewrote every placeholder (:func:`podium.pii.samples.alter_placeholders`).

With ``--probe FILE.jsonl`` it runs detection over the ``question`` field (``--probe-field``: others,
comma-separated) of a benchmark file (e.g. GSM8K) that has no real PII, and reports what was
flagged — false positives that would reach external workers as placeholders.

    PYTHONPATH=src python bench/pii_cases.py
    PYTHONPATH=src python bench/pii_cases.py --generated 1000 --seed 1
    PYTHONPATH=src python bench/pii_cases.py --probe data/benchmarks/gsm8k/test.jsonl --limit 500
    PYTHONPATH=src python bench/pii_cases.py --generated 0 --probe data/benchmarks/mbpp/mbpp.jsonl \
        --probe-field text,test_list --limit 974
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from podium.pii.detect import Detector
from podium.pii.mask import Pseudonymizer
from podium.pii.samples import Sample, alter_placeholders, glued_text, leaked
from podium.pii.vault import UnknownPlaceholder, Vault

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


def other_forms(case: dict[str, Any]) -> dict[str, Any]:
    """``case`` with each value written another way (see the module docstring); values whose
    kind has no other form here (addresses, IP addresses) stay as they are."""
    text, entities = case["text"], []
    for e in case["entities"]:
        new = _other_form(e["type"], e["value"])
        text = text.replace(e["value"], new)
        entities.append({"type": e["type"], "value": new})
    return {"id": case["id"] + "/other-forms", "text": text, "entities": entities}


def _other_form(kind: str, value: str) -> str:
    digits = re.sub(r"\D", "", value)
    if kind == "DK_CPR" and len(digits) == 10:
        return f"{digits[:2]}.{digits[2:4]}.{digits[4:6]}-{digits[6:]}"
    if kind == "IBAN_CODE":
        return re.sub(r"\s", "", value).lower()
    if kind == "CREDIT_CARD" and len(digits) == 16:
        return "-".join(digits[i : i + 4] for i in range(0, 16, 4))
    if kind == "PHONE_NUMBER":
        prefix = value[: value.index(" ")] + " " if value.startswith("+") else ""
        national = digits[len(re.sub(r"\D", "", prefix)) :]
        if len(national) == 8:
            return prefix + f"{national[:4]} {national[4:]}"
        return value
    if kind in ("PERSON", "EMAIL_ADDRESS"):
        return value.upper()
    return value


def glued_together(case: dict[str, Any]) -> dict[str, Any] | None:
    """A text of ``case``'s values glued with nothing between them, or None for fewer than two."""
    if len(case["entities"]) < 2:
        return None
    return {"id": case["id"] + "/glued", "text": "".join(e["value"] for e in case["entities"]),
            "entities": case["entities"]}  # fmt: skip


def generated(count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` texts of :func:`podium.pii.samples.glued_text`."""
    cases = []
    for i in range(count):
        text, samples = glued_text(random.Random(seed * 1_000_003 + i))
        cases.append({"id": f"generated-{i}", "text": text,
                      "entities": [{"type": x.kind, "value": x.text, "form": x.form} for x in samples]})  # fmt: skip
    return cases


def masking(cases: list[dict[str, Any]], pseudonymizer: Pseudonymizer, seed: int = 0) -> dict[str, Any]:
    """Per entity type: values listed, masked (no character outside a placeholder) and leaked
    (still readable); texts restored exactly, and restored exactly after a worker rewrote the
    placeholders (else failed closed, or wrong)."""
    listed: Counter[str] = Counter()
    masked_count: Counter[str] = Counter()
    leaked_count: Counter[str] = Counter()
    examples: list[str] = []
    unmasked: list[str] = []
    restored = rewritten_ok = failed_closed = 0
    seconds = 0.0
    for n, case in enumerate(cases):
        vault = Vault()
        started = time.perf_counter()
        vault.reserve_literals(case["text"])
        spans = [(d.start, d.end) for d in pseudonymizer.find(case["text"], vault)]
        masked, _ = pseudonymizer.mask(case["text"], vault)
        seconds += time.perf_counter() - started
        for e in case["entities"]:
            listed[e["type"]] += 1
            if _covered(case["text"], e["value"], spans):
                masked_count[e["type"]] += 1
            else:
                unmasked.append(f"{case['id']}: {e['type']} {e['value']!r} in {masked!r}")
            if leaked(Sample(e["type"], e["value"], e.get("form", "")), masked):
                leaked_count[e["type"]] += 1
                examples.append(f"{case['id']}: {e['type']} {e['value']!r} in {masked!r}")
        restored += vault.restore(masked) == case["text"]
        try:
            rewritten_ok += vault.restore(alter_placeholders(masked, random.Random(seed + n))) == case["text"]
        except UnknownPlaceholder:
            failed_closed += 1
    return {
        "texts": len(cases),
        "rows": [
            {"type": k, "listed": listed[k], "masked": masked_count[k], "leaked": leaked_count[k]}
            for k in sorted(listed)
        ],
        "leaked": sum(leaked_count.values()),
        "exact_restores": restored,
        "restores_after_rewrite": rewritten_ok,
        "failed_closed_after_rewrite": failed_closed,
        "ms_per_text": 1000 * seconds / max(1, len(cases)),
        "leak_examples": examples[:20],
        "unmasked_examples": unmasked[:20],
    }


def _covered(text: str, value: str, spans: list[tuple[int, int]]) -> bool:
    """Whether every occurrence of ``value`` in ``text`` has each letter and digit inside a span
    (separators and brackets carry no information)."""
    inside = bytearray(len(text))
    for start, end in spans:
        inside[start:end] = b"\x01" * (end - start)
    found = False
    for m in re.finditer(re.escape(value), text):
        found = True
        if any(not inside[i] and text[i].isalnum() for i in range(m.start(), m.end())):
            return False
    return found


def _as_text(value: Any) -> str:
    return "\n".join(str(v) for v in value) if isinstance(value, list) else str(value)


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.0f} %"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--cases", type=Path, default=ROOT / "data" / "pii" / "cases.jsonl")
    parser.add_argument("--generated", type=int, default=500, help="generated glued/split texts (0: none)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the generated texts")
    parser.add_argument("--probe", type=Path, help="a JSONL file with a 'question' field and no real PII")
    parser.add_argument(
        "--probe-field", default="question", help="probe: the field(s) to read, comma-separated (lists are joined)"
    )
    parser.add_argument("--limit", type=int, default=500, help="probe: first N questions")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    detector = Detector()
    started = time.perf_counter()
    detector.warm_up()
    report: dict[str, Any] = {"warm_up_s": time.perf_counter() - started}
    cases = _read(args.cases)
    report["cases"] = score_cases(cases, detector)
    pseudonymizer = Pseudonymizer(detector)
    with_values = [c for c in cases if c["entities"]]
    sets = {
        "as written": with_values,
        "other forms": [other_forms(c) for c in with_values],
        "glued together": [g for c in with_values if (g := glued_together(c)) is not None],
    }
    if args.generated:
        sets[f"generated ({args.generated})"] = generated(args.generated, args.seed)
    report["masking"] = {name: masking(texts, pseudonymizer, args.seed) for name, texts in sets.items()}
    if args.probe:
        fields = args.probe_field.split(",")
        texts = ["\n".join(_as_text(r[f]) for f in fields) for r in _read(args.probe)[: args.limit]]
        report["probe"] = probe(texts, detector)
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
        return 0
    c = report["cases"]
    print(f"{args.cases.name}: {c['cases']} texts, {c['entities']} listed entities; exact type and text\n")
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
    print(f"\ndetection: {c['ms_per_text']:.1f} ms per text (after a {report['warm_up_s']:.1f} s warm-up)")
    for m in c["mismatches"]:
        print(f"  mismatch: {m}")
    _print_masking(report["masking"])
    if "probe" in report:
        p = report["probe"]
        print(f"\nprobe {args.probe.name}: {p['texts_flagged']} of {p['texts']} texts flagged; by type {p['by_type']}")
        for kind, examples in p["examples"].items():
            print(f"  {kind}: {examples}")
    return 0


def _print_masking(results: dict[str, dict[str, Any]]) -> None:
    """The masking table: per entity type and set, values masked of values listed (recall)."""
    names = list(results)
    kinds = sorted({r["type"] for res in results.values() for r in res["rows"]})
    print("\nvalues masked (no letter or digit left outside a placeholder) of values listed, per set:\n")
    print("| entity type | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))

    def cell(res: dict[str, Any], kind: str | None) -> str:
        rows = [r for r in res["rows"] if kind is None or r["type"] == kind]
        listed, masked = sum(r["listed"] for r in rows), sum(r["masked"] for r in rows)
        return f"{masked}/{listed} ({_pct(masked / listed)})" if listed else "—"

    for kind in kinds:
        print(f"| {kind} | " + " | ".join(cell(results[n], kind) for n in names) + " |")
    print("| all | " + " | ".join(cell(results[n], None) for n in names) + " |")
    print("| **values leaked** | " + " | ".join(f"**{results[n]['leaked']}**" for n in names) + " |")
    print("| texts restored exactly | " + " | ".join(f"{results[n]['exact_restores']}/{results[n]['texts']}"
                                                  for n in names) + " |")  # fmt: skip
    print(
        "| … after the worker rewrote placeholders | "
        + " | ".join(f"{results[n]['restores_after_rewrite']}/{results[n]['texts']}" for n in names)
        + " |"
    )
    print("| masking, ms per text | " + " | ".join(f"{results[n]['ms_per_text']:.0f}" for n in names) + " |")
    for n in names:
        for example in results[n]["leak_examples"]:
            print(f"  leak ({n}): {example}")


if __name__ == "__main__":
    sys.exit(main())
