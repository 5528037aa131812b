"""PII detection with Presidio's AnalyzerEngine, fully offline.

Presidio normally loads a spaCy NER model, which cannot be downloaded here (no model hubs). The
engine below runs on a *blank* spaCy pipeline per language (tokenizer only, shipped inside spaCy)
and registers only recognizers that need no NER: podium's own (:mod:`podium.pii.recognizers`)
plus Presidio's IP recognizer. Lemmas are the lowercased tokens, so Presidio's context words
("cpr", "tlf", ...) still raise scores.

The text as read: a text with invisible characters, combining marks or whitespace runs between
digit groups is analysed once more as a person reads it (:func:`podium.pii.segment.reading_view`:
invisible characters left out, NFD letters composed, stray marks left out, a tab, line break or
several spaces between digit groups one space), so ``0704\u200b912846``, ``070491\\t2846`` and
``Ju\u0308rgen`` are the CPR and the name they read as.

Glued values: each text is analysed as written and, when it has glue points, once more as its
segmented view (:mod:`podium.pii.segment`: boundaries inserted between ``a@x.dk`` and
``b@y.dk``, a card number and a CPR, ``Kjærgaard`` and ``0704912846``, ...); the view's spans are
mapped back to the text and both sets of detections are merged.

A text longer than :data:`CHUNK_CHARS` is analysed in overlapping chunks, so that detection
stays linear in the length of the text.

Overlapping detections are resolved before anything is replaced: the higher score wins, then
the longer span, then the more specific kind (:data:`KIND_PRIORITY`). A detection that loses
keeps the part of it that no winner covers (trimmed of spaces and sentence punctuation), so the union of
what was detected is always masked — no character of a value reaches a worker because a
neighbour's detection overlapped it.
"""

from __future__ import annotations

import dataclasses
import re
import threading
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from podium.errors import ConfigError
from podium.pii._presidio import (
    AnalyzerEngine,
    IpRecognizer,
    NlpArtifacts,
    RecognizerRegistry,
    RecognizerResult,
    SpacyNlpEngine,
    spacy,
)
from podium.pii.recognizers import (
    AddressRecognizer,
    CardNumberRecognizer,
    CprRecognizer,
    GluedNumberRecognizer,
    IbanCodeRecognizer,
    OfflineEmailRecognizer,
    PersonNameRecognizer,
    PhoneNumberRecognizer,
)
from podium.pii.segment import SegmentedView, read_lookalikes, reading_view, segmented_view
from podium.pii.vault import ENTITY_TYPES

__all__ = [
    "CHUNK_CHARS",
    "CHUNK_OVERLAP",
    "KIND_PRIORITY",
    "Detection",
    "Detector",
    "fold_separators",
    "resolve_overlaps",
]

KIND_PRIORITY: tuple[str, ...] = (
    "DK_CPR",
    "IBAN_CODE",
    "CREDIT_CARD",
    "EMAIL_ADDRESS",
    "IP_ADDRESS",
    "PHONE_NUMBER",
    "ADDRESS",
    "PERSON",
)
"""Tie-break between overlapping detections of equal score and length: earlier wins."""


@dataclass(frozen=True)
class Detection:
    """One detected entity.

    Attributes:
        kind: entity type (one of :data:`~podium.pii.vault.ENTITY_TYPES`).
        start, end: character offsets in the analysed text (end exclusive).
        score: the recognizer's confidence in [0, 1] after context enhancement.
        text: ``text[start:end]``.
    """

    kind: str
    start: int
    end: int
    score: float
    text: str


_TRIM = " \t\r\n.,;:!?"  # spaces and sentence punctuation; brackets may be a value's own: (969) 741-3884


def resolve_overlaps(detections: Iterable[Detection]) -> list[Detection]:
    """Non-overlapping detections in text order: among overlapping ones the highest score wins,
    then the longest span, then the kind earlier in :data:`KIND_PRIORITY`. What a losing
    detection covers beyond the winners is kept as a detection of its kind (trimmed of spaces
    and sentence punctuation; dropped when no letter or digit is left: a bracket alone says
    nothing).

    Time O(k log k + the characters the detections cover): each detection reads and marks the
    characters it spans, never the other detections."""

    def rank(d: Detection) -> tuple[float, int, int, int]:
        priority = KIND_PRIORITY.index(d.kind) if d.kind in KIND_PRIORITY else len(KIND_PRIORITY)
        return (-d.score, -(d.end - d.start), priority, d.start)

    ranked = sorted(detections, key=rank)
    if not ranked:
        return []
    taken = bytearray(max(d.end for d in ranked))  # 1: the character is a kept detection's
    kept: list[Detection] = []
    for d in ranked:
        if not any(taken[d.start : d.end]):
            kept.append(d)
            taken[d.start : d.end] = b"\x01" * (d.end - d.start)
            continue
        at = d.start
        while at < d.end:
            while at < d.end and taken[at]:
                at += 1
            start = at
            while at < d.end and not taken[at]:
                at += 1
            if at == start:
                continue
            piece = d.text[start - d.start : at - d.start]
            left = len(piece) - len(piece.lstrip(_TRIM))
            right = len(piece.rstrip(_TRIM))
            if right > left and any(c.isalnum() for c in piece[left:right]):
                kept.append(Detection(d.kind, start + left, start + right, d.score, piece[left:right]))
                taken[start + left : start + right] = b"\x01" * (right - left)
    return sorted(kept, key=lambda d: d.start)


class _BlankSpacyEngine(SpacyNlpEngine):
    """Presidio's spaCy engine on ``spacy.blank(lang)``: tokens, no model download, no NER."""

    def __init__(self, languages: Sequence[str]) -> None:
        super().__init__(models=[{"lang_code": lang, "model_name": f"blank:{lang}"} for lang in languages])

    def load(self) -> None:
        self.nlp = {m["lang_code"]: spacy.blank(m["lang_code"]) for m in self.models}  # type: ignore[assignment]

    def _doc_to_nlp_artifact(self, doc: Any, language: str) -> NlpArtifacts:
        return NlpArtifacts(
            entities=[],
            tokens=doc,
            tokens_indices=[t.idx for t in doc],
            lemmas=[t.lower_ for t in doc],  # no lemmatizer in a blank pipeline
            nlp_engine=self,
            language=language,
            scores=[],
        )


def _fold_char(ch: str) -> str:
    if ch.isascii():
        return ch
    category = unicodedata.category(ch)
    if category == "Zs":  # no-break, thin, figure, ideographic … spaces
        return " "
    if category == "Pd" or ch == "\u2212":  # hyphens and dashes, the minus sign
        return "-"
    digit = unicodedata.decimal(ch, None)  # full-width, Arabic-Indic, Devanagari … digits
    if digit is not None:
        return str(digit)
    wide = unicodedata.normalize("NFKC", ch)  # full-width letters and signs (＠, Ａ, ．)
    return wide if len(wide) == 1 and wide.isascii() and wide.isprintable() else ch


_FOLD_CACHE: dict[str, str] = {}


_DIGIT_UNDERSCORE = re.compile(r"(?<=\d)_(?=\d)")


def fold_separators(text: str) -> str:
    """``text`` with spaces, dashes and digits written in other scripts or widths replaced by
    their ASCII forms, an underscore between two digits by a hyphen, and Cyrillic or Greek
    letters drawn like Latin ones (:func:`podium.pii.segment.read_lookalikes`) by those Latin letters
    inside a word that has Latin letters too, one character for one (so an offset in the result
    is the same offset in ``text``): detection then sees ``070491\u00a02846``, ``070491_2846``,
    ``０７０４９１－２８４６`` and ``M\u0435tte`` (a Cyrillic ``е``) as the CPR and the name
    they read as. A word wholly in Cyrillic or Greek is left as it is (``Мама`` is Russian, not
    a look-alike). Linear."""
    if not text.isascii():
        out = []
        for ch in text:
            folded = _FOLD_CACHE.get(ch)
            if folded is None:
                folded = _FOLD_CACHE[ch] = _fold_char(ch)
            out.append(folded)
        text = "".join(out)
        text = read_lookalikes(text)
    return _DIGIT_UNDERSCORE.sub("-", text) if "_" in text else text


class Detector:
    """Finds PII in text with an offline Presidio analyzer.

    Args:
        entities: the entity types to look for (default: all of ``ENTITY_TYPES``).
        languages: spaCy language codes to analyse each text in (context words exist for
            ``da`` and ``en``); results of all languages are merged.
        score_threshold: detections scoring below it are dropped, in [0, 1].

    The analyzer is built on first use (importing spaCy and Presidio takes seconds) and shared
    by threads. Raises ConfigError for an unknown entity type or a language spaCy lacks.
    """

    def __init__(
        self,
        entities: Sequence[str] = ENTITY_TYPES,
        languages: Sequence[str] = ("da", "en"),
        score_threshold: float = 0.5,
    ) -> None:
        unknown = sorted(set(entities) - set(ENTITY_TYPES))
        if unknown:
            raise ConfigError(f"unknown PII entity type(s) {', '.join(unknown)}; known: {', '.join(ENTITY_TYPES)}")
        if not languages:
            raise ConfigError("PII detection needs at least one language (e.g. languages = ['da', 'en'])")
        self.entities = tuple(entities)
        self.languages = tuple(languages)
        self.score_threshold = score_threshold
        self._engine: AnalyzerEngine | None = None
        self._lock = threading.Lock()

    def _analyzer(self) -> AnalyzerEngine:
        with self._lock:
            if self._engine is None:
                try:
                    nlp = _BlankSpacyEngine(self.languages)
                    nlp.load()
                except (ImportError, OSError, KeyError) as exc:
                    raise ConfigError(f"spaCy has no blank pipeline for {self.languages}: {exc}") from None
                registry = RecognizerRegistry(supported_languages=list(self.languages))
                for lang in self.languages:
                    for recognizer in (
                        CprRecognizer(lang),
                        PhoneNumberRecognizer(lang),
                        OfflineEmailRecognizer(lang),
                        PersonNameRecognizer(lang),
                        AddressRecognizer(lang),
                        IbanCodeRecognizer(lang),
                        CardNumberRecognizer(lang),
                        GluedNumberRecognizer(lang),
                        IpRecognizer(supported_language=lang),
                    ):
                        registry.add_recognizer(recognizer)
                self._engine = AnalyzerEngine(
                    registry=registry, nlp_engine=nlp, supported_languages=list(self.languages)
                )
            return self._engine

    def warm_up(self) -> None:
        """Build the analyzer now (seconds) instead of on the first call."""
        self.detect("warm-up")

    def detect(self, text: str) -> list[Detection]:
        """Non-overlapping PII detections in ``text``, in text order (see :func:`resolve_overlaps`),
        from the text as written and from its segmented view (glued values).

        Raises whatever Presidio raises; callers that send data out treat any exception as a
        detection failure and fail closed.
        """
        if not text.strip():
            return []
        plain = fold_separators(text)  # one character for one: every offset holds in ``text``
        found = [dataclasses.replace(d, text=text[d.start : d.end]) for d in self._analyze(plain)]
        reading = reading_view(plain)
        if reading is not None:  # only the chunks where something was left out, composed or collapsed differ
            found += self._from_view(text, reading, reading.differs)
        glued = segmented_view(plain if reading is None else reading.text)
        if glued is not None:  # only the chunks with a boundary in them differ from the text
            view = glued if reading is None else reading.then(glued)
            found += self._from_view(text, view, glued.differs)
        return resolve_overlaps(found)

    def _from_view(self, text: str, view: SegmentedView, only: Callable[[int, int], bool]) -> list[Detection]:
        """Detections in ``view`` (chunks that ``only`` accepts), as spans of ``text``."""
        found = []
        for d in self._analyze(view.text, only=only):
            span = view.span(d.start, d.end)
            if span is not None:
                start, end = span
                found.append(Detection(d.kind, start, end, d.score, text[start:end]))
        return found

    def _analyze(self, text: str, only: Callable[[int, int], bool] | None = None) -> list[Detection]:
        """Presidio's detections in each language, chunk by chunk (:func:`_chunks`); with
        ``only``, just the chunks (start, end) it accepts."""
        engine = self._analyzer()
        found: list[Detection] = []
        for offset, chunk in _chunks(text):
            if only is not None and not only(offset, offset + len(chunk)):
                continue
            for lang in self.languages:
                results: list[RecognizerResult] = engine.analyze(
                    text=chunk, language=lang, entities=list(self.entities), score_threshold=self.score_threshold
                )
                found += [
                    Detection(r.entity_type, offset + r.start, offset + r.end, float(r.score), chunk[r.start : r.end])
                    for r in results
                ]
        return found


CHUNK_CHARS = 2000
CHUNK_OVERLAP = 400
"""Long texts are analysed in chunks of about ``CHUNK_CHARS`` characters that overlap by
``CHUNK_OVERLAP`` (more than any value is long, so each value lies whole in some chunk):
Presidio's context enhancement walks every token of the text for every result, which is
quadratic on one long text and linear over chunks."""


def _chunks(text: str) -> list[tuple[int, str]]:
    """(offset, chunk) pieces of ``text`` as described at :data:`CHUNK_CHARS`; each cut is at a
    line break or a space when there is one near it."""
    if len(text) <= CHUNK_CHARS:
        return [(0, text)]
    pieces: list[tuple[int, str]] = []
    start = 0
    while True:
        end = min(len(text), start + CHUNK_CHARS)
        if end < len(text):
            end = _cut(text, end - CHUNK_OVERLAP // 2, end)
        pieces.append((start, text[start:end]))
        if end >= len(text):
            return pieces
        start = _cut(text, end - CHUNK_OVERLAP, end - CHUNK_OVERLAP // 2)


def _cut(text: str, low: int, high: int) -> int:
    """The offset just after the last line break (else space) in ``text[low:high]``, else ``high``."""
    for sep in ("\n", " "):
        at = text.rfind(sep, low, high)
        if at >= 0:
            return at + 1
    return high
