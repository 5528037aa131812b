"""What a worker may do to the placeholders of a masked text: :func:`alter_placeholders` (for
tests and benchmarks, with :mod:`podium.pii.samples`)."""

from __future__ import annotations

import random
import re
import unicodedata

__all__ = ["alter_placeholders"]

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
    "{ckind}{n}",
    "<{alias}_{n}>",
    "<{kind}{punct}{n}>",
    "<{kind}({n})>",
    "<{kind}_#{n}>",
    "<{marked}_{n}>",
    "<{kind}_{n}\u0301>",
    "</{kind}_{n}>",
    "<{kind}_{n}/>",
    "<{kind}_{n}_>",
    "<{kind}_{spelled}>",
    "{calias}_{n}",
)
_ALIASES = {
    "PERSON": ("NAME", "PERSON_NAME", "Name"),
    "DK_CPR": ("CPR", "CPR_NUMBER", "cpr"),
    "PHONE_NUMBER": ("PHONE", "TEL", "Phone"),
    "EMAIL_ADDRESS": ("EMAIL", "EMAIL_ADDR", "E-MAIL"),
    "IBAN_CODE": ("IBAN",),
    "CREDIT_CARD": ("CARD", "CARD_NUMBER"),
    "IP_ADDRESS": ("IP",),
    "ADDRESS": ("ADDR",),
}
"""Shorter or longer names a model gives a kind when it rewrites a placeholder."""
_BARE = ("{kind}_{n}", "{lkind}_{n}", "{skind} {n}", "{tkind} {n}", "{ckind}{n}", "{calias}_{n}")
_CAPITAL_ALIASES = {
    kind: tuple(a.replace("-", "_") for a in aliases if a.isupper()) for kind, aliases in _ALIASES.items()
}
_WORDS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
          "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty")  # fmt: skip
_ROMAN = ("", "Ⅰ", "Ⅱ", "Ⅲ", "Ⅳ", "Ⅴ", "Ⅵ", "Ⅶ", "Ⅷ", "Ⅸ", "Ⅹ", "Ⅺ", "Ⅻ")
_FULLWIDTH = {c: chr(ord(c) + 0xFEE0) for c in "<>_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"}
_CYRILLIC = str.maketrans("AEOPCX", "АЕОРСХ")  # the same shapes, Cyrillic letters


def alter_placeholders(masked: str, rng: random.Random) -> str:
    """``masked`` with each issued-style placeholder (``<KIND_n>``) rewritten the way a language
    model might: other brackets (‹ › 〈 〉 ＜ ＞ « », HTML-escaped, doubled), zero-width and other
    invisible characters, fullwidth or Cyrillic look-alike letters, another case, spaces or
    hyphens instead of underscores, bare forms (``KIND_n``, ``kind_n``, ``KIND n``,
    ``Kind n``, ``KINDn``), a shorter or longer kind name (``<EMAIL_n>``, ``<PERSON_NAME_n>``),
    a punctuation mark before the number (``<KIND.n>``, ``<KIND#n>``, ``<KIND:n>``,
    ``<KIND(n)>``, ``<KIND_#n>``), combining marks (``<PE\u0301RSON_1>``,
    ``<PERSON_1\u0301>``), markup around it (``</KIND_n>``, ``<KIND_n/>``, ``<KIND_n_>``), the
    number spelled out (``<KIND_one>``, ``<KIND_XII>``, ``<KIND_Ⅻ>``) and a bare alias in
    capitals (``PHONE_n``, ``CPR_n``, ``NAME_n``). Bare forms are used only where no reader could misread them either:
    not after a letter or an underscore (except ``KIND_n`` itself, which is read glued) and not
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
        if after.isalnum() or after in ("_", "<") or before.isalnum() or before in ("_", ">"):
            choices = [c for c in choices if c != "{calias}_{n}"]  # a word of its own, also once its neighbours are
        template = rng.choice(choices)
        return template.format(
            kind=kind,
            n=n,
            lkind=kind.lower(),
            skind=kind.replace("_", " "),
            tkind=kind.replace("_", " ").title(),
            dkind=kind.replace("_", "-").lower(),
            ckind=kind.replace("_", ""),
            fullwidth="".join(_FULLWIDTH.get(c, c) for c in f"<{kind}_{n}>"),
            cyrillic=kind.translate(_CYRILLIC),
            alias=rng.choice(_ALIASES.get(kind, (kind,))),
            punct=rng.choice(".#:/"),
            marked=_with_mark(kind, rng),
            calias=rng.choice(_CAPITAL_ALIASES.get(kind) or (kind,)),
            spelled=_spelled(int(n), rng),
        )

    return re.sub(r"<([A-Z]+(?:_[A-Z]+)*)_(\d+)>", one, masked)


def _with_mark(word: str, rng: random.Random) -> str:
    """``word`` with a combining mark after one of its letters."""
    at = rng.randrange(len(word)) + 1
    return word[:at] + rng.choice("\u0301\u0332\u0308") + word[at:]


def _spelled(n: int, rng: random.Random) -> str:
    """``n`` as a model may spell it: a number word (up to twenty), a Roman numeral in letters or
    Unicode's numerals (a single letter only as a Unicode numeral: ``<PERSON_X>`` is a label),
    else the digits."""
    forms = [str(n)]
    if n <= len(_WORDS):
        forms.append(rng.choice([_WORDS[n - 1], _WORDS[n - 1].upper(), _WORDS[n - 1].title()]))
    if n < len(_ROMAN):
        roman = unicodedata.normalize("NFKC", _ROMAN[n])
        forms.append(_ROMAN[n])
        if len(roman) > 1:
            forms.append(roman)
    return rng.choice(forms)
