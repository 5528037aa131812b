"""Reading placeholders back: one bounded parser for a whole reply and for a stream.

A value gets one placeholder for the whole request (``<PERSON_1>``, ``<DK_CPR_1>``, ...), so every
step of a workflow — and a nested request — refers to the same person by the same name. The key
is the value *as written*: ``070491-2846`` and ``0704912846``, or ``Mette Kjærgaard`` and
``METTE KJÆRGAARD``, get two placeholders, so each comes back exactly as it was written. The
vault lives in memory for one request only; it is never written to a trace (see
:mod:`podium.pii.protection`).

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
  The number may be spelled out when a closing bracket follows it: a number word up to twenty
  or a Roman numeral up to XXXIX (``<PERSON_one>``, ``<PERSON_Ⅱ>``); a single letter
  (``<PERSON_X>``) is a label as often as a numeral and is left as written when never issued. A
  slash or a separator run that belongs to markup is part of the placeholder: ``</PERSON_1>``,
  ``<PERSON_1/>``, ``<PERSON_1_>`` restore to the value alone;
- a bare one: ``PERSON_1`` as issued (also glued to a word), or ``person_1``, ``PERSON 1``,
  ``Person-1`` after a non-letter, or ``PERSON1`` in capitals with the number glued on; and a
  kind's other name in capitals with underscores, a word of its own (``PHONE_1``, ``CPR_1``,
  ``NAME_1``): restored when this request issued that number, else left as written (it may be
  a constant in code).

Every part of a placeholder is bounded (runs of at most three spaces or separators, numbers of
at most six digits), so whether one starts at a place is decided by at most
:data:`MAX_PLACEHOLDER` characters of the skeleton: a longer run (``<PERSON`` + 70 spaces +
``1>``) is ordinary text. One parser (:func:`parse`, run by :class:`podium.pii.scanner.Scanner`)
decides for :meth:`Vault.restore` and for :class:`StreamRestorer`, which holds back exactly
what the parser could not decide yet, so a reply streamed in any chunks shows exactly what the
whole reply restores to (or fails closed where it does).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "CLOSERS",
    "ENTITY_TYPES",
    "MAX_PLACEHOLDER",
    "NUMERIC_KINDS",
    "OPENERS",
    "STARTS",
    "Found",
    "NeedMore",
    "Reader",
    "parse",
]

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
_NUMBER_WORDS = {
    word: n
    for n, word in enumerate(
        ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
         "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"),
        1,
    )
}  # fmt: skip
_ROMAN = {
    "".join(("", "X", "XX", "XXX")[n // 10] + ("", "I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX")[n % 10]): n
    for n in range(1, 40)
}
_SPELLED = max(len(word) for word in [*_NUMBER_WORDS, *_ROMAN])
"""A number spelled out inside brackets: an English number word up to twenty (``<PERSON_one>``)
or a Roman numeral up to XXXIX (``<PERSON_II>``, ``<PERSON_Ⅰ>`` as NFKC reads ``Ⅰ``), any case."""
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
    + 2  # a closing tag's slash, \/
    + _RUN  # spaces
    + max(_longest_name(words) for words, _, _ in _FORMS)
    + _RUN + 1 + _RUN  # separators, one punctuation mark, separators
    + max(_DIGITS, _SPELLED) + 1  # the number (or a spelled one) and a closing parenthesis
    + _RUN + 2 + _RUN  # separators, a self-closing slash \/, spaces
    + 2 * 9  # one or two closing brackets
    + 1  # the character after it, read to see that it ends there
)  # fmt: skip
"""The most characters of a reply's skeleton (below) that deciding whether a placeholder starts
at one place ever reads: the stream restorer holds back at most this many visible characters."""


class NeedMore(Exception):
    """Deciding needs a character the streamed text does not have yet: a signal from the
    skeleton reader to :mod:`podium.pii.scanner`, which catches it and waits for more text;
    never raised out of :mod:`podium.pii`, so not an error of podium's tree."""


@dataclass(frozen=True)
class Found:
    """A placeholder at skeleton offsets ``start:end``: ``kind`` and ``number``; ``strict``: one
    never issued fails closed (every form but a bare prose one such as ``Person 2``)."""

    start: int
    end: int
    kind: str
    number: int
    strict: bool


class Reader:
    """Reads a skeleton from a position; a character past its end raises :class:`NeedMore`
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
        raise NeedMore

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

    def spelled(self, i: int) -> tuple[int, int] | None:
        """(end, value) of a number word or Roman numeral (:data:`_NUMBER_WORDS`, :data:`_ROMAN`)
        from ``i`` that no further letter follows, else None."""
        j = i
        while j - i <= _SPELLED and self.at(j).isascii() and self.at(j).isalpha():
            j += 1
        word = self.text[i:j].upper()
        n = _NUMBER_WORDS.get(word.lower()) or _ROMAN.get(word)
        return None if n is None or j - i > _SPELLED else (j, n)

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


def _not_in_word(r: Reader, i: int) -> bool:
    """Whether ``i`` starts a word: no letter or underscore before it."""
    return i == 0 or not (r.text[i - 1].isalpha() or r.text[i - 1] == "_")


def _bracketed(r: Reader, q: int) -> Found | None:
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
    if r.at(end) == "/" or (r.at(end) == "\\" and r.at(end + 1) == "/"):  # </PERSON_1>: a closing tag
        end += 1 + (r.at(end) == "\\")
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


def _kind_words(r: Reader, i: int, words: tuple[str, ...], exact: bool = False) -> int | None:
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


def _bracketed_rest(r: Reader, q: int, i: int, words: tuple[str, ...], kind: str, alias: bool) -> Found | None:
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
    spelled = number is None and k > j
    if spelled:  # <PERSON_one>, <PERSON_II>: a closing bracket must follow
        number = r.spelled(k)
    if number is None:
        return None
    after, n = number
    letter = spelled and after - k == 1  # <PERSON_X>: a label as often as a numeral, kept when never issued
    if mark in _PAIRS and r.at(after) == _PAIRS[mark]:
        after += 1
    end = _closing(r, after)
    if end is None and spelled:
        return None
    return Found(q, end or after, kind, n, not letter)


def _closing(r: Reader, k: int) -> int | None:
    """The end of what closes a placeholder from ``k`` (after its number): separators and a
    slash that belong to it (``<PERSON_1_>``, ``<PERSON_1/>``, ``<PERSON_1 \\/>``), spaces, then
    one or two closing brackets; None when no closing bracket follows."""
    j = r.run(k, lambda c: c != "\\" and _separator(c))  # a backslash escapes what follows
    if j is None:
        return None
    if r.at(j) == "/" or (r.at(j) == "\\" and r.at(j + 1) == "/"):
        j += 1 + (r.at(j) == "\\")
    j = r.run(j, _space)
    close = None if j is None else r.bracket(j, closing=True)
    return None if close is None else r.bracket(close, closing=True) or close


def _unbracketed(r: Reader, q: int) -> Found | None:
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
    return _bare_alias(r, q)


def _bare_alias(r: Reader, q: int) -> Found | None:
    """A kind's other name in capitals, underscores and a number, a word of its own
    (``PHONE_1``, ``CPR_1``, ``NAME_1``, ``E_MAIL_2``), from ``q``: restored when this request
    issued that number, else left as written (``CPR_1`` may be a constant in code)."""
    if q > 0 and (r.text[q - 1].isalnum() or r.text[q - 1] == "_"):
        return None
    for words, kind, alias in _FORMS_BY_LETTER.get(r.at(q), ()):
        j = _kind_words(r, q, words, exact=True) if alias else None
        number = r.digits(j + 1) if j is not None and r.at(j) == "_" else None
        if number is not None and not (r.at(number[0]).isalnum() or r.at(number[0]) == "_"):
            return Found(q, number[0], kind, number[1], False)
    return None


def _glued_kind(r: Reader, i: int, words: tuple[str, ...]) -> int | None:
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


STARTS = re.compile("[" + re.escape(OPENERS) + r"\[{&\\" + "]|[PDEICANTMFSpdeica]")
"""Where a placeholder may start: a bracket, ``&`` or ``\\``, or the first letter of a kind
(aliases bare only in capitals)."""
assert {words[0][0] for words in _CANONICAL.values()} == set("PDEICA")


def parse(r: Reader, q: int) -> Found | None:
    """The placeholder starting at skeleton offset ``q``, or None; raises :class:`NeedMore`
    when that depends on what the stream has not sent yet."""
    c = r.text[q]
    if c.isalpha():
        return _unbracketed(r, q)
    return _bracketed(r, q)
