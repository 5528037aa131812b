"""Unicode facts that podium's text handling shares: which characters draw nothing, and which
are drawn like others.

One definition for every place that must read text as a person sees it — PII detection
(:func:`podium.pii.segment.visible_view`), placeholder restoration (:mod:`podium.pii.vault`),
the access boundary (:func:`podium.messages.neutralise`), the LM conductor's injection check
(:mod:`podium.conductor.prompt`) and blank questions (:func:`podium.orchestrator.is_blank`) — so
that a character hidden from one is hidden from none, and a look-alike read as a letter by one is
read so by all.
"""

from __future__ import annotations

import html.entities
import re
import unicodedata
from dataclasses import dataclass

__all__ = [
    "INVISIBLE_MARKS",
    "LATIN_LOOKALIKES",
    "READ_AS",
    "Reading",
    "fold",
    "fold_character",
    "is_invisible",
    "is_mark",
    "read",
    "visible_characters",
]

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
    "АВЕКМНОРСТХУІЅЈԁаеорсухіѕјһԛԝΑΒΕΖΗΙΚΜΝΟΡΤΥΧονρτᴀʙᴄᴅᴇꜰɢʜɪᴊᴋʟᴍɴᴏᴘꞯʀꜱᴛᴜᴠᴡʏᴢ",
    "ABEKMHOPCTXYISJdaeopcyxisjhqwABEZHIKMNOPTYXovptABCDEFGHIJKLMNOPQRSTUVWYZ",
)
"""Letters drawn like Latin ones, one for one: Cyrillic and Greek (``о`` U+043E for ``o``) and
the Latin small capitals (``ᴏ`` U+1D0F for ``O``, which have no compatibility form). Read as the
Latin letter wherever text is matched against words (placeholder kinds, framing tags, injection
markers)."""

READ_AS: dict[str, str] = (
    dict.fromkeys("\u2215\u2044\u29f8\u2571\uff0f", "/")  # ∕ ⁄ ⧸ ╱ ／
    | dict.fromkeys("\u2223\u01c0\u2502\uff5c\u00a6", "|")  # ∣ ǀ │ ｜ ¦
    | {"\u2045": "[", "\u2046": "]"}  # ⁅ ⁆
    # angle quotes and the angle brackets of other scripts: ‹ › ﹤ ﹥ 〈 〉 (two) ⟨ ⟩ ⟪ ⟫ ᐸ ᐳ ˂ ˃ ❮ ❯ ❬ ❭ ❰ ❱ ⧼ ⧽
    | dict.fromkeys("\u2039\ufe64\u2329\u3008\u27e8\u27ea\u1438\u02c2\u276e\u276c\u2770\u29fc", "<")
    | dict.fromkeys("\u203a\ufe65\u232a\u3009\u27e9\u27eb\u1433\u02c3\u276f\u276d\u2771\u29fd", ">")
)
"""Punctuation drawn like an ASCII slash, bar or bracket without being one in Unicode's
compatibility forms (NFKC leaves ``∕`` and ``‹`` as they are): read as that ASCII character. It
includes what :func:`podium.messages.neutralise` writes (``‹|im_start|›``, ``⁅INST⁆``,
``‹¦User¦›``): defanged for a model's tokenizer, still read as what it was."""


def fold_character(ch: str) -> str:
    """The one character ``ch`` is read as when text is matched against words and markup: an
    ASCII character as itself; one of :data:`READ_AS` as its ASCII character; otherwise its
    compatibility form (NFKC: ``ｓ`` ``𝐬`` ``ⓢ`` ``ˢ`` → ``s``, ``：`` → ``:``) where that is one
    character, with a look-alike letter (:data:`LATIN_LOOKALIKES`) read as the Latin one. A
    character whose form is several characters (``ﬁ``, ``½``) or not ASCII stays itself, so
    folding is one for one. Invisible characters stay too (:func:`read` drops them)."""
    if ch.isascii():
        return ch
    if ch in READ_AS:
        return READ_AS[ch]
    form = unicodedata.normalize("NFKC", ch)
    if len(form) == 1:
        form = READ_AS.get(form, form).translate(LATIN_LOOKALIKES)
        if form.isascii():
            return form
    return ch.translate(LATIN_LOOKALIKES)


def is_mark(ch: str) -> bool:
    """Whether ``ch`` is a combining mark (Unicode category M: ``\u0332`` combining low line,
    ``\u0300`` grave accent, ``\u20dd`` enclosing circle), drawn on the character before it."""
    return unicodedata.category(ch)[0] == "M"


class _Read(dict[int, str]):
    """Per code point, what it is read as: ``""`` for an invisible character or a combining mark
    (:func:`read` drops them), else :func:`fold_character` (computed once per code point)."""

    def __missing__(self, cp: int) -> str:
        ch = chr(cp)
        folded = "" if is_invisible(ch) or is_mark(ch) else fold_character(ch)
        self[cp] = folded
        return folded


class _Fold(dict[int, str]):
    """:class:`_Read`, one for one: an invisible character kept as ``invisible`` (itself when
    None), a combining mark as itself."""

    def __init__(self, invisible: str | None) -> None:
        super().__init__()
        self.invisible = invisible

    def __missing__(self, cp: int) -> str:
        ch = chr(cp)
        folded = _READ[cp]
        if not folded:  # an invisible character; a visible combining mark stays itself (read drops it)
            folded = self.invisible if self.invisible is not None and is_invisible(ch) else ch
        self[cp] = folded
        return folded


_READ = _Read()
_FOLDS: dict[str | None, _Fold] = {}


def fold(text: str, *, invisible: str | None = None) -> str:
    """``text`` with every character folded (:func:`fold_character`), one for one: a match in
    the result is at the same offsets in ``text``. An invisible character stays itself, or
    becomes ``invisible`` (one character, e.g. a space: ``<step\\u200bindex=2>`` is a tag with
    an attribute) when that is given."""
    if text.isascii():
        return text
    if invisible not in _FOLDS:
        _FOLDS[invisible] = _Fold(invisible)
    return text.translate(_FOLDS[invisible])


_REFERENCE = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});?")


def _referenced(reference: str) -> str | None:
    """The one character an HTML character reference (``&lt;``, ``&#60;``, ``&#x3c;``, also
    without its ``;``) stands for, or None."""
    name = reference[1:].rstrip(";")
    if name.startswith("#"):
        cp = int(name[2:], 16) if name[1:2] in ("x", "X") else int(name[1:])
        return chr(cp) if 0 < cp <= 0x10FFFF and not 0xD800 <= cp <= 0xDFFF else None
    value = html.entities.html5.get(name + ";")
    return value if value is not None and len(value) == 1 else None


@dataclass(frozen=True)
class Reading:
    """Text as it is read (:func:`read`): ``view``, and per view character the span of the text
    it was read from (``start`` to ``end``; None when the view is one for one with the text)."""

    view: str
    start: list[int] | None = None
    end: list[int] | None = None

    def span(self, i: int) -> tuple[int, int]:
        """The offsets in the text of view character ``i``."""
        if self.start is None or self.end is None:
            return i, i + 1
        return self.start[i], self.end[i]


def read(text: str) -> Reading:
    """``text`` as a person or a model reads it: invisible characters and combining marks
    dropped (``SYS\\u200bTEM`` and ``SYS\\u0332TEM`` are ``SYSTEM``; a letter with an accent
    written as a separate mark reads as the bare letter, so both sides of a comparison must be
    read alike), HTML character references as the character they stand for (``&lt;`` is
    ``<``), and every character folded (:func:`fold_character`: look-alikes, compatibility
    forms). Linear in ``len(text)``; one-for-one text (the common case) is folded without
    offsets."""
    if text.isascii() and "&" not in text:
        return Reading(text)
    view = text.translate(_READ)
    if "&" not in text:
        if len(view) == len(text):  # no invisible character: one for one
            return Reading(view)
        kept = [i for i, c in enumerate(text) if _READ[ord(c)]]
        return Reading(view, kept, [i + 1 for i in kept])
    chars: list[str] = []
    start: list[int] = []
    end: list[int] = []

    def plain(a: int, b: int) -> None:
        if a == b:
            return
        folded = text[a:b].translate(_READ)
        chars.append(folded)
        if len(folded) == b - a:
            start.extend(range(a, b))
            end.extend(range(a + 1, b + 1))
            return
        for i in range(a, b):
            if _READ[ord(text[i])]:
                start.append(i)
                end.append(i + 1)

    pos = 0
    for match in _REFERENCE.finditer(text):
        reference = match.group()
        if reference in _REFERENCES:
            folded = _REFERENCES[reference]
        else:
            referenced = _referenced(reference)
            folded = referenced.translate(_READ) if referenced is not None else None
            if len(_REFERENCES) < 4096:
                _REFERENCES[reference] = folded
        if folded is None:
            continue
        plain(pos, match.start())
        if folded:
            chars.append(folded)
            start.append(match.start())
            end.append(match.end())
        pos = match.end()
    plain(pos, len(text))
    return Reading("".join(chars), start, end)


_REFERENCES: dict[str, str | None] = {}
"""Per character reference seen (the first 4,096), the character it is read as ("" for an
invisible one), or None for no character."""
