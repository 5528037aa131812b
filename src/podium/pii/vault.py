"""The per-request vault: typed, numbered placeholders and their originals, and restoration.

A value gets one placeholder for the whole request (``<PERSON_1>``, ``<DK_CPR_1>``, ...), so every
step of a workflow — and a nested request — refers to the same person by the same name. The vault
lives in memory for one request only; it is never written to a trace (see
:mod:`podium.pii.session`).

Restoration is tolerant of what language models do to placeholders — case, spaces, hyphens,
HTML escaping, square or curly brackets (``<person 1>``, ``&lt;PERSON_1&gt;``, ``[PERSON_1]``)
and bare ``PERSON_1`` — and strict about the rest: a bracketed placeholder of a known kind whose
number the vault does not hold raises :class:`UnknownPlaceholder`, so a reply that refers to
data podium cannot put back fails closed instead of reaching the user half-restored.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

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
"""Kinds whose value is its letters and digits: ``0704912846`` is the same CPR as ``070491-2846``."""

_KIND_WORDS = "|".join(sorted((k.replace("_", r"[\s_-]*") for k in ENTITY_TYPES), key=len, reverse=True))
_BRACKETED_PATTERN = (
    rf"(?:<|&lt;|\[\[?|\{{\{{?)\s*(?P<kind>{_KIND_WORDS})[\s_-]*(?P<num>\d{{1,5}})\s*(?:>|&gt;|\]\]?|\}}\}}?)"
)
_BARE_PATTERN = rf"\b(?P<bare>{'|'.join(ENTITY_TYPES)})_(?P<bnum>\d{{1,5}})\b"
_PLACEHOLDER = re.compile(rf"(?i:{_BRACKETED_PATTERN})|{_BARE_PATTERN}")
"""A placeholder as a model may write it: bracketed in any case and spacing, or bare KIND_n."""
_PLACEHOLDER_START = re.compile(r"(?:<|&(?:l(?:t;?)?)?|\[\[?|\{\{?)[\w\s-]{0,24}$")


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
    """One vault entry: ``token`` (e.g. ``<PERSON_1>``) stands for ``value`` of ``kind``."""

    kind: str
    value: str
    token: str


def _key(kind: str, value: str) -> str:
    """What makes two surface forms the same value of ``kind``."""
    if kind in NUMERIC_KINDS:
        return re.sub(r"[\W_]", "", value).upper()
    return " ".join(value.casefold().split())


class Vault:
    """Placeholders issued in one request, both ways.

    ``placeholder(kind, value)`` returns the value's token, issuing ``<KIND_n>`` with the next
    free ``n`` the first time; ``restore(text)`` puts originals back. A placeholder look-alike
    that was already in the outbound text (the user typed ``<PERSON_1>``) is reserved with
    :meth:`reserve_literal` so it is never issued and restores to itself.
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
        """The token for ``value`` (same value, same token for the whole request)."""
        key = (kind, _key(kind, value))
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
        """The entry for ``value`` of ``kind`` if one was issued."""
        return self._by_key.get((kind, _key(kind, value)))

    def reserve_literals(self, text: str) -> None:
        """Reserve every placeholder look-alike in ``text`` that this vault did not issue, so it
        is never issued and restores to itself."""
        for m in _PLACEHOLDER.finditer(text):
            kind, n = _parts(m)
            with self._lock:
                if (kind, n) not in self._by_token:
                    self._by_token[(kind, n)] = Entry(kind, m.group(0), m.group(0))

    def restore(self, text: str) -> str:
        """``text`` with every placeholder replaced by its original.

        Raises UnknownPlaceholder for a bracketed placeholder of a known kind that this vault
        never issued; an unknown *bare* ``KIND_n`` is left as it is (it may be a code
        identifier).
        """

        def one(m: re.Match[str]) -> str:
            entry = self._by_token.get(_parts(m))
            if entry is not None:
                return entry.value
            if m.group("kind") is not None:
                raise UnknownPlaceholder(m.group(0))
            return m.group(0)

        return _PLACEHOLDER.sub(one, text)

    def kinds(self, text: str) -> Counter[str]:
        """Count of this vault's placeholders per kind in ``text`` (as issued, exact form)."""
        counts: Counter[str] = Counter()
        for m in re.finditer(r"<([A-Z_]+)_(\d+)>", text):
            entry = self._by_token.get((m.group(1), int(m.group(2))))
            if entry is not None and entry.token == m.group(0):
                counts[entry.kind] += 1
        return counts


def _parts(m: re.Match[str]) -> tuple[str, int]:
    """(kind, number) of a placeholder match, the kind normalised (``person 1`` → PERSON, 1)."""
    if m.group("kind") is not None:
        return re.sub(r"[\s_-]+", "_", m.group("kind").strip()).upper(), int(m.group("num"))
    return m.group("bare"), int(m.group("bnum"))


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
        m = _PLACEHOLDER_START.search(text)
        if m is not None:
            cut = m.start()
        tail = re.search(r"\w+$", text[:cut])  # a bare KIND_n may still be growing
        if tail is not None:
            cut = tail.start()
        self._held = text[cut:]
        return self.vault.restore(text[:cut])

    def close(self) -> str:
        text, self._held = self._held, ""
        return self.vault.restore(text)
