"""Full-text search and filters over a real SQLite trace file (FTS5), through the store and the CLI.

Requests are run by the real orchestrator with the scripted fakes (podium.testing); the stored
records are then copied with chosen times, costs, tags and subjects so every filter has a
known right answer.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import sqlite3
from pathlib import Path
from typing import cast

import pytest

from podium.cli import cli
from podium.errors import ConfigError
from podium.orchestrator import Fallback, Orchestrator
from podium.records import RunRecord
from podium.testing import ScriptedConductor, ScriptedWorker
from podium.trace.backend import TraceBackend
from podium.trace.query import TraceFilter, fts_query, parse_utc
from podium.trace.store import TraceStore
from tests.conftest import v2_trace_database

PLAN = (
    "Reasoning: the drafter sketches, the checker polishes.\n"
    'model_id = [0, 1]\nsubtasks = ["Draft an outline about {topic}.", "Finish the {topic} answer."]\n'
    'access_list = [[], "all"]'
)


def make_record(topic: str, *, conductor: str = "scripted") -> RunRecord:
    """A real record (orchestrator + scripted fakes) whose texts all mention ``topic``."""
    orch = Orchestrator(
        [
            ScriptedWorker("drafter", reply=f"outline of {topic} ideas"),
            ScriptedWorker("checker", reply=f"{topic} done"),
        ],
        ScriptedConductor([PLAN.format(topic=topic)], name=conductor),
        Fallback(0, "Answer."),
    )
    return asyncio.run(orch.run(f"Tell me about {topic}?"))


def store_copy(store: TraceBackend, record: RunRecord, **changes: object) -> RunRecord:
    """Write ``record`` as a new request (begin, then write, as the orchestrator does)."""
    totals = dataclasses.replace(
        record.totals,
        total_cost_usd=changes.pop("cost", record.totals.total_cost_usd),
        wall_time_s=changes.pop("wall", record.totals.wall_time_s),
    )
    copy = dataclasses.replace(record, totals=totals, **changes)  # type: ignore[arg-type]
    store.begin(copy.id, copy.question, started_at=copy.started_at, pool="p", conductor=copy.conductor, mode="run")
    store.write(copy)
    return copy


def seeded(s: TraceBackend) -> TraceBackend:
    """Four requests with known days, costs, wall times, tags, subjects and statuses."""
    base = make_record("volcanoes")
    store_copy(s, base, id="a" * 32, started_at="2026-11-01T10:00:00.000Z", cost=0.001, wall=2.0, tags=("geo",))
    store_copy(
        s, make_record("glaciers", conductor="lm:qwen@v2"), id="b" * 32, started_at="2026-11-02T10:00:00.000Z",
        cost=0.010, wall=20.0, tags=("geo", "shadow"), subject="customer-7",
    )  # fmt: skip
    store_copy(
        s, make_record("sourdough"), id="c" * 32, started_at="2026-11-03T23:59:59.000Z",
        cost=0.100, wall=5.0, status="fallback", subject="customer-7",
    )  # fmt: skip
    s.begin("d" * 32, "Are volcanoes still running?", started_at="2026-11-04T00:00:00.000Z",
            pool="p", conductor="scripted", mode="run")  # fmt: skip
    return s


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> TraceBackend:
    """The four requests, in each engine's trace store: one suite, both engines (PostgreSQL: a
    fresh database on the session's real server, upgraded as ``podium db upgrade`` does)."""
    if request.param == "sqlite":
        return seeded(TraceStore(tmp_path / "t.sqlite3"))
    from podium.trace.postgres import PostgresTraceStore

    return seeded(PostgresTraceStore(request.getfixturevalue("store_url_postgresql")))


@pytest.fixture
def sqlite_store(tmp_path: Path) -> TraceStore:
    """The four requests in an SQLite file (FTS5 syntax and the CLI's --traces FILE)."""
    return cast(TraceStore, seeded(TraceStore(tmp_path / "t.sqlite3")))


def ids(hits: list) -> list[str]:  # type: ignore[type-arg]
    return [(h.trace.id if hasattr(h, "trace") else h.id)[0] for h in hits]


def test_each_kind_of_text_is_found_and_the_match_is_highlighted(store: TraceBackend) -> None:
    hit = store.search("sourdough", fields=["question"])[0]
    assert (hit.trace.id[0], hit.field, hit.location) == ("c", "question", "")
    assert [hit.snippet[a:b] for a, b in hit.highlights] == ["sourdough"]
    assert hit.snippet == "Tell me about sourdough?"
    assert hit.matches == 1
    # question, answer, conductor output, both subtasks and both outputs name the topic
    assert store.search("sourdough")[0].matches == 7
    by_field = {f: store.search("glaciers", fields=[f])[0] for f in ("answer", "reasoning", "subtask", "output")}
    assert by_field["answer"].snippet == "glaciers done"
    assert "polishes" in store.search("polishes")[0].snippet  # conductor reasoning, not in any step
    assert by_field["reasoning"].location == "attempt 0"
    assert by_field["subtask"].location in ("step 0", "step 1")
    assert store.search("outline ideas", fields=["output"])[0].location == "step 0"  # only step 0 wrote "ideas"
    assert store.search("ideas", fields=["answer"]) == []


def test_plain_words_all_must_occur_any_case_and_prefixes(store: TraceBackend) -> None:
    assert ids(store.search("VOLCANOES")) == ["a", "d"] or ids(store.search("VOLCANOES")) == ["d", "a"]
    assert ids(store.search("volcanoes running")) == ["d"]  # both words: only the running request
    assert sorted(ids(store.search("volc*"))) == ["a", "d"]
    assert store.search('"done glaciers"') == []  # a phrase must occur in that order
    assert ids(store.search('"glaciers done"')) == ["b"]


@pytest.mark.parametrize("query", ["NEAR(a b", "AND", "foo:bar", '"unbalanced', "x OR", "(", "*", "-"])
@pytest.mark.slow
def test_plain_queries_never_fail_on_fts_syntax(store: TraceBackend, query: str) -> None:
    store.search(query if query.strip("*-(") else query + " volcanoes")  # no exception


def test_raw_fts_syntax_is_passed_on_and_bad_syntax_is_a_config_error(sqlite_store: TraceStore) -> None:
    store = sqlite_store
    assert sorted(ids(store.search("sourdough OR glaciers", raw=True))) == ["b", "c"]
    assert ids(store.search("volcanoes NOT running", raw=True)) == ["a"]
    with pytest.raises(ConfigError, match=r"invalid FTS5 query.*drop --fts"):
        store.search("NEAR(a b", raw=True)
    with pytest.raises(ConfigError, match="empty"):
        store.search("   ")


def test_filters(store: TraceBackend) -> None:
    def listed(**kw: object) -> list[str]:
        return sorted(ids(store.list(where=TraceFilter(**kw))))  # type: ignore[arg-type]

    assert listed(since=parse_utc("2026-11-02"), until=parse_utc("2026-11-03", end_of_day=True)) == ["b", "c"]
    assert listed(since=parse_utc("2026-11-02T10:00:00Z")) == ["b", "c", "d"]  # since is inclusive
    assert listed(until=parse_utc("2026-11-02T10:00:00Z")) == ["a"]  # until is exclusive
    assert listed(status="fallback") == ["c"] and listed(status="running") == ["d"]
    assert listed(min_cost_usd=0.005, max_cost_usd=0.05) == ["b"]
    assert listed(min_wall_s=3, max_wall_s=10) == ["c"]
    assert listed(conductor="lm:*") == ["b"] and listed(conductor="scripted") == ["a", "c", "d"]
    assert listed(tags=("geo",)) == ["a", "b"] and listed(tags=("geo", "shadow")) == ["b"]
    assert listed(subject="customer-7") == ["b", "c"]
    assert listed(worker="checker") == ["a", "b", "c"]  # d has run no step yet
    assert listed(worker="nobody") == []
    # each summary names the workers its steps ran on (none yet for the running d)
    assert {r.id[0]: r.workers for r in store.list()} == {
        "a": ("checker", "drafter"), "b": ("checker", "drafter"), "c": ("checker", "drafter"), "d": (),
    }  # fmt: skip
    assert store.search("glaciers")[0].trace.workers == ("checker", "drafter")
    # filters narrow a search too
    assert ids(store.search("outline", where=TraceFilter(subject="customer-7", max_cost_usd=0.05))) == ["b"]


def test_bad_filter_values_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="--since '2026-13-01' is not an ISO 8601"):
        parse_utc("2026-13-01", flag="--since")
    with pytest.raises(ConfigError, match=r"min cost 2 is above max cost 1"):
        TraceFilter(min_cost_usd=2.0, max_cost_usd=1.0)
    for bad in (math.nan, math.inf):  # the CLI took nan as "nothing matches", exit 0; the UI as a filter
        with pytest.raises(ConfigError, match="must be numbers"):
            TraceFilter(min_wall_s=bad)
    with pytest.raises(ConfigError, match="status 'done' is unknown"):
        TraceFilter(status="done")
    assert parse_utc("2026-11-30T14:00:00+02:00") == "2026-11-30T12:00:00.000Z"  # converted to UTC
    assert parse_utc("2026-11-30T14:00") == "2026-11-30T14:00:00.000Z"  # no offset: UTC


def test_fts_query_quotes_every_word() -> None:
    assert fts_query('a "b c" d* NOT x"y') == '"a" "b c" "d"* "NOT" "x""y"'


def test_the_index_follows_writes_and_a_replaced_running_row_is_not_indexed_twice(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "t.sqlite3")
    record = make_record("lighthouses")
    store.begin(record.id, record.question, started_at=record.started_at, pool="p", conductor="c", mode="run")
    assert store.flush(timeout=10)  # the running row (its question indexed) is committed on its own
    store.write(record)  # then replaced by the finished record
    assert store.flush(timeout=10)  # the raw connection below reads the file, not the store
    db = sqlite3.connect(tmp_path / "t.sqlite3")
    rows = db.execute("SELECT field, location FROM search_text ORDER BY field, location").fetchall()
    assert rows == [
        ("answer", ""),
        ("output", "step 0"),
        ("output", "step 1"),
        ("question", ""),
        ("reasoning", "attempt 0"),
        ("reasoning", "round 1 attempt 0"),
        ("subtask", "step 0"),
        ("subtask", "step 1"),
    ]  # fmt: skip (round 1 is the conductor's review that kept the answer)
    # the FTS5 index agrees with its content table (FTS5's own consistency check)
    db.execute("INSERT INTO search_index (search_index) VALUES ('integrity-check')")


def test_an_old_database_is_indexed_when_upgraded(tmp_path: Path) -> None:
    path = tmp_path / "v2.sqlite3"
    v2_trace_database(
        path,
        "INSERT INTO requests (id, started_at, mode, pool, conductor, status, question, answer) "
        "VALUES ('ab12', '2026-11-29T00:00:00.000Z', 'run', 'p', 'c', 'ok', 'old question on marmots', 'furry')",
    )
    store = TraceStore(path)
    assert [(h.trace.id, h.field) for h in store.search("marmots")] == [("ab12", "question")]
    assert [h.field for h in store.search("furry")] == ["answer"]


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def test_cli_search_list_and_show(sqlite_store: TraceStore, capsys: pytest.CaptureFixture[str]) -> None:
    store = sqlite_store
    db = str(store.path)
    code, out, _ = run_cli(["trace", "search", "glaciers", "--traces", db, "--json"], capsys)
    [hit] = json.loads(out)
    assert code == 0 and hit["id"] == "b" * 32 and hit["subject"] == "customer-7"
    assert hit["tags"] == ["geo", "shadow"] and hit["started_at"] == "2026-11-02T10:00:00.000Z"
    assert [hit["snippet"][a:b] for a, b in hit["highlights"]] == ["glaciers"]
    code, out, _ = run_cli(["trace", "search", "outline", "--traces", db, "--tag", "geo", "--until", "2026-11-01"],
                           capsys)  # fmt: skip
    assert code == 0 and "aaaaaaaa" in out and "bbbbbbbb" not in out and "2026-11-01T10:00:00.000Z" in out
    code, out, _ = run_cli(["trace", "list", "--traces", db, "--status", "fallback", "--json"], capsys)
    assert [r["id"][0] for r in json.loads(out)] == ["c"]
    code, out, _ = run_cli(["trace", "search", "--traces", db, "--subject", "customer-7", "--json"], capsys)
    assert sorted(r["id"][0] for r in json.loads(out)) == ["b", "c"]  # filters alone: a listing
    code, out, _ = run_cli(["trace", "show", "bbbb", "--traces", db, "--messages"], capsys)
    assert code == 0 and "tags geo, shadow · subject customer-7" in out
    assert "messages sent to checker" in out and "Tell me about glaciers?" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["search", "NEAR(a", "--fts"], "invalid FTS5 query"),
        (["search", "x", "--since", "yesterday"], "--since 'yesterday' is not an ISO 8601"),
        (["list", "--min-latency", "-1"], "must not be negative"),
        (["search", "x", "--limit", "0"], "--limit must be at least 1"),
        (["search", "--fts"], "need a search query"),
    ],
)
def test_cli_bad_input_is_exit_2_with_one_line(
    sqlite_store: TraceStore, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, _, err = run_cli(["trace", *argv, "--traces", str(sqlite_store.path)], capsys)
    assert code == 2 and message in err and err.count("\n") == 1


def test_a_search_of_many_terms_is_refused_before_the_index_is_asked(store: TraceBackend) -> None:
    """The UI re-check: 1,000 words (3 KB) held a server thread for 293 s, the index's cost
    growing with the square of the terms. Repeats count once; more than MAX_TERMS distinct
    terms, or a query over MAX_QUERY_CHARS, is a ConfigError naming the limit, on both stores."""
    from podium.errors import ConfigError
    from podium.trace.query import MAX_QUERY_CHARS, MAX_TERMS, search_terms

    assert search_terms(" ".join(["a*"] * 300)) == [("prefix", "a")]  # one term, given 300 times
    assert len(store.search(" ".join(["glaciers"] * 100))) == 1
    with pytest.raises(ConfigError, match=f"more than {MAX_TERMS}"):
        store.search(" ".join(f"w{i}" for i in range(MAX_TERMS + 1)))
    with pytest.raises(ConfigError, match="characters"):
        store.search("x" * (MAX_QUERY_CHARS + 1))
    assert store.search(" ".join(["glaciers", *(f"w{i}" for i in range(MAX_TERMS - 1))])) == []  # at the limit: fine
