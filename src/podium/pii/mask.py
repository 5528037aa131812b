"""Pseudonymization: detected PII → the request's placeholders, with Presidio's AnonymizerEngine.

Before detection, every value the vault already holds is found again in the text — in any case
or spacing, digits with or without separators (and glued to letters), numeric values with their
digits reversed (a reversed CPR is still a CPR anyone can reverse back), and a known person's
first name or surname on its own — so a value seen once in a request stays masked in every later
step even where the analyzer alone would miss it. Every surface form gets a placeholder of its
own (``070491-2846`` and ``0704912846`` are ``<DK_CPR_1>`` and ``<DK_CPR_2>``), so restoration
gives back exactly what was written.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

from presidio_anonymizer import AnonymizerEngine
from presidio_anonymizer.entities import OperatorConfig
from presidio_anonymizer.entities import RecognizerResult as AnonymizerResult

from podium.pii.detect import Detection, Detector, resolve_overlaps
from podium.pii.vault import NUMERIC_KINDS, Vault

__all__ = ["Pseudonymizer"]


_SEPARATOR = r"[\s./\-\u2010-\u2015\u2212]?"
_NOT_LETTER_BEFORE, _NOT_LETTER_AFTER = r"(?<![^\W\d_])", r"(?![^\W\d_])"


def _known_patterns(vault: Vault) -> list[tuple[str, re.Pattern[str]]]:
    """(kind, pattern) for every value the vault holds, its variants included.

    Numbers match with any one separator between their characters and only digits as edges (a
    CPR glued to a name is still that CPR); names and addresses match in any case and spacing
    with letters as edges; other kinds need a word boundary."""
    patterns: list[tuple[str, re.Pattern[str]]] = []
    for entry in vault:
        if entry.kind in NUMERIC_KINDS:
            chars = re.sub(r"[\W_]", "", entry.value)
            forms = [chars, chars[::-1]] if len(chars) >= 6 and chars[::-1] != chars else [chars]
            for form in forms:
                body = _SEPARATOR.join(re.escape(c) for c in form)
                patterns.append((entry.kind, re.compile(rf"(?<![\d+])\+?{body}(?!\d)", re.IGNORECASE)))
            continue
        body = r"\s+".join(re.escape(w) for w in entry.value.split())
        if entry.kind in ("PERSON", "ADDRESS"):
            patterns.append((entry.kind, re.compile(rf"{_NOT_LETTER_BEFORE}{body}{_NOT_LETTER_AFTER}", re.IGNORECASE)))
        else:
            patterns.append((entry.kind, re.compile(rf"(?<![\w]){body}(?![\w])", re.IGNORECASE)))
        if entry.kind == "PERSON" and len(entry.value.split()) > 1:
            for part in entry.value.split():  # "Mette" alone, capitalised as in the full name
                if len(part) >= 3 and part[0].isupper() and part.isalpha():
                    pattern = re.compile(rf"{_NOT_LETTER_BEFORE}{re.escape(part)}{_NOT_LETTER_AFTER}")
                    patterns.append(("PERSON", pattern))
    return patterns


class Pseudonymizer:
    """Masks text with a request's vault.

    Args:
        detector: the analyzer (shared; thread-safe).
    """

    def __init__(self, detector: Detector) -> None:
        self.detector = detector
        self._anonymizer = AnonymizerEngine()  # type: ignore[no-untyped-call]

    def find(self, text: str, vault: Vault) -> list[Detection]:
        """What :meth:`mask` will replace, overlaps resolved, in text order: new detections
        (registered in the vault first, in reading order) and every vault value and variant
        (score 1.0), so a CPR and its reversed digits in the same text are both caught. Raises
        whatever the analyzer raises."""
        detected = self.detector.detect(text)
        for d in detected:
            vault.placeholder(d.kind, d.text)
        known = [
            Detection(kind, m.start(), m.end(), 1.0, m.group())
            for kind, pattern in _known_patterns(vault)
            for m in pattern.finditer(text)
        ]
        return resolve_overlaps([*known, *detected])

    def mask(self, text: str, vault: Vault) -> tuple[str, Counter[str]]:
        """``text`` with every detected value replaced by its placeholder, and the count of
        replacements per kind. Placeholders are issued in text order. Raises whatever the
        analyzer raises (callers fail closed)."""
        vault.reserve_literals(text)
        found = self.find(text, vault)
        if not found:
            return text, Counter()
        for d in found:  # variants found by the known-value pass get theirs now
            vault.placeholder(d.kind, d.text)

        def operator(kind: str) -> Callable[[str], str]:
            return lambda value: vault.placeholder(kind, value)

        result = self._anonymizer.anonymize(
            text=text,
            analyzer_results=[AnonymizerResult(d.kind, d.start, d.end, d.score) for d in found],
            operators={kind: OperatorConfig("custom", {"lambda": operator(kind)}) for kind in {d.kind for d in found}},
            merge_entities_with_spaces=False,
        )
        return str(result.text), Counter(d.kind for d in found)
