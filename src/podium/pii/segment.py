"""A segmented view of a text: boundaries inserted where values are glued together.

Recognizers find a value by its edges — a CPR pattern wants no digit before it, an e-mail's
domain must end in a public suffix, a name is a run of name tokens separated by spaces — so
``a@x.dkb@y.dk``, ``…@example.orglars.moller@…``, ``MetteKjærgaard0704912846`` or a card
number glued to a CPR hide every value in them. :func:`segmented_view` inserts a boundary at
each glue point; :class:`~podium.pii.detect.Detector` runs the recognizers on the text *and*
on this view, maps the view's spans back to the text (:meth:`SegmentedView.span`) and keeps the
union. A boundary is a space, or a newline after a value made of digits (a newline ends a run of
digits, where a space would continue it).

Glue points, each found in one linear pass:

- a letter next to a run of five or more digits (``Kjærgaard0704912846``), except inside an
  IBAN or an e-mail address's local part (``abigail43@``), and a ``+`` with
  digits after a letter or digit (``Kjærgaard+45 20 12 34 56``);
- a change of case inside a word that starts a new word (``dkMette``, ``KJÆRGAARDMette``, an
  initial ``MorganG.``,
  ``TORPEYmartine`` where the lower-case rest is a known name; ``KAULilija``: the reading with
  more known names on its two sides);
- a word, or a stretch of one between changes of case, that is two or three bundled names and
  on no name list itself (``mettekjærgaard``, ``shelbySteffensennikola``),
  and, after a first name, a surname that runs on into an e-mail address's local part
  (``jordon hansseneugene.hosey@…``: at the end of the longest name it starts with); words
  inside a local part are not split otherwise (``lars.moller@`` is no ``mol`` + ``ler``);
- an e-mail domain that runs on into more letters: a label that starts with a top-level domain
  and goes on (``x.dkb@y.dk``, ``example.orglars.moller@…``, ``example.dkMette``) when the
  domain as written is not one or another ``@`` follows at once, or a valid domain runs into a
  letter no domain has (``example.orgøjvind``); of several such points, one where the rest
  starts with a known name wins, then one at a change of case (``deAlanna``: not the ``.deal``
  domain), then the last;
- a number right after an initial's dot (``Mette K.02.03.04-5641``);
- the start (after a letter or digit) and the end of an IBAN (:func:`podium.pii.numbers.iban_spans`);
- the edges of the values in a run of digits that holds several
  (:func:`podium.pii.recognizers.glued_numbers`).
"""

from __future__ import annotations

import itertools
import re
from functools import cache

from podium.pii.numbers import iban_spans
from podium.pii.recognizers import (
    SURNAME_ENDINGS,
    digit_runs,
    first_names,
    glued_numbers,
    single_label_tlds,
    surnames,
    valid_email_domain,
)
from podium.pii.views import SegmentedView, read_lookalikes, reading_view, view_of, visible_view

__all__ = [
    "SegmentedView",
    "glue_points",
    "name_joints",
    "read_lookalikes",
    "reading_view",
    "segmented_view",
    "visible_view",
]


_LETTERS = re.compile(r"[^\W\d_]+")
_LETTER_DIGIT = re.compile(r"(?<=[^\W\d_])(?=\d)|(?<=\d)(?=[^\W\d_])|(?<=[^\W_])(?=[+(]\d)")
_INITIAL_DIGIT = re.compile(r"(?<=(?<![^\W\d_])[^\W\d_]\.)(?=\d)")
_GLUED_IPV4 = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}(\d{2,6})(?:\.\d{1,3}){3}(?![\d.])")
_DOMAIN = re.compile(r"[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")
_MAX_NAME_PARTS = 3
_MIN_GLUED_DIGITS = 5
"""A letter/digit seam counts only next to a run of at least this many digits (every numeric
value has more; ``10km`` or ``sha256`` hide nothing)."""


def glue_points(text: str) -> dict[int, str]:
    """Offset → the boundary to insert before ``text[offset]`` (see the module docstring)."""
    points: dict[int, str] = {}
    ibans = iban_spans(text)

    def add(offset: int, boundary: str = " ") -> None:
        if not 0 < offset < len(text) or points.get(offset) == "\n":  # a newline (digits) wins over a space
            return
        if boundary == " " and (text[offset - 1].isspace() or text[offset].isspace()):
            return
        points[offset] = boundary

    for start, end in ibans:
        if start > 0 and text[start - 1].isalnum():
            add(start)
        add(end, "\n")
    inside = bytearray(len(text) + 1)  # 1: inside an IBAN or an e-mail local part (no letter/digit seam)
    local_parts = _local_parts(text)
    for start, end in (*ibans, *local_parts):
        inside[start + 1 : end] = b"\x01" * max(0, end - start - 1)
    local_starts = bytearray(len(text) + 1)
    for start, _ in local_parts:
        local_starts[start] = 1
    run_digits = [0] * (len(text) + 1)  # per offset: the digits of the digit run it is in
    run_interior = bytearray(len(text) + 1)
    for start, end, digits, _ in digit_runs(text):
        run_digits[start:end] = [len(digits)] * (end - start)
        run_interior[start + 1 : end] = b"\x01" * max(0, end - start - 1)
    for m in _LETTER_DIGIT.finditer(text):
        at = m.start()
        digit_side = at if text[at].isdigit() else at - 1
        if text[at] in "+(" or (not inside[at] and run_digits[digit_side] >= _MIN_GLUED_DIGITS):
            add(at)
    for m in _INITIAL_DIGIT.finditer(text):  # "Mette K.02.03.04-5641": an initial's dot, then a number
        add(m.start())
    for m in _GLUED_IPV4.finditer(text):  # 203.0.113.47198.51.100.23: the 4th octet runs into the next address
        seam = _octet_seam(m.group(1))
        if seam is not None:
            add(m.start(1) + seam, "\n")
    for m in _LETTERS.finditer(text):
        if inside[m.start()] and not local_starts[m.start()]:
            continue  # inside an e-mail address's local part: lars.moller@ is no "mol" + "ler"
        if any(local_starts[m.start() : m.end()]):  # the word an address's local part starts in
            if _after_first_name(text, m.start()):  # jordon hansseneugene.hosey@…: a name runs into it
                seam = _longest_name_prefix(m.group())
                if seam is not None:
                    add(m.start() + seam)
            continue
        word = m.group()
        if len(word) >= 3 and word[-1].isupper() and word[-2].islower() and text[m.end() : m.end() + 1] == ".":
            add(m.end() - 1)  # an initial glued to a name: MorganG. Nguyen
        for offset in _word_glue(word):
            if not any(0 < start - (m.start() + offset) <= 2 for start, _ in ibans):
                add(m.start() + offset)  # (MACCOLEfi51…: the IBAN's start is the seam, not E|fi)
    for offset in _email_glue(text):
        add(offset)
    for _, start, end, seams in glued_numbers(text):
        for at in (start, end, *seams):
            if run_interior[at]:  # a run's own edges are edges already ("(410) 781-1211…" stays whole)
                add(at, "\n")
    return points


def segmented_view(text: str) -> SegmentedView | None:
    """``text`` with a boundary at each glue point, and each name joint (:func:`name_joints`,
    found once the boundaries are in: ``…@example.comALANA-TORRES``) read as a space; None when
    it has neither."""
    points = glue_points(text)
    if not points:
        joints = name_joints(text)
        if not joints:
            return None
        chars, origin = list(text), list(range(len(text)))
    else:
        chars, origin = [], []
        for i, c in enumerate(text):
            boundary = points.get(i)
            if boundary is not None:
                chars.append(boundary)
                origin.append(-1)
            chars.append(c)
            origin.append(i)
        joints = name_joints("".join(chars))
    for j in joints:
        chars[j] = " "
    return view_of(text, chars, origin, [o + 1 if o >= 0 else -1 for o in origin])


_JOINED_WORDS = re.compile(r"(?<![^\W\d_])([^\W\d_]{2,})([-._])(?=([^\W\d_]{2,})(?![^\W\d_]))")


def name_joints(text: str) -> list[int]:
    """Offsets of a ``-``, ``.`` or ``_`` that joins two names into one word (``METTE-KJÆRGAARD``,
    ``Mette.Kjærgaard``, ``John_Smith``, ``Holm_Mette``): a first name before a known name or a
    word with a typical surname ending (-sen, -gaard, … as the name recognizer has them), or a
    known surname before a first name; not inside an e-mail address's local part
    (``lars.holm@`` is the address's). Code identifiers such as ``Max_Length`` or
    ``Odd_Occurrence`` (Max and Odd are first names) are no joint. The segmented view reads a
    joint as a space, so the name recognizer sees the name tokens it knows (and applies its own
    rules to them). Linear."""
    if not any(c in text for c in "-._"):
        return []
    names, firsts = _all_names(), first_names()
    inside = bytearray(len(text) + 1)
    for start, end in _local_parts(text):
        inside[start:end] = b"\x01" * (end - start)
    found = []
    for m in _JOINED_WORDS.finditer(text):
        if inside[m.start(2)]:
            continue
        left, right = m.group(1).casefold(), m.group(3).casefold()
        surname_like = right in names or right.endswith(SURNAME_ENDINGS)
        if (left in firsts and surname_like) or (left in surnames() and right in firsts):
            found.append(m.start(2))
    return found


def _octet_seam(digits: str) -> int | None:
    """Where the last octet of one IPv4 address ends and the first of the next begins in
    ``digits`` (both 0–255, no leading zero), or None."""
    for k in range(1, min(3, len(digits) - 1) + 1):
        left, right = digits[:k], digits[k:]
        if len(right) <= 3 and all(int(x) <= 255 and (x == "0" or x[0] != "0") for x in (left, right)):
            return k
    return None


def _after_first_name(text: str, start: int) -> bool:
    """Whether the word before ``text[start]`` (separated by spaces) is, or ends in, a known first
    name (``…@example.comkaspar johnsonz@``: the name glued to the address before it)."""
    before = text[max(0, start - 40) : start]
    m = re.search(r"([^\W\d_]+)[ \t]+$", before)
    if m is None:
        return False
    word, names = m.group(1).casefold(), first_names()
    return any(word[k:] in names for k in range(0, len(word) - 2))


@cache
def _all_names() -> frozenset[str]:
    return first_names() | surnames()


def _word_glue(word: str) -> list[int]:
    """Offsets inside a word (a run of letters) where a new word starts: a change of case, and
    the seams of bundled names in the word or in a stretch of it between changes of case."""
    cuts = []
    names = _all_names()
    for k in range(2, len(word) - 2):  # two letters before a seam, three after (not iPhone, DVDs)
        here, before, after = word[k], word[k - 1], word[k + 1]
        if here.isupper() and before.islower():  # dkMette, kjærgaardMETTE
            cuts.append(k)
        elif before.isupper() and here.isupper() and after.islower():
            # KJÆRGAARDMette (a new word from the last capital) or TORPEYmartine (from the lower case):
            # the reading with more known names on its two sides wins (KAULilija: KAUL + ilija, not
            # KAU + Lilija), the capital's on a tie
            def known(cut: int) -> int:
                return (word[:cut].casefold() in names) + (word[cut:].casefold() in names)

            cuts.append(k + 1 if known(k + 1) > known(k) else k)
    # names run together in a stretch between changes of case: shelby|Steffensen|nikola
    edges = [0, *cuts, len(word)]
    return sorted({*cuts, *(a + seam for a, b in itertools.pairwise(edges) for seam in _name_seams(word[a:b]))})


def _longest_name_prefix(word: str) -> int | None:
    """The end of the longest known name (three letters or more) that ``word`` starts with and
    goes on after (``hansseneugene`` → 7), or None."""
    folded, names = word.casefold(), _all_names()
    if len(folded) != len(word):
        return None
    for k in range(len(folded) - 1, 2, -1):
        if folded[:k] in names:
            return k
    return None


def _name_seams(word: str) -> list[int]:
    """Where a word that is two or three names run together splits (``mettekjærgaard`` →
    [5]); [] when the word is a name itself or no such split exists."""
    folded = word.casefold()
    if len(folded) < 6 or len(folded) != len(word):
        return []
    names_first, names_last = first_names(), surnames()
    if folded in names_first or folded in names_last:
        return []
    n = len(folded)
    # reach[i]: the fewest names that make folded[:i], and where the last one started
    reach: list[tuple[int, int] | None] = [None] * (n + 1)
    reach[0] = (0, 0)
    for i in range(n):
        at = reach[i]
        if at is None or at[0] >= _MAX_NAME_PARTS:
            continue
        for j in range(i + 3, min(n, i + 20) + 1):
            part = folded[i:j]
            if part in names_first or part in names_last:
                best = reach[j]
                if best is None or at[0] + 1 < best[0]:
                    reach[j] = (at[0] + 1, i)
    end = reach[n]
    if end is None or end[0] < 2:
        return []
    seams = []
    j = n
    while j > 0:
        step = reach[j]
        if step is None:  # not reached: cannot happen on the path back from reach[n]
            return []
        j = step[1]
        if j > 0:
            seams.append(j)
    return sorted(seams)


_LOCAL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._%+-")


def _local_parts(text: str) -> list[tuple[int, int]]:
    """(start, end) of the local parts of e-mail addresses (at most 64 characters, as RFC 5321
    allows): ``abigail43`` stays one word."""
    parts = []
    for at in (i for i, c in enumerate(text) if c == "@"):
        start = at
        while start > 0 and at - start < 64 and text[start - 1] in _LOCAL_CHARS:
            start -= 1
        if start < at:
            parts.append((start, at))
    return parts


def _email_glue(text: str) -> list[int]:
    """Offsets where an e-mail domain stops and glued text (another address's local part, a
    name) starts."""
    found = []
    tlds = single_label_tlds()
    names = _all_names()
    for at in (i for i, c in enumerate(text) if c == "@"):
        m = _DOMAIN.match(text, at + 1)
        if m is None:
            continue
        run = m.group()
        glued = m.end() < len(text) and text[m.end()] == "@"
        if not glued and (m.end() == len(text) or not text[m.end()].isalpha()) and valid_email_domain(run):
            continue
        if not glued and m.end() < len(text) and valid_email_domain(run):  # example.orgøjvind: a letter no
            found.append(m.end())  # domain has (the pattern took every one it may) starts the next word
            continue
        best: tuple[bool, bool, int] | None = None
        label_start = run.index(".") + 1
        for label in run[label_start:].split("."):
            for p in range(2, len(label)):
                if label[:p].casefold() not in tlds:
                    continue
                cut = label_start + p
                rest = run[cut:]
                if not rest[:1].isalnum() or not valid_email_domain(run[:cut]):
                    continue
                lead = _LETTERS.match(rest)
                case_change = run[cut - 1].islower() and run[cut].isupper()  # deAlanna: de | Alanna, not deal | anna
                key = (lead is not None and lead.group().casefold() in names, case_change, cut)
                if best is None or key > best:
                    best = key
            label_start += len(label) + 1
        if best is not None:
            found.append(at + 1 + best[2])
    return found
