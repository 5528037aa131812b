"""Unicode facts that podium's text handling shares: which characters draw nothing.

One definition for every place that must read text as a person sees it — PII detection
(:func:`podium.pii.segment.visible_view`), placeholder restoration (:mod:`podium.pii.vault`),
the access boundary (:func:`podium.messages.neutralise`) and blank questions
(:func:`podium.orchestrator.is_blank`) — so that a character hidden from one is hidden from none.
"""

from __future__ import annotations

import unicodedata

__all__ = ["INVISIBLE_MARKS", "LATIN_LOOKALIKES", "is_invisible", "visible_characters"]

INVISIBLE_MARKS = frozenset(
    [0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x3164, 0xFFA0, *range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0)]
)
"""Code points outside category Cf that draw nothing: the combining grapheme joiner, Hangul
fillers, Khmer inherent vowels, variation selectors (VS1–VS256)."""


def is_invisible(ch: str) -> bool:
    """Whether the character ``ch`` draws nothing: a format character (Unicode category Cf —
    zero-width space, joiners, word joiner, soft hyphen, byte-order mark, bidirectional controls,
    tag characters) or one of :data:`INVISIBLE_MARKS`. Spaces are not invisible: they separate."""
    return unicodedata.category(ch) == "Cf" or ord(ch) in INVISIBLE_MARKS


def visible_characters(text: str) -> list[int] | None:
    """Offsets of the characters of ``text`` that are not invisible (:func:`is_invisible`), or
    None when it has no invisible character (the common case, checked fast for ASCII text). ``"".join(text[i] for i
    in offsets)`` is the text as a person reads it."""
    if text.isascii() or not any(is_invisible(c) for c in text):
        return None
    return [i for i, c in enumerate(text) if not is_invisible(c)]


LATIN_LOOKALIKES: dict[int, int] = str.maketrans(
    "АВЕКМНОРСТХУІЅЈԁаеорсухіѕјһԛԝΑΒΕΖΗΙΚΜΝΟΡΤΥΧονρτ",
    "ABEKMHOPCTXYISJdaeopcyxisjhqwABEZHIKMNOPTYXovpt",
)
"""Cyrillic and Greek letters drawn like Latin ones (``о`` U+043E for ``o``), one for one: read as
the Latin letter wherever text is matched against words (placeholder kinds, framing tags)."""
