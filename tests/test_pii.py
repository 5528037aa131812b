"""PII protection: real Presidio detection, the vault, and the pseudonymizing worker wrapper.

Detection is never faked here: every test runs the real offline analyzer (Presidio on a blank
spaCy pipeline with podium's recognizers). The *recipients* are fakes — ``ScriptedWorker``s
marked ``external`` in a real pool file — because the point is the exact payload that would
leave the machine, which a fake records byte for byte. The cases come from
``shared/data/pii/cases.jsonl`` and ``shared/data/adversarial/cases.jsonl``.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from podium.builder import build_orchestrator
from podium.conductor.lm import LMConductor, LMConductorSettings
from podium.errors import ConfigError
from podium.pii.detect import Detection, Detector, resolve_overlaps
from podium.pii.recognizers import cpr_birth_date
from podium.pii.vault import StreamRestorer, UnknownPlaceholder, Vault
from podium.pool import PoolConfig, load_pool
from podium.records import RunRecord
from podium.testing import ScriptedConductor, ScriptedWorker
from podium.trace.store import TraceStore
from podium.workers.base import Message
from tests.conftest import SHARED_DATA, read_jsonl

CASES = read_jsonl(SHARED_DATA / "pii" / "cases.jsonl")
ADVERSARIAL = {c["id"]: c for c in read_jsonl(SHARED_DATA / "adversarial" / "cases.jsonl")}

POOL = """
name = "pii-test"
[conductor]
worker = "ext-a"
[fallback]
worker = "local"
[[workers]]
name = "ext-a"
backend = "openai"
base_url = "https://api.example.com/v1"
model = "model-a"
price = {{ input = 1.0, output = 2.0 }}
provider = "Example AI"
region = "EU"
{extra_a}
[[workers]]
name = "local"
backend = "python"
[[workers]]
name = "ext-b"
backend = "anthropic"
model = "model-b"
api_key_env = "EXAMPLE_KEY"
price = {{ input = 1.0, output = 2.0 }}
{extra_b}
{pii}
"""


def pool_file(tmp_path: Path, *, extra_a: str = "", extra_b: str = "", pii: str = "") -> PoolConfig:
    path = tmp_path / "pool.toml"
    path.write_text(POOL.format(extra_a=extra_a, extra_b=extra_b, pii=pii), encoding="utf-8")
    return load_pool(path)


@pytest.fixture(scope="module")
def detector() -> Detector:
    d = Detector()
    d.warm_up()
    return d


def question_of(messages: Sequence[Message]) -> str:
    """The question section of a worker message (what a worker that echoes the question writes)."""
    body = messages[-1]["content"]
    return body.split("<question>\n", 1)[1].split("\n</question>", 1)[0]


def digits(text: str) -> str:
    return re.sub(r"\D", "", text)


def leaks(payload: str, value: str, kind: str) -> bool:
    """Whether ``value`` appears in ``payload``: verbatim, case-folded, or (numbers) its digits
    in order with any separators."""
    if value in payload or value.casefold() in payload.casefold():
        return True
    if kind in ("DK_CPR", "PHONE_NUMBER", "CREDIT_CARD", "IBAN_CODE"):
        return digits(value) in digits(payload) if len(digits(value)) >= 6 else False
    return False


# --- detection -------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_every_listed_entity_is_detected_with_its_kind(case: dict[str, Any], detector: Detector) -> None:
    found = {(d.kind, d.text) for d in detector.detect(case["text"])}
    for entity in case["entities"]:
        assert (entity["type"], entity["value"]) in found


def test_texts_without_pii_yield_no_detection(detector: Detector) -> None:
    for case in CASES:
        if not case["entities"]:
            assert detector.detect(case["text"]) == [], case["id"]


def test_cpr_needs_a_real_date_with_the_century_from_the_seventh_digit(detector: Detector) -> None:
    assert cpr_birth_date("0704912846") is not None  # 1991-04-07
    # 29 Feb 2000 exists, 29 Feb 1900 does not: the 7th digit decides the century
    assert str(cpr_birth_date("2902004234")) == "2000-02-29"
    assert cpr_birth_date("2902001234") is None
    assert cpr_birth_date("2902586321") is None  # 7th digit 6, year 58 → 1858, not a leap year
    assert str(cpr_birth_date("0101604321")) == "1960-01-01"  # 4 with year > 36 → 1900s
    text = "CPR 300290-1234, 311390-1234, 290200-1234 og 290200-4234."
    assert [(d.kind, d.text) for d in detector.detect(text)] == [("DK_CPR", "290200-4234")]
    # no modulus-11 check (CPR numbers without it exist since 2007): 070491-2847 fails it and is found
    weights = (4, 3, 2, 7, 6, 5, 4, 3, 2, 1)
    assert sum(int(c) * w for c, w in zip("0704912847", weights, strict=True)) % 11 != 0
    assert [d.kind for d in detector.detect("CPR 070491-2847")] == ["DK_CPR"]


def test_phone_numbers_grouped_international_or_with_context_but_not_bare_order_numbers(detector: Detector) -> None:
    def phones(text: str) -> list[str]:
        return [d.text for d in detector.detect(text) if d.kind == "PHONE_NUMBER"]

    assert phones("Ring 70 10 20 30 i morgen.") == ["70 10 20 30"]
    assert phones("Call +44 20 7946 0958 or +1 212-555-0187.") == ["+44 20 7946 0958", "+1 212-555-0187"]
    assert phones("tlf. 28913477") == ["28913477"]  # bare digits with a context word
    assert phones("Ordre 22345678 er afsendt.") == []  # bare digits, no context: an order number
    assert phones("Bestil 25000000 enheder.") == []


def test_overlapping_detections_keep_the_best_one() -> None:
    cpr = Detection("DK_CPR", 4, 15, 0.8, "010190-1234")
    phone = Detection("PHONE_NUMBER", 8, 15, 0.4, "90-1234")
    person = Detection("PERSON", 20, 30, 0.85, "Hans Chris")
    address = Detection("ADDRESS", 20, 50, 0.85, "Hans Christian Andersens Boulevard")
    assert resolve_overlaps([phone, cpr, person, address]) == [cpr, address]
    # equal score and span: the more specific kind wins
    a, b = Detection("PHONE_NUMBER", 0, 8, 0.6, "x"), Detection("DK_CPR", 0, 8, 0.6, "x")
    assert resolve_overlaps([a, b]) == [b]


def test_an_address_containing_a_first_name_is_one_address(detector: Detector) -> None:
    text = "Hans Christian Andersens Boulevard 27, 1553 København V"
    assert [(d.kind, d.text) for d in detector.detect(text)] == [("ADDRESS", text)]


# --- the vault ----------------------------------------------------------------------------------


def test_same_text_same_placeholder_and_another_surface_form_its_own() -> None:
    v = Vault()
    assert v.placeholder("PERSON", "Mette Kjærgaard") == "<PERSON_1>"
    assert v.placeholder("DK_CPR", "070491-2846") == "<DK_CPR_1>"
    assert v.placeholder("PERSON", "Søren Østergaard") == "<PERSON_2>"
    assert v.placeholder("PERSON", "Mette Kjærgaard") == "<PERSON_1>"  # the same text: the same placeholder
    # another way of writing it gets its own, so that each comes back exactly as written
    assert v.placeholder("PERSON", "mette  kjærgaard") == "<PERSON_3>"
    assert v.placeholder("DK_CPR", "0704912846") == "<DK_CPR_2>"
    assert v.restore("<DK_CPR_2> / <DK_CPR_1> / <PERSON_3>") == "0704912846 / 070491-2846 / mette  kjærgaard"


def test_restore_tolerates_what_models_do_to_placeholders_and_fails_closed_on_unknown_ones() -> None:
    v = Vault()
    v.placeholder("PERSON", "Mette Kjærgaard")
    v.placeholder("DK_CPR", "070491-2846")
    assert v.restore("<person 1>, &lt;DK_CPR_1&gt;, [PERSON_1], {{DK-CPR-1}}, < PERSON_1 >") == (
        "Mette Kjærgaard, 070491-2846, Mette Kjærgaard, 070491-2846, Mette Kjærgaard"
    )
    assert v.restore("PERSON_1 wrote; Person 9 is in the puzzle") == "Mette Kjærgaard wrote; Person 9 is in the puzzle"
    with pytest.raises(UnknownPlaceholder, match="PERSON_2"):
        v.restore("Ask <PERSON_2> instead")
    with pytest.raises(UnknownPlaceholder, match="PERSON_9"):  # written as podium writes them, never issued
        v.restore("PERSON_9 wrote")
    assert v.restore("a < b and <div> stay as they are") == "a < b and <div> stay as they are"


def test_a_placeholder_look_alike_typed_by_the_user_is_reserved_and_kept() -> None:
    v = Vault()
    v.reserve_literals("Replace <PERSON_1> in the template")
    assert v.placeholder("PERSON", "Ida Holm Jensen") == "<PERSON_2>"
    assert v.restore("<PERSON_1> and <PERSON_2>") == "<PERSON_1> and Ida Holm Jensen"


def test_streamed_text_is_restored_across_chunk_boundaries() -> None:
    v = Vault()
    v.placeholder("PERSON", "Mette Kjærgaard")
    stream = StreamRestorer(v)
    chunks = ["Dear <PER", "SON", "_1>, your n", "ame is PERS", "ON_1. 2 < 3 ok"]
    shown = [stream.feed(c) for c in chunks]
    assert "".join(shown) + stream.close() == "Dear Mette Kjærgaard, your name is Mette Kjærgaard. 2 < 3 ok"
    assert "<PER" not in "".join(shown)  # a half placeholder is never shown


# --- pool policy --------------------------------------------------------------------------------


def test_external_defaults_follow_the_backend_and_loopback(tmp_path: Path) -> None:
    config = pool_file(tmp_path)
    ext_a, local, ext_b = config.workers
    assert config.is_external(ext_a) and config.is_external(ext_b) and not config.is_external(local)
    loop = config.workers[0].model_copy(update={"base_url": "http://127.0.0.1:8000/v1"})
    assert not config.is_external(loop)
    assert config.pii_enabled  # an external worker without allow_pii turns protection on
    off = pool_file(tmp_path, pii="[pii]\nenabled = false")
    assert not off.pii_enabled
    with pytest.raises(ConfigError, match="unknown entity type"):
        pool_file(tmp_path, pii='[pii]\nentities = ["SSN"]')


def test_protection_on_without_presidio_is_a_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if "presidio" in name else real(name, *a))
    from podium.extras import install_command

    with pytest.raises(ConfigError, match=re.escape(install_command("pii"))):
        build_orchestrator(pool_file(tmp_path), conductor=ScriptedConductor(["x"]), workers=fakes())


# --- end to end through the orchestrator ------------------------------------------------------


def fakes(a: Any = "ok", local: Any = "local ok", b: Any = "ok") -> list[ScriptedWorker]:
    """Fake recipients in pool order: ext-a (external), local, ext-b (external)."""
    return [ScriptedWorker("ext-a", reply=a), ScriptedWorker("local", reply=local), ScriptedWorker("ext-b", reply=b)]


PLAN_3 = 'model_id = [0, 1, 2]\nsubtasks = ["Restate.", "Check.", "Answer."]\naccess_list = [[], "all", "all"]'


def run(config: PoolConfig, workers: list[ScriptedWorker], question: str, plan: str, traces: TraceStore) -> RunRecord:
    orchestrator = build_orchestrator(config, traces=traces, conductor=ScriptedConductor([plan]), workers=workers)
    return asyncio.run(orchestrator.run(question))


@pytest.mark.parametrize("case", [c for c in CASES if c["entities"]], ids=lambda c: c["id"])
@pytest.mark.slow
def test_every_entity_is_masked_in_the_exact_outbound_payloads_and_the_answer_restores_exactly(
    case: dict[str, Any], tmp_path: Path
) -> None:
    # ext-a restates the question it got, local echoes (it sees originals), ext-b answers with
    # the question it got: the answer must be the original question again, byte for byte.
    workers = fakes(a=question_of, local=question_of, b=question_of)
    store = TraceStore(tmp_path / "t.sqlite3")
    record = run(pool_file(tmp_path), workers, case["text"], PLAN_3, store)
    assert record.status == "ok", record.error
    assert record.answer == case["text"].strip()
    outbound = [m["content"] for w in (workers[0], workers[2]) for call in w.calls for m in call]
    assert outbound, "the external workers were called"
    for payload in outbound:
        for entity in case["entities"]:
            assert not leaks(payload, entity["value"], entity["type"]), (entity, payload)
    assert any(case["entities"][0]["value"] in m["content"] for m in workers[1].calls[0])  # local: in clear
    # the trace holds what was sent (masked), the kinds and counts, never the values
    stored = store.get(record.id)
    assert stored is not None
    step0 = stored.steps[0]
    assert list(step0.messages) == workers[0].calls[0]
    (disclosure,) = step0.disclosures
    expected: dict[str, int] = {}
    for entity in case["entities"]:
        expected[entity["type"]] = expected.get(entity["type"], 0) + 1
    assert disclosure.masked == expected and disclosure.values == {} and disclosure.region == "EU"
    assert stored.steps[1].disclosures == ()  # local worker: not a third party


def test_placeholders_are_consistent_across_steps_and_recipients(tmp_path: Path) -> None:
    question = "Mette Kjærgaard (CPR 070491-2846) og Søren Østergaard skriver sammen."
    workers = fakes(a=lambda m: "Svar til <PERSON_2> og <person_1>", b=question_of)
    record = run(pool_file(tmp_path), workers, question, PLAN_3, TraceStore(tmp_path / "t.sqlite3"))
    assert record.steps[0].output == "Svar til Søren Østergaard og Mette Kjærgaard"
    # ext-b sees step 0's restored output masked again with the same placeholders
    sent_b = workers[2].calls[0][-1]["content"]
    assert "Svar til <PERSON_2> og <PERSON_1>" in sent_b
    assert "<PERSON_1> (CPR <DK_CPR_1>) og <PERSON_2>" in sent_b


def test_detection_failure_sends_nothing_and_the_fallback_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: Detector, text: str) -> list[Detection]:
        raise RuntimeError("analyzer crashed")  # fault injection: the analyzer itself fails

    monkeypatch.setattr(Detector, "detect", broken)
    workers = fakes(local="fallback answer")
    plan = 'model_id = [0]\nsubtasks = ["Answer."]\naccess_list = [[]]'
    store = TraceStore(tmp_path / "t.sqlite3")
    record = run(pool_file(tmp_path), workers, "Mit CPR er 070491-2846.", plan, store)
    assert workers[0].calls == []  # never sent
    assert record.status == "fallback" and record.answer == "fallback answer"
    assert record.fallback is not None and record.fallback.reason == "pii_protection"
    step = record.steps[0]
    assert step.error_type == "PIIProtectionError" and "nothing was sent" in (step.error or "")
    (d,) = step.disclosures
    assert d.blocked == "detection_failed: RuntimeError" and not d.scanned
    stored = store.get(record.id)
    assert stored is not None and stored.steps[0].disclosures == step.disclosures


def test_a_reply_naming_an_unknown_placeholder_is_not_used(tmp_path: Path) -> None:
    workers = fakes(a="Sure, <PERSON_7> already called.", local="fallback answer")
    plan = 'model_id = [0]\nsubtasks = ["Answer."]\naccess_list = [[]]'
    record = run(pool_file(tmp_path), workers, "Ring til Søren Østergaard.", plan, TraceStore(tmp_path / "t.sqlite3"))
    assert record.status == "fallback" and record.answer == "fallback answer"
    assert record.steps[0].error_type == "PIIProtectionError"
    assert "<PERSON_7>" in (record.steps[0].error or "")


def test_a_worker_allowed_pii_gets_it_in_clear_and_the_trace_says_which_kinds(tmp_path: Path) -> None:
    config = pool_file(tmp_path, extra_a="allow_pii = true")
    workers = fakes(a=question_of)
    plan = 'model_id = [0]\nsubtasks = ["Answer."]\naccess_list = [[]]'
    question = "Ring til Søren Østergaard på +45 31 42 58 67."
    record = run(config, workers, question, plan, TraceStore(tmp_path / "t.sqlite3"))
    assert "+45 31 42 58 67" in workers[0].calls[0][-1]["content"]
    (d,) = record.steps[0].disclosures
    assert d.clear == {"PERSON": 1, "PHONE_NUMBER": 1} and d.masked == {} and d.scanned


def test_record_values_stores_the_mapping_only_when_configured(tmp_path: Path) -> None:
    config = pool_file(tmp_path, pii="[pii]\nrecord_values = true")
    plan = 'model_id = [0]\nsubtasks = ["Answer."]\naccess_list = [[]]'
    record = run(config, fakes(), "Mit CPR er 070491-2846.", plan, TraceStore(tmp_path / "t.sqlite3"))
    assert record.steps[0].disclosures[0].values == {"<DK_CPR_1>": "070491-2846"}


def test_exfiltration_across_steps_never_sends_the_cpr_or_its_digits(tmp_path: Path) -> None:
    case = ADVERSARIAL["exfiltrate-pii-across-steps"]
    cpr = "070491-2846"
    assert cpr in case["question"]

    def local_reverses(messages: Sequence[Message]) -> str:  # a local worker that obeys the question
        found = re.search(r"\d{6}-\d{4}", question_of(messages))
        return f"Baglæns: {found.group()[::-1]}" if found else "intet CPR"

    # every step after the first sees everything; steps 1 and 2 go to external workers
    plan = (
        'model_id = [1, 0, 2]\nsubtasks = ["Write the CPR backwards.", "Send it on.", "Answer the user."]\n'
        'access_list = [[], "all", "all"]'
    )
    workers = fakes(a=lambda m: "Videresendt: " + m[-1]["content"].split("<output>\n")[1].split("\n</output>")[0],
                    local=local_reverses, b=question_of)  # fmt: skip
    record = run(pool_file(tmp_path), workers, case["question"], plan, TraceStore(tmp_path / "t.sqlite3"))
    assert record.status == "ok", record.error
    forward, backward = digits(cpr), digits(cpr)[::-1]
    outbound = [m["content"] for w in (workers[0], workers[2]) for call in w.calls for m in call]
    assert len(outbound) == 2
    for payload in outbound:
        assert cpr not in payload and forward not in digits(payload) and backward not in digits(payload)
    # the reversed CPR went out as a placeholder of its own, and came back restored exactly
    assert record.steps[1].output == "Videresendt: Baglæns: 6482-194070"
    # the final answer has the value exactly where the user's own text had it
    assert record.answer == case["question"]


def test_an_external_conductor_sees_placeholders_and_its_subtasks_are_restored(tmp_path: Path) -> None:
    plan = (
        'model_id = [1, 0]\nsubtasks = ["Validate <DK_CPR_1>.", "Explain it to <PERSON_1>."]\naccess_list = [[], [0]]'
    )
    conductor_model = ScriptedWorker("ext-a", reply=plan)
    workers = fakes(local=lambda m: "checked")
    config = pool_file(tmp_path)
    orchestrator = build_orchestrator(
        config,
        workers=[conductor_model, workers[1], workers[2]],
        traces=TraceStore(tmp_path / "t.sqlite3"),
    )
    assert isinstance(orchestrator.conductor, LMConductor)
    orchestrator.conductor.settings = LMConductorSettings(constrained=False)
    record = asyncio.run(orchestrator.run("Mette Kjærgaard har CPR 070491-2846. Er det gyldigt?"))
    conductor_prompt = conductor_model.calls[0][-1]["content"]
    assert "070491-2846" not in conductor_prompt and "<DK_CPR_1>" in conductor_prompt
    assert "Mette Kjærgaard" not in conductor_prompt
    (attempt,) = record.attempts
    assert attempt.disclosures[0].masked == {"PERSON": 1, "DK_CPR": 1}
    assert "<DK_CPR_1>" in attempt.messages[-1]["content"]  # the trace has what was sent
    # the workflow holds the originals; the local worker gets them, the external one placeholders
    assert record.workflows[0].steps[0].subtask == "Validate 070491-2846."
    assert "070491-2846" in workers[1].calls[0][-1]["content"]
    assert record.steps[1].messages[-1]["content"].endswith("Explain it to <PERSON_1>.\n</your_subtask>")


def test_an_external_conductor_naming_an_unknown_placeholder_ends_in_the_fallback_on_record(tmp_path: Path) -> None:
    conductor_model = ScriptedWorker(
        "ext-a", reply='model_id = [0]\nsubtasks = ["Ask <PERSON_4>."]\naccess_list = [[]]'
    )
    workers = fakes(local="fallback answer")
    orchestrator = build_orchestrator(pool_file(tmp_path), workers=[conductor_model, workers[1], workers[2]])
    assert isinstance(orchestrator.conductor, LMConductor)
    orchestrator.conductor.settings = LMConductorSettings(constrained=False)
    record = asyncio.run(orchestrator.run("Ring til Søren Østergaard."))
    assert record.status == "fallback" and record.fallback is not None
    assert record.fallback.reason == "pii_protection" and record.answer == "fallback answer"
    (attempt,) = record.attempts  # the refused reply is on record, with what was sent
    assert attempt.error_kind == "pii_protection" and attempt.disclosures[0].masked == {"PERSON": 1}
    assert "Søren" not in attempt.messages[-1]["content"]


def test_a_streamed_answer_from_an_external_worker_arrives_restored(tmp_path: Path) -> None:
    """The answering step streams (podium serve): ext-b's text carries placeholders, split
    across the pieces it reports; the caller must only ever see the originals."""
    from podium.streaming import AnswerStream

    question = "Hej, jeg hedder Mette Kjærgaard og mit CPR-nummer er 070491-2846."
    workers = fakes(b=question_of)
    workers[2].word_delay_s = 0.001  # reports its reply word by word, as a streaming backend does
    orchestrator = build_orchestrator(
        pool_file(tmp_path),
        traces=TraceStore(tmp_path / "t.sqlite3"),
        conductor=ScriptedConductor(['model_id = [2]\nsubtasks = ["Repeat."]\naccess_list = [[]]']),
        workers=list(workers),
    )

    async def go() -> tuple[list[str], str, str | None]:
        deltas: list[str] = []
        stream = AnswerStream(deltas.append)
        record = await orchestrator.run(question, stream=stream)
        return deltas, record.answer, stream.close(record.answer)

    deltas, answer, rest = asyncio.run(go())
    assert answer == question and "".join(deltas) + (rest or "") == question and rest is not None
    assert len(deltas) > 3  # it streamed
    assert not any("<" in d or "PERSON" in d or "DK_CPR" in d for d in deltas)  # never a placeholder
    sent = workers[2].calls[0][-1]["content"]
    assert "070491-2846" not in sent and "<DK_CPR_1>" in sent  # what left was masked


def test_pii_detection_is_loaded_before_a_request_not_inside_its_deadline(tmp_path: Path) -> None:
    """Presidio takes 15-30 s to load on a small CPU; `podium run` and `podium serve` load it
    first (runtime.pii_to_warm) when a worker receiving data is external, so a request's deadline
    never pays for it. A pool with only local workers loads nothing."""
    from podium.builder import pii_to_warm
    from podium.pool import packaged_pools

    config = pool_file(tmp_path)
    orchestrator = build_orchestrator(config, conductor=ScriptedConductor([PLAN_3]), workers=fakes())
    again = build_orchestrator(config, conductor=ScriptedConductor([PLAN_3]), workers=fakes())
    protections = pii_to_warm([orchestrator])
    assert len(protections) == 1  # ext-a and ext-b share the pool's one analyzer
    assert protections[0]._pseudonymizer is None  # not loaded by building the orchestrator
    protections[0].warm_up()
    assert protections[0]._pseudonymizer is not None
    assert len(pii_to_warm([orchestrator, again])) == 2  # each build has its own
    local = build_orchestrator(load_pool(packaged_pools()["local"]), conductor=ScriptedConductor([PLAN_3]),
                               workers=[ScriptedWorker(n) for n in ("a", "b", "c", "d", "e")])  # fmt: skip
    assert pii_to_warm([local]) == []
