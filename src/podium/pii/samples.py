"""Synthetic PII values, texts that glue them together, and a worker that mangles placeholders.

For tests and benchmarks (``tests/test_pii_properties.py``, ``bench/pii_cases.py``): every
value is valid the way a real one is — names from the bundled name lists, CPR numbers with a
real date and the century digit that goes with it, IBANs with their check digits, card numbers
that pass Luhn, phone numbers of the DK, GB and US numbering plans — and written the ways people
write them. Nothing here is real data. All functions take a :class:`random.Random`, so a seed
reproduces a case.

- :func:`value` — one value of a kind, in one of its written forms.
- :func:`glued_text` — several values glued to each other (no separator) or set in prose.
- :func:`alter_placeholders` — what a worker may do to the placeholders of a masked text.
- :func:`leaked` — whether a value (or, for numbers, its digits in order) is still in a text.
"""

from __future__ import annotations

import itertools
import random
import re
import unicodedata
from dataclasses import dataclass
from datetime import date, timedelta
from functools import cache

from podium.pii.numbers import luhn_ok
from podium.pii.recognizers import first_names, surnames
from podium.pii.rewrites import alter_placeholders
from podium.text import LATIN_LOOKALIKES

__all__ = [
    "FORMS",
    "INVISIBLES",
    "KINDS",
    "UNGLUEABLE_FORMS",
    "Sample",
    "alter_placeholders",
    "card",
    "cpr",
    "email",
    "glueable",
    "glued_text",
    "hide",
    "iban",
    "leaked",
    "person",
    "phone",
    "value",
]

KINDS = ("PERSON", "DK_CPR", "IBAN_CODE", "CREDIT_CARD", "PHONE_NUMBER", "EMAIL_ADDRESS")
"""The kinds generated here (addresses and IP addresses are not glued into other values)."""

_PARTICLE_RUNS = ("van der", "de la", "von der", "van den", "de los", "van", "von", "de", "di", "da", "du", "le",
                  "la", "ten", "ter", "af", "zu", "dos", "del")  # fmt: skip
_SURNAME_ENDINGS = ("sen", "son", "gaard", "holm", "berg", "lund", "strup", "skov", "dahl", "borg", "bech")


@dataclass(frozen=True)
class Sample:
    """A generated value: ``kind``, ``text`` as written, and ``form`` (how it is written)."""

    kind: str
    text: str
    form: str


@cache
def _decomposable() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(first names, surnames) with a letter that Unicode NFD decomposes (Åse, Müller)."""
    firsts, lasts, _ = _names()
    return (
        tuple(n for n in firsts if unicodedata.normalize("NFD", n) != n),
        tuple(n for n in lasts if unicodedata.normalize("NFD", n) != n),
    )


_LOOKALIKE_OF: dict[str, list[str]] = {}
for _cyrillic, _latin in LATIN_LOOKALIKES.items():
    _LOOKALIKE_OF.setdefault(chr(_latin), []).append(chr(_cyrillic))


@cache
def _names() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(first names, surnames, surnames with a typical ending), capitalised, letters only."""
    firsts = tuple(sorted(n.capitalize() for n in first_names() if n.isalpha() and len(n) >= 3))
    lasts = tuple(sorted(n.capitalize() for n in surnames() if n.isalpha() and len(n) >= 3))
    typical = tuple(n for n in lasts if n.casefold().endswith(_SURNAME_ENDINGS))
    return firsts, lasts, typical


FORMS: dict[str, tuple[str, ...]] = {
    "PERSON": ("title", "title", "caps", "lower", "middle", "hyphen_first", "hyphen_last", "surname_first",
               "initial_first", "first_initial", "line_break", "joined", "nfd", "lookalike", "particles", "camel"),
    "DK_CPR": ("dash", "plain", "space", "dots", "slashes", "dashes", "pairs", "underscore", "spaced_dash",
               "tab", "line_break", "double_space", "marks"),
    "IBAN_CODE": ("compact", "spaced", "lower", "lower_spaced", "dashed", "dotted", "tabs", "double_spaced"),
    "CREDIT_CARD": ("plain", "spaces", "dashes", "dots", "slashes", "tabs", "double_spaces", "line_breaks"),
    "PHONE_NUMBER": ("dk_pairs", "dk_quads", "dk_intl", "dk_dashes", "us", "us_dashes", "us_intl", "us_local",
                     "gb_london", "gb_mobile", "gb_intl", "gb_00", "dk_00", "us_00", "dk_tab", "dk_double_space",
                     "gb_dots"),
    "EMAIL_ADDRESS": ("dotted", "first", "digits", "initial"),
}  # fmt: skip
"""The written forms of each kind (see each maker's docstring); a form listed twice is drawn
twice as often."""

UNGLUEABLE_FORMS: dict[str, frozenset[str]] = {"PERSON": frozenset({"surname_first", "initial_first", "line_break"})}
"""Forms whose edges are lost when another value is set right next to them, glued or after a
bare space: ``Hooper, Dagobert`` glued to ``r@example.dk`` reads as ``Dagobertr@``, ``E. Frank``
glued to ``angelica3@…`` as ``Frankangelica3@``, and neither ``Mette Hansen Lindell, Joann``
nor ``Kerville, Loni, Hakan, Bo`` has edges a reader could be sure of. The generators set these
apart with a semicolon or a line break (:func:`glued_text`, the property tests); one value in
prose, every form is masked."""


def person(rng: random.Random, form: str | None = None) -> Sample:
    """A first name and a surname from the bundled lists; forms: ``title`` (Mette Kjærgaard),
    ``caps`` (METTE KJÆRGAARD), ``lower`` (mette kjærgaard, with a surname of a typical ending:
    only those are recognised in lower case), ``middle`` (two first names and a surname),
    ``hyphen_first`` (Anne-Mette Kjærgaard), ``hyphen_last`` (Mette Kjærgaard-Holm),
    ``surname_first`` (Kjærgaard, Mette), ``initial_first`` (M. Kjærgaard), ``first_initial``
    (Mette K.), ``line_break`` (Mette\nKjærgaard, as in a signature), ``joined`` (Mette.Kjærgaard,
    METTE-KJÆRGAARD, John_Smith: one of ``-._``, in title case or capitals), ``nfd`` (a name
    with letters that decompose, written in Unicode NFD: ``A\u030ase Bj\u0308ork``, as macOS
    and many PDFs write it), ``lookalike`` (one letter replaced by the Cyrillic or Greek letter
    drawn like it: ``M\u0435tte``), ``particles`` (a run of particles before the surname:
    ``Hans van der Berg``, ``ANNE DE LA COUR``), ``camel`` (a first name glued to a surname with a
    typical ending at a change of case: ``metteJensen``, ``METTEjensen``)."""
    firsts, lasts, typical = _names()
    form = form or rng.choice(FORMS["PERSON"])
    first, last = rng.choice(firsts), rng.choice(lasts)
    if form == "lower":
        return Sample("PERSON", f"{first} {rng.choice(typical)}".lower(), form)
    if form == "joined":
        name = f"{first}{rng.choice('-._')}{last}"
        return Sample("PERSON", name.upper() if rng.random() < 0.4 else name, form)
    if form == "particles":
        name = f"{first} {rng.choice(_PARTICLE_RUNS)} {last}"
        return Sample("PERSON", name.upper() if rng.random() < 0.3 else name, form)
    if form == "camel":
        surname = rng.choice(typical)
        name = first.lower() + surname if rng.random() < 0.6 else first.upper() + surname.lower()
        return Sample("PERSON", name, form)
    if form == "nfd":
        first_d, last_d = _decomposable()
        first, last = (rng.choice(first_d), rng.choice(last_d)) if rng.random() < 0.5 else (rng.choice(first_d), last)
        return Sample("PERSON", unicodedata.normalize("NFD", f"{first} {last}"), form)
    if form == "lookalike":
        name = f"{first} {last}"
        spots = [i for i, c in enumerate(name) if c in _LOOKALIKE_OF]
        if spots:
            at = rng.choice(spots)
            name = name[:at] + rng.choice(_LOOKALIKE_OF[name[at]]) + name[at + 1 :]
        return Sample("PERSON", name, form)
    name = {
        "middle": f"{first} {rng.choice(firsts)} {last}",
        "hyphen_first": f"{first}-{rng.choice(firsts)} {last}",
        "hyphen_last": f"{first} {last}-{rng.choice(lasts)}",
        "surname_first": f"{last}, {first}",
        "initial_first": f"{first[0]}. {last}",
        "first_initial": f"{first} {last[0]}.",
        "line_break": f"{first}\n{last}",
    }.get(form, f"{first} {last}")
    return Sample("PERSON", name.upper() if form == "caps" else name, form)


def _cpr_digits(rng: random.Random) -> str:
    """A birth date in 1920–2019 and a serial number whose 7th digit gives that century."""
    born = date(1920, 1, 1) + timedelta(days=rng.randrange(0, 365 * 100))
    yy = born.year % 100
    sevenths = ("0123" + ("49" if yy >= 37 else "")) if born.year < 2000 else "456789"
    return f"{born:%d%m}{yy:02d}{rng.choice(sevenths)}{rng.randrange(0, 1000):03d}"


def cpr(rng: random.Random, form: str | None = None) -> Sample:
    """A CPR number with a real date; forms ``dash`` (070491-2846), ``plain`` (0704912846),
    ``space`` (070491 2846), ``dots`` (07.04.91-2846), ``slashes`` (07/04/91-2846), ``dashes``
    (07-04-91-2846), ``pairs`` (07 04 91 28 46), ``underscore`` (070491_2846), ``spaced_dash``
    (070491 - 2846), ``tab`` (070491\t2846, a spreadsheet's cells), ``line_break``
    (070491\n2846, a wrapped line), ``double_space`` (070491  2846, justified text), ``marks``
    (a combining mark after some digits: 0\u03017049\u03081…)."""
    d = _cpr_digits(rng)
    form = form or rng.choice(FORMS["DK_CPR"])
    text = {
        "dash": f"{d[:6]}-{d[6:]}",
        "plain": d,
        "space": f"{d[:6]} {d[6:]}",
        "dots": f"{d[:2]}.{d[2:4]}.{d[4:6]}-{d[6:]}",
        "slashes": f"{d[:2]}/{d[2:4]}/{d[4:6]}-{d[6:]}",
        "dashes": f"{d[:2]}-{d[2:4]}-{d[4:6]}-{d[6:]}",
        "pairs": " ".join(d[i : i + 2] for i in range(0, 10, 2)),
        "underscore": f"{d[:6]}_{d[6:]}",
        "spaced_dash": f"{d[:6]} - {d[6:]}",
        "tab": f"{d[:6]}\t{d[6:]}",
        "line_break": f"{d[:6]}\n{d[6:]}",
        "double_space": f"{d[:6]}  {d[6:]}",
        "marks": "".join(c + (rng.choice(_MARKS) if rng.random() < 0.4 else "") for c in f"{d[:6]}-{d[6:]}"),
    }[form]
    return Sample("DK_CPR", text, form)


_MARKS = "\u0301\u0308\u0332\u030a\u20dd"
"""Combining marks (acute, diaeresis, low line, ring, enclosing circle) that compose with no digit."""


_BBAN = {"DK": "n14", "DE": "n18", "NO": "n11", "SE": "n20", "GB": "a4n14", "NL": "a4n10", "FI": "n14"}


def iban(rng: random.Random, form: str | None = None) -> Sample:
    """An IBAN with valid check digits (DK, DE, NO, SE, GB, NL, FI); forms ``compact``,
    ``spaced`` (groups of four), ``lower`` (compact, lower case), ``lower_spaced``, ``dashed``
    and ``dotted`` (groups of four joined by hyphens or dots), ``tabs`` and ``double_spaced``
    (groups of four joined by tabs or two spaces)."""
    country = rng.choice(sorted(_BBAN))
    bban = ""
    for kind, count in re.findall(r"([an])(\d+)", _BBAN[country]):
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if kind == "a" else "0123456789"
        bban += "".join(rng.choice(alphabet) for _ in range(int(count)))
    numeric = "".join(str(int(c, 36)) for c in bban + country + "00")
    compact = f"{country}{98 - int(numeric) % 97:02d}{bban}"
    form = form or rng.choice(FORMS["IBAN_CODE"])
    groups = [compact[i : i + 4] for i in range(0, len(compact), 4)]
    text = {
        "compact": compact,
        "spaced": " ".join(groups),
        "lower": compact.lower(),
        "lower_spaced": " ".join(groups).lower(),
        "dashed": "-".join(groups),
        "dotted": ".".join(groups),
        "tabs": "\t".join(groups),
        "double_spaced": "  ".join(groups),
    }[form]
    return Sample("IBAN_CODE", text, form)


def card(rng: random.Random, form: str | None = None) -> Sample:
    """A Luhn-valid card number (Visa, Mastercard, Amex, Discover); forms ``plain``, ``spaces``,
    ``dashes``, ``dots``, ``slashes``, ``tabs``, ``double_spaces``, ``line_breaks`` (in the
    brand's groups)."""
    brand = rng.choice(("visa", "mastercard", "amex", "discover"))
    prefix, length = {
        "visa": ("4", 16),
        "mastercard": (rng.choice(("51", "52", "53", "54", "55", "2221", "2720")), 16),
        "amex": (rng.choice(("34", "37")), 15),
        "discover": ("6011", 16),
    }[brand]
    body = prefix + "".join(rng.choice("0123456789") for _ in range(length - len(prefix) - 1))
    digits = next(body + c for c in "0123456789" if luhn_ok(body + c))
    groups = (4, 6, 5) if brand == "amex" else (4, 4, 4, 4)
    form = form or rng.choice(FORMS["CREDIT_CARD"])
    parts, at = [], 0
    for g in groups:
        parts.append(digits[at : at + g])
        at += g
    text = {"plain": digits, "spaces": " ".join(parts), "dashes": "-".join(parts), "dots": ".".join(parts),
            "slashes": "/".join(parts), "tabs": "\t".join(parts), "double_spaces": "  ".join(parts),
            "line_breaks": "\n".join(parts)}[form]  # fmt: skip
    return Sample("CREDIT_CARD", text, form)


def _d(rng: random.Random, n: int, first: str = "0123456789") -> str:
    return rng.choice(first) + "".join(rng.choice("0123456789") for _ in range(n - 1))


def phone(rng: random.Random, form: str | None = None) -> Sample:
    """A phone number of the DK, GB or US numbering plan. Forms: ``dk_pairs`` (20 12 34 56),
    ``dk_quads`` (2012 3456), ``dk_intl`` (+45 20 12 34 56), ``dk_dashes`` (20-12-34-56),
    ``us`` ((212) 555-0187), ``us_dashes`` (212-555-0187), ``us_intl`` (+1 212 555 0187),
    ``us_local`` (555-0187), ``gb_london`` (020 7946 0958), ``gb_mobile`` (07700 900123),
    ``gb_intl`` (+44 7700 900123), ``gb_00`` (0044 7700 900123), ``dk_00`` (0045 20 12 34 56),
    ``us_00`` (001 212 555 0187), ``dk_tab`` (2012\t3456), ``dk_double_space``
    (20  12  34  56), ``gb_dots`` (07700.900.123). Numbers without any separator are not
    generated: those need a context word by design (an order number is a bare digit run too)."""
    form = form or rng.choice(FORMS["PHONE_NUMBER"])
    dk = _d(rng, 8, "2345678")
    area, exchange, line = _d(rng, 3, "23456789"), _d(rng, 3, "23456789"), _d(rng, 4)
    mobile = "7" + _d(rng, 3, "456789") + " " + _d(rng, 6)
    text = {
        "dk_pairs": " ".join(dk[i : i + 2] for i in range(0, 8, 2)),
        "dk_quads": f"{dk[:4]} {dk[4:]}",
        "dk_intl": "+45 " + " ".join(dk[i : i + 2] for i in range(0, 8, 2)),
        "dk_dashes": "-".join(dk[i : i + 2] for i in range(0, 8, 2)),
        "us": f"({area}) {exchange}-{line}",
        "us_dashes": f"{area}-{exchange}-{line}",
        "us_intl": f"+1 {area} {exchange} {line}",
        "us_local": f"{exchange}-{line}",
        "gb_london": f"020 7946 {_d(rng, 4)}",
        "gb_mobile": "0" + mobile,
        "gb_intl": "+44 " + mobile,
        "gb_00": "0044 " + mobile,
        "dk_00": "0045 " + " ".join(dk[i : i + 2] for i in range(0, 8, 2)),
        "us_00": f"001 {area} {exchange} {line}",
        "dk_tab": f"{dk[:4]}\t{dk[4:]}",
        "dk_double_space": "  ".join(dk[i : i + 2] for i in range(0, 8, 2)),
        "gb_dots": "0" + mobile[:4] + "." + mobile[5:8] + "." + mobile[8:],
    }[form]
    return Sample("PHONE_NUMBER", text, form)


_DOMAINS = ("example.com", "example.org", "example.net", "example.dk", "mail.dk", "firma.co.uk", "post.example.de")


def email(rng: random.Random, form: str | None = None) -> Sample:
    """An e-mail address on an example domain; forms ``dotted`` (first.last@), ``first``
    (first@), ``digits`` (first42@), ``initial`` (a single letter, a@x.dk style)."""
    firsts, lasts, _ = _names()
    form = form or rng.choice(FORMS["EMAIL_ADDRESS"])
    first, last = rng.choice(firsts).lower(), rng.choice(lasts).lower()
    first = first.translate(str.maketrans("æøåäöü", "aoaaou"))
    last = last.translate(str.maketrans("æøåäöü", "aoaaou"))
    local = {
        "dotted": f"{first}.{last}",
        "first": first,
        "digits": f"{first}{rng.randrange(1, 100)}",
        "initial": rng.choice("abcdefghijklmnopqrstuvwxyz"),
    }[form]
    local = re.sub(r"[^a-z0-9.]", "", local) or "x"
    return Sample("EMAIL_ADDRESS", f"{local}@{rng.choice(_DOMAINS)}", form)


_MAKERS = {"PERSON": person, "DK_CPR": cpr, "IBAN_CODE": iban, "CREDIT_CARD": card, "PHONE_NUMBER": phone,
           "EMAIL_ADDRESS": email}  # fmt: skip


def value(rng: random.Random, kind: str | None = None, form: str | None = None) -> Sample:
    """One value of ``kind`` (default: any of :data:`KINDS`) in ``form`` (default: any)."""
    return _MAKERS[kind or rng.choice(KINDS)](rng, form)


INVISIBLES = "\u200b\u200c\u200d\u2060\u00ad\ufeff"
"""Zero-width space, non-joiner and joiner, word joiner, soft hyphen, zero-width no-break space:
characters that text pasted from a web page or a word processor may carry inside a value, and that
an attacker may put there to hide it."""
_DROP_INVISIBLES = {ord(c): None for c in INVISIBLES}


def hide(sample: Sample, rng: random.Random) -> Sample:
    """``sample`` with one invisible character (:data:`INVISIBLES`) inside it, between two of its
    letters or digits; its form gets ``+invisible``."""
    inner = [i for i in range(1, len(sample.text)) if sample.text[i - 1].isalnum() and sample.text[i].isalnum()]
    if not inner:
        return sample
    at = rng.choice(inner)
    text = sample.text[:at] + rng.choice(INVISIBLES) + sample.text[at:]
    return Sample(sample.kind, text, sample.form + "+invisible")


_PROSE = (
    "Hej, her er oplysningerne: {} — tak.",
    "Please update the record: {}.",
    "Kunde {} ringede i dag.",
    "Forward this to {} as soon as possible",
    "{}",
)


def glued_text(rng: random.Random, count: int | None = None) -> tuple[str, list[Sample]]:
    """A text with 2–4 values, each pair either glued (nothing between them) or separated by a
    space, a comma or a newline, set in one of a few Danish and English sentences; and the
    values in order. One value in eight carries an invisible character (:func:`hide`)."""
    samples = [value(rng) for _ in range(count or rng.randint(2, 4))]
    samples = [hide(s, rng) if rng.random() < 0.125 else s for s in samples]
    parts = [samples[0].text]
    for before, nxt in itertools.pairwise(samples):
        joint = rng.choice(("", "", "", " ", ", ", "\n"))
        if joint in ("", " ", ", ") and not (glueable(before) and glueable(nxt)):
            joint = "; "
        parts.append(joint + nxt.text)
    return rng.choice(_PROSE).format("".join(parts)), samples


def glueable(sample: Sample) -> bool:
    """Whether ``sample`` may be glued to a neighbour with nothing between (:data:`UNGLUEABLE_FORMS`)."""
    return sample.form.split("+")[0] not in UNGLUEABLE_FORMS.get(sample.kind, frozenset())


def _strip_placeholders(text: str) -> str:
    return re.sub(r"<[A-Z]+(?:_[A-Z]+)*_\d+>", "\x00", text)


def _as_read(text: str) -> str:
    """``text`` as a reader reads it: invisible characters left out, combining marks composed
    (NFC) or, where they compose with nothing, left out, look-alike letters read as Latin."""
    composed = unicodedata.normalize("NFC", text.translate(_DROP_INVISIBLES))
    return "".join(c for c in composed if unicodedata.category(c)[0] != "M").translate(LATIN_LOOKALIKES)


def _case_parts(token: str) -> list[str]:
    """``token`` split where a new word starts at a change of case (``metteJensen``,
    ``METTEjensen``); [] for an empty token."""
    cuts = [0]
    for k in range(1, len(token)):
        if (token[k - 1].islower() and token[k].isupper()) or (
            k >= 2 and token[k - 2 : k].isupper() and token[k].islower()
        ):
            cuts.append(k)
    return [token[a:b] for a, b in itertools.pairwise([*cuts, len(token)]) if b > a]


def leaked(sample: Sample, masked: str) -> bool:
    """Whether ``sample`` can still be read in ``masked`` (placeholders left out): a number's
    digits (an IBAN's letters and digits, an IP address's digits) in order, whatever separates
    them; a name's tokens (any case, as words); an address's words of four or more letters; an
    e-mail address in any case or its local part before an ``@``. Both are read as a reader
    reads them: invisible characters (:data:`INVISIBLES`) left out, NFD letters composed, stray
    combining marks left out, Cyrillic and Greek look-alike letters read as Latin; a name's
    words also where ``-``, ``.`` or ``_`` join them."""
    sample = Sample(sample.kind, _as_read(sample.text), sample.form)
    text = _as_read(_strip_placeholders(masked))
    if sample.kind in ("DK_CPR", "PHONE_NUMBER", "CREDIT_CARD", "IBAN_CODE", "IP_ADDRESS"):
        chars = re.sub(r"[\W_]", "", sample.text).upper()
        if sample.kind == "PHONE_NUMBER" and sample.text.startswith(("+", "00")):
            chars = re.sub(r"^(?:00)?(?:45|44|1)(?=\d{7})", "", chars)  # the national number is the value
        pieces = [re.sub(r"[\W_]", "", p).upper() for p in text.split("\x00")]
        return any(chars in p for p in pieces)
    if sample.kind in ("PERSON", "ADDRESS"):
        if sample.kind == "PERSON":  # Mette.Kjærgaard, Anne-Mette: each name on its own
            tokens = [p for t in re.split(r"\s+|(?<=[^\W\d_])[-._](?=[^\W\d_])", sample.text) for p in _case_parts(t)]
        else:
            tokens = re.findall(r"[^\W\d_]{4,}", sample.text)
        return (
            any(re.search(rf"(?<![^\W\d_]){re.escape(token)}(?![^\W\d_])", text, re.IGNORECASE) for token in tokens)
            or sample.text.casefold() in text.casefold()
        )
    local = sample.text.split("@", 1)[0]
    return sample.text.casefold() in text.casefold() or f"{local}@".casefold() in text.casefold()
