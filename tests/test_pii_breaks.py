"""The outside tester's findings, one test each, on the paths the tester used.

Each failed on the code before the fix (commit 6705fd7's ``src/podium/pii``) and passes after it:
1. a US 7-digit local number (``NNN-NNNN``) reached the worker unmasked;
2. glued or run-together values leaked (both of ``a@x.dkb@y.dk``, ``…@example.orglars.moller@…``,
   ``METTE KJÆRGAARD``, ``07.04.91-2846``, a lower-case IBAN, an IBAN glued to a name, a card
   number glued to a CPR);
3. placeholders altered by the worker (``person_1``, ``PERSON 1``, ``‹PERSON\\u200b_1>``) were
   shown unrestored (3a), and a value written two ways came back in its first form (3b).

Only public behaviour is used (the HTTP wire, the orchestrator with fake external workers), so
the same tests ran against the old code.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from podium.trace.store import TraceStore
from tests.test_pii import fakes, leaks, pool_file, question_of, run
from tests.test_pii_http import _run_case

ONE_STEP = 'model_id = [0]\nsubtasks = ["Answer."]\naccess_list = [[]]'


def _wire(tmp_path: Path, question: str) -> tuple[str, str]:
    """The message body the provider received over HTTP (JSON-decoded) and the answer."""
    bodies, answer = asyncio.run(_run_case(tmp_path, question))
    assert len(bodies) == 1
    return json.loads(bodies[0])["messages"][-1]["content"], answer


def test_break_1_a_us_seven_digit_local_number_never_reaches_the_worker(tmp_path: Path) -> None:
    question = "Call me back at 555-0187 tonight, or at 555.0143 tomorrow."
    wire, answer = _wire(tmp_path, question)
    for number in ("555-0187", "555.0143"):
        assert not leaks(wire, number, "PHONE_NUMBER"), wire
        assert re.sub(r"\D", "", number) not in re.sub(r"\D", "", wire)
    assert answer == question


GLUED = (
    "Send it to a@x.dkb@y.dk and anna.berg@example.orglars.moller@example.net. "
    "Kunde: METTE KJÆRGAARD, CPR 07.04.91-2846, konto dk50 0040 0440 1162 43 "
    "eller DE89370400440532013000Greta Vogel. Kort 41111111111111111502856317."
)
GLUED_VALUES = (
    ("EMAIL_ADDRESS", "a@x.dk"),
    ("EMAIL_ADDRESS", "b@y.dk"),
    ("EMAIL_ADDRESS", "anna.berg@example.org"),
    ("EMAIL_ADDRESS", "lars.moller@example.net"),
    ("PERSON", "METTE KJÆRGAARD"),
    ("DK_CPR", "07.04.91-2846"),
    ("IBAN_CODE", "dk50 0040 0440 1162 43"),
    ("IBAN_CODE", "DE89370400440532013000"),
    ("PERSON", "Greta Vogel"),
    ("CREDIT_CARD", "4111111111111111"),
    ("DK_CPR", "1502856317"),
)


def _leaked(wire: str, values: tuple[tuple[str, str], ...]) -> list[str]:
    """The values (or parts of them) that reached the worker: a value as :func:`leaks` finds it,
    every token of a name on its own, an e-mail address's local part."""
    leaked = []
    for kind, value in values:
        if leaks(wire, value, kind):
            leaked.append(value)
        if kind == "PERSON":  # every name token on its own counts
            leaked += [t for t in value.split() if re.search(rf"(?<!\w){t}(?!\w)", wire, re.IGNORECASE)]
        if kind == "EMAIL_ADDRESS" and value.split("@")[0] + "@" in wire:  # b@y.dk: its local part left
            leaked.append(value)
    return leaked


def test_break_2_glued_and_run_together_values_never_reach_the_worker(tmp_path: Path) -> None:
    wire, answer = _wire(tmp_path, GLUED)
    assert all(value in GLUED for _, value in GLUED_VALUES)
    assert _leaked(wire, GLUED_VALUES) == [], wire
    assert answer == GLUED  # restored exactly


@pytest.mark.slow
def test_break_3a_altered_placeholders_are_restored_or_fail_closed(tmp_path: Path) -> None:
    question = "Ring til Søren Østergaard."
    # the worker writes the placeholder back the ways the tester saw
    altered = "Hej person_1, PERSON 1 og ‹PERSON\u200b_1>."
    workers = fakes(a=altered, local="fallback answer")
    record = run(pool_file(tmp_path), workers, question, ONE_STEP, TraceStore(tmp_path / "t.sqlite3"))
    assert record.status == "ok", record.error
    assert record.answer == "Hej Søren Østergaard, Søren Østergaard og Søren Østergaard."
    # a look-alike of a placeholder this request never issued: not shown, the fallback answers
    workers = fakes(a="Spørg ‹PERSON\u200b_7> i stedet.", local="fallback answer")
    record = run(pool_file(tmp_path), workers, question, ONE_STEP, TraceStore(tmp_path / "t2.sqlite3"))
    assert record.status == "fallback" and record.answer == "fallback answer"
    assert record.fallback is not None and record.fallback.reason == "pii_protection"


def test_break_3b_a_value_written_two_ways_comes_back_as_written(tmp_path: Path) -> None:
    question = "Mit CPR er 0704912846 (på papir: 070491-2846)."
    workers = fakes(a=question_of)
    record = run(pool_file(tmp_path), workers, question, ONE_STEP, TraceStore(tmp_path / "t.sqlite3"))
    assert record.status == "ok", record.error
    sent = workers[0].calls[0][-1]["content"]
    assert "0704912846" not in sent and "070491-2846" not in sent
    assert record.answer == question


FOUND_BY_PROPERTY_TESTS = (
    "Ring til JORGE KORT i dag. Eller NERMIN KAULilija klasson11.08.54-0114, "
    "skriv til viktoria@example.orgøjvind borg eller emmett55@post.example.deAlanna Latier29.10.04-9874."
)
FOUND_VALUES = (
    ("PERSON", "JORGE KORT"),  # "kort" (a card) is a label word and a surname: it ended the name
    ("PERSON", "NERMIN KAUL"),
    ("PERSON", "ilija klasson"),  # KAULilija read as KAU + Lilija, which left "klasson" alone
    ("DK_CPR", "11.08.54-0114"),
    ("EMAIL_ADDRESS", "viktoria@example.org"),  # a domain running into a letter no domain has
    ("PERSON", "øjvind borg"),
    ("EMAIL_ADDRESS", "emmett55@post.example.de"),
    ("PERSON", "Alanna Latier"),  # deAlanna cut as the .deal domain + "anna"
    ("DK_CPR", "29.10.04-9874"),
)


def test_glued_values_the_property_tests_found_never_reach_the_worker(tmp_path: Path) -> None:
    """Three leaks the random property tests (test_pii_properties) found after the first fixes,
    each a mechanism: a label word that is also a surname, two readings of a case change, a valid
    domain glued to a non-ASCII letter or to a name that starts with a top-level domain."""
    wire, answer = _wire(tmp_path, FOUND_BY_PROPERTY_TESTS)
    assert all(value in FOUND_BY_PROPERTY_TESTS for _, value in FOUND_VALUES)
    assert _leaked(wire, FOUND_VALUES) == [], wire
    assert answer == FOUND_BY_PROPERTY_TESTS


OTHER_SEPARATORS = (
    "Kunde Jonas Holm, CPR 120388\u00a01457, konto DK50\u20090040\u20090440\u20091162\u200943, "
    "kort 4111\u202f1111\u202f1111\u202f1111, tlf. \uff12\uff10\uff11\uff12\uff13\uff14\uff15\uff16, "
    "CPR 030275\u20136321."
)
OTHER_SEPARATOR_VALUES = (
    ("PERSON", "Jonas Holm"),
    ("DK_CPR", "120388\u00a01457"),
    ("IBAN_CODE", "DK50\u20090040\u20090440\u20091162\u200943"),
    ("CREDIT_CARD", "4111\u202f1111\u202f1111\u202f1111"),
    ("DK_CPR", "030275\u20136321"),
)


def test_values_written_with_other_spaces_dashes_or_digits_never_reach_the_worker(tmp_path: Path) -> None:
    """The outside re-test: a no-break space, a thin or narrow no-break space, an en dash, or
    full-width digits between the parts of a value hid it from detection. Detection now reads a
    one-for-one ASCII fold of the text (pii.detect.fold_separators), so offsets, masking and
    exact restoration are unchanged."""
    wire, answer = _wire(tmp_path, OTHER_SEPARATORS)
    assert _leaked(wire, OTHER_SEPARATOR_VALUES) == [], wire
    digits = "".join(ch for ch in wire if ch.isdigit())
    assert "20123456" not in digits.translate(str.maketrans("０１２３４５６７８９", "0123456789")), wire
    assert answer == OTHER_SEPARATORS


BRACKETED = (
    "From: Lars Jensen <lars.jensen@example.dk>. «Mette Nielsen» ringede; "
    "svar til [Mette Nielsen](mailto:mette.nielsen@example.dk)."
)


def test_a_value_in_the_users_own_brackets_comes_back_with_them(tmp_path: Path) -> None:
    """The outside re-test, with no worker alteration at all: ``<lars@…>`` masked to
    ``<<EMAIL_ADDRESS_1>>`` and restoration took both brackets as the placeholder's, so the user
    got ``lars@…`` without them (also « » and a Markdown link's [ ]). Restored exactly now."""
    wire, answer = _wire(tmp_path, BRACKETED)
    assert "example.dk" not in wire and "Nielsen" not in wire, wire
    assert answer == BRACKETED


def test_a_markdown_escaped_placeholder_is_restored_or_fails_closed() -> None:
    """A worker answering in Markdown escapes underscores (``<PERSON\\_1>``): the placeholder is
    restored; one of a number never issued fails closed instead of reaching the user."""
    from podium.pii.vault import UnknownPlaceholder, Vault

    vault = Vault()
    token = vault.placeholder("PERSON", "Mette Nielsen")
    assert vault.restore(f"Ring til {token.replace('_', chr(92) + '_')}.") == "Ring til Mette Nielsen."
    with pytest.raises(UnknownPlaceholder):
        vault.restore("Ring til <PERSON\\_7>.")


@pytest.mark.parametrize("mark", ["\ufe0f", "\u034f", "\u3164", "\U000e0101", "\u00ad"])
def test_a_placeholder_with_any_invisible_mark_inside_is_restored_or_fails_closed(mark: str) -> None:
    """Variation selectors, the combining grapheme joiner and Hangul fillers draw nothing, as the
    Cf format characters do (podium.text.is_invisible): a placeholder carrying one is restored,
    and one never issued fails closed instead of reaching the user."""
    from podium.pii.vault import UnknownPlaceholder, Vault

    vault = Vault()
    token = vault.placeholder("PERSON", "Mette Nielsen")
    assert vault.restore(f"Ring til {token[:3]}{mark}{token[3:]}.") == "Ring til Mette Nielsen."
    with pytest.raises(UnknownPlaceholder):
        vault.restore(f"Ring til <PER{mark}SON_7>.")


SECOND_RECHECK_VALUES = (
    ("PERSON", "Anne-Mette Kjærgaard"),
    ("PERSON", "Holm, Jonas"),
    ("DK_CPR", "120388_1457"),
    ("DK_CPR", "03 02 75 63 21"),
    ("DK_CPR", "0704\u200b912846"),
    ("IBAN_CODE", "DK50.0040.0440.1162.43"),
    ("CREDIT_CARD", "4111/1111/1111/1111"),
    ("PHONE_NUMBER", "0044 7700 900123"),
    ("EMAIL_ADDRESS", "lars.jensen@example.dk"),
)
SECOND_RECHECK = (
    "Kunde Anne-Mette Kjærgaard (cpr 120388_1457) og Holm, Jonas med CPR 03 02 75 63 21 og 0704\u200b912846. "
    "Konto DK50.0040.0440.1162.43, kort 4111/1111/1111/1111, tlf 0044 7700 900123. "
    "Skriv til lars.jensen@example.dk.Tak"
)


def test_values_in_the_second_rechecks_forms_never_reach_the_worker(tmp_path: Path) -> None:
    """The second outside re-check: a hyphenated first name, a name written surname first, CPR
    numbers with an underscore, in pairs or with a zero-width space inside, an IBAN grouped with
    dots, a card grouped with slashes, a phone number after 0044 and an e-mail address run into
    the next sentence (``…@example.dk.Tak``) each reached the worker. Each is masked now, and
    the answer comes back exactly."""
    wire, answer = _wire(tmp_path, SECOND_RECHECK)
    visible = wire.replace("\u200b", "")
    assert _leaked(visible, SECOND_RECHECK_VALUES) == [], wire
    assert "lars.jensen" not in wire and "Tak" in wire, wire
    assert answer == SECOND_RECHECK


def test_a_placeholder_in_capitals_with_its_number_glued_on_is_restored_or_fails_closed() -> None:
    """``PERSON1``, ``DKCPR1`` (a worker dropping the brackets and the underscore) used to reach
    the user as written; now they are restored, one never issued fails closed, and lower-case
    ``person1`` (a variable in a worker's code) is left alone."""
    from podium.pii.vault import UnknownPlaceholder, Vault

    vault = Vault()
    person = vault.placeholder("PERSON", "Mette Nielsen")
    cpr = vault.placeholder("DK_CPR", "070491-2846")
    assert (person, cpr) == ("<PERSON_1>", "<DK_CPR_1>")
    assert vault.restore("PERSON1 har CPR DKCPR1.") == "Mette Nielsen har CPR 070491-2846."
    assert vault.restore("person1 = load(DK_CPR1)") == "person1 = load(070491-2846)"
    with pytest.raises(UnknownPlaceholder):
        vault.restore("Ring til PERSON7.")


def test_a_streamed_placeholder_padded_with_invisible_characters_is_never_shown() -> None:
    """The stream restorer held back at most 64 characters, so a placeholder padded with more
    zero-width spaces than that was shown as written, chunk by chunk. It now counts visible
    characters (up to 4 KiB in all)."""
    from podium.pii.vault import StreamRestorer, Vault

    vault = Vault()
    vault.placeholder("PERSON", "Mette Nielsen")
    reply = "Ring til <PERSON" + "\u200b" * 100 + "_1> i dag."
    restorer = StreamRestorer(vault)
    shown = "".join(restorer.feed(ch) for ch in reply) + restorer.close()
    assert shown == vault.restore(reply) == "Ring til Mette Nielsen i dag."
