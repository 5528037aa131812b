"""PII detection with Presidio's AnalyzerEngine, fully offline.

Presidio normally loads a spaCy NER model, which cannot be downloaded here (no model hubs). The
engine below runs on a *blank* spaCy pipeline per language (tokenizer only, shipped inside spaCy)
and registers only recognizers that need no NER: podium's own (:mod:`podium.pii.recognizers`)
plus Presidio's IBAN, payment-card and IP recognizers. Lemmas are the lowercased tokens, so
Presidio's context words ("cpr", "tlf", ...) still raise scores.

Overlapping detections are resolved before anything is replaced: the higher score wins, then
the longer span, then the more specific kind (:data:`KIND_PRIORITY`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from podium.errors import ConfigError

try:
    import spacy
    from presidio_analyzer import AnalyzerEngine, RecognizerRegistry, RecognizerResult
    from presidio_analyzer.nlp_engine import NlpArtifacts, SpacyNlpEngine
    from presidio_analyzer.predefined_recognizers import CreditCardRecognizer, IbanRecognizer, IpRecognizer
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ConfigError(f"PII protection needs Presidio: pip install 'podium[pii]' ({exc})") from None

from podium.pii.recognizers import (
    AddressRecognizer,
    CprRecognizer,
    OfflineEmailRecognizer,
    PersonNameRecognizer,
    PhoneNumberRecognizer,
)
from podium.pii.vault import ENTITY_TYPES

__all__ = ["KIND_PRIORITY", "Detection", "Detector", "resolve_overlaps"]

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


def resolve_overlaps(detections: Iterable[Detection]) -> list[Detection]:
    """Non-overlapping detections in text order: among overlapping ones the highest score wins,
    then the longest span, then the kind earlier in :data:`KIND_PRIORITY`."""

    def rank(d: Detection) -> tuple[float, int, int, int]:
        priority = KIND_PRIORITY.index(d.kind) if d.kind in KIND_PRIORITY else len(KIND_PRIORITY)
        return (-d.score, -(d.end - d.start), priority, d.start)

    kept: list[Detection] = []
    for d in sorted(detections, key=rank):
        if all(d.end <= k.start or d.start >= k.end for k in kept):
            kept.append(d)
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
                        IbanRecognizer(supported_language=lang),
                        CreditCardRecognizer(supported_language=lang),
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
        """Non-overlapping PII detections in ``text``, in text order (see :func:`resolve_overlaps`).

        Raises whatever Presidio raises; callers that send data out treat any exception as a
        detection failure and fail closed.
        """
        if not text.strip():
            return []
        engine = self._analyzer()
        found: list[Detection] = []
        for lang in self.languages:
            results: list[RecognizerResult] = engine.analyze(
                text=text, language=lang, entities=list(self.entities), score_threshold=self.score_threshold
            )
            found += [Detection(r.entity_type, r.start, r.end, float(r.score), text[r.start : r.end]) for r in results]
        return resolve_overlaps(found)
