"""The PII findings of outside re-test 17 (findings 3, 4, 6, 10, 13 and 14), one test or more
each; every one failed on the code before its fix (branch start, 24893f2) and passes after it.

3. names written in Unicode NFD (decomposed: ``A\\u030ase``) leaked, or were masked only up to
   the first combining mark;
4. numbers split by a tab, a line break or several spaces went out unmasked;
6. the known-value pass of masking was quadratic in the number of values the vault holds;
10. a placeholder with a separator longer than the stream restorer's hold-back was shown
    streamed while the whole reply was restored (or failed closed);
13. realistic rewrites of a placeholder (shortened kinds, other separators, combining marks)
    were shown unrestored, and their never-issued versions did not fail closed;
14. names joined by ``-``, ``.`` or ``_``, a Cyrillic look-alike letter in a name, and GB numbers
    grouped with dots went out unmasked.
"""

from __future__ import annotations

import random
import re
import time
import unicodedata

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from podium.pii.detect import Detection
from podium.pii.mask import Pseudonymizer
from podium.pii.samples import Sample, leaked, value
from podium.pii.vault import Vault


class _NoDetector:
    """A detector that finds nothing: only the known-value pass masks."""

    def detect(self, text: str) -> list[Detection]:
        return []


def _phone_text(n: int, seed: int = 0) -> tuple[str, list[str]]:
    rng = random.Random(seed)
    numbers = [" ".join(str(rng.randint(a, 99)) for a in (20, 10, 10, 10)) for _ in range(n)]
    return "Ring " + ", ring ".join(numbers) + ".", numbers


def _mask_seconds(text: str, known: list[str]) -> float:
    """Best of three: masking ``text`` with ``known`` in the vault (only the known-value pass)."""
    best = float("inf")
    for _ in range(3):
        vault = Vault()
        for number in known:
            vault.placeholder("PHONE_NUMBER", number)
        pseudonymizer = Pseudonymizer(_NoDetector())  # type: ignore[arg-type]
        started = time.perf_counter()
        masked, _ = pseudonymizer.mask(text, vault)
        best = min(best, time.perf_counter() - started)
        assert not any(number in masked for number in known[:50])
    return best


@pytest.mark.slow
def test_finding_6_masking_time_does_not_grow_with_the_vault_times_the_text() -> None:
    """Re-test 17 #6: one regex per vault value, compiled per call and run over the whole text,
    made a mask cost O(values × length): 72 s for 6,500 phone numbers in 117k characters. The
    same 72k-character text masked with 16 times the values in the vault must cost about as
    much (text + vault), not 16 times as much (ratio within one run, best of three each; the old
    code measured 16 and more, this one about 2)."""
    text, numbers = _phone_text(4000)
    few, all_of_them = _mask_seconds(text, numbers[:250]), _mask_seconds(text, numbers)
    assert all_of_them / max(few, 1e-3) < 6, (few, all_of_them)


def test_finding_6_the_known_value_pass_does_work_proportional_to_the_text() -> None:
    """The known-value pass counts its work (symbols read, vault symbols added, automaton
    steps): per character of text it stays the same when the text and the vault grow together,
    by construction, not by timing."""
    from podium.pii.known import WorkCount, known_values

    per_char = []
    for n in (200, 400, 800, 1600):
        text, numbers = _phone_text(n)
        vault = Vault()
        for number in numbers:
            vault.placeholder("PHONE_NUMBER", number)
        vault.placeholder("PERSON", "Mette Kjærgaard")
        work = WorkCount()
        found = known_values(text + " Mette Kjærgaard", vault, work)
        assert len(found) >= n + 1
        per_char.append(work.total / len(text))
    assert max(per_char) / min(per_char) < 1.05, per_char


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), count=st.integers(1, 12))
def test_finding_6_every_known_value_and_variant_is_found_with_bounded_work(seed: int, count: int) -> None:
    """Whatever the vault holds: each value written again (as written, in capitals, with its
    spaces doubled, a number with its digits reversed) is masked by the known-value pass alone,
    and the pass's work is bounded by a constant times (text + vault) length."""
    from podium.pii.known import WorkCount, known_values

    rng = random.Random(seed)
    samples = [value(rng, rng.choice(["PERSON", "DK_CPR", "IBAN_CODE", "CREDIT_CARD", "PHONE_NUMBER",
                                      "EMAIL_ADDRESS"])) for _ in range(count)]  # fmt: skip
    vault = Vault()
    for sample in samples:
        vault.placeholder(sample.kind, sample.text)
    variants = []
    for sample in samples:
        # in capitals, unless a look-alike letter is in it: Greek ν reads v, its capital Ν reads N
        capitals = sample.text if sample.form == "lookalike" else sample.text.upper()
        variant = rng.choice([sample.text, capitals, sample.text.replace(" ", "  ")])
        if sample.kind in ("DK_CPR", "CREDIT_CARD", "PHONE_NUMBER") and rng.random() < 0.3:
            variant = variant[::-1]
        variants.append((sample, variant))
    text = "Se: " + " / ".join(v for _, v in variants) + "."
    work = WorkCount()
    found = known_values(text, vault, work)
    pseudonymizer = Pseudonymizer(_NoDetector())  # type: ignore[arg-type]
    masked, _ = pseudonymizer.mask(text, vault)
    for sample, variant in variants:
        assert not leaked(Sample(sample.kind, variant, sample.form), masked), (variant, masked)
    assert found
    assert work.total <= 4 * (len(text) + sum(len(s.text) for s in samples)) + 8 * len(found)


@pytest.fixture(scope="module")
def pseudonymizer() -> Pseudonymizer:
    from podium.pii.detect import Detector

    detector = Detector()
    detector.warm_up()
    return Pseudonymizer(detector)


def _decomposable(names: frozenset[str]) -> list[str]:
    return sorted(n.capitalize() for n in names if n.isalpha() and unicodedata.normalize("NFD", n) != n)


@pytest.mark.slow
def test_finding_3_names_in_nfd_are_masked_whole(pseudonymizer: Pseudonymizer) -> None:
    """Re-test 17 #3: a combining mark is no word character, so ``Ju\\u0308rgen`` was two
    tokens and NFD names leaked in full, even after a naming cue, or were masked only up to
    the first mark (``<PERSON_1>\\u030ard``). Names with letters that decompose, written NFD
    (as macOS and many PDFs write them), after a cue, a title or in plain prose: one
    placeholder covers the whole name, and the text comes back exactly."""
    from podium.pii.recognizers import first_names, surnames

    rng = random.Random(17)
    firsts, lasts = _decomposable(first_names()), _decomposable(surnames())
    templates = ["Jeg hedder {}.", "Dr. {} ringede.", "Kunden {} ringede i dag.", "Please call {} today."]
    for n in range(40):
        name = unicodedata.normalize("NFD", f"{rng.choice(firsts)} {rng.choice(lasts)}")
        template = templates[n % len(templates)]
        text = template.format(name)
        vault = Vault()
        masked, _ = pseudonymizer.mask(text, vault)
        rest = re.sub(r"<PERSON_\d+>", "\x00", masked)
        assert rest.count("\x00") == 1, (text, masked)  # one placeholder (a title may go with it)
        assert not any(unicodedata.category(c)[0] == "M" for c in rest), (text, masked)
        read = unicodedata.normalize("NFC", rest).casefold()
        assert not any(w.casefold() in read for w in unicodedata.normalize("NFC", name).split()), (text, masked)
        assert vault.restore(masked) == text


def test_finding_3_combining_marks_inside_a_number_do_not_hide_it(pseudonymizer: Pseudonymizer) -> None:
    """Re-test 17 #14 (last item): combining marks after the digits of a CPR number
    (``0\\u03017\\u0301…``) hid it; marks that compose with nothing are read past now."""
    rng = random.Random(1714)
    marks = ["\u0301", "\u0308", "\u0332", "\u20dd", "\u0489"]
    for _ in range(12):
        sample = value(rng, "DK_CPR", rng.choice(["plain", "dash", "space"]))
        text = "".join(c + (rng.choice(marks) if c.isdigit() and rng.random() < 0.5 else "") for c in sample.text)
        sentence = f"CPR {text} er registreret."
        vault = Vault()
        masked, _ = pseudonymizer.mask(sentence, vault)
        assert not leaked(Sample("DK_CPR", text, "marks"), masked), masked
        assert vault.restore(masked) == sentence


_RUNS = ["\t", "\n", "  ", "\t\t", " \n ", "\r\n", "   ", "\n\n", " \t"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "form"),
    [("DK_CPR", "space"), ("DK_CPR", "pairs"), ("CREDIT_CARD", "spaces"), ("IBAN_CODE", "spaced"),
     ("IBAN_CODE", "lower_spaced"), ("PHONE_NUMBER", "dk_quads"), ("PHONE_NUMBER", "dk_pairs"),
     ("PHONE_NUMBER", "dk_intl"), ("PHONE_NUMBER", "us_intl"), ("PHONE_NUMBER", "us"),
     ("PHONE_NUMBER", "gb_london"), ("PHONE_NUMBER", "gb_mobile"), ("PHONE_NUMBER", "gb_00")],
)  # fmt: skip
def test_finding_4_numbers_split_by_tabs_line_breaks_or_several_spaces_are_masked(
    kind: str, form: str, pseudonymizer: Pseudonymizer
) -> None:
    """Re-test 17 #4: where one space between digit groups was accepted, a tab, a line break or
    two spaces (spreadsheet cells, wrapped lines, justified text) let the number out unmasked.
    Each space of a generated value replaced by a random run of whitespace: masked, restored."""
    rng = random.Random(f"{kind}/{form}")
    for _ in range(8):
        sample = value(rng, kind, form)
        text = re.sub(" ", lambda _: rng.choice(_RUNS), sample.text)
        sentence = rng.choice(["Kunde {} ringede i dag.", "Please update the record: {}.", "Se {}"]).format(text)
        vault = Vault()
        masked, _ = pseudonymizer.mask(sentence, vault)
        assert not leaked(Sample(kind, text, form), masked), (sentence, masked)
        assert vault.restore(masked) == sentence


@pytest.mark.slow
def test_finding_14_names_joined_by_a_hyphen_dot_or_underscore_are_masked(pseudonymizer: Pseudonymizer) -> None:
    """Re-test 17 #14: ``METTE-KJÆRGAARD``, ``Mette.Kjærgaard``, ``John_Smith`` were one word
    to the name recognizer and went out unmasked. Listed first names joined to a surname by a
    random one of ``-._``, in title case or capitals, in a sentence: masked, restored. Code
    identifiers that start with a first name (MBPP's ``Max_Length``, ``Odd_Occurrence``) stay."""
    rng = random.Random(1714)
    for _ in range(24):
        sample = value(rng, "PERSON", "title")
        first, last = sample.text.split(" ", 1)
        name = f"{first}{rng.choice('-._')}{last}"
        name = name.upper() if rng.random() < 0.4 else name
        text = rng.choice(["KUNDE: {}", "Kunde: {} ringede.", "Account: {} logged in", "Hej {}!"]).format(name)
        vault = Vault()
        masked, _ = pseudonymizer.mask(text, vault)
        assert not leaked(Sample("PERSON", f"{first} {last}", "joined"), masked), (text, masked)
        assert vault.restore(masked) == text
    for code in ["def Max_Length(arr):", "Odd_Occurrence(arr) == 5", "x = Max_Num + Min_Num", "Odd-Even sort"]:
        assert pseudonymizer.mask(code, Vault())[0] == code  # Max and Odd are first names: identifiers stay


def test_finding_14_a_look_alike_letter_inside_a_name_does_not_hide_it(pseudonymizer: Pseudonymizer) -> None:
    """Re-test 17 #14: ``Mеtte Kjærgaard`` with a Cyrillic ``е`` went out as written (the
    restorer reads look-alikes, the detector did not). A Cyrillic or Greek look-alike put in
    place of a Latin letter of a listed name: masked; a word wholly in Cyrillic is not read
    as Latin (``Мама``)."""
    from podium.text import LATIN_LOOKALIKES

    swaps: dict[str, list[str]] = {}
    for cyrillic, latin in LATIN_LOOKALIKES.items():
        swaps.setdefault(chr(latin), []).append(chr(cyrillic))
    rng = random.Random(1714)
    done = 0
    while done < 16:
        sample = value(rng, "PERSON", "title")
        spots = [i for i, c in enumerate(sample.text) if c in swaps]
        if not spots:
            continue
        at = rng.choice(spots)
        name = sample.text[:at] + rng.choice(swaps[sample.text[at]]) + sample.text[at + 1 :]
        text = f"Kunden hedder {name}."
        vault = Vault()
        masked, _ = pseudonymizer.mask(text, vault)
        assert "<PERSON_" in masked and not any(w in masked for w in name.split()), (text, masked)
        assert vault.restore(masked) == text
        done += 1
    assert pseudonymizer.mask("Мама мыла раму.", Vault())[0] == "Мама мыла раму."


@pytest.mark.parametrize("number", ["07700.900.123", "020.7946.0958", "01632.960.001", "+44 7700.900.123"])
def test_finding_14_gb_numbers_grouped_with_dots_are_masked(number: str, pseudonymizer: Pseudonymizer) -> None:
    """Re-test 17 #14: a GB number written 5-3-3 with dots (``07700.900.123``) went out while
    the same number with hyphens or spaces was masked: dots now group GB numbers as they group
    DK and US ones."""
    text = f"Ring me on {number} tomorrow."
    vault = Vault()
    masked, _ = pseudonymizer.mask(text, vault)
    assert masked.startswith("Ring me on <PHONE_NUMBER_") and number not in masked, masked
    assert vault.restore(masked) == text


def _streamed(vault: Vault, text: str, sizes: list[int]) -> str | None:
    """``text`` restored through a StreamRestorer in chunks of ``sizes`` (cycled); None when it
    failed closed."""
    from podium.pii.vault import StreamRestorer, UnknownPlaceholder

    restorer, shown, at, k = StreamRestorer(vault), [], 0, 0
    try:
        while at < len(text):
            size = sizes[k % len(sizes)]
            shown.append(restorer.feed(text[at : at + size]))
            at, k = at + size, k + 1
        shown.append(restorer.close())
    except UnknownPlaceholder:
        return None
    return "".join(shown)


def _whole(vault: Vault, text: str) -> str | None:
    from podium.pii.vault import UnknownPlaceholder

    try:
        return vault.restore(text)
    except UnknownPlaceholder:
        return None


@pytest.mark.parametrize("run", [" ", "_", "\n", "-", "\t", " _"])
def test_finding_10_a_placeholder_with_a_long_separator_is_the_same_streamed_or_not(run: str) -> None:
    """Re-test 17 #10: ``<PERSON`` + 70 spaces + ``1>`` was restored whole but shown as written
    when streamed (the restorer held back 64 characters; the pattern allowed any run), and an
    unissued ``…7>`` failed closed whole but was shown streamed. Separator runs of every length,
    issued and never-issued numbers, streamed one character at a time and in larger chunks:
    the same text, or both fail closed."""
    vault = Vault()
    vault.placeholder("PERSON", "Mette Kjærgaard")
    for length in range(0, 90, 3):
        for number in ("1", "7"):
            for text in (f"Hi <PERSON{run * length}{number}> bye", f"Hi <{run * length}PERSON_{number}> bye",
                         f"Hi PERSON{run * length}{number} bye"):  # fmt: skip
                whole = _whole(vault, text)
                for sizes in ([1], [7, 3], [64]):
                    assert _streamed(vault, text, sizes) == whole, (repr(text), sizes)


FRAGMENTS = (
    *("<", ">", "<<", ">>", "‹", "›", "«", "»", "〈", "〉", "[", "]", "[[", "]]", "{", "}", "{{", "}}", "＜", "＞"),
    *("&lt;", "&gt;", "&lt", "&gt", "&#60;", "&#x3c;", "&#0060;", "&#62;", "&#x3E;", "&", "\\", "\\_"),
    *("PERSON", "person", "Person", "PER", "SON", "DK", "CPR", "DK_CPR", "dk-cpr", "PHONE", "NUMBER", "EMAIL"),
    *("ADDRESS", "EMAIL_ADDRESS", "IBAN", "CODE", "CREDIT", "CARD", "IP", "NAME", "TEL", "MAIL", "ADDR", "FULL"),
    *("_", "-", "–", " ", "  ", "    ", "\n", "\t", ".", "#", ":", "(", ")", "/", ",", "x", "ok", "1", "2", "7"),
    *("12", "1234567", "0", "１", "٣", "①", "\u200b", "\u2060", "\ufeff", "\u00ad", "\u0301", "\u0332", "\u034f"),
    *("Р", "Е", "ﬀ", "ﷺ", "㈠", "é", "ß", "\u00a0"),
)  # fmt: skip


STREAMS = {
    "pieces": st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=50),
    "sizes": st.lists(st.integers(1, 12), min_size=1, max_size=8),
    "issued": st.lists(
        st.sampled_from(["PERSON", "DK_CPR", "EMAIL_ADDRESS", "PHONE_NUMBER", "CREDIT_CARD"]), max_size=5
    ),
    "reserved": st.booleans(),
}


def _vault(issued: list[str], reserved: bool) -> Vault:
    vault = Vault()
    if reserved:
        vault.reserve_literals("<PERSON_2>")
    for n, kind in enumerate(issued):
        vault.placeholder(kind, f"value {n}")
    return vault


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**STREAMS)
def test_finding_10_streaming_any_text_in_any_chunks_gives_exactly_what_restore_gives(
    pieces: list[str], sizes: list[int], issued: list[str], reserved: bool
) -> None:
    """Re-test 17 #10, as a property: for any text made of placeholder-ish pieces (brackets,
    entities, kind words and aliases in any case, separators and long runs, punctuation,
    digits of any script, invisible characters, combining marks, look-alike and NFKC letters)
    and any chunking, the stream shows exactly what :meth:`Vault.restore` returns, or fails
    closed where it does (the old code disagreed on about 2 % of such texts)."""
    vault = _vault(issued, reserved)
    text = "".join(pieces)
    assert _streamed(vault, text, sizes) == _whole(vault, text), repr(text)


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**STREAMS)
def test_finding_10_the_stream_never_holds_back_more_than_the_longest_placeholder(
    pieces: list[str], sizes: list[int], issued: list[str], reserved: bool
) -> None:
    """What the stream has received and not shown is never more than MAX_PLACEHOLDER visible
    characters: the bound the placeholder grammar is written to."""
    from podium.pii.vault import MAX_PLACEHOLDER, StreamRestorer, UnknownPlaceholder

    vault = _vault(issued, reserved)
    text = "".join(pieces)
    restorer, at = StreamRestorer(vault), 0
    try:
        while at < len(text):
            restorer.feed(text[at : at + sizes[0]])
            at += sizes[0]
            held = text[restorer._scanner._emitted : at]  # what was received and not shown yet
            assert sum(not _invisible_or_mark(c) for c in held) <= MAX_PLACEHOLDER, repr(held)
    except UnknownPlaceholder:
        pass


def _invisible_or_mark(c: str) -> bool:
    from podium.text import is_invisible

    return is_invisible(c) or unicodedata.category(c)[0] == "M"


def test_finding_10_the_longest_placeholder_is_restored_streamed_and_whole() -> None:
    """Every part at its bound (two escaped entity brackets, three spaces at each run, the
    longest alias, a punctuation mark, six digits): restored both ways, never more than
    MAX_PLACEHOLDER characters held back; one more space and it is ordinary text."""
    from podium.pii.vault import MAX_PLACEHOLDER, StreamRestorer

    vault = Vault()
    vault.placeholder("CREDIT_CARD", "4111 1111 1111 1111")
    longest = "\\&#x003c;\\&#x003c;   CREDIT   CARD   NUMBER   (   000001)   \\&#x003e;\\&#x003e;"
    text = f"Kort: {longest} ok"
    assert vault.restore(text) == "Kort: 4111 1111 1111 1111 ok"
    restorer, shown, held = StreamRestorer(vault), "", 0
    for at, c in enumerate(text, 1):
        shown += restorer.feed(c)
        held = max(held, at - restorer._scanner._emitted)
    assert shown + restorer.close() == "Kort: 4111 1111 1111 1111 ok"
    assert len(longest) - 1 <= held <= MAX_PLACEHOLDER
    longer = longest.replace("NUMBER   (", "NUMBER    (")
    assert vault.restore(longer) == longer == _streamed(vault, longer, [1])


VALUES = {
    "PERSON": "Mette Kjærgaard",
    "EMAIL_ADDRESS": "mette@example.dk",
    "PHONE_NUMBER": "20 12 34 56",
    "DK_CPR": "070491-2846",
    "IBAN_CODE": "DK50 0040 0440 1162 43",
    "CREDIT_CARD": "4111 1111 1111 1111",
    "IP_ADDRESS": "203.0.113.7",
    "ADDRESS": "Vesterbrogade 112, 1620 København V",
}
REWRITTEN_KINDS = {  # names a model gives a kind when it rewrites a placeholder
    "PERSON": ["NAME", "PERSON_NAME", "Name", "person-name", "FULL_NAME"],
    "EMAIL_ADDRESS": ["EMAIL", "EMAIL_ADDR", "E-MAIL", "email", "MAIL"],
    "PHONE_NUMBER": ["PHONE", "Phone", "TEL", "TELEPHONE", "PHONE_NO"],
    "DK_CPR": ["CPR", "cpr", "CPR_NUMBER", "CPR_NR"],
    "IBAN_CODE": ["IBAN", "Iban"],
    "CREDIT_CARD": ["CARD", "CARD_NUMBER", "CREDIT_CARD_NUMBER"],
    "IP_ADDRESS": ["IP", "IP_ADDR"],
    "ADDRESS": ["ADDR", "STREET_ADDRESS"],
}
SEPARATED = ["{k}.{n}", "{k}#{n}", "{k}:{n}", "{k}({n})", "{k}_#{n}", "{k} #{n}", "{k}: {n}", "{k}/{n}", "{k}|{n}"]
BRACKETS = ["<{}>", "‹{}›", "&lt;{}&gt;", "«{}»", "[[{}]]", "<{}"]


def _marked(text: str, rng: random.Random) -> str:
    """``text`` with a combining mark after one of its letters."""
    spots = [i for i, c in enumerate(text) if c.isalpha()]
    at = rng.choice(spots) + 1
    return text[:at] + rng.choice(["\u0301", "\u0332", "\u0308", "\u0338"]) + text[at:]


def test_finding_13_realistic_rewrites_are_restored_and_unissued_ones_fail_closed() -> None:
    """Re-test 17 #13: shortened or longer kind names (``<EMAIL_1>``, ``<CPR_1>``,
    ``<PERSON_NAME_1>``), other separators (``<PERSON.1>``, ``<PERSON#1>``, ``<PERSON(1)>``) and a
    combining mark inside (``<PE\\u0301RSON_1>``) were shown unrestored, and their never-issued
    versions did not fail closed. Every kind, under other names, with other separators and
    brackets, with a mark put on a random letter: restored to the value exactly, or, for a
    number never issued, UnknownPlaceholder."""
    from podium.pii.vault import UnknownPlaceholder

    rng = random.Random(1713)
    vault = Vault()
    for kind, value_ in VALUES.items():
        assert vault.placeholder(kind, value_) == f"<{kind}_1>"
    for kind, names in REWRITTEN_KINDS.items():
        for name in [*names, kind]:
            for template in [*SEPARATED, "{k}_{n}", "{k} {n}"]:
                for n, expected in (("1", VALUES[kind]), ("7", None)):
                    core = template.format(k=name, n=n)
                    for placeholder in (rng.choice(BRACKETS).format(core), _marked(f"<{core}>", rng)):
                        text = f"Se {placeholder} nu."
                        if expected is None:
                            with pytest.raises(UnknownPlaceholder):
                                vault.restore(text)
                        else:
                            assert vault.restore(text) == f"Se {expected} nu.", text


def test_finding_13_a_mark_after_the_number_takes_no_bracket_along() -> None:
    """``<PERSON_1\\u0301>`` restored to the value followed by a stray ``>``: the mark ended the
    placeholder before its bracket. Marks are read past everywhere in a placeholder."""
    vault = Vault()
    vault.placeholder("PERSON", "Mette Kjærgaard")
    for mark in ["\u0301", "\u0332", "\u20dd"]:
        assert vault.restore(f"Hej <PERSON_1{mark}>!") == "Hej Mette Kjærgaard!"
        assert vault.restore(f"Hej <PERSON{mark}_1>!") == "Hej Mette Kjærgaard!"
        assert vault.restore(f"Hej <{mark}PERSON_1{mark}>{mark}!") == f"Hej Mette Kjærgaard{mark}!"


@pytest.mark.parametrize(
    "text",
    [
        "Use <NAME> and <EMAIL> in the template.",
        "<name1>Mette</name1> <phone2>20</phone2> <card3/> <ip4>x</ip4>",
        "person1 = load(person2); email1 = x",
        "<p>Hi</p><h1>Title</h1><td>1</td><li>2</li><img src='a.png'>",
        "Card 1 beats Card 2; [Name 1] and [Email 2] in a Markdown list; {card 3}",
        "1 < 2 and 3 > 2; a<b>c; x &lt; y",
        "See section IP.1 and NAME.2 of the RFC",
        "The <Name> field, <Phone #> column and <IP:port> syntax",
    ],
)
def test_finding_13_ordinary_text_stays_as_it_is(text: str) -> None:
    """Widening what reads as a placeholder must leave ordinary text alone: an XML tag such as
    ``<name1>``, code such as ``person1``, HTML, Markdown lists with ``[Name 1]``, a section
    number ``IP.1`` — whether or not the request issued placeholders of those kinds."""
    vault = Vault()
    for kind, value_ in VALUES.items():
        vault.placeholder(kind, value_)
    assert vault.restore(text) == text
    assert _streamed(vault, text, [1]) == text


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("Forward this to anna@example.comALANA-TORRES as soon", ["ALANA", "TORRES"]),
        ("x@example.orgEnar_Merritt ringede", ["Enar", "Merritt"]),
        ("Se 07665 42912507817.341.954191159 - 0769, tak", ["42912507817", "341", "954191159", "0769"]),
        ("Kunde 07986.486.0204\u200c3 64 47 346011\n1321\n2830\n4446 ringede", ["07986", "486", "6011", "4446"]),
        ("Please update the record: x@example.dk\nAnic\u200b\u0430 Gordon.", ["Anic", "Gordon"]),
    ],
)
def test_the_extended_generators_glued_forms_are_masked(
    text: str, values: list[str], pseudonymizer: Pseudonymizer
) -> None:
    """What the generator's new forms found glued to other values (development seeds 0, 6
    and 7 of ``bench/pii_cases.py``): a joined name right after an e-mail domain (the joint is
    found once the glue point splits ``comALANA``), GB numbers grouped with dots glued to other
    phone numbers (a stretch of phone numbers each grouped as its country writes them is one
    phone number, dots or not), and a look-alike letter in a word an invisible character
    splits. Each is masked and restored."""
    vault = Vault()
    masked, _ = pseudonymizer.mask(text, vault)
    assert not any(v in masked for v in values), masked
    assert vault.restore(masked) == text
