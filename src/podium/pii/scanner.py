"""The scan that restoration runs over a reply, whole or streamed, with the placeholder parser of
:mod:`podium.pii.placeholders`: :class:`Scanner` decides each place of the reply's skeleton
(:func:`skeleton`) as soon as the text that has arrived decides it, so :meth:`Vault.restore
<podium.pii.vault.Vault.restore>` and :class:`~podium.pii.vault.StreamRestorer` give the same
text for the same reply in any chunks.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable

from podium.pii.placeholders import STARTS, Found, NeedMore, Reader, parse
from podium.text import LATIN_LOOKALIKES, is_invisible

__all__ = ["Scanner", "skeleton"]


def skeleton(text: str, base: int = 0) -> tuple[str, list[int]]:
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
    has arrived decides it (:class:`NeedMore` otherwise), and calls ``replace`` for each. The
    text given whole (:meth:`Vault.restore`) and the same text in any pieces give the same
    output, and the same :class:`UnknownPlaceholder`: every decision is made on the same
    characters. Linear in the text: each place is decided once, reading at most
    :data:`~podium.pii.placeholders.MAX_PLACEHOLDER` skeleton characters, again on each later chunk while undecided."""

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
        text, origin = skeleton(chunk, self._raw_end)
        self._raw_end += len(chunk)
        if chunk:
            self._pending.append(chunk)
        if text:
            self._skeleton += text
            self._origin += origin
        reader = Reader(self._skeleton, final)
        base = self._skeleton_base
        q = self._scan - base
        out: list[str] = []
        emitted = self._emitted
        while True:
            m = STARTS.search(self._skeleton, q)
            if m is None:
                q = len(self._skeleton)
                break
            q = m.start()
            try:
                found = parse(reader, q)
            except NeedMore:
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
