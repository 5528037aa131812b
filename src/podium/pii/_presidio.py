"""Presidio and spaCy, the ``pii`` extra's libraries, imported in one place without torch and
transformers. Every podium module takes Presidio's names from here.

Presidio and spaCy import torch and transformers whenever they are installed (thinc's torch
shims, Presidio's device detector and its Hugging Face pipe), although podium's detection runs
on blank spaCy pipelines and pattern recognizers that use neither. Where the ``train`` extra
shares the environment, that costs about 6 s in every process that detects PII, on 2 cores:
``import presidio_analyzer`` took 7.2–7.4 s, this module 1.4–1.5 s (2026-12-03, beside a running
evaluation). While these imports run, both are hidden (``sys.modules[name] = None``, so their
import raises ImportError and the libraries take their no-torch paths: spaCy runs on numpy,
Presidio's device is ``cpu``); afterwards a later ``import torch`` in the process works as usual.
A module already imported is left as it is.

Raises ConfigError naming the install command when the ``pii`` extra is missing.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from podium.errors import ConfigError
from podium.extras import install_command

__all__ = [
    "AnalysisExplanation",
    "AnalyzerEngine",
    "EmailRecognizer",
    "EntityRecognizer",
    "IpRecognizer",
    "LocalRecognizer",
    "NlpArtifacts",
    "Pattern",
    "PatternRecognizer",
    "PhoneRecognizer",
    "RecognizerRegistry",
    "RecognizerResult",
    "SpacyNlpEngine",
    "regex_per_country",
    "spacy",
]


@contextlib.contextmanager
def _hidden(*modules: str) -> Iterator[None]:
    """Within the block, importing one of ``modules`` that is not imported yet raises ImportError."""
    hidden = [name for name in modules if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        for name in hidden:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


try:
    with _hidden("torch", "transformers"):
        import spacy
        from presidio_analyzer import (
            AnalysisExplanation,
            AnalyzerEngine,
            EntityRecognizer,
            LocalRecognizer,
            Pattern,
            PatternRecognizer,
            RecognizerRegistry,
            RecognizerResult,
        )
        from presidio_analyzer.nlp_engine import NlpArtifacts, SpacyNlpEngine
        from presidio_analyzer.predefined_recognizers import EmailRecognizer, IpRecognizer, PhoneRecognizer
        from presidio_analyzer.predefined_recognizers.generic.iban_patterns import regex_per_country
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ConfigError(f"PII protection needs Presidio: {install_command('pii')} ({exc})") from None
