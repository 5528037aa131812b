"""What export and drift read from a question's text: its normalised form, its terms, its
language and its format, and a model-free embedding.

All of it is deterministic and runs on the CPU without a download:

* :func:`normalise` — the text two near-identical questions share (accents folded as the trace
  search folds them, case folded, every run of non-alphanumeric characters one space), so
  ``"What is 2+2?"`` and ``"what is 2 + 2"`` are one question while ``2.5`` and ``25`` stay
  apart.
* :func:`terms` — the words of a question (letters only, three or more, case folded), for the
  rate of terms a reference window never saw.
* :func:`language` — the language of a question by py3langid (Lui & Baldwin's langid.py: a
  naive Bayes classifier over byte n-grams; ``py3langid==0.4.0``, its model file sha256-checked
  before the first load), as an ISO 639-1 code among :data:`LANGUAGES`; ``und`` (undetermined) when
  the text has no letters, or the classifier's normalised probability is below
  :data:`MIN_LANGUAGE_PROBABILITY` or it says ``zxx`` (no linguistic content): code, numbers,
  a table of names.
* :func:`formats` — which of ``table`` (Markdown pipes or tab-separated columns on two or more
  lines), ``code`` (a fence, two or more code-like lines, an inline code span with code
  punctuation, or one unmistakable construct: ``def f(``, an import line, ``print(``, ``=>``, a
  list comprehension, ``SELECT … FROM``, a chained method call), ``json``, ``list`` (two or more
  bullet or numbered lines) and ``long`` (over 1,000 characters) a question has.
* :class:`HashingEncoder` — character 3- to 5-gram counts of the normalised text hashed into
  512 buckets by CRC-32 (feature hashing, Weinberger et al. 2009; the hash's top bit gives the
  sign), L2-normalised: an :class:`~podium.embed.Encoder` that needs no model, so drift runs
  anywhere. It sees spelling, not meaning: new terms, another language, tables and code move
  it; a paraphrase does not.
"""

from __future__ import annotations

import functools
import importlib.util
import re
import unicodedata
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from podium.trace.query import fold

__all__ = [
    "FORMATS",
    "LANGUAGES",
    "LONG_CHARS",
    "MIN_LANGUAGE_PROBABILITY",
    "PLACEHOLDER",
    "HashingEncoder",
    "formats",
    "language",
    "normalise",
    "terms",
]

_NON_ALNUM = re.compile(r"[\W_]+")


def normalise(text: str) -> str:
    """``text`` as de-duplication compares it (see the module docstring)."""
    folded = fold(unicodedata.normalize("NFKC", text)).casefold()
    return _NON_ALNUM.sub(" ", folded).strip()


_TERM = re.compile(r"[^\W\d_]{3,}")
PLACEHOLDER = re.compile(r"<[A-Z_]+_\d+>")
"""A pseudonymization placeholder (``<PERSON_1>``): no word and no number of the question."""


def terms(text: str) -> list[str]:
    """The words of ``text``: runs of three or more letters, NFKC and case folded (accents kept:
    ``"lørdag"`` is a Danish word, not ``"lordag"``); pseudonymization placeholders
    (``<PERSON_1>``) are not words."""
    return _TERM.findall(unicodedata.normalize("NFKC", PLACEHOLDER.sub(" ", text)).casefold())


LANGUAGES: tuple[str, ...] = (
    "en", "es", "de", "ja", "fr", "pt", "ru", "it", "nl", "pl",
    "tr", "fa", "zh", "vi", "id", "cs", "ko", "uk", "hu", "sv",
    "ar", "ro", "el", "da", "fi", "he", "sk", "th", "bg", "hr",
    "no", "lt", "sr", "sl", "lv", "et", "hi", "ca", "ms", "bn",
)  # fmt: skip
"""The 40 languages :func:`language` chooses between (ISO 639-1; ``no`` is Norwegian), besides
``und``: the most used languages of web content and customer traffic. py3langid knows 142, but
on a text of two or three words the rare ones win by chance ("Is it ok?" was Frisian, "Rechnung
falsch" Luxembourgish, "Compute 7 factorial" Latin), and a drift report would show them as new
languages. A question in a language outside this list gets the closest of them, or ``und``."""
MIN_LANGUAGE_PROBABILITY = 0.2
"""Below this normalised probability :func:`language` says ``und``. py3langid gives text with
little language in it (``def f(x): return x``, ``12345 + 678``, ``ok``) 0.01–0.1 and real
sentences, even four words of Danish, 0.4 or more."""
_LANGID_SHA256 = "f4f4a2c3465ca1f081541037f9cac23021d68151c2f709c55ae5eedfca522963"
"""sha256 of ``py3langid/data/model.npz.xz`` in py3langid 0.4.0 (4,586,720 bytes)."""


@functools.cache
def _identifier() -> Any:
    """py3langid's classifier with normalised probabilities, loaded once per process (0.45 s)
    after its model file's sha256 check. Raises ConfigError when the file does not match."""
    from podium.local_models import check_pinned_file

    spec = importlib.util.find_spec("py3langid")
    folder = Path(next(iter(spec.submodule_search_locations or ()))) if spec else None
    check_pinned_file(folder / "data" / "model.npz.xz" if folder else None, _LANGID_SHA256, "py3langid", "0.4.0")
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    identifier.set_languages(list(LANGUAGES))
    return identifier


def language(text: str) -> str:
    """The language of ``text``: an ISO 639-1 code (``en``, ``da``, ``ru``, ``zh``, ...) or
    ``und`` (see the module docstring). Pseudonymization placeholders (``<PERSON_1>``) are left
    out first. About 0.15 ms a question on 2 cores, after the model's one load.

    Raises ConfigError when py3langid's model file fails its sha256 check."""
    text = PLACEHOLDER.sub(" ", text)
    if not any(c.isalpha() for c in text):
        return "und"
    label, probability = _identifier().classify(text)
    return "und" if label == "zxx" or probability < MIN_LANGUAGE_PROBABILITY else str(label)


FORMATS: tuple[str, ...] = ("table", "code", "json", "list", "long")
"""The format flags :func:`formats` sets (a question may have several, or none: plain prose)."""

_TABLE_ROW = re.compile(r"^\s*\|?[^|\n]*(?:\|[^|\n]*)+\|?\s*$")
"""A row of a pipe table, of any number of columns (``| a | b | c |``, ``a | b``)."""
_TAB_ROW = re.compile(r"^[^\t\n]+\t[^\t\n]+")
_CODE_LINE = re.compile(
    r"^\s*(?:def |class |import |from \S+ import |return\b|for .+:\s*$|if .+:\s*$|while .+:\s*$|"
    r"#include|public |private |function |const |let |var |SELECT |print\()|[;{}]\s*$"
)
_CODE_SPAN = re.compile(r"`([^`\n]+)`")
_CODE_PUNCTUATION = re.compile(r"[()\[\]{}=;<>]")
_ONE_LINE_CODE = re.compile(
    r"(?:^|`)\s*(?:import \w|from [\w.]+ import )|\bdef \w+\(|\bclass \w+[(:]|#include\s*<|\blambda \w*:|"
    r"\b(?:print|console\.log|printf|len|range|System\.out\.println)\(|=>|\bSELECT\b.+\bFROM\b|"
    r"\[[^\]\n]+ for \w+ in [^\]\n]+\]|\w\.\w+\([^()\n]*\)\.\w+\(",
    re.MULTILINE,
)
_LIST_LINE = re.compile(r"^\s*(?:[-*•]|\d{1,3}[.)])\s+\S")
LONG_CHARS = 1000
"""A question longer than this (characters) has the ``long`` format flag."""


def formats(text: str) -> frozenset[str]:
    """The format flags of ``text`` (see :data:`FORMATS` and the module docstring)."""
    lines = text.splitlines()
    found: set[str] = set()
    if sum(1 for line in lines if _TABLE_ROW.match(line)) >= 2 or sum(1 for line in lines if _TAB_ROW.match(line)) >= 2:
        found.add("table")
    if (
        "```" in text
        or sum(1 for line in lines if _CODE_LINE.match(line)) >= 2
        or any(_CODE_PUNCTUATION.search(span) for span in _CODE_SPAN.findall(text))
        or _ONE_LINE_CODE.search(text)
    ):
        found.add("code")
    stripped = text.strip()
    if re.search(r"\{\s*\"[^\"\n]+\"\s*:", stripped) or (stripped.startswith("[{") and stripped.endswith("}]")):
        found.add("json")
    if sum(1 for line in lines if _LIST_LINE.match(line)) >= 2:
        found.add("list")
    if len(text) > LONG_CHARS:
        found.add("long")
    return frozenset(found)


class HashingEncoder:
    """Feature-hashed character n-grams (see the module docstring); an
    :class:`~podium.embed.Encoder`.

    Args:
        dim: buckets (vector width).
        ngrams: the n of the character n-grams, inclusive range.
    """

    def __init__(self, dim: int = 512, ngrams: tuple[int, int] = (3, 5)) -> None:
        self.dim = dim
        self.ngrams = ngrams
        self.name = f"hash-char{ngrams[0]}-{ngrams[1]}:{dim}"

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        low, high = self.ngrams
        for row, text in enumerate(texts):
            padded = f" {normalise(text)} "
            for n in range(low, high + 1):
                for i in range(len(padded) - n + 1):
                    value = zlib.crc32(padded[i : i + n].encode())
                    out[row, value % self.dim] += 1.0 if value >> 31 else -1.0
            norm = float(np.linalg.norm(out[row]))
            if norm > 0:
                out[row] /= norm
        return out
