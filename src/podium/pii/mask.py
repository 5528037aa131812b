"""Pseudonymization: detected PII → the request's placeholders.

Before detection, every value the vault already holds is found again in the text — in any case
or spacing, digits with or without separators (and glued to letters), numeric values with their
digits reversed (a reversed CPR is still a CPR anyone can reverse back), and a known person's
first name or surname on its own — so a value seen once in a request stays masked in every later
step even where the analyzer alone would miss it (:func:`podium.pii.known.known_values`: one
pass over the text, whatever the vault holds). Every surface form gets a placeholder of its own
(``070491-2846`` and ``0704912846`` are ``<DK_CPR_1>`` and ``<DK_CPR_2>``), so restoration
gives back exactly what was written.

Masking is linear in the length of the text (plus the vault's size): detection runs in chunks
(:mod:`podium.pii.detect`), the known-value pass is one automaton scan, overlaps are resolved
over the covered characters (:func:`~podium.pii.detect.resolve_overlaps`) and the masked text
is built in one join.
"""

from __future__ import annotations

from collections import Counter

from podium.pii.detect import Detection, Detector, resolve_overlaps
from podium.pii.known import WorkCount, known_values
from podium.pii.vault import Vault

__all__ = ["Pseudonymizer"]


class Pseudonymizer:
    """Masks text with a request's vault.

    Args:
        detector: the analyzer (shared; thread-safe).
    """

    def __init__(self, detector: Detector) -> None:
        self.detector = detector

    def find(self, text: str, vault: Vault, work: WorkCount | None = None) -> list[Detection]:
        """What :meth:`mask` will replace, overlaps resolved, in text order: new detections
        (registered in the vault first, in reading order) and every vault value and variant
        (score 1.0), so a CPR and its reversed digits in the same text are both caught. Raises
        whatever the analyzer raises. ``work``, when given, counts the known-value pass's work
        (:class:`~podium.pii.known.WorkCount`)."""
        detected = self.detector.detect(text)
        for d in detected:
            vault.placeholder(d.kind, d.text)
        known = known_values(text, vault, work)
        return resolve_overlaps([*known, *detected])

    def mask(self, text: str, vault: Vault) -> tuple[str, Counter[str]]:
        """``text`` with every detected value replaced by its placeholder, and the count of
        replacements per kind. Placeholders are issued in text order. Raises whatever the
        analyzer raises (callers fail closed)."""
        vault.reserve_literals(text)
        found = self.find(text, vault)
        if not found:
            return text, Counter()
        pieces: list[str] = []
        at = 0
        for d in found:  # non-overlapping, in text order
            pieces.append(text[at : d.start])
            pieces.append(vault.placeholder(d.kind, d.text))
            at = d.end
        pieces.append(text[at:])
        return "".join(pieces), Counter(d.kind for d in found)
