"""Runs of digits in a text, and the values glued together in one.

:func:`digit_runs` finds maximal runs of ASCII digits with single separators (spaces, dashes,
dots, slashes), leaving IBANs and IPv4 addresses out; :func:`glued_numbers` splits a run of 14
or more digits that holds several values (a card and a CPR, a CPR and a phone number) with
:func:`podium.pii.numbers.split_digit_run` and says where each value is. Pure functions on
strings: the recognizers (:mod:`podium.pii.recognizers`) and the segmented view
(:mod:`podium.pii.segment`) share them.
"""

from __future__ import annotations

import re
from functools import lru_cache

from podium.pii.numbers import Piece, iban_spans, split_digit_run

__all__ = ["DASHES", "IPV4_RUN", "PHONE_CONTEXT", "digit_runs", "glued_numbers"]

DASHES = r"\-\u2010\u2011\u2012\u2013\u2014\u2212"
"""The dashes a number may be written with (hyphen, Unicode dashes, minus), for a regular
expression's character class: the hyphen escaped."""

PHONE_CONTEXT = (
    "phone", "telephone", "cell", "mobile", "call", "contact", "sms", "text me",
    "telefon", "tlf", "mobil", "ring", "kontakt", "opkald",
)  # fmt: skip
"""Words that make a run of digits a phone number: the phone recognizer's context words, and what
lets :func:`glued_numbers` read phone numbers chained to phone numbers."""

_DIGIT_RUN = re.compile(rf"\d(?:(?:[ ./{DASHES}]| [{DASHES}] )?\d)*")
_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
IPV4_RUN = re.compile(rf"(?<![\d.])(?:{_OCTET}\.){{3}}(?:{_OCTET}|\d{{2,6}}(?:\.{_OCTET}){{3}})(?![\d])")
"""An IPv4 address, or two glued (``203.0.113.47198.51.100.23``): not a run of digits to split."""


def digit_runs(text: str) -> list[tuple[int, int, str, dict[int, str]]]:
    """Maximal runs of ASCII digits with single spaces, dashes, dots or slashes between them
    (or a dash between two spaces, ``070491 - 2846``, taken as the dash), IBANs left out:
    (start, end, the digits, digit offset → the separator written before it)."""
    masked = text
    for start, end in iban_spans(text) + [m.span() for m in IPV4_RUN.finditer(text)]:
        masked = masked[:start] + "x" * (end - start) + masked[end:]  # an IBAN's, an IP address's digits
    runs = []
    for m in _DIGIT_RUN.finditer(masked):
        run = m.group()
        if not run.isascii():
            continue
        digits: list[str] = []
        seps: dict[int, str] = {}
        for c in run:
            if c.isdigit():
                digits.append(c)
            elif seps.get(len(digits)) != "-":  # " - " is the dash (the run is ASCII: no other dash)
                seps[len(digits)] = c
        runs.append((m.start(), m.end(), "".join(digits), seps))
    return runs


def _digit_offsets(run: str) -> list[int]:
    """offsets[k] = position in ``run`` of its k-th digit; offsets[len] = len(run)."""
    offsets = [i for i, c in enumerate(run) if c.isdigit()]
    return [*offsets, len(run)]


_AREA_CODE_BEFORE = re.compile(r"\([2-9]\d\d\) ?$")
_PHONE_CONTEXT_NEAR = re.compile(r"(?i:" + "|".join(re.escape(w) for w in PHONE_CONTEXT) + ")")


@lru_cache(maxsize=1024)
def _split_cached(digits: str, seps: tuple[tuple[int, str], ...], phones_alone: bool) -> tuple[Piece, ...]:
    """:func:`split_digit_run`, remembered: both languages and both views of a text see the same runs."""
    return tuple(split_digit_run(digits, dict(seps), phones_alone=phones_alone))


def glued_numbers(text: str) -> list[tuple[str, int, int, tuple[int, ...]]]:
    """(kind, start, end, seams) of every value inside a run of 14 or more digits that holds
    several (:func:`podium.pii.numbers.split_digit_run`; seams: text offsets where a merged phone
    number most likely splits); phone numbers chained to phone numbers count when a phone
    context word is within 40 characters before the run."""
    found = []
    for start, end, digits, seps in digit_runs(text):
        if len(digits) < 14:
            continue
        context = bool(_PHONE_CONTEXT_NEAR.search(text, max(0, start - 40), start))
        offsets = _digit_offsets(text[start:end])
        for piece in _split_cached(digits, tuple(sorted(seps.items())), context):
            begin = start + offsets[piece.start]
            if piece.kind == "PHONE_NUMBER" and piece.start == 0:
                if text[begin - 1 : begin] == "+":
                    begin -= 1  # +45 20 12 34 56…: the country code's plus belongs to the number
                elif area := _AREA_CODE_BEFORE.search(text, max(0, begin - 6), begin):
                    begin = area.start()  # (623) 658-2476…: so does a US area code in parentheses
            seams = tuple(start + offsets[k] for k in piece.seams)
            found.append((piece.kind, begin, start + offsets[piece.end - 1] + 1, seams))
    return found
