"""Reading placeholders back: one bounded parser for a whole reply and for a stream.

A value gets one placeholder for the whole request (``<PERSON_1>``, ``<DK_CPR_1>``, ...), so every
step of a workflow — and a nested request — refers to the same person by the same name. The key
is the value *as written*: ``070491-2846`` and ``0704912846``, or ``Mette Kjærgaard`` and
``METTE KJÆRGAARD``, get two placeholders, so each comes back exactly as it was written. The
vault lives in memory for one request only; it is never written to a trace (see
:mod:`podium.pii.session`).

Restoration finds placeholders in a *skeleton* of the reply — format characters (zero-width
spaces and joiners, U+2060, U+FEFF, bidi marks, soft hyphens) and combining marks dropped, NFKC
applied (fullwidth ``＜ＰＥＲＳＯＮ＿１＞``), Cyrillic and Greek look-alike letters read as
Latin — and replaces the matching stretch of the reply itself. It accepts:

- a bracketed placeholder: one or two of ``< ‹ « 〈 ⟨ 《 ❮ [ {`` (HTML-escaped or
  backslash-escaped too) before it and any closing bracket or none after it, in any case, with
  up to three spaces, underscores, hyphens or dashes (or nothing) between kind words and
  before the number, and at most one punctuation mark there too (``<PERSON.1>``,
  ``<PERSON #1>``, ``<PERSON(1)>``): ``‹person\u200b_1>``, ``&lt;DK-CPR-1&gt;``,
  ``[[PERSON 1]]``, ``<PERSON_1``, ``<PE\u0301RSON_1>``. After an angle bracket (or a doubled
  ``[[``/``{{``) the kind may also be written the shorter or longer ways a model writes it
  (``<EMAIL_1>``, ``<PHONE_1>``, ``<CPR_1>``, ``<NAME_1>``, ``<PERSON_NAME_1>``, ``<CARD_1>``,
  :data:`_ALIASES`), with a separator before the number unless in capitals (``<name1>`` is an
  XML tag);
- a bare one: ``PERSON_1`` as issued (also glued to a word), or ``person_1``, ``PERSON 1``,
  ``Person-1`` after a non-letter, or ``PERSON1`` in capitals with the number glued on.

Every part of a placeholder is bounded (runs of at most three spaces or separators, numbers of
at most six digits), so whether one starts at a place is decided by at most
:data:`MAX_PLACEHOLDER` characters of the skeleton: a longer run (``<PERSON`` + 70 spaces +
``1>``) is ordinary text. One parser decides for :meth:`Vault.restore` and for
:class:`StreamRestorer`, which holds back exactly what the parser could not decide yet, so a
reply streamed in any chunks shows exactly what the whole reply restores to (or fails closed
where it does).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from podium.text import LATIN_LOOKALIKES, is_invisible

__all__ = ["CLOSERS", "ENTITY_TYPES", "MAX_PLACEHOLDER", "NUMERIC_KINDS", "OPENERS", "Found", "Scanner"]

ENTITY_TYPES: tuple[str, ...] = (
    "PERSON",
    "DK_CPR",
    "PHONE_NUMBER",
    "EMAIL_ADDRESS",
    "IBAN_CODE",
    "CREDIT_CARD",
    "IP_ADDRESS",
    "ADDRESS",
)
"""Entity types podium detects (Presidio's names where Presidio has one)."""

NUMERIC_KINDS = frozenset({"DK_CPR", "PHONE_NUMBER", "IBAN_CODE", "CREDIT_CARD"})
"""Kinds whose value is its letters and digits: once ``070491-2846`` is in the vault, masking
finds ``0704912846`` again as the same CPR (and gives that form a placeholder of its own)."""

_SEPARATORS = frozenset("_\\-\u2010\u2011\u2012\u2013\u2014\u2015\u2212")
"""Between a kind's words and before its number, besides whitespace: underscores, hyphens and
dashes, and a backslash (Markdown escapes ``PERSON\\_1``)."""
_RUN = 3
"""At most this many whitespace or separator characters in a row inside a placeholder: a
longer run (``<PERSON`` + 70 spaces + ``1>``) is no placeholder, streamed or not."""
_DIGITS = 6
OPENERS = "<‹«〈⟨《❮❬❰⟪ᐸ˂⧼"
CLOSERS = ">›»〉⟩》❯❭❱⟫ᐳ˃⧽"
_PAIRS = {"(": ")", "[": "]", "{": "}"}
_CANONICAL: dict[str, tuple[str, ...]] = {kind: tuple(kind.split("_")) for kind in ENTITY_TYPES}
_ALIASES: dict[str, tuple[tuple[str, ...], ...]] = {
    "PERSON": (("NAME",), ("PERSON", "NAME"), ("FULL", "NAME")),
    "DK_CPR": (("CPR",), ("CPR", "NUMBER"), ("CPR", "NR"), ("CPR", "NO")),
    "PHONE_NUMBER": (("PHONE",), ("PHONE", "NO"), ("PHONE", "NR"), ("TEL",), ("TELEPHONE",),
                     ("TELEPHONE", "NUMBER"), ("MOBILE",), ("MOBILE", "NUMBER")),
    "EMAIL_ADDRESS": (("EMAIL",), ("E", "MAIL"), ("EMAIL", "ADDR"), ("MAIL",), ("E", "MAIL", "ADDRESS")),
    "IBAN_CODE": (("IBAN",), ("IBAN", "NUMBER")),
    "CREDIT_CARD": (("CARD",), ("CARD", "NUMBER"), ("CREDIT", "CARD", "NUMBER")),
    "IP_ADDRESS": (("IP",), ("IP", "ADDR")),
    "ADDRESS": (("ADDR",), ("STREET", "ADDRESS"), ("POSTAL", "ADDRESS")),
}  # fmt: skip
"""Shorter or longer names a model may give a kind inside brackets (``<EMAIL_1>``,
``<PERSON_NAME_1>``): accepted after an angle bracket (``<``, ``‹``, ``&lt;`` …) or a doubled
``[[``/``{{``, and with a separator before the number unless written in capitals (``<NAME1>``,
not ``<name1>``, an XML tag)."""
_FORMS: tuple[tuple[tuple[str, ...], str, bool], ...] = tuple(
    sorted(
        [(words, kind, False) for kind, words in _CANONICAL.items()]
        + [(words, kind, True) for kind, forms in _ALIASES.items() for words in forms],
        key=lambda form: -len("".join(form[0])),
    )
)
"""(words, kind, alias) of every kind name, longest first."""
_FORMS_BY_LETTER: dict[str, tuple[tuple[tuple[str, ...], str, bool], ...]] = {
    letter: tuple(f for f in _FORMS if f[0][0][0] == letter) for letter in {f[0][0][0] for f in _FORMS}
}


def _longest_name(words: tuple[str, ...]) -> int:
    return sum(len(w) for w in words) + _RUN * (len(words) - 1)


MAX_PLACEHOLDER = (
    2 * 9  # one or two opening brackets, the longest \&#x003c;
    + _RUN  # spaces
    + max(_longest_name(words) for words, _, _ in _FORMS)
    + _RUN + 1 + _RUN  # separators, one punctuation mark, separators
    + _DIGITS + 1  # the number and a closing parenthesis
    + _RUN  # spaces
    + 2 * 9  # one or two closing brackets
    + 1  # the character after it, read to see that it ends there
)  # fmt: skip
"""The most characters of a reply's skeleton (below) that deciding whether a placeholder starts
at one place ever reads: the stream restorer holds back at most this many visible characters."""


class _NeedMore(Exception):
    """Deciding needs a character the streamed text does not have yet."""


@dataclass(frozen=True)
class Found:
    """A placeholder at skeleton offsets ``start:end``: ``kind`` and ``number``; ``strict``: one
    never issued fails closed (every form but a bare prose one such as ``Person 2``)."""

    start: int
    end: int
    kind: str
    number: int
    strict: bool


class _Reader:
    """Reads a skeleton from a position; a character past its end raises :class:`_NeedMore`
    unless the skeleton is final (then it reads as "")."""

    __slots__ = ("final", "text")

    def __init__(self, text: str, final: bool) -> None:
        self.text = text
        self.final = final

    def at(self, i: int) -> str:
        if i < len(self.text):
            return self.text[i]
        if self.final:
            return ""
        raise _NeedMore

    def run(self, i: int, accept: Callable[[str], bool]) -> int | None:
        """The end of the run of characters ``accept`` takes from ``i``; None when it is longer
        than :data:`_RUN`."""
        j = i
        while accept(self.at(j)):
            j += 1
            if j - i > _RUN:
                return None
        return j

    def word(self, i: int, word: str) -> int | None:
        """The end of ``word`` (capitals) written from ``i`` in any case, else None."""
        for k, letter in enumerate(word):
            c = self.at(i + k)
            if not c.isascii() or c.upper() != letter:
                return None
        return i + len(word)

    def exact(self, i: int, word: str) -> int | None:
        for k, letter in enumerate(word):
            if self.at(i + k) != letter:
                return None
        return i + len(word)

    def digits(self, i: int) -> tuple[int, int] | None:
        """(end, value) of 1 to :data:`_DIGITS` decimal digits from ``i`` that no further digit
        follows, else None."""
        j = i
        while j - i <= _DIGITS and self.at(j).isdecimal():
            j += 1
        if j == i or j - i > _DIGITS:
            return None
        return j, int(self.text[i:j])

    def bracket(self, i: int, closing: bool) -> int | None:
        """The end of one opening (or closing) bracket from ``i``: a bracket character, ``&lt;``
        (``&gt;``) with or without its ``;``, ``&#60;``/``&#x3c;`` (``&#62;``/``&#x3e;``) with up to
        two leading zeros, each maybe after a backslash; else None."""
        j = i + (self.at(i) == "\\")
        c = self.at(j)
        if c in (CLOSERS + "]}" if closing else OPENERS + "[{") and c:
            return j + 1
        if c != "&":
            return None
        j += 1
        c = self.at(j).lower()
        if c == ("g" if closing else "l"):
            if self.at(j + 1).lower() != "t":
                return None
            j += 2
        elif c == "#":
            j += 1
            hexadecimal = self.at(j).lower() == "x"
            j += hexadecimal
            zeros = 0
            while self.at(j) == "0" and zeros < 2:
                j += 1
                zeros += 1
            code = ("3e" if closing else "3c") if hexadecimal else ("62" if closing else "60")
            if self.at(j).lower() != code[0] or self.at(j + 1).lower() != code[1]:
                return None
            j += 2
        else:
            return None
        return j + 1 if self.at(j) == ";" else j


def _space(c: str) -> bool:
    return c.isspace()


def _separator(c: str) -> bool:
    return c.isspace() or c in _SEPARATORS


def _punctuation(c: str) -> bool:
    """A punctuation mark or symbol a model may put between a kind and its number (``.``, ``#``,
    ``:``, ``(``, ``/`` …), not a bracket of a placeholder nor ``&``."""
    if not c or c.isspace() or c.isalnum() or c in _SEPARATORS or c in OPENERS or c in CLOSERS or c in "&<>":
        return False
    return unicodedata.category(c)[0] in "PS"


def _not_in_word(r: _Reader, i: int) -> bool:
    """Whether ``i`` starts a word: no letter or underscore before it."""
    return i == 0 or not (r.text[i - 1].isalpha() or r.text[i - 1] == "_")


def _bracketed(r: _Reader, q: int) -> Found | None:
    """``<PERSON_1>``, ``&lt;dk-cpr 2&gt;``, ``[[Person 1]]``, ``<EMAIL.1>``, ``<NAME(1)>`` …
    from ``q``, or None."""
    end = r.bracket(q, closing=False)
    if end is None:
        return None
    angle = r.text[q:end].lstrip("\\")[:1] not in ("[", "{")
    second = r.bracket(end, closing=False)
    if second is not None:
        angle = angle or r.text[end:second] == r.text[q:end]  # [[ … ]], {{ … }}
        end = second
    start_kind = r.run(end, _space)
    if start_kind is None:
        return None
    letter = r.at(start_kind).upper()
    best: Found | None = None
    for words, kind, alias in _FORMS_BY_LETTER.get(letter, ()):
        if alias and not angle:
            continue
        found = _bracketed_rest(r, q, start_kind, words, kind, alias)
        if found is not None and (best is None or found.end > best.end):
            best = found
    return best


def _kind_words(r: _Reader, i: int, words: tuple[str, ...], exact: bool = False) -> int | None:
    """The end of ``words`` from ``i`` (any case; separators up to :data:`_RUN` between
    them), or None; ``exact``: as issued, ``DK_CPR``."""
    if exact:
        return r.exact(i, "_".join(words))
    j = i
    for n, word in enumerate(words):
        if n:
            after_separators = r.run(j, _separator)
            if after_separators is None:
                return None
            j = after_separators
        after_word = r.word(j, word)
        if after_word is None:
            return None
        j = after_word
    return j


def _bracketed_rest(r: _Reader, q: int, i: int, words: tuple[str, ...], kind: str, alias: bool) -> Found | None:
    j = _kind_words(r, i, words)
    if j is None:
        return None
    capitals = r.text[i:j].upper() == r.text[i:j]
    k = r.run(j, _separator)
    if k is None:
        return None
    mark = r.at(k) if _punctuation(r.at(k)) else ""
    if mark:
        k = r.run(k + 1, _separator)
        if k is None:
            return None
    if alias and k == j and not capitals:
        return None  # <name1>: an XML tag
    number = r.digits(k)
    if number is None:
        return None
    k, n = number
    if mark in _PAIRS and r.at(k) == _PAIRS[mark]:
        k += 1
    end = k
    spaces = r.run(k, _space)
    if spaces is not None:
        close = r.bracket(spaces, closing=True)
        if close is not None:
            end = r.bracket(close, closing=True) or close
    return Found(q, end, kind, n, True)


def _unbracketed(r: _Reader, q: int) -> Found | None:
    """``PERSON_1`` as issued (also glued to a word), ``person 1``/``Person-1`` after a
    non-letter (bare), ``PERSON1``/``DKCPR1`` in capitals (glued), from ``q``, or None."""
    letter = r.at(q).upper()
    forms = [(words, kind) for words, kind, alias in _FORMS_BY_LETTER.get(letter, ()) if not alias]
    if q == 0 or r.text[q - 1] != "_":  # as issued
        for words, kind in forms:
            j = _kind_words(r, q, words, exact=True)
            if j is not None and r.at(j) == "_":
                number = r.digits(j + 1)
                if number is not None:
                    return Found(q, number[0], kind, number[1], True)
    if not _not_in_word(r, q):
        return None
    for words, kind in forms:  # bare: kind words, separators, a number
        j = _kind_words(r, q, words)
        if j is None:
            continue
        k = r.run(j, _separator)
        if k is None or k == j:
            continue
        number = r.digits(k)
        if number is not None:
            written = r.text[q:j]
            return Found(q, number[0], kind, number[1], "_" in r.text[j:k] or written.isupper())
    for words, kind in forms:  # glued, in capitals: PERSON1, DKCPR1, DK_CPR1
        end = _glued_kind(r, q, words)
        if end is None:
            continue
        number = r.digits(end)
        if number is not None:
            return Found(q, number[0], kind, number[1], True)
    return None


def _glued_kind(r: _Reader, i: int, words: tuple[str, ...]) -> int | None:
    """The end of ``words`` in capitals from ``i``, an underscore or nothing between them."""
    j = i
    for n, word in enumerate(words):
        if n and r.at(j) == "_":
            j += 1
        end = r.exact(j, word)
        if end is None:
            return None
        j = end
    return j


_STARTS = re.compile("[" + re.escape(OPENERS) + r"\[{&\\" + "]|[PDEICApdeica]")
"""Where a placeholder may start: a bracket, ``&`` or ``\\``, or the first letter of a kind
(aliases come only in brackets)."""
assert {words[0][0] for words in _CANONICAL.values()} == set("PDEICA")


def _parse(r: _Reader, q: int) -> Found | None:
    """The placeholder starting at skeleton offset ``q``, or None; raises :class:`_NeedMore`
    when that depends on what the stream has not sent yet."""
    c = r.text[q]
    if c.isalpha():
        return _unbracketed(r, q)
    return _bracketed(r, q)


def _skeleton(text: str, base: int = 0) -> tuple[str, list[int]]:
    """``text`` as matched for placeholders, and per skeleton character its offset in ``text``
    (plus ``base``): invisible characters and combining marks left out, NFKC applied, Cyrillic
    and Greek look-alike letters read as Latin."""
    if text.isascii():
        return text, list(range(base, base + len(text)))
    chars: list[str] = []
    origin: list[int] = []
    for i, c in enumerate(text):
        if c.isascii():
            chars.append(c)
            origin.append(base + i)
            continue
        if is_invisible(c) or unicodedata.category(c)[0] == "M":
            continue
        for x in unicodedata.normalize("NFKC", c).translate(LATIN_LOOKALIKES):
            if unicodedata.category(x)[0] != "M":
                chars.append(x)
                origin.append(base + i)
    return "".join(chars), origin


class Scanner:
    """Finds placeholders in text that arrives in pieces, deciding each place as soon as what
    has arrived decides it (:class:`_NeedMore` otherwise), and calls ``replace`` for each. The
    text given whole (:meth:`Vault.restore`) and the same text in any pieces give the same
    output, and the same :class:`UnknownPlaceholder`: every decision is made on the same
    characters. Linear in the text: each place is decided once, reading at most
    :data:`MAX_PLACEHOLDER` skeleton characters, again on each later chunk while undecided."""

    def __init__(self, replace: Callable[[Found, str], str]) -> None:
        self._replace = replace
        self._raw = ""  # the text from offset self._raw_base on (with self._pending after it)
        self._pending: list[str] = []  # chunks not yet joined onto self._raw
        self._raw_base = 0
        self._raw_end = 0  # the offset after the last character received
        self._skeleton = ""  # the skeleton from skeleton offset self._skeleton_base on
        self._origin: list[int] = []  # per skeleton character, its offset in the whole text
        self._skeleton_base = 0
        self._scan = 0  # skeleton offset where the scan stands
        self._emitted = 0  # text offset up to which output was given

    def feed(self, chunk: str, final: bool = False) -> str:
        """The output that ``chunk`` (added to what came before) decides; with ``final`` the
        text is complete and everything left is given."""
        skeleton, origin = _skeleton(chunk, self._raw_end)
        self._raw_end += len(chunk)
        if chunk:
            self._pending.append(chunk)
        if skeleton:
            self._skeleton += skeleton
            self._origin += origin
        reader = _Reader(self._skeleton, final)
        base = self._skeleton_base
        q = self._scan - base
        out: list[str] = []
        emitted = self._emitted
        while True:
            m = _STARTS.search(self._skeleton, q)
            if m is None:
                q = len(self._skeleton)
                break
            q = m.start()
            try:
                found = _parse(reader, q)
            except _NeedMore:
                break
            if found is None:
                q += 1
                continue
            start, end = self._origin[found.start], self._origin[found.end - 1] + 1
            out.append(self._text(emitted, start))
            out.append(self._replace(found, self._text(start, end)))
            emitted = end
            q = found.end
        limit = self._raw_end if final or q >= len(self._skeleton) else self._origin[q]
        if limit > emitted:
            out.append(self._text(emitted, limit))
            emitted = limit
        self._emitted, self._scan = emitted, base + q
        self._trim(q)
        return "".join(out)

    def _text(self, start: int, end: int) -> str:
        """The text from offset ``start`` to ``end`` (both received)."""
        if end <= start:
            return ""
        if self._pending:
            self._raw += "".join(self._pending)
            self._pending.clear()
        return self._raw[start - self._raw_base : end - self._raw_base]

    def _trim(self, q: int) -> None:
        """Forget what no later decision reads: the text before what is not given yet, the
        skeleton before the character before the scan (a placeholder looks one back)."""
        keep = max(0, q - 1)
        if keep > 4096 or (keep and keep * 2 > len(self._skeleton)):
            self._skeleton = self._skeleton[keep:]
            self._origin = self._origin[keep:]
            self._skeleton_base += keep
        needed = min(self._emitted, self._origin[0]) if self._origin else self._emitted
        drop = needed - self._raw_base
        if drop > 4096 or (drop and drop * 2 > len(self._raw)):
            self._text(needed, needed + 1)  # joins what is pending
            self._raw = self._raw[drop:]
            self._raw_base = needed
