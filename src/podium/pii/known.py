"""Finding the values a vault already holds again in a text, in one pass (linear in the text).

Before detection, :class:`~podium.pii.mask.Pseudonymizer` looks for every value of the
request's vault again, so a value seen once stays masked in every later step even where the
analyzer alone would miss it. The vault may hold thousands of values (a long text of phone
numbers), so this is not a search per value: the text is read once as a stream of symbols and
an Aho–Corasick automaton (:class:`Automaton`) over the normalised values reports every
occurrence, in time linear in the length of the text plus the number of occurrences, after a
build linear in the total length of the values.

Two streams are read (:func:`known_values`):

- **numbers** (:data:`~podium.pii.vault.NUMERIC_KINDS`): the text's ASCII letters and digits in
  upper case (after :func:`~podium.pii.detect.fold_separators`), where between two of them there
  may be one ``.``, ``/`` or ``-`` and any whitespace or parentheses (``(415) 555-0187``), or
  nothing; other characters break the stream. A value matches as its letters and digits, also
  with its digits reversed (a reversed CPR is a CPR anyone can reverse back), with no digit
  glued on before or after (a separator between is fine), a ``+`` right before it and the
  opening parenthesis of a closing one inside it taken along.
- **words** (other kinds): the text as atoms — a run of letters (composed to NFC, combining
  marks that compose with nothing and invisible characters left out, Cyrillic and Greek
  look-alike letters read as Latin, case-folded), a run of digits, a run of whitespace (one
  atom, whatever its length), or one other character. A value matches atom for atom, with no
  letter glued on at its edges (names and addresses) or no letter, digit or underscore (e-mail
  and IP addresses); a person's first name or surname (three letters or more, capitalised) also
  matches on its own, in the case it is written in.

Invisible characters and combining marks (:func:`podium.text.is_invisible`, Unicode category M)
are read past in both streams.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from podium.pii.detect import Detection, fold_separators
from podium.pii.vault import NUMERIC_KINDS, Vault
from podium.text import LATIN_LOOKALIKES, is_invisible

__all__ = ["Automaton", "WorkCount", "known_values"]

_P = TypeVar("_P")


class Automaton(Generic[_P]):
    """Aho–Corasick over sequences of hashable symbols.

    :meth:`add` keys (non-empty sequences) with a payload each, then :meth:`scan` a sequence:
    every occurrence of every key, in O(len(sequence) + occurrences) after a build that is
    O(total length of the keys). ``steps`` counts the transitions taken by all scans (each
    goto, each failure link and each reported occurrence), the measure of the work done.

    The trie is kept in flat tables (one dict of transitions keyed by node and symbol number,
    lists of ints per node), so a vault of thousands of values makes a few objects, not one
    per node.
    """

    _WIDTH = 1 << 32  # transition key: node * _WIDTH + symbol number

    def __init__(self) -> None:
        self._ids: dict[Hashable, int] = {}
        self._next: dict[int, int] = {}
        self._parent: list[int] = [0]
        self._symbol: list[int] = [-1]
        self._depth: list[int] = [0]
        self._fail: list[int] = [0]
        self._link: list[int] = [-1]  # nearest node on the failure chain with an output (-1: none)
        self._out: dict[int, list[tuple[int, _P]]] = {}  # node → (key length, payload) of the keys ending there
        self._built = True
        self.steps = 0

    def __len__(self) -> int:
        """Nodes of the trie (1: no key added)."""
        return len(self._parent)

    def add(self, key: Sequence[Hashable], payload: _P) -> None:
        """Add ``key`` (non-empty) with ``payload``; the same key may be added several times.
        Raises ValueError for an empty key."""
        if not key:
            raise ValueError("an empty key")
        node = 0
        for symbol in key:
            sid = self._ids.setdefault(symbol, len(self._ids))
            edge = node * self._WIDTH + sid
            child = self._next.get(edge)
            if child is None:
                child = len(self._parent)
                self._next[edge] = child
                self._parent.append(node)
                self._symbol.append(sid)
                self._depth.append(self._depth[node] + 1)
                self._fail.append(0)
                self._link.append(-1)
            node = child
        self._out.setdefault(node, []).append((len(key), payload))
        self._built = False

    def _build(self) -> None:
        """Failure and output links, in order of depth."""
        width, nxt, fail, link, out = self._WIDTH, self._next, self._fail, self._link, self._out
        by_depth: list[list[int]] = [[] for _ in range(max(self._depth) + 1)]
        for node, depth in enumerate(self._depth):
            by_depth[depth].append(node)
        for level in by_depth[1:]:
            for node in level:
                parent, sid = self._parent[node], self._symbol[node]
                target = 0
                if parent:
                    state = fail[parent]
                    while state and state * width + sid not in nxt:
                        state = fail[state]
                    target = nxt.get(state * width + sid, 0)
                fail[node] = target
                link[node] = target if target in out else link[target]
        self._built = True

    def scan(self, symbols: Iterable[Hashable]) -> Iterator[tuple[int, int, _P]]:
        """(start, end, payload) of every occurrence of a key in ``symbols`` (end exclusive,
        in symbol indices), in the order their ends are read. A symbol no key holds (such as
        None) resets the match."""
        if not self._built:
            self._build()
        ids, width, nxt, fail, link, out = self._ids, self._WIDTH, self._next, self._fail, self._link, self._out
        node = 0
        steps = 0
        for i, symbol in enumerate(symbols):
            steps += 1
            sid = ids.get(symbol)
            if sid is None:
                node = 0
                continue
            while node and node * width + sid not in nxt:
                node = fail[node]
                steps += 1
            node = nxt.get(node * width + sid, 0)
            hit = node if node in out else link[node]
            while hit > 0:
                for length, payload in out[hit]:
                    steps += 1
                    yield i + 1 - length, i + 1, payload
                hit = link[hit]
        self.steps += steps


@dataclass
class WorkCount:
    """Work done by :func:`known_values`: ``symbols`` read from the text (both streams),
    ``key_symbols`` of the vault's values added to the automata, ``steps`` the automata took
    (:attr:`Automaton.steps`)."""

    symbols: int = 0
    key_symbols: int = 0
    steps: int = 0

    @property
    def total(self) -> int:
        return self.symbols + self.key_symbols + self.steps


_CLASS: dict[str, str] = {}


def _char_class(c: str) -> str:
    """L letter, D digit, S whitespace, T transparent (invisible or a combining mark), P other."""
    found = _CLASS.get(c)
    if found is not None:
        return found
    if c.isspace():
        found = "S"
    elif is_invisible(c) or unicodedata.category(c)[0] == "M":
        found = "T"
    elif c.isdecimal():
        found = "D"
    elif unicodedata.category(c)[0] == "L":
        found = "L"
    else:
        found = "P"
    if len(_CLASS) < 65536:
        _CLASS[c] = found
    return found


def _letters(raw: str) -> str:
    """A run of letters (with its marks and invisible characters) as read: NFC, what does not
    compose left out, look-alike letters as Latin; case kept."""
    if raw.isascii():
        return raw
    kept = "".join(c for c in raw if not is_invisible(c))
    composed = unicodedata.normalize("NFC", kept)
    return "".join(c for c in composed if unicodedata.category(c)[0] != "M").translate(LATIN_LOOKALIKES)


@dataclass(frozen=True)
class _Atom:
    cls: str  # L, D, S or P
    text: str  # as read: letters normalised (case kept), digits, " " for whitespace, the character
    start: int
    end: int


def _atoms(text: str) -> list[_Atom]:
    """``text`` (folded, :func:`~podium.pii.detect.fold_separators`) as atoms (module docstring)."""
    atoms: list[_Atom] = []
    i, n = 0, len(text)
    while i < n:
        cls = _char_class(text[i])
        if cls == "T":  # a mark or an invisible character outside a run of letters: read past
            i += 1
            continue
        j = i + 1
        if cls == "P":
            atoms.append(_Atom("P", text[i], i, j))
            i = j
            continue
        while j < n:
            other = _char_class(text[j])
            if other != cls and not (other == "T" and cls != "S"):
                break
            j += 1
        if cls == "L":
            atoms.append(_Atom("L", _letters(text[i:j]), i, j))
        elif cls == "D":
            atoms.append(_Atom("D", "".join(c for c in text[i:j] if c.isdecimal()), i, j))
        else:
            atoms.append(_Atom("S", " ", i, j))
        i = j
    return atoms


def _word_key(value: str) -> tuple[str, ...]:
    return tuple(a.text.casefold() for a in _atoms(fold_separators(value)))


_NUMBER_PUNCT = "./-"  # one of these between two characters of a number


@dataclass
class _Numbers:
    """The number stream of a text: per symbol its character, where it starts and ends in the
    text, and whether it is glued to the symbol before (no separator between). None: a break."""

    symbols: list[str | None]
    starts: list[int]
    ends: list[int]
    glued: list[bool]


def _numbers(text: str) -> _Numbers:
    """The number stream of ``text`` (folded; see the module docstring)."""
    stream = _Numbers([], [], [], [])
    punct = 0  # separators since the last symbol: one of ./- at most
    spaced = False
    for i, c in enumerate(text):
        if c.isascii() and c.isalnum():
            stream.symbols.append(c.upper())
            stream.starts.append(i)
            stream.ends.append(i + 1)
            stream.glued.append(not spaced)
            punct, spaced = 0, False
            continue
        cls = _char_class(c)
        if cls == "T":
            if stream.ends and stream.symbols[-1] is not None and not spaced:
                stream.ends[-1] = i + 1  # a mark after a digit goes with it
            continue
        if cls == "S" or c in _NUMBER_PUNCT or c in "()":
            spaced = True
            punct += c in _NUMBER_PUNCT
            if punct <= 1:
                continue
        if stream.symbols and stream.symbols[-1] is not None:
            stream.symbols.append(None)
            stream.starts.append(i)
            stream.ends.append(i + 1)
            stream.glued.append(False)
        punct, spaced = 0, False
    return stream


def _numeric_key(value: str) -> str:
    return "".join(c for c in fold_separators(value) if c.isascii() and c.isalnum()).upper()


_PERSON_EDGES = ("PERSON", "ADDRESS")


def known_values(text: str, vault: Vault, work: WorkCount | None = None) -> list[Detection]:
    """Every occurrence in ``text`` of a value ``vault`` holds, and of its variants (see the
    module docstring), as detections of score 1.0 (they may overlap; callers resolve them).
    Time linear in ``len(text)`` plus the total length of the vault's values plus the number
    of occurrences; ``work``, when given, is increased by the work done."""
    numbers: Automaton[str] = Automaton()
    words: Automaton[tuple[str, str | None]] = Automaton()  # (kind, the case a part must be written in)
    key_symbols = 0
    for entry in vault:
        if entry.kind in NUMERIC_KINDS:
            key = _numeric_key(entry.value)
            if not key:
                continue
            forms = {key, key[::-1]} if len(key) >= 6 else {key}
            for form in forms:
                numbers.add(form, entry.kind)
                key_symbols += len(form)
            continue
        word_key = _word_key(entry.value)
        if not word_key:
            continue
        words.add(word_key, (entry.kind, None))
        key_symbols += len(word_key)
        parts = entry.value.split()
        if entry.kind == "PERSON" and len(parts) > 1:
            for part in parts:  # "Mette" alone, capitalised as in the full name
                if len(part) >= 3 and part[0].isupper() and part.isalpha():
                    words.add((_letters(part).casefold(),), (entry.kind, _letters(part)))
                    key_symbols += 1
    if len(numbers) == 1 and len(words) == 1:
        if work is not None:
            work.key_symbols += key_symbols
        return []
    folded = fold_separators(text)
    found: list[Detection] = []
    symbols = 0
    if len(numbers) > 1:
        stream = _numbers(folded)
        symbols += len(stream.symbols)
        found += _number_matches(text, folded, stream, numbers)
    if len(words) > 1:
        atoms = _atoms(folded)
        symbols += len(atoms)
        found += _word_matches(text, atoms, words)
    if work is not None:
        work.symbols += symbols
        work.key_symbols += key_symbols
        work.steps += numbers.steps + words.steps
    return found


def _number_matches(text: str, folded: str, stream: _Numbers, automaton: Automaton[str]) -> list[Detection]:
    found = []
    symbols = stream.symbols
    for s, e, kind in automaton.scan(symbols):
        if s > 0 and stream.glued[s] and (symbols[s - 1] or "").isdigit():
            continue  # a digit glued on before: part of a longer number
        if e < len(symbols) and stream.glued[e] and (symbols[e] or "").isdigit():
            continue
        start, end = stream.starts[s], stream.ends[e - 1]
        if folded[start - 1 : start] == "(" and folded.count(")", start, end) > folded.count("(", start, end):
            start -= 1  # (540) 829-0421: the area code's parenthesis goes with it
        if folded[start - 1 : start] == "+" and not folded[start - 2 : start - 1].isdigit():
            start -= 1
        found.append(Detection(kind, start, end, 1.0, text[start:end]))
    return found


def _glues(atom: _Atom, word_edges: bool) -> bool:
    """Whether ``atom``, right next to a match, makes it part of a longer word."""
    if atom.cls == "L":
        return True
    return word_edges and (atom.cls == "D" or atom.text == "_")


def _word_matches(text: str, atoms: list[_Atom], automaton: Automaton[tuple[str, str | None]]) -> list[Detection]:
    found = []
    for s, e, (kind, case) in automaton.scan(a.text.casefold() for a in atoms):
        if case is not None and atoms[s].text != case:
            continue
        word_edges = kind not in _PERSON_EDGES  # e-mail and IP addresses: no digit or underscore either
        before = atoms[s - 1] if s > 0 else None
        after = atoms[e] if e < len(atoms) else None
        if any(a is not None and _glues(a, word_edges) for a in (before, after)):
            continue
        start, end = atoms[s].start, atoms[e - 1].end
        found.append(Detection(kind, start, end, 1.0, text[start:end]))
    return found
