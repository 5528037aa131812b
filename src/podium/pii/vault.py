"""The per-request vault: typed, numbered placeholders and their originals, and restoration.

Restoration reads placeholders back with :mod:`podium.pii.placeholders` (one bounded parser for
:meth:`Vault.restore` and for :class:`StreamRestorer`).

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
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from podium.errors import PodiumError
from podium.pii.placeholders import CLOSERS, ENTITY_TYPES, MAX_PLACEHOLDER, NUMERIC_KINDS, OPENERS, Found
from podium.pii.scanner import Scanner

__all__ = ["ENTITY_TYPES", "MAX_PLACEHOLDER", "NUMERIC_KINDS", "Entry", "StreamRestorer", "UnknownPlaceholder", "Vault"]


class UnknownPlaceholder(PodiumError):
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

        def reserve(found: Found, written: str) -> str:
            with self._lock:
                if (found.kind, found.number) not in self._by_token:
                    self._by_token[(found.kind, found.number)] = Entry(found.kind, written, written, literal=True)
            return written

        Scanner(reserve).feed(text, final=True)

    def restore(self, text: str) -> str:
        """``text`` with every placeholder replaced by its original (see the module docstring
        for the forms accepted). Linear in the length of ``text``.

        Raises UnknownPlaceholder for a placeholder of a known kind that this vault never
        issued — bracketed, written ``KIND_n``, bare with an underscore or in capitals, or
        ``KINDn`` in capitals; an unknown bare prose form (``Person 2``) is left as it is.
        :class:`StreamRestorer` gives the same text, or raises the same, for the same text in
        any chunks.
        """
        return Scanner(self._restoring).feed(text, final=True)

    def _restoring(self, found: Found, written: str) -> str:
        """What the placeholder ``found``, written as ``written`` in the reply, restores to."""
        entry = self._by_token.get((found.kind, found.number))
        if entry is not None:
            if entry.literal:
                return written
            before, after = _outer_brackets(written)  # the user's own: «<PERSON_1>» is «Mette»
            return before + entry.value + after
        if found.strict:
            raise UnknownPlaceholder(written)
        return written

    def kinds(self, text: str) -> Counter[str]:
        """Count of this vault's placeholders per kind in ``text`` (as issued, exact form)."""
        counts: Counter[str] = Counter()
        for m in re.finditer(r"<([A-Z_]+)_(\d+)>", text):
            entry = self._by_token.get((m.group(1), int(m.group(2))))
            if entry is not None and entry.token == m.group(0):
                counts[entry.kind] += 1
        return counts


_ONE_OPEN = re.compile(rf"\\?(?:[{OPENERS}\[{{]|&lt;?|&#0*60;?|&#x0*3c;?)", re.IGNORECASE)
_ONE_CLOSE = re.compile(rf"\\?(?:[{CLOSERS}\]}}]|&gt;?|&#0*62;?|&#x0*3e;?)$", re.IGNORECASE)


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


class StreamRestorer:
    """Restores placeholders in streamed text, chunk by chunk.

    A placeholder may be split across chunks (``"<PER"`` + ``"SON_1>"``), so text whose meaning
    the next chunk may still change is held back until it is decided: at most
    :data:`MAX_PLACEHOLDER` visible characters (and the invisible ones among them). ``feed``
    returns what can be shown now, ``close`` the rest. Everything ``feed`` and ``close`` return,
    joined, is exactly what :meth:`Vault.restore` returns for the whole text, whatever the
    chunks; where that raises UnknownPlaceholder, ``feed`` or ``close`` raises it, having shown
    only text before the placeholder.
    """

    def __init__(self, vault: Vault) -> None:
        self.vault = vault
        self._scanner = Scanner(vault._restoring)

    def feed(self, chunk: str) -> str:
        return self._scanner.feed(chunk)

    def close(self) -> str:
        return self._scanner.feed("", final=True)
