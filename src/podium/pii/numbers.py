"""Checksums and shapes of the numeric identifiers podium masks, and the splitting of glued runs.

Pure functions on strings (of Presidio only its table of IBAN patterns is used): the recognizers
(:mod:`podium.pii.recognizers`) and the segmented view (:mod:`podium.pii.segment`) share them.

- :func:`cpr_birth_date`: the date a Danish CPR number encodes (its only check: no modulus 11).
- :func:`luhn_ok`, :func:`is_card`: payment cards, 13–19 digits, Luhn, issuer digit 2–6 (1 for
  the 15-digit UATP cards).
- :func:`iban_at`: an IBAN starting at a position, in any case, with single spaces or hyphens
  anywhere, its length fixed by the country (Presidio's per-country patterns) and its ISO 7064
  mod-97 checksum valid. Because the length is the country's, an IBAN glued to more letters or
  digits still ends where it should.
- :func:`phone_shape`: whether a digit string is a national number of DK (8 digits), the US
  (10, or 7 without the area code) or GB (11 starting with 0), with or without a country code.
- :func:`split_digit_run`: the values a run of digits glued together is made of (a card and a
  CPR, a CPR and a phone number, ...), by dynamic programming over the run, linear in its length.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from functools import cache

__all__ = [
    "MAX_RUN_DIGITS",
    "Piece",
    "cpr_birth_date",
    "iban_at",
    "iban_spans",
    "is_card",
    "luhn_ok",
    "phone_shape",
    "split_digit_run",
]


def cpr_birth_date(digits: str) -> date | None:
    """The birth date a 10-digit CPR number encodes, or None when it is no valid date.

    The 7th digit gives the century (CPR office rules): 0–3 → 1900s; 4 and 9 → 2000–2036 for
    years 00–36, else 1900s; 5–8 → 2000–2057 for years 00–57, else 1858–1899.
    """
    if len(digits) != 10 or not digits.isdigit() or not digits.isascii():
        return None
    day, month, yy, seventh = int(digits[0:2]), int(digits[2:4]), int(digits[4:6]), int(digits[6])
    if seventh <= 3:
        century = 1900
    elif seventh in (4, 9):
        century = 2000 if yy <= 36 else 1900
    else:
        century = 2000 if yy <= 57 else 1800
    try:
        return date(century + yy, month, day)
    except ValueError:
        return None


_DOUBLED = (0, 2, 4, 6, 8, 1, 3, 5, 7, 9)  # digit sum of 2·d


def luhn_ok(digits: str) -> bool:
    """Whether an ASCII digit string passes the Luhn check (ISO/IEC 7812)."""
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = ord(c) - 48
        total += _DOUBLED[d] if i % 2 else d
    return total % 10 == 0


def is_card(digits: str) -> bool:
    """A payment card number: 13–19 ASCII digits, issuer digit 2–6 (or a 15-digit UATP number
    starting with 1), Luhn-valid."""
    n = len(digits)
    if not 13 <= n <= 19 or not digits.isascii() or not digits.isdigit():
        return False
    if not ("2" <= digits[0] <= "6" or (digits[0] == "1" and n == 15)):
        return False
    return luhn_ok(digits)


@cache
def _iban_patterns() -> dict[str, re.Pattern[str]]:
    """Country → Presidio's pattern for its IBANs (fixed length; optional spaces ignored here,
    since it is matched against the compact upper-case form)."""
    from podium.pii._presidio import regex_per_country

    return {country: re.compile(pattern) for country, pattern in regex_per_country.items()}


def _iban_checksum_ok(compact: str) -> bool:
    """ISO 7064 mod 97-10 on an upper-case compact IBAN."""
    rearranged = compact[4:] + compact[:4]
    number = "".join(str(int(c, 36)) for c in rearranged)
    return int(number) % 97 == 1


_IBAN_SEPARATORS = " -./_"  # the checksum, the length and the country's pattern make any of them safe


def _ascii_alnum(s: str) -> bool:
    return s.isascii() and s.isalnum()


def iban_at(text: str, start: int) -> int | None:
    """The end of an IBAN that starts at ``text[start]``, or None.

    The IBAN may be in any case and have one space, hyphen, dot, slash or underscore between any
    two characters (after its first four); it is
    as long as its country's IBANs are (so what follows it, glued or not, is not part of it) and
    its checksum and its country's BBAN pattern must hold.
    """
    head = text[start : start + 4]
    if len(head) < 4 or not (head[:2].isascii() and head[:2].isalpha() and head[2:].isascii() and head[2:].isdigit()):
        return None
    pattern = _iban_patterns().get(head[:2].upper())
    if pattern is None:
        return None
    chars: list[str] = []
    ends: list[int] = []  # ends[k]: the text offset after the (k+1)-th character
    i = start
    while i < len(text) and len(chars) < 34:
        c = text[i]
        if c.isascii() and c.isalnum():
            chars.append(c.upper())
            i += 1
            ends.append(i)
        elif c in _IBAN_SEPARATORS and len(chars) >= 4 and _ascii_alnum(text[i + 1 : i + 2]):
            i += 1
        else:
            break
    compact = "".join(chars)
    for length in range(len(compact), 14, -1):  # a country's pattern fits one length only
        if pattern.fullmatch(compact[:length]) and _iban_checksum_ok(compact[:length]):
            return ends[length - 1]
    return None


_IBAN_HEAD = re.compile(r"(?=[A-Za-z]{2}\d{2})")


def iban_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every IBAN in ``text`` (see :func:`iban_at`), not overlapping, in order.
    Starts are tried anywhere, also inside a word, so an IBAN glued to a name is found."""
    spans: list[tuple[int, int]] = []
    covered = 0
    for m in _IBAN_HEAD.finditer(text):
        if m.start() < covered:
            continue
        end = iban_at(text, m.start())
        if end is not None:
            spans.append((m.start(), end))
            covered = end
    return spans


def phone_shape(digits: str) -> str | None:
    """The region whose national (or country-coded) number shape ``digits`` has, or None.

    DK: 8 digits starting 2–9, or that after 45 / 0045. US: 10 digits NXX-NXX-XXXX (N = 2–9),
    after an optional 1 or 001; a 7-digit local NXX-XXXX. GB: 11 digits starting 0 then 1–9, or
    44 or 0044 and 10 digits. Shapes only: a run of digits with one of these lengths is not necessarily a
    phone number, which is why the callers want a context word, separators or a neighbour.
    """
    n = len(digits)
    if not digits.isascii() or not digits.isdigit():
        return None
    if n == 8 and digits[0] >= "2":
        return "DK"
    if (n == 10 and digits.startswith("45") and digits[2] >= "2") or (n == 12 and digits.startswith("0045")):
        return "DK"
    if n == 10 and digits[0] >= "2" and digits[3] >= "2":
        return "US"
    if n == 11 and digits[0] == "1" and digits[1] >= "2" and digits[4] >= "2":
        return "US"
    if n == 7 and digits[0] >= "2":
        return "US"
    if n == 11 and digits[0] == "0" and digits[1] >= "1":
        return "GB"
    if n == 12 and digits.startswith("44") and digits[2] >= "1":
        return "GB"
    if (n == 14 and digits.startswith("0044")) or (n == 13 and digits.startswith("001")):
        return phone_shape(digits[2:])  # 00: the international prefix of most of Europe
    return None


@dataclass(frozen=True)
class Piece:
    """One value inside a digit run: digits ``start:end`` of the run (separators not counted);
    ``seams``: where a phone number merged from several (see :func:`split_digit_run`) most
    likely splits, as digit offsets of the run."""

    kind: str  # DK_CPR, CREDIT_CARD or PHONE_NUMBER
    start: int
    end: int
    seams: tuple[int, ...] = ()


_STRONG = ("DK_CPR", "CREDIT_CARD")
_STRONG_LENGTHS = (10, 13, 14, 15, 16, 17, 18, 19)
_PHONE_LENGTHS = (7, 8, 10, 11, 12, 13, 14)
MAX_RUN_DIGITS = 400
"""Longer runs are not split (that is a number, not twenty glued values); the whole-run
recognizers still see them."""


def split_digit_run(digits: str, seps: Mapping[int, str] | None = None, *, phones_alone: bool = False) -> list[Piece]:
    """The values a run of digits is made of, when it is more than one value; else ``[]``.

    ``digits`` are the run's digits without separators; ``seps`` maps a digit offset to the
    separator written before that digit. A cover splits the run into pieces — a card
    (:func:`is_card`) or a CPR (:func:`cpr_birth_date`), the strong kinds; a phone number
    (:func:`phone_shape`), the weak one — and loose digits. A piece's own separators must be
    ones its kind is written with: a CPR's only after the day and the month (both, the same
    character) and before the serial number; a card's spaces or hyphens; a phone number's no
    slash. The best cover leaves the fewest digits loose, then has the fewest phone pieces
    grouped unlike their country's numbers (``223-8464`` + ``842-356-2979``, not
    ``223-8464842`` + ``356-2979``), then the fewest unsound seams (below), then puts the most
    digits in strong pieces, then in phone pieces, then has the fewest pieces. Of its pieces
    those are kept whose both ends are sound: an end of the run, a separator, or a seam with
    another piece where one of the two is strong (any seam when ``phones_alone``: a phone
    context word is near). Between kept pieces there is then either nothing, or phone numbers
    only with a space or hyphen among them (``020 7946 85276793 9684``: two numbers glued), or
    with dots where each of them is grouped as its country writes it (``07665 42912507817.341.954``),
    kept as one phone number, or digits that make no value — and a kept piece glued to those without
    a separator is dropped too, so that a long number is never taken apart
    (``6775685320645824322581…``).

    Dynamic programming over the run with a fixed set of piece lengths: O(len(digits)).
    """
    n = len(digits)
    if n < 14 or n > MAX_RUN_DIGITS:
        return []
    seps = seps or {}
    candidates = [_candidates(digits, i, seps) for i in range(n)]
    # best[i][state]: the best cover of digits[:i] whose last part is of that state, scored
    # (-loose digits, -phone pieces in an unusual grouping, -unsound seams, strong digits,
    # phone digits, -pieces)
    best: list[list[tuple[int, int, int, int, int, int] | None]] = [[None] * 4 for _ in range(n + 1)]
    back: list[list[tuple[int, int, str | None]]] = [[(0, 0, None)] * 4 for _ in range(n + 1)]
    best[0][_START] = (0, 0, 0, 0, 0, 0)
    for i in range(n):
        for state in range(4):
            here = best[i][state]
            if here is None:
                continue
            loose, odd, unsound, strong, weak, count = here
            for length, kind in candidates[i]:
                if kind is None:
                    glued = state in (_STRONG_STATE, _PHONE_STATE) and i not in seps
                    step, score = _LOOSE, (loose - 1, odd, unsound - glued, strong, weak, count)
                else:
                    step = _STRONG_STATE if kind in _STRONG else _PHONE_STATE
                    ok = i == 0 or i in seps or _seam_ok(state, step, phones_alone)
                    unusual = step == _PHONE_STATE and not _phone_grouping_ok(i, length, seps)
                    strong_add = length if step == _STRONG_STATE else 0
                    weak_add = length if step == _PHONE_STATE else 0
                    score = (loose, odd - unusual, unsound - (not ok), strong + strong_add, weak + weak_add, count - 1)
                j = i + length
                current = best[j][step]
                if current is None or score > current:
                    best[j][step] = score
                    back[j][step] = (i, state, kind)
    state = max((s for s in range(4) if best[n][s] is not None), key=lambda s: best[n][s] or ())
    found: list[Piece] = []
    j = n
    while j > 0:
        i, previous, kind = back[j][state]
        if kind is not None:
            found.append(Piece(kind, i, j))
        j, state = i, previous
    found.reverse()
    if not found or (len(found) == 1 and (found[0].start, found[0].end) == (0, n)):
        return []  # one value, or none: the whole-run recognizers' business
    return _sound_pieces(found, n, seps, phones_alone)


_START, _LOOSE, _STRONG_STATE, _PHONE_STATE = range(4)
_CARD_GROUPINGS = {13: {4, 8, 12}, 14: {4, 10}, 15: {4, 10}, 16: {4, 8, 12}, 17: {4, 8, 12, 16}, 18: {4, 8, 12, 16},
                   19: {4, 8, 12, 16}}  # fmt: skip
"""Card groups by length: 4-4-4-4(-3), Amex 4-6-5, Diners 4-6-4."""


def _seam_ok(previous: int, step: int, phones_alone: bool) -> bool:
    """Whether two glued pieces (no separator between) make a sound seam."""
    if previous in (_START, _LOOSE):
        return False
    if _STRONG_STATE in (previous, step):
        return True
    return phones_alone


def _candidates(digits: str, i: int, seps: Mapping[int, str]) -> list[tuple[int, str | None]]:
    """(length, kind) of the pieces that may start at digit ``i`` (kind None: one loose digit)."""
    n = len(digits)
    found: list[tuple[int, str | None]] = [(1, None)]
    for length in _STRONG_LENGTHS:
        if i + length > n:
            break
        piece = digits[i : i + length]
        inner = {k - i: seps[k] for k in range(i + 1, i + length) if k in seps}
        if length == 10 and _cpr_separators_ok(inner) and cpr_birth_date(piece) is not None:
            found.append((length, "DK_CPR"))
        elif length >= 13 and _card_separators_ok(inner, length) and is_card(piece):
            found.append((length, "CREDIT_CARD"))
    for length in _PHONE_LENGTHS:
        if i + length > n:
            break
        if all(seps.get(k) != "/" for k in range(i + 1, i + length)) and phone_shape(digits[i : i + length]):
            found.append((length, "PHONE_NUMBER"))
    return found


_PHONE_GROUPINGS: dict[int, tuple[frozenset[int], ...]] = {
    7: (frozenset({3}),),  # NXX-XXXX
    8: (frozenset({2, 4, 6}), frozenset({4})),  # NN NN NN NN, NNNN NNNN
    10: (frozenset({3, 6}), frozenset({2, 4, 6, 8}), frozenset({2, 6}), frozenset({2})),  # US; 45 + DK
    11: (frozenset({3, 7}), frozenset({4, 7}), frozenset({5}), frozenset({5, 8}), frozenset({1, 4, 7})),  # GB; 1 + US
    12: (frozenset({4, 6, 8, 10}), frozenset({4, 8}), frozenset({2, 6}), frozenset({2, 5})),  # 0045 + DK; 44 + GB
    13: (frozenset({3, 6, 9}), frozenset({3})),  # 001 + US
    14: (frozenset({4, 8}), frozenset({4, 7}), frozenset({4})),  # 0044 + GB
}


def _phone_grouping_ok(i: int, length: int, seps: Mapping[int, str]) -> bool:
    """Whether a phone piece's own separators (none at all is fine) group its digits the way its
    country writes them: 3-4, 2-2-2-2, 4-4, 3-3-4, 3-4-4, 4-3-4, 5-6, ..."""
    inner = frozenset(k - i for k in range(i + 1, i + length) if k in seps)
    return not inner or inner in _PHONE_GROUPINGS.get(length, ())


def _card_separators_ok(inner: Mapping[int, str], length: int) -> bool:
    """Whether separators inside a card piece are none, or spaces or hyphens — or one dot or
    slash throughout — in all of its length's groups (a 19-digit ``2720-9141-9615-4774394`` is
    no card)."""
    if not inner:
        return True
    kinds = set(inner.values())
    return (kinds <= {" ", "-"} or len(kinds) == 1) and set(inner) == _CARD_GROUPINGS.get(length)


def _sound_pieces(found: list[Piece], n: int, seps: Mapping[int, str], phones_alone: bool) -> list[Piece]:
    """The pieces of a cover that stand on sound boundaries (see :func:`split_digit_run`)."""
    kind_at_start = {p.start: p.kind for p in found}
    kind_at_end = {p.end: p.kind for p in found}

    def sound(at: int) -> bool:
        if at in (0, n) or at in seps:
            return True
        left, right = kind_at_end.get(at), kind_at_start.get(at)
        if left is None or right is None:
            return False  # against loose digits
        return left in _STRONG or right in _STRONG or phones_alone

    kept = [p for p in found if sound(p.start) and sound(p.end)]
    # what is left between kept pieces: phone numbers only, with a separator → one phone number;
    # anything else glued to a kept piece (no separator between) → that piece is no value of its own
    result: list[Piece] = []
    edges = [0, *(x for p in kept for x in (p.start, p.end)), n]
    revoked: set[Piece] = set()
    for start, end in zip(edges[::2], edges[1::2], strict=True):
        if start == end:
            continue
        inside = [p for p in found if start <= p.start and p.end <= end]
        covered = sum(p.end - p.start for p in inside)
        phones_only = covered == end - start and all(p.kind == "PHONE_NUMBER" for p in inside)
        # dots or slashes: a decimal (302.90938549487214), unless every phone number in the stretch is
        # grouped the way its country writes it (07817.341.954 glued to 07665 429125)
        grouped = all(
            p.kind == "PHONE_NUMBER"
            and any(p.start < k < p.end for k in seps)
            and _phone_grouping_ok(p.start, p.end - p.start, seps)
            for p in inside
        )
        separated = any(start < k < end for k in seps) and (
            grouped or all(seps.get(k) not in (".", "/") for k in range(start + 1, end))
        )
        if phones_only and separated:
            result.append(Piece("PHONE_NUMBER", start, end, tuple(p.start for p in inside if p.start > start)))
            continue
        for p in kept:
            if (p.end == start and start not in seps) or (p.start == end and end not in seps):
                revoked.add(p)
    result += [p for p in kept if p not in revoked]
    return sorted(result, key=lambda p: p.start)


def _cpr_separators_ok(inner: Mapping[int, str]) -> bool:
    """Whether separators at these offsets inside a 10-digit piece are a CPR's: DD?MM?YY?SSSS,
    the two date separators both there and the same, or both absent; or DD MM YY SS SS, one
    separator throughout."""
    if set(inner) == {2, 4, 6, 8}:
        return len(set(inner.values())) == 1
    if not set(inner) <= {2, 4, 6}:
        return False
    return (2 in inner) == (4 in inner) and inner.get(2) == inner.get(4)
