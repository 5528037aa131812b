"""The per-request vault: typed, numbered placeholders and their originals, and restoration.

A value gets one placeholder for the whole request (``<PERSON_1>``, ``<DK_CPR_1>``, ...), so every
step of a workflow — and a nested request — refers to the same person by the same name. The key
is the value *as written*: ``070491-2846`` and ``0704912846``, or ``Mette Kjærgaard`` and
``METTE KJÆRGAARD``, get two placeholders, so each comes back exactly as it was written. The
vault lives in memory for one request only; it is never written to a trace (see
:mod:`podium.pii.session`).

Restoration finds placeholders in a *skeleton* of the reply — format characters (zero-width
spaces and joiners, U+2060, U+FEFF, bidi marks, soft hyphens) dropped, NFKC applied (fullwidth
``＜ＰＥＲＳＯＮ＿１＞``), Cyrillic and Greek look-alike letters read as Latin — and replaces
the matching stretch of the reply itself. It accepts:

- a bracketed placeholder: any of ``< ‹ « 〈 ⟨ 《 ❮ [ {`` (one or two, HTML-escaped or
  backslash-escaped too) before it and any closing bracket or none after it, in any case, with
  spaces, underscores, hyphens, dashes or nothing between kind words and number
  (``‹person\u200b_1>``, ``&lt;DK-CPR-1&gt;``, ``[[PERSON 1]]``, ``<PERSON_1``);
- a bare one: ``PERSON_1`` as issued (also glued to a word), or ``person_1``, ``PERSON 1``,
  ``Person-1`` after a non-letter, or ``PERSON1`` in capitals with the number glued on.

What it cannot map fails closed with :class:`UnknownPlaceholder` — a bracketed or ``KIND_n``
placeholder of a known kind whose number this request never issued, and a bare one with an
underscore or in capitals — so a reply that refers to data podium cannot put back never
reaches the user half-restored. A bare prose form that was not issued (``Person 2`` in a puzzle)
is left as it is. Placeholder look-alikes that were already in the outbound text are reserved
(:meth:`Vault.reserve_literals`) and come back as the reply wrote them.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from podium.text import LATIN_LOOKALIKES, is_invisible

__all__ = ["ENTITY_TYPES", "NUMERIC_KINDS", "Entry", "StreamRestorer", "UnknownPlaceholder", "Vault"]

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

_SEP = r"[\s_\\\-\u2010-\u2015\u2212]"  # a backslash too: Markdown escapes ``PERSON\_1``
_KIND_WORDS = "|".join(sorted((k.replace("_", f"{_SEP}*") for k in ENTITY_TYPES), key=len, reverse=True))
_KIND_CAPS = "|".join(sorted((k.replace("_", "_?") for k in ENTITY_TYPES), key=len, reverse=True))
"""A kind in capitals with its number glued on (``PERSON1``, ``DKCPR2``): capitals only, so
``person1`` in a worker's code is not taken for one."""
_OPENERS = "<‹«〈⟨《❮❬❰⟪ᐸ˂⧼"
_CLOSERS = ">›»〉⟩》❯❭❱⟫ᐳ˃⧽"
_OPEN = rf"(?:\\?(?:[{_OPENERS}\[{{]|&lt;?|&#0*60;?|&#x0*3c;?)){{1,2}}"
_CLOSE = rf"(?:\\?(?:[{_CLOSERS}\]}}]|&gt;?|&#0*62;?|&#x0*3e;?)){{1,2}}"
_PLACEHOLDER = re.compile(
    rf"(?i:(?P<open>{_OPEN})\s*(?P<kind>{_KIND_WORDS}){_SEP}*(?P<num>\d{{1,6}})\s*(?:{_CLOSE})?)"
    rf"|(?<!_)(?P<canon>{'|'.join(ENTITY_TYPES)})_(?P<cnum>\d{{1,6}})(?!\d)"
    rf"|(?i:(?<![^\W\d])(?P<bare>{_KIND_WORDS})(?P<bsep>{_SEP}+)(?P<bnum>\d{{1,6}})(?!\d))"
    rf"|(?<![^\W\d])(?P<glued>{_KIND_CAPS})(?P<gnum>\d{{1,6}})(?!\d)"
)
"""A placeholder as a model may write it (matched on the skeleton, see the module docstring):
bracketed (``open``/``kind``/``num``), as issued without brackets (``canon``/``cnum``), a
bare prose form (``bare``/``bsep``/``bnum``), or in capitals with the number glued on
(``glued``/``gnum``)."""

_KIND_LETTERS = tuple(k.replace("_", "") for k in ENTITY_TYPES)  # PERSON, DKCPR, ...
_PARTIAL_OPENER = re.compile(
    rf"(?:\\?(?:[{_OPENERS}\[{{]|&lt;?|&#0*60;?|&#x0*3c;?)){{0,2}}\\?(?:&(?:l|#0*6?|#x0*3?)?)?"
)


_PARTIAL_CLOSE = re.compile(rf"\\?(?:[{_CLOSERS}\]}}]|&(?:gt?)?|&#0*6?2?|&#x0*3?e?)?")
"""What may still grow into (more of) a closing bracket."""


def _skeleton(text: str) -> tuple[str, list[int] | None]:
    """``text`` as matched for placeholders, and per skeleton character its offset in ``text``
    (None: the identity, for ASCII text)."""
    if text.isascii():
        return text, None
    chars: list[str] = []
    origin: list[int] = []
    for i, c in enumerate(text):
        if c.isascii():
            chars.append(c)
            origin.append(i)
            continue
        if is_invisible(c):  # zero-width space/joiners, U+2060, BOM, bidi marks, soft hyphen, variation selectors
            continue
        for x in unicodedata.normalize("NFKC", c).translate(LATIN_LOOKALIKES):
            chars.append(x)
            origin.append(i)
    return "".join(chars), origin


class UnknownPlaceholder(Exception):
    """A reply holds a placeholder of a known kind that this request's vault never issued.

    Attributes:
        placeholder: the text as the reply wrote it (e.g. ``"<PERSON_7>"``).
    """

    def __init__(self, placeholder: str) -> None:
        super().__init__(f"the reply refers to {placeholder!r}, which this request never issued")
        self.placeholder = placeholder


@dataclass(frozen=True)
class Entry:
    """One vault entry: ``token`` (e.g. ``<PERSON_1>``) stands for ``value`` of ``kind``; a
    ``literal`` entry is a look-alike from the outbound text, reserved, never issued."""

    kind: str
    value: str
    token: str
    literal: bool = False


class Vault:
    """Placeholders issued in one request, both ways.

    ``placeholder(kind, value)`` returns the value's token, issuing ``<KIND_n>`` with the next
    free ``n`` the first time the value is seen *written this way*; ``restore(text)`` puts
    originals back. A placeholder look-alike that was already in the outbound text (the user
    typed ``<PERSON_1>``) is reserved with :meth:`reserve_literals` so it is never issued and
    restores to itself.
    """

    def __init__(self) -> None:
        self._by_key: dict[tuple[str, str], Entry] = {}
        self._by_token: dict[tuple[str, int], Entry] = {}
        self._next: Counter[str] = Counter()
        self._lock = threading.Lock()  # steps run concurrently; masking runs in worker threads

    def __len__(self) -> int:
        return len(self._by_key)

    def __iter__(self) -> Iterator[Entry]:
        """Issued entries (literal reservations excluded), in issue order."""
        with self._lock:
            return iter(list(self._by_key.values()))

    def placeholder(self, kind: str, value: str) -> str:
        """The token for ``value`` (the same text, the same token for the whole request)."""
        key = (kind, value)
        with self._lock:
            return self._issue(key, kind, value)

    def _issue(self, key: tuple[str, str], kind: str, value: str) -> str:
        entry = self._by_key.get(key)
        if entry is None:
            n = self._next[kind] + 1
            while (kind, n) in self._by_token:
                n += 1
            self._next[kind] = n
            entry = Entry(kind, value, f"<{kind}_{n}>")
            self._by_key[key] = entry
            self._by_token[(kind, n)] = entry
        return entry.token

    def lookup(self, kind: str, value: str) -> Entry | None:
        """The entry for ``value`` (exactly as written) of ``kind`` if one was issued."""
        return self._by_key.get((kind, value))

    def reserve_literals(self, text: str) -> None:
        """Reserve every placeholder look-alike in ``text`` that this vault did not issue, so it
        is never issued and restores to itself."""
        skeleton, _ = _skeleton(text)
        for m in _PLACEHOLDER.finditer(skeleton):
            kind, n = _parts(m)
            with self._lock:
                if (kind, n) not in self._by_token:
                    self._by_token[(kind, n)] = Entry(kind, m.group(0), m.group(0), literal=True)

    def restore(self, text: str) -> str:
        """``text`` with every placeholder replaced by its original (see the module docstring
        for the forms accepted).

        Raises UnknownPlaceholder for a placeholder of a known kind that this vault never
        issued — bracketed, written ``KIND_n``, bare with an underscore or in capitals, or
        ``KINDn`` in capitals; an unknown bare prose form (``Person 2``) is left as it is.
        """

        def one(m: re.Match[str], written: str) -> str:
            entry = self._by_token.get(_parts(m))
            if entry is not None:
                if entry.literal:
                    return written
                before, after = _outer_brackets(written)  # the user's own: «<PERSON_1>» is «Mette»
                return before + entry.value + after
            bare = m.group("bare")
            if bare is None or "_" in m.group("bsep") or bare.isupper():
                raise UnknownPlaceholder(written)
            return written

        return _substitute(text, one)

    def kinds(self, text: str) -> Counter[str]:
        """Count of this vault's placeholders per kind in ``text`` (as issued, exact form)."""
        counts: Counter[str] = Counter()
        for m in re.finditer(r"<([A-Z_]+)_(\d+)>", text):
            entry = self._by_token.get((m.group(1), int(m.group(2))))
            if entry is not None and entry.token == m.group(0):
                counts[entry.kind] += 1
        return counts


_ONE_OPEN = re.compile(rf"\\?(?:[{_OPENERS}\[{{]|&lt;?|&#0*60;?|&#x0*3c;?)", re.IGNORECASE)
_ONE_CLOSE = re.compile(rf"\\?(?:[{_CLOSERS}\]}}]|&gt;?|&#0*62;?|&#x0*3e;?)$", re.IGNORECASE)


def _outer_brackets(written: str) -> tuple[str, str]:
    """The brackets around a placeholder that are the text's, not its own: a bracket outside the
    issued ``<``/``>`` (``<lars@x.dk>`` masks to ``<<EMAIL_ADDRESS_1>>``, ``«Mette»`` to
    ``«<PERSON_1>»``, a Markdown link's ``[Mette]`` to ``[<PERSON_1>]``), kept by restoration.
    A doubled bracket of another kind (``[[PERSON_1]]``, ``{{PERSON_1}}``) is a model's
    rewriting of the placeholder and goes with it."""
    before = after = ""
    first = _ONE_OPEN.match(written)
    if first is not None and (inner := _ONE_OPEN.match(written, first.end())) is not None and inner.group() == "<":
        before = written[: first.end()]
    last = _ONE_CLOSE.search(written)
    if last is not None and last.start() > 0 and written[last.start() - 1] == ">":
        after = written[last.start() :]
    return before, after


_KIND_BY_LETTERS = {k.replace("_", ""): k for k in ENTITY_TYPES}


def _parts(m: re.Match[str]) -> tuple[str, int]:
    """(kind, number) of a placeholder match, the kind normalised (``person 1`` → PERSON, 1;
    ``dk-cpr 2`` and ``DKCPR2`` → DK_CPR, 2)."""
    for kind, num in (("kind", "num"), ("canon", "cnum"), ("bare", "bnum"), ("glued", "gnum")):
        if m.group(kind) is not None:
            return _KIND_BY_LETTERS[re.sub(f"{_SEP}+", "", m.group(kind)).upper()], int(m.group(num))
    raise ValueError(m.group(0))  # pragma: no cover - every alternative has a kind


def _substitute(text: str, one: Callable[[re.Match[str], str], str]) -> str:
    """``text`` with each placeholder match on its skeleton replaced by ``one(match, the
    stretch of text it covers)``."""
    skeleton, origin = _skeleton(text)
    out: list[str] = []
    at = 0
    for m in _PLACEHOLDER.finditer(skeleton):
        start, end = (m.start(), m.end()) if origin is None else (origin[m.start()], origin[m.end() - 1] + 1)
        out.append(text[at:start])
        out.append(one(m, text[start:end]))
        at = end
    out.append(text[at:])
    return "".join(out)


def _may_grow(tail: str) -> bool:
    """Whether ``tail`` (the end of the text streamed so far) may still become a placeholder."""
    skeleton, _ = _skeleton(tail)
    if not skeleton:
        return False
    opener = _PARTIAL_OPENER.match(skeleton)
    rest = skeleton[opener.end() if opener else 0 :]
    if opener is not None and opener.end() > 0:
        rest = rest.lstrip()
        if not rest:
            return True
    elif not rest[:1].isalpha():
        return False
    if not re.fullmatch(rf"[^\W_]*(?:{_SEP}+[^\W_]*)*{_SEP}*", rest):
        return False  # punctuation or a closing bracket: decided
    letters = re.sub(rf"{_SEP}+", "", rest).upper()
    word = letters.rstrip("0123456789")
    digits = letters[len(word) :]
    if digits:
        return word in _KIND_LETTERS
    return any(k.startswith(word) for k in _KIND_LETTERS)


_HOLD_MAX = 64
"""At most this many visible characters are held back while a placeholder may still be growing."""
_HOLD_RAW_MAX = 4096
"""… and at most this many characters in all, invisible ones (which a placeholder may carry:
``<PERSON\u200b_1>``) included."""


def _hold_window(text: str) -> list[int]:
    """The offsets where a placeholder still growing at the end of ``text`` may start: its
    visible characters among the last :data:`_HOLD_MAX` visible ones (an invisible character
    starts nothing: the skeleton drops it), within the last :data:`_HOLD_RAW_MAX` characters."""
    starts: list[int] = []
    i = len(text)
    floor = max(0, len(text) - _HOLD_RAW_MAX)
    while i > floor and len(starts) < _HOLD_MAX:
        i -= 1
        if not is_invisible(text[i]):
            starts.append(i)
    return starts[::-1]


class StreamRestorer:
    """Restores placeholders in streamed text, chunk by chunk.

    A placeholder may be split across chunks (``"<PER"`` + ``"SON_1>"``), so text that could
    still be the start of one is held back until the next chunk decides it. ``feed`` returns
    what can be shown now; ``close`` returns the rest. Raises UnknownPlaceholder like
    :meth:`Vault.restore`.
    """

    def __init__(self, vault: Vault) -> None:
        self.vault = vault
        self._held = ""

    def feed(self, chunk: str) -> str:
        text = self._held + chunk
        cut = len(text)
        for i in _hold_window(text):
            if _may_grow(text[i:]):
                cut = i
                break
        # a placeholder followed by nothing but the start of a closing bracket may still grow
        # (``[[PERSON_1]`` before its second ``]``, ``&lt;PERSON_1&g`` before ``t;``)
        skeleton, origin = _skeleton(text[:cut])
        matches = list(_PLACEHOLDER.finditer(skeleton))
        last = matches[-1] if matches else None
        if last is not None and _PARTIAL_CLOSE.fullmatch(skeleton[last.end() :] + _skeleton(text[cut:])[0]):
            cut = last.start() if origin is None else origin[last.start()]
        self._held = text[cut:]
        return self.vault.restore(text[:cut])

    def close(self) -> str:
        text, self._held = self._held, ""
        return self.vault.restore(text)
