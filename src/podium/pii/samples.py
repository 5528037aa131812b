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

import random
import re
from dataclasses import dataclass
from datetime import date, timedelta
from functools import cache

from podium.pii.numbers import luhn_ok
from podium.pii.recognizers import first_names, surnames

__all__ = [
    "KINDS",
    "Sample",
    "alter_placeholders",
    "card",
    "cpr",
    "email",
    "glued_text",
    "iban",
    "leaked",
    "person",
    "phone",
    "value",
]

KINDS = ("PERSON", "DK_CPR", "IBAN_CODE", "CREDIT_CARD", "PHONE_NUMBER", "EMAIL_ADDRESS")
"""The kinds generated here (addresses and IP addresses are not glued into other values)."""

_SURNAME_ENDINGS = ("sen", "son", "gaard", "holm", "berg", "lund", "strup", "skov", "dahl", "borg", "bech")


@dataclass(frozen=True)
class Sample:
    """A generated value: ``kind``, ``text`` as written, and ``form`` (how it is written)."""

    kind: str
    text: str
    form: str


@cache
def _names() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(first names, surnames, surnames with a typical ending), capitalised, letters only."""
    firsts = tuple(sorted(n.capitalize() for n in first_names() if n.isalpha() and len(n) >= 3))
    lasts = tuple(sorted(n.capitalize() for n in surnames() if n.isalpha() and len(n) >= 3))
    typical = tuple(n for n in lasts if n.casefold().endswith(_SURNAME_ENDINGS))
    return firsts, lasts, typical


def person(rng: random.Random, form: str | None = None) -> Sample:
    """A first name and a surname from the bundled lists; forms: ``title`` (Mette Kjærgaard),
    ``caps`` (METTE KJÆRGAARD), ``lower`` (mette kjærgaard, with a surname of a typical ending:
    only those are recognised in lower case), ``middle`` (two first names and a surname)."""
    firsts, lasts, typical = _names()
    form = form or rng.choice(("title", "title", "caps", "lower", "middle"))
    first = rng.choice(firsts)
    if form == "lower":
        return Sample("PERSON", f"{first} {rng.choice(typical)}".lower(), form)
    name = f"{first} {rng.choice(lasts)}"
    if form == "middle":
        name = f"{first} {rng.choice(firsts)} {rng.choice(lasts)}"
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
    (07-04-91-2846)."""
    d = _cpr_digits(rng)
    form = form or rng.choice(("dash", "plain", "space", "dots", "slashes", "dashes"))
    text = {
        "dash": f"{d[:6]}-{d[6:]}",
        "plain": d,
        "space": f"{d[:6]} {d[6:]}",
        "dots": f"{d[:2]}.{d[2:4]}.{d[4:6]}-{d[6:]}",
        "slashes": f"{d[:2]}/{d[2:4]}/{d[4:6]}-{d[6:]}",
        "dashes": f"{d[:2]}-{d[2:4]}-{d[4:6]}-{d[6:]}",
    }[form]
    return Sample("DK_CPR", text, form)


_BBAN = {"DK": "n14", "DE": "n18", "NO": "n11", "SE": "n20", "GB": "a4n14", "NL": "a4n10", "FI": "n14"}


def iban(rng: random.Random, form: str | None = None) -> Sample:
    """An IBAN with valid check digits (DK, DE, NO, SE, GB, NL, FI); forms ``compact``,
    ``spaced`` (groups of four), ``lower`` (compact, lower case), ``lower_spaced``."""
    country = rng.choice(sorted(_BBAN))
    bban = ""
    for kind, count in re.findall(r"([an])(\d+)", _BBAN[country]):
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if kind == "a" else "0123456789"
        bban += "".join(rng.choice(alphabet) for _ in range(int(count)))
    numeric = "".join(str(int(c, 36)) for c in bban + country + "00")
    compact = f"{country}{98 - int(numeric) % 97:02d}{bban}"
    form = form or rng.choice(("compact", "spaced", "lower", "lower_spaced"))
    spaced = " ".join(compact[i : i + 4] for i in range(0, len(compact), 4))
    text = {"compact": compact, "spaced": spaced, "lower": compact.lower(), "lower_spaced": spaced.lower()}[form]
    return Sample("IBAN_CODE", text, form)


def card(rng: random.Random, form: str | None = None) -> Sample:
    """A Luhn-valid card number (Visa, Mastercard, Amex, Discover); forms ``plain``, ``spaces``,
    ``dashes`` (in the brand's groups)."""
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
    form = form or rng.choice(("plain", "spaces", "dashes"))
    parts, at = [], 0
    for g in groups:
        parts.append(digits[at : at + g])
        at += g
    text = {"plain": digits, "spaces": " ".join(parts), "dashes": "-".join(parts)}[form]
    return Sample("CREDIT_CARD", text, form)


def _d(rng: random.Random, n: int, first: str = "0123456789") -> str:
    return rng.choice(first) + "".join(rng.choice("0123456789") for _ in range(n - 1))


def phone(rng: random.Random, form: str | None = None) -> Sample:
    """A phone number of the DK, GB or US numbering plan. Forms: ``dk_pairs`` (20 12 34 56),
    ``dk_quads`` (2012 3456), ``dk_intl`` (+45 20 12 34 56), ``dk_dashes`` (20-12-34-56),
    ``us`` ((212) 555-0187), ``us_dashes`` (212-555-0187), ``us_intl`` (+1 212 555 0187),
    ``us_local`` (555-0187), ``gb_london`` (020 7946 0958), ``gb_mobile`` (07700 900123),
    ``gb_intl`` (+44 7700 900123). Numbers without any separator are not generated: those need
    a context word by design (an order number is a bare digit run too)."""
    form = form or rng.choice(
        ("dk_pairs", "dk_quads", "dk_intl", "dk_dashes", "us", "us_dashes", "us_intl", "us_local", "gb_london",
         "gb_mobile", "gb_intl")
    )  # fmt: skip
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
    }[form]
    return Sample("PHONE_NUMBER", text, form)


_DOMAINS = ("example.com", "example.org", "example.net", "example.dk", "mail.dk", "firma.co.uk", "post.example.de")


def email(rng: random.Random, form: str | None = None) -> Sample:
    """An e-mail address on an example domain; forms ``dotted`` (first.last@), ``first``
    (first@), ``digits`` (first42@), ``initial`` (a single letter, a@x.dk style)."""
    firsts, lasts, _ = _names()
    form = form or rng.choice(("dotted", "first", "digits", "initial"))
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
    values in order."""
    samples = [value(rng) for _ in range(count or rng.randint(2, 4))]
    parts = [samples[0].text]
    for nxt in samples[1:]:
        parts.append(rng.choice(("", "", "", " ", ", ", "\n")) + nxt.text)
    return rng.choice(_PROSE).format("".join(parts)), samples


_ALTERATIONS = (
    "<{kind}_{n}>",
    "<{lkind}_{n}>",
    "< {kind} {n} >",
    "‹{kind}\u200b_{n}>",
    "〈{kind}_{n}〉",
    "＜{kind}_{n}＞",
    "{fullwidth}",
    "<{cyrillic}_{n}>",
    "«{kind}_{n}»",
    "&lt;{kind}_{n}&gt;",
    "[[{kind}_{n}]]",
    "{{{{{kind}_{n}}}}}",
    "<{kind}\u2060_\ufeff{n}>",
    "<{dkind}-{n}>",
    "{kind}_{n}",
    "{lkind}_{n}",
    "{skind} {n}",
    "{tkind} {n}",
)
_BARE = ("{kind}_{n}", "{lkind}_{n}", "{skind} {n}", "{tkind} {n}")
_FULLWIDTH = {c: chr(ord(c) + 0xFEE0) for c in "<>_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"}
_CYRILLIC = str.maketrans("AEOPCX", "АЕОРСХ")  # the same shapes, Cyrillic letters


def alter_placeholders(masked: str, rng: random.Random) -> str:
    """``masked`` with each issued-style placeholder (``<KIND_n>``) rewritten the way a language
    model might: other brackets (‹ › 〈 〉 ＜ ＞ « », HTML-escaped, doubled), zero-width and other
    invisible characters, fullwidth or Cyrillic look-alike letters, another case, spaces or
    hyphens instead of underscores, and bare forms (``KIND_n``, ``kind_n``, ``KIND n``,
    ``Kind n``). Bare forms are used only where no reader could misread them either: not
    after a letter or an underscore (except ``KIND_n`` itself, which is read glued) and not
    before a digit."""

    def one(m: re.Match[str]) -> str:
        kind, n = m.group(1), m.group(2)
        before = masked[m.start() - 1 : m.start()]
        after = masked[m.end() : m.end() + 1]
        choices = list(_ALTERATIONS)
        if after.isdigit() or before == "_":
            choices = [c for c in choices if c not in _BARE]
        elif before.isalpha():
            choices = [c for c in choices if c not in _BARE[1:]]
        template = rng.choice(choices)
        return template.format(
            kind=kind,
            n=n,
            lkind=kind.lower(),
            skind=kind.replace("_", " "),
            tkind=kind.replace("_", " ").title(),
            dkind=kind.replace("_", "-").lower(),
            fullwidth="".join(_FULLWIDTH.get(c, c) for c in f"<{kind}_{n}>"),
            cyrillic=kind.translate(_CYRILLIC),
        )

    return re.sub(r"<([A-Z]+(?:_[A-Z]+)*)_(\d+)>", one, masked)


def _strip_placeholders(text: str) -> str:
    return re.sub(r"<[A-Z]+(?:_[A-Z]+)*_\d+>", "\x00", text)


def leaked(sample: Sample, masked: str) -> bool:
    """Whether ``sample`` can still be read in ``masked`` (placeholders left out): a number's
    digits (an IBAN's letters and digits, an IP address's digits) in order, whatever separates
    them; a name's tokens (any case, as words); an address's words of four or more letters; an
    e-mail address in any case or its local part before an ``@``."""
    text = _strip_placeholders(masked)
    if sample.kind in ("DK_CPR", "PHONE_NUMBER", "CREDIT_CARD", "IBAN_CODE", "IP_ADDRESS"):
        chars = re.sub(r"[\W_]", "", sample.text).upper()
        if sample.kind == "PHONE_NUMBER" and sample.text.startswith("+"):
            chars = re.sub(r"^(?:45|44|1)(?=\d{7})", "", chars)  # the national number is the value
        pieces = [re.sub(r"[\W_]", "", p).upper() for p in text.split("\x00")]
        return any(chars in p for p in pieces)
    if sample.kind in ("PERSON", "ADDRESS"):
        tokens = sample.text.split() if sample.kind == "PERSON" else re.findall(r"[^\W\d_]{4,}", sample.text)
        return (
            any(re.search(rf"(?<![^\W\d_]){re.escape(token)}(?![^\W\d_])", text, re.IGNORECASE) for token in tokens)
            or sample.text.casefold() in text.casefold()
        )
    local = sample.text.split("@", 1)[0]
    return sample.text.casefold() in text.casefold() or f"{local}@".casefold() in text.casefold()
