"""Views of a text that the recognizers read instead of (or besides) the text itself, with
every span mapped back to the text (:class:`SegmentedView`): :func:`visible_view` without
invisible characters, and :func:`reading_view`, the text as a person reads it — invisible
characters left out, a letter and its combining marks composed (NFC) and marks that compose
with nothing dropped, a run of whitespace between digit groups read as one space, and
Cyrillic/Greek look-alike letters read as Latin in words that also have Latin letters
(:func:`read_lookalikes`). :mod:`podium.pii.segment` adds the glued-value view."""

from __future__ import annotations

import bisect
import re
import unicodedata
from dataclasses import dataclass

from podium.text import LATIN_LOOKALIKES, is_invisible, visible_characters

__all__ = ["SegmentedView", "read_lookalikes", "reading_view", "view_of", "visible_view"]


@dataclass(frozen=True)
class SegmentedView:
    """A text read another way: boundaries inserted, characters left out, composed or replaced.

    Attributes:
        text: the view.
        origin: per character of ``text``, its offset in the original text, or -1 for an
            inserted boundary.
        ends: per character, the end (exclusive) of what it stands for in the original text
            (a composed ``å`` stands for ``a`` and its combining ring; a collapsed run of
            whitespace for the whole run); None: ``origin + 1`` throughout.
        changed: the offsets in ``text`` where the view differs from the text it was made of (an
            inserted boundary, a character composed or replaced, one after characters left out),
            in order.
    """

    text: str
    origin: tuple[int, ...]
    ends: tuple[int, ...] | None = None
    changed: tuple[int, ...] = ()

    def _end(self, j: int) -> int:
        return self.origin[j] + 1 if self.ends is None else self.ends[j]

    def span(self, start: int, end: int) -> tuple[int, int] | None:
        """The original (start, end) of the view's ``text[start:end]``, inserted boundaries at
        its edges left out; None when it holds nothing but boundaries."""
        inside = [j for j in range(start, end) if self.origin[j] >= 0]
        if not inside:
            return None
        return self.origin[inside[0]], self._end(inside[-1])

    def differs(self, start: int, end: int) -> bool:
        """Whether the view's ``text[start:end]`` differs from what it was made of."""
        at = bisect.bisect_left(self.changed, start)
        return at < len(self.changed) and self.changed[at] < end

    def then(self, inner: SegmentedView) -> SegmentedView:
        """The view ``inner`` (a view of this view's text) as a view of the original text; its
        ``changed`` are inner's and those of this view's characters it keeps."""
        origin = tuple(self.origin[o] if o >= 0 else -1 for o in inner.origin)
        ends = tuple(self._end(o) if o >= 0 else -1 for o in inner.origin)
        mine = set(self.changed)
        changed = sorted(set(inner.changed) | {j for j, o in enumerate(inner.origin) if o in mine})
        return SegmentedView(inner.text, origin, ends, tuple(changed))


def view_of(original: str, chars: list[str], origin: list[int], ends: list[int]) -> SegmentedView | None:
    """The view of ``original`` made of ``chars`` (see :class:`SegmentedView`), or None when it
    is ``original`` itself."""
    changed = []
    previous_end = 0
    for j, (c, o, e) in enumerate(zip(chars, origin, ends, strict=True)):
        if o < 0:
            changed.append(j)
            continue
        if e - o != 1 or original[o] != c or o != previous_end:
            changed.append(j)
        previous_end = e
    if not changed and previous_end == len(original):
        return None
    return SegmentedView("".join(chars), tuple(origin), tuple(ends), tuple(changed))


def visible_view(text: str) -> SegmentedView | None:
    """``text`` without its invisible characters (:func:`podium.text.is_invisible`), or None
    when it has none: a value with a zero-width space or a soft hyphen inside
    (``0704\u200b912846``, ``Me\u00adtte``) reads as the value to a person and must read so to
    the recognizers. The view's spans map back to the text over the deleted characters. Linear.
    (:func:`reading_view` does this and more.)"""
    kept = visible_characters(text)
    if kept is None:
        return None
    return view_of(text, [text[i] for i in kept], kept, [i + 1 for i in kept])


_MARK_OR_INVISIBLE: dict[str, bool] = {}


def _mark_or_invisible(c: str) -> bool:
    """Whether ``c`` is a combining mark (Unicode category M) or draws nothing (:func:`is_invisible`)."""
    found = _MARK_OR_INVISIBLE.get(c)
    if found is None:
        found = unicodedata.category(c)[0] == "M" or is_invisible(c)
        if len(_MARK_OR_INVISIBLE) < 65536:
            _MARK_OR_INVISIBLE[c] = found
    return found


_NON_ASCII = re.compile(r"[^\x00-\x7f]")
_ODD_SPACE = re.compile(r"\s{2,}|[^\S ]")  # several whitespace characters, or one that is no space
_DASH_RUN = re.compile(r"(?<=\d)([-\u2010\u2011\u2012\u2013\u2014\u2212])\1{1,2}(?=\d)")
"""Two or three of the same hyphen or dash between digits (``22--06--28--91``): read as one."""
_LEFT_OF_GAP = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ)")
_RIGHT_OF_GAP = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ(+")


_LOOKALIKE = re.compile("[" + "".join(chr(c) for c in LATIN_LOOKALIKES) + "]")
_WORD = re.compile(r"[^\W\d_]+")


def read_lookalikes(text: str) -> str:
    """``text`` with the Cyrillic and Greek letters drawn like Latin ones
    (:data:`podium.text.LATIN_LOOKALIKES`) read as those Latin letters in every word that has
    a Latin letter too (``M\u0435tte`` → ``Mette``), one character for one; a word wholly in
    Cyrillic or Greek stays (``Мама`` is Russian). Linear."""
    if text.isascii() or not _LOOKALIKE.search(text):
        return text
    return _WORD.sub(_read_word, text)


def _read_word(m: re.Match[str]) -> str:
    word = m.group()
    if not _LOOKALIKE.search(word) or not any(_is_latin(c) for c in word):
        return word
    return word.translate(LATIN_LOOKALIKES)


def _is_latin(c: str) -> bool:
    if c.isascii():
        return c.isalpha()
    return unicodedata.name(c, "").startswith("LATIN ")


def reading_view(text: str) -> SegmentedView | None:
    """``text`` as a person reads it, or None when that is ``text`` itself:

    - invisible characters left out (:func:`podium.text.is_invisible`: ``0704\\u200b912846``,
      ``Me\\u00adtte``);
    - a letter or digit and the combining marks after it composed (NFC), so ``A\\u030ase``
      (NFD, as macOS and many PDFs write it) reads ``Åse``; marks that compose with nothing
      are left out (``0\\u03017…``, ``Kjær\\u0332gaard``), as are marks with no letter before them;
    - a run of whitespace between digit groups — a tab, a line break, several spaces, between
      ASCII letters or digits (or ``)`` before, ``(``/``+`` after) with a digit on at least one
      side — read as one space, so ``070491\\t2846``, ``4111  1111  1111  1111`` and
      ``DK50\\n0040…`` read as the numbers they are; between words it stays (a line break may
      end a name, :class:`~podium.pii.recognizers.PersonNameRecognizer`); two or three of the
      same hyphen or dash between digits read as one (``22--06--28--91``);
    - look-alike letters read as Latin (:func:`read_lookalikes`) once invisible characters are
      out, so a word they split (``Anic\u200b\u0430``) is read whole.

    The view's spans map back to the text over everything left out or composed. Linear."""
    chars: list[str] = []
    origin: list[int] = []
    ends: list[int] = []
    n = len(text)
    if any(_mark_or_invisible(m.group()) for m in _NON_ASCII.finditer(text)):
        i = 0
        while i < n:
            c = text[i]
            j = i + 1
            if _mark_or_invisible(c):  # an invisible character, or a mark with nothing to combine with
                i = j
                continue
            marks = []
            while j < n and _mark_or_invisible(text[j]):
                if not is_invisible(text[j]):
                    marks.append(text[j])
                j += 1
            read = unicodedata.normalize("NFC", c + "".join(marks)) if marks else c
            for x in read:
                if unicodedata.category(x)[0] != "M":
                    chars.append(x)
                    origin.append(i)
                    ends.append(j)
            i = j
    if origin:  # look-alikes in a word an invisible character split (Anic\u200b\u0430)
        chars = list(read_lookalikes("".join(chars)))
    composed = "".join(chars) if origin else text
    gaps = []
    for m in _ODD_SPACE.finditer(composed):
        before, after = composed[m.start() - 1 : m.start()], composed[m.end() : m.end() + 1]
        if before in _LEFT_OF_GAP and after in _RIGHT_OF_GAP and (before.isdigit() or after.isdigit()):
            gaps.append((m.start(), m.end(), " "))
    gaps += [(m.start(), m.end(), m.group(1)) for m in _DASH_RUN.finditer(composed)]
    gaps.sort()
    if not origin:
        if not gaps:
            return None
        chars, origin, ends = list(text), list(range(n)), list(range(1, n + 1))
    if gaps:
        out_chars, out_origin, out_ends = [], [], []
        at = 0
        for start, end, read in gaps:
            out_chars += chars[at:start]
            out_origin += origin[at:start]
            out_ends += ends[at:start]
            out_chars.append(read)
            out_origin.append(origin[start])
            out_ends.append(ends[end - 1])
            at = end
        chars, origin, ends = out_chars + chars[at:], out_origin + origin[at:], out_ends + ends[at:]
    return view_of(text, chars, origin, ends)
