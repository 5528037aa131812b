"""``podium tasks export``: regression sets from real trace files and real shadow stores.

Traces are written by the real orchestrator over podium.testing's scripted fake workers and
conductor (tests/traffic_support.py); shadow rows by the real shadow proxy's ``run_job`` on a
chat-completion reply given as bytes (a fake upstream's, no HTTP). The sets are read back by
the eval loop's own loader, so a set that ``podium eval`` could not run fails here.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from podium.builder import build_orchestrator
from podium.cli import cli
from podium.embed import Embedder
from podium.errors import ConfigError
from podium.eval.tasks import load_tasks
from podium.pool import load_pool
from podium.serve.shadow import ShadowJob, ShadowProxy
from podium.store.shadow import ShadowStore
from podium.testing import ScriptedWorker
from podium.trace.store import TraceStore
from podium.traffic.export import build_set, numbers
from podium.traffic.features import HashingEncoder, normalise
from podium.traffic.source import read_traces
from tests.conftest import read_jsonl
from tests.traffic_support import Request, at, gsm8k_questions, run_requests

JANET, ROBE = gsm8k_questions(0, 2)


@pytest.fixture
def traces(tmp_path: Path) -> Path:
    """Nine requests over four days: math with final answers, a near-duplicate pair, a code
    question, a fallback and an unanswered plan."""
    path = tmp_path / "traces.sqlite3"
    run_requests(
        path,
        [
            Request(JANET, at(2, 9), ("use-case:math", "task:math"), "She sells 9 eggs: 9 * 2 = 18. The answer is 18."),
            Request(ROBE, at(2, 10), ("use-case:math", "task:math"), "It takes 2 + 1 = 3 bolts."),
            Request("What is the capital of Denmark?", at(3, 9), ("use-case:chat", "key:team-a"), "Copenhagen."),
            Request("what is the capital of  denmark", at(3, 10), ("use-case:chat",), "Copenhagen, of course."),
            Request("Explain our refund policy.", at(3, 11), ("use-case:chat", "model:podium"), "Refunds: 30 days."),
            Request("Write a function add(a, b).", at(4, 9), ("use-case:code", "task:code"), "def add(a, b): ..."),
            Request("Which plan fits 12 seats? (A) 5 (B) 10 (C) 50", at(4, 10), ("task:choice",), "Answer: C"),
            Request("How many bolts, roughly?", at(4, 11), ("use-case:math", "task:math"), "Quite a few."),
            Request("Is this answered?", at(5, 9), ("use-case:chat",), "By the fallback.", conductor="broken"),
        ],
    )
    return path


def export(traces: Path, out: Path, *extra: str) -> int:
    return cli(["tasks", "export", "--traces", str(traces), "--out", str(out), "--allow-pii", *extra])


def test_each_distinct_question_becomes_a_task_with_a_marked_candidate_reference(traces: Path, tmp_path: Path) -> None:
    out = tmp_path / "set.jsonl"
    assert export(traces, out) == 0
    records = read_jsonl(out)
    by_question = {r["question"]: r for r in records}
    assert len(records) == 8  # nine requests, the two "capital of Denmark" spellings are one question
    assert "what is the capital of  denmark" not in by_question  # the oldest one is kept
    janet = by_question[JANET]
    assert (janet["task_type"], janet["reference"], janet["reference_source"]) == ("math", "18", "candidate:podium")
    assert janet["tags"] == ["use-case:math"] and janet["origin"].startswith("trace:")
    assert janet["id"] == "traffic/" + janet["origin"].removeprefix("trace:")
    assert by_question[ROBE]["reference"] == "3"  # the last number when there is no marker
    assert by_question["Which plan fits 12 seats? (A) 5 (B) 10 (C) 50"]["reference"] == "C"
    # no final number: a judge grades it against the whole answer, so it is open; so is code (no tests)
    assert by_question["How many bolts, roughly?"]["task_type"] == "open"
    code = by_question["Write a function add(a, b)."]
    assert code["task_type"] == "open" and code["reference"] == "def add(a, b): ..."
    # how a request was served is not what was asked: key:, model: and task: tags are not copied
    assert by_question["What is the capital of Denmark?"]["tags"] == ["use-case:chat"]
    assert by_question["Explain our refund policy."]["tags"] == ["use-case:chat"]
    tasks = {t.question: t for t in load_tasks(out)}  # the eval loop reads it as it is
    assert len(tasks) == 8 and tasks[JANET].reference_source == "candidate:podium"
    assert tasks[JANET].origin == janet["origin"]


def test_time_window_tag_use_case_and_status_select_the_requests(traces: Path, tmp_path: Path) -> None:
    def questions(*extra: str) -> list[str]:
        out = tmp_path / f"s{len(list(tmp_path.iterdir()))}.jsonl"
        assert export(traces, out, *extra) == 0
        return [r["question"] for r in read_jsonl(out)]

    assert questions("--since", "2026-11-04", "--until", "2026-11-04") == [
        "Write a function add(a, b).",
        "Which plan fits 12 seats? (A) 5 (B) 10 (C) 50",
        "How many bolts, roughly?",
    ]
    assert questions("--use-case", "math") == [JANET, ROBE, "How many bolts, roughly?"]
    assert questions("--tag", "use-case:chat", "--tag", "key:team-a") == ["What is the capital of Denmark?"]
    assert questions("--status", "fallback") == ["Is this answered?"]
    assert questions("--limit", "2") == ["How many bolts, roughly?", "Is this answered?"]  # the newest two


def test_bad_selections_are_errors_that_name_the_fix(
    traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "set.jsonl"
    assert export(traces, out, "--tag", "use-case:billing") == 2
    err = capsys.readouterr().err
    assert "'use-case:billing'" in err and "use-case:chat" in err  # the unknown tag, and the tags there are
    assert export(traces, out, "--since", "2026-12-01") == 2
    assert "no stored request passes the filters" in capsys.readouterr().err
    assert export(traces, out, "--use-case", "math", "--since", "2026-11-05") == 2  # a known tag, an empty window
    assert "widen --since/--until" in capsys.readouterr().err
    assert export(traces, out, "--status", "done") == 2
    assert "ok, fallback, error, running" in capsys.readouterr().err
    assert export(tmp_path / "nothing.sqlite3", out) == 2
    assert "no trace database" in capsys.readouterr().err
    assert export(traces, out, "--task-type", "poem") == 2
    assert "use one of open, math, choice, exact" in capsys.readouterr().err
    assert export(traces, out, "--task-type", "code") == 2  # was accepted, and every task came out open
    assert "a code task is graded by its tests, and traffic has none" in capsys.readouterr().err
    assert not out.exists()  # nothing written by any of them
    typo = tmp_path / "typo" / "set.jsonl"  # a mistyped folder is not created (a first user got /nonexistent)
    assert export(traces, typo) == 2
    assert f"folder {typo.parent} does not exist; create it first" in capsys.readouterr().err
    assert export(traces, out, "--review", str(typo.with_suffix(".csv"))) == 2
    assert not typo.parent.exists() and not out.exists()
    folder = tmp_path / "sets"  # a folder where a file goes: refused before anything is written, even with --force
    folder.mkdir()
    assert export(traces, folder, "--force") == 2
    assert f"--out {folder} is a folder; name a file" in capsys.readouterr().err
    assert export(traces, out, "--review", str(folder), "--force") == 2
    assert f"--review {folder} is a folder" in capsys.readouterr().err
    assert not out.exists() and not any(folder.iterdir())
    assert export(traces, out, "--review", str(out)) == 2  # the review file would overwrite the set
    assert "is the set itself (--out)" in capsys.readouterr().err
    assert export(traces, out, "--use-case", " ") == 2
    assert "--use-case '': name a use case" in capsys.readouterr().err
    assert not out.exists()
    assert cli(["tasks", "label", str(folder), "--judge", "big"]) == 2
    assert f"{folder} is a folder, not a regression set file" in capsys.readouterr().err
    assert export(traces, out) == 0
    capsys.readouterr()
    assert cli(["tasks", "import", str(folder), "--set", str(out)]) == 2
    assert f"{folder} is a folder; name the review file in it" in capsys.readouterr().err


def test_append_adds_only_new_requests_and_is_idempotent(traces: Path, tmp_path: Path) -> None:
    out = tmp_path / "set.jsonl"
    assert export(traces, out, "--until", "2026-11-03") == 0
    first = read_jsonl(out)
    assert len(first) == 4  # five requests, one a duplicate
    assert export(traces, out) == 2  # exists: say --append or --force
    assert export(traces, out, "--append") == 0
    second = read_jsonl(out)
    assert second[:4] == first and len(second) == 8
    before = out.read_bytes()
    assert export(traces, out, "--append", "--json") == 0  # nothing new: the file is as it was
    assert out.read_bytes() == before
    assert export(traces, out, "--force", "--use-case", "code") == 0
    assert [r["question"] for r in read_jsonl(out)] == ["Write a function add(a, b)."]


def test_embedding_similarity_drops_paraphrases_that_normalised_text_keeps(tmp_path: Path) -> None:
    path = tmp_path / "traces.sqlite3"
    a = "How many eggs does Janet sell at the farmers' market every day?"
    b = "How many eggs does Janet sell at the farmers market each day?"
    run_requests(path, [Request(a, at(1)), Request(b, at(1, 13)), Request(ROBE, at(1, 14))])
    store = TraceStore(path)
    items = read_traces(store)
    store.close()
    assert normalise(a) != normalise(b)
    embedder = Embedder(None, encoder=HashingEncoder())
    vectors = embedder.embed([a, b, ROBE])
    assert float(vectors[0] @ vectors[1]) > 0.8 > float(vectors[0] @ vectors[2])
    assert len(build_set(items).records) == 3
    result = build_set(items, embedder=embedder, similarity=0.8)
    assert [r["question"] for r in result.records] == [a, ROBE] and result.similar == 1


def test_similar_questions_that_state_other_numbers_are_kept_apart(tmp_path: Path) -> None:
    """Two tickets that differ only in a number are almost one vector (hashed n-grams) but two
    tasks: the number changes the answer. A placeholder's digits (``<PERSON_1>``) are no number."""
    path = tmp_path / "traces.sqlite3"
    a = "Ordre 1042 kom uden oplader. Hvornår sender I den?"
    b = "Ordre 1043 kom uden oplader. Hvornår sender I den?"
    c = "Ordre 1042 kom uden en oplader. Hvornår sender I den?"  # the same numbers: a near-duplicate
    d = "<PERSON_1> skrev: ordre 1042 kom uden oplader. Hvornår sender I den?"
    run_requests(path, [Request(q, at(1, 10 + n)) for n, q in enumerate((a, b, c, d))])
    store = TraceStore(path)
    items = read_traces(store)
    store.close()
    embedder = Embedder(None, encoder=HashingEncoder())
    vectors = embedder.embed([a, b, d])
    assert float(vectors[0] @ vectors[1]) > 0.9 and float(vectors[0] @ vectors[2]) > 0.8
    result = build_set(items, embedder=embedder, similarity=0.8)
    assert [r["question"] for r in result.records] == [a, b] and result.similar == 2
    assert numbers(d) == ("1042",) and numbers("2.5 and 25") == ("2.5", "25")


def test_personal_data_is_pseudonymized_unless_allowed(tmp_path: Path) -> None:
    """The trace keeps the question and answer as written (docs/pii.md), so the export masks
    them: one vault per request, the same placeholder in question and reference."""
    path = tmp_path / "traces.sqlite3"
    question = "Hej, jeg hedder Mette Kjærgaard og mit CPR-nummer er 070491-2846. Hvad er mit kundenummer?"
    run_requests(path, [Request(question, at(1), answer="Mette Kjærgaard har kundenummer 17.")])
    store = TraceStore(path)
    (stored,) = read_traces(store)
    store.close()
    assert "Mette Kjærgaard" in stored.question  # in clear in the trace: the export must mask it
    masked, clear = tmp_path / "masked.jsonl", tmp_path / "clear.jsonl"
    assert cli(["tasks", "export", "--traces", str(path), "--out", str(masked)]) == 0
    (record,) = read_jsonl(masked)
    assert record["question"] == (
        "Hej, jeg hedder <PERSON_1> og mit CPR-nummer er <DK_CPR_1>. Hvad er mit kundenummer?"
    )
    assert record["reference"] == "<PERSON_1> har kundenummer 17."
    assert "Mette" not in masked.read_text(encoding="utf-8") and "070491" not in masked.read_text(encoding="utf-8")
    assert export(path, clear) == 0
    assert read_jsonl(clear)[0]["question"] == question


def test_shadow_records_give_the_upstreams_answer_as_candidate_and_the_clients_reference(tmp_path: Path) -> None:
    """Rows written by the real shadow proxy (``run_job``) for three chat completions."""
    pool = load_pool(str(Path(__file__).parent / "pools" / "three-fakes.toml"))
    plan = 'model_id = [0]\nsubtasks = ["Solve it."]\naccess_list = [[]]'
    workers = [
        ScriptedWorker(n, lambda m: plan if any("model_id" in x["content"] for x in m) else "podium says 41")
        for n in ("smol-a", "smol-b", "smol-c")
    ]
    traces = TraceStore(tmp_path / "traces.sqlite3")
    orchestrator = build_orchestrator(pool, traces=traces, workers=list(workers))
    store = ShadowStore(tmp_path / "shadow.sqlite3")
    proxy = ShadowProxy("http://127.0.0.1:9", orchestrator, store, mode="execute")

    def job(question: str, use_case: str, upstream: str, **kw: str) -> ShadowJob:
        reply = {"choices": [{"message": {"role": "assistant", "content": upstream}}], "usage": {}}
        body = {"model": "pipeline", "messages": [{"role": "user", "content": question}]}
        return ShadowJob(body, 200, json.dumps(reply).encode(), 0.1, use_case, at=at(7), **kw)

    async def run() -> None:
        await proxy.run_job(job("What is 6 * 7?", "math", "It is 42.", task_type="math", reference=None))
        await proxy.run_job(job("What is 5 * 5?", "math", "25", task_type="math", reference="25"))
        await proxy.run_job(job("Say hi.", "chat", "Hi!", task_type=None, reference=None))

    asyncio.run(run())
    traces.close()
    out = tmp_path / "set.jsonl"
    base = ["tasks", "export", "--source", "shadow", "--store", str(tmp_path / "shadow.sqlite3"), "--allow-pii"]
    assert cli([*base, "--out", str(out)]) == 0
    six, five, hi = read_jsonl(out)
    assert (six["reference"], six["reference_source"], six["task_type"]) == ("42", "candidate:upstream", "math")
    assert (five["reference"], five["reference_source"]) == ("25", "client")
    assert (hi["task_type"], hi["reference"], hi["tags"]) == ("open", "Hi!", ["use-case:chat"])
    rows = store.rows()
    assert six["id"] == f"traffic/{rows[0]['request_id']}" and six["origin"] == f"shadow:{rows[0]['id']}"
    assert cli([*base, "--out", str(out), "--force", "--candidate", "podium", "--use-case", "math"]) == 0
    assert [r["reference"] for r in read_jsonl(out)] == ["41", "25"]  # podium's final number; the client's stays
    assert cli([*base, "--out", str(out), "--force", "--use-case", "billing"]) == 2
    assert len(load_tasks(out)) == 2  # the failed export left the file as it was


def test_the_loader_reads_the_provenance_fields_and_rejects_other_types(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    record = {"id": "a", "question": "2+2?", "task_type": "math", "reference": "4"}
    good.write_text(json.dumps({**record, "reference_source": "human", "origin": "trace:ab"}) + "\n")
    (task,) = load_tasks(good)
    assert (task.reference_source, task.origin) == ("human", "trace:ab")
    bad.write_text(json.dumps(record) + "\n" + json.dumps({**record, "id": "b", "origin": 5}) + "\n")
    with pytest.raises(ConfigError, match=r"bad\.jsonl:2: 'origin' must be text"):
        load_tasks(bad)


def test_a_request_without_an_answer_is_exported_open_so_the_set_loads(tmp_path: Path) -> None:
    """A math-tagged request that ended in an error has no candidate and no reference: a math
    task needs one, so it is exported open (counted as retyped) and the set still loads."""
    from podium.traffic.export import write_jsonl
    from podium.traffic.source import TrafficItem

    failed = TrafficItem("trace:ab", "ab" * 16, at(1), "What is 2 + 2?", "error", ("task:math",))
    result = build_set([failed])
    (record,) = result.records
    assert (record["task_type"], result.retyped, result.without_reference) == ("open", 1, 1)
    write_jsonl(tmp_path / "set.jsonl", result.records)
    assert [t.task_type for t in load_tasks(tmp_path / "set.jsonl")] == ["open"]


def test_the_personal_data_count_is_of_the_tasks_written_not_of_duplicates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "traces.sqlite3"
    question = "Hej, jeg hedder Mette Kjærgaard. Hvad er mit kundenummer?"
    asked = [Request(question, at(1), answer="Mette Kjærgaard har kundenummer 17.")]
    run_requests(path, asked * 2)  # the same question twice: one task
    assert cli(["tasks", "export", "--traces", str(path), "--out", str(tmp_path / "s.jsonl"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["written"], summary["duplicates"]) == (1, 1)
    assert summary["pii"] == {"PERSON": 2}  # in the written task's question and reference


def test_an_answer_cut_off_at_its_token_limit_gives_no_candidate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The last number of an answer that stopped mid-sentence is no final answer: the task is
    exported without a candidate (a math task then open), counted, and said."""
    path = tmp_path / "traces.sqlite3"
    first, second = gsm8k_questions(0, 2)
    run_requests(path, [
        Request(first, at(1), ("task:math",), "So 16 - 3 - 4 = 9 eggs remain, and 9 * 2 = 1", finish_reason="length"),
        Request(second, at(2), ("task:math",), "The answer is 3."),
    ])  # fmt: skip
    store = TraceStore(path)
    assert [i.cut_off for i in read_traces(store)] == [True, False]
    store.close()
    out = tmp_path / "set.jsonl"
    assert export(path, out) == 0
    assert "1 answer(s) stopped at their token limit" in " ".join(capsys.readouterr().out.split())
    cut, whole = read_jsonl(out)
    assert cut["task_type"] == "open" and "reference" not in cut
    assert (whole["reference"], whole["reference_source"]) == ("3", "candidate:podium")
