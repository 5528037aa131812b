"""What export and drift read from a question's text: its normalised form, its terms, its
language and its format, and a model-free embedding.

All of it is deterministic and needs nothing beyond numpy:

* :func:`normalise` — the text two near-identical questions share (accents folded as the trace
  search folds them, case folded, every run of non-alphanumeric characters one space), so
  ``"What is 2+2?"`` and ``"what is 2 + 2"`` are one question while ``2.5`` and ``25`` stay
  apart.
* :func:`terms` — the words of a question (letters only, three or more, case folded), for the
  rate of terms a reference window never saw.
* :func:`language` — a stop-word vote over eleven Latin-script languages (en, da, sv, de, nl,
  fr, es, it, pt, pl, fi) plus the script for non-Latin text (``cyrillic``, ``greek``,
  ``arabic``, ``hebrew``, ``devanagari``, ``cjk``, ``hangul``, ``thai``); ``und`` when too few
  words decide it. Norwegian is left out on purpose: bokmål shares most of its function words
  with Danish, and a vote between the two would be a coin toss.
* :func:`formats` — which of ``table`` (Markdown pipes or tab-separated columns on two or more
  lines), ``code`` (a fence or two or more code-like lines), ``json``, ``list`` (two or more
  bullet or numbered lines) and ``long`` (over 1,000 characters) a question has.
* :class:`HashingEncoder` — character 3- to 5-gram counts of the normalised text hashed into
  512 buckets by CRC-32 (feature hashing, Weinberger et al. 2009; the hash's top bit gives the
  sign), L2-normalised: an :class:`~podium.embed.Encoder` that needs no model, so drift runs
  anywhere. It sees spelling, not meaning: new terms, another language, tables and code move
  it; a paraphrase does not.
"""

from __future__ import annotations

import re
import unicodedata
import zlib
from collections import Counter
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from podium.trace.query import fold

__all__ = [
    "FORMATS",
    "LANGUAGES",
    "LONG_CHARS",
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
_PLACEHOLDER = re.compile(r"<[A-Z_]+_\d+>")


def terms(text: str) -> list[str]:
    """The words of ``text``: runs of three or more letters, NFKC and case folded (accents kept:
    ``"lørdag"`` is a Danish word, not ``"lordag"``); pseudonymization placeholders
    (``<PERSON_1>``) are not words."""
    return _TERM.findall(unicodedata.normalize("NFKC", _PLACEHOLDER.sub(" ", text)).casefold())


_STOPWORDS: dict[str, frozenset[str]] = {
    lang: frozenset(words.split())
    for lang, words in {
        "en": "the and is are of to in that it for with as was on be this what how many which who "
        "have has from by an or not can you your does will would there their they if then than",
        "da": "og er det en et til af på med som ikke har jeg hvad hvor mange hvilke hvordan der "
        "den de skal kan fra har efter også være var eller hun han vores dage hvis så når mig "
        "dig mit min sin nogle alle kunde svar",
        "sv": "och är det en ett till av på med som inte har jag vad hur många vilka där den de ska "
        "kan från efter också vara var eller hon han våra dagar om när mig dig mitt min sin några "
        "alla kund svara",
        "de": "und ist der die das ein eine zu von mit nicht für auf wie viele welche wer hat ich "
        "sie es den dem des im sind aus bei nach oder auch",
        "nl": "en is de het een van te met niet voor op hoe veel welke wie heeft ik zij dat zijn "
        "uit bij naar ook maar dan als",
        "fr": "et est le la les un une des de du pour avec pas sur comment combien quel quelle qui "
        "il elle nous vous dans ce cette sont ou aussi",
        "es": "y es el la los las un una de del para con no por cómo cuántos cuál quién tiene que "
        "en se su sus son o también pero",
        "it": "e è il lo la gli le un una di del per con non come quanti quale chi ha che in si "
        "sono anche ma della dei",
        "pt": "e é o a os as um uma de do da para com não por como quantos qual quem tem que em se são também mas",
        "pl": "i jest w na z do nie że się to jak ile który która co czy jego jej są od przez",
        "fi": "ja on ei se että kuinka monta mikä kuka oli ovat myös tai kun jos mutta",
    }.items()
}
LANGUAGES: tuple[str, ...] = (
    *_STOPWORDS,
    "cyrillic",
    "greek",
    "arabic",
    "hebrew",
    "devanagari",
    "cjk",
    "hangul",
    "thai",
    "und",
)
"""Labels :func:`language` returns: ISO 639-1 codes for the Latin-script languages it votes
between, a script name for non-Latin text, ``und`` (undetermined)."""

_SCRIPTS = (
    ("CYRILLIC", "cyrillic"),
    ("GREEK", "greek"),
    ("ARABIC", "arabic"),
    ("HEBREW", "hebrew"),
    ("DEVANAGARI", "devanagari"),
    ("CJK", "cjk"),
    ("HIRAGANA", "cjk"),
    ("KATAKANA", "cjk"),
    ("HANGUL", "hangul"),
    ("THAI", "thai"),
)
_LETTER_HINTS = {"da": "æø", "sv": "äö", "de": "äöüß", "fr": "çèêàù", "es": "ñ¿¡", "pl": "łąęśźżć"}
"""Letters that break a tie between the vote's leaders (å is Danish and Swedish alike)."""


def _script(char: str) -> str | None:
    try:
        name = unicodedata.name(char)
    except ValueError:
        return None
    return next((label for prefix, label in _SCRIPTS if name.startswith(prefix)), None)


def language(text: str) -> str:
    """The language (or script) of ``text``; see the module docstring and :data:`LANGUAGES`.

    Letters of a non-Latin script win when they are at least a third of the letters; otherwise
    the Latin-script language whose function words occur most often, with at least two hits
    (ties go to the language whose own letters, e.g. æ ø for Danish, occur; else ``und``)."""
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return "und"
    scripts = Counter(s for c in letters if (s := _script(c)))
    if scripts:
        script, count = scripts.most_common(1)[0]
        if count * 3 >= len(letters):
            return script
    words = re.findall(r"[^\W\d_]+", text.casefold())
    votes = Counter({lang: sum(w in stop for w in words) for lang, stop in _STOPWORDS.items()})
    ranked = votes.most_common()
    best, hits = ranked[0]
    if hits < 2:
        return "und"
    tied = [lang for lang, n in ranked if n == hits]
    if len(tied) == 1:
        return best
    lowered = text.casefold()
    hinted = [lang for lang in tied if any(c in lowered for c in _LETTER_HINTS.get(lang, ""))]
    return hinted[0] if len(hinted) == 1 else "und"


FORMATS: tuple[str, ...] = ("table", "code", "json", "list", "long")
"""The format flags :func:`formats` sets (a question may have several, or none: plain prose)."""

_TABLE_ROW = re.compile(r"^\s*\|?[^|\n]*\|[^|\n]*\|?\s*$")
_TAB_ROW = re.compile(r"^[^\t\n]+\t[^\t\n]+")
_CODE_LINE = re.compile(
    r"^\s*(?:def |class |import |from \S+ import |return\b|for .+:\s*$|if .+:\s*$|while .+:\s*$|"
    r"#include|public |private |function |const |let |var |SELECT |print\()|[;{}]\s*$"
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
    if "```" in text or sum(1 for line in lines if _CODE_LINE.match(line)) >= 2:
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
