"""The data-flow register, derived from real SQLite traces written by real requests.

The requests run through ``build_orchestrator`` on a real pool file whose external workers are
fakes (``ScriptedWorker``) — the recipients' replies do not matter here, what podium records
about them does. PII detection is the real offline analyzer.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from podium.builder import build_orchestrator
from podium.cli import cli
from podium.dataflow import build_register
from podium.errors import ConfigError
from podium.records import utc_now
from podium.testing import ScriptedConductor
from podium.trace.query import parse_utc as parse_time
from podium.trace.store import TraceStore
from podium.workers.base import Price, WorkerSettings
from podium.workers.endpoints import DEFAULT_ENDPOINTS
from tests.conftest import v2_trace_database
from tests.test_pii import PLAN_3, fakes, pool_file, question_of

QUESTION = "Mette Kjærgaard (CPR 070491-2846) spørger om sin sag."


def traced(tmp_path: Path, *, extra_b: str = "", db: Path | None = None) -> TraceStore:
    """One request into a trace database (default: traces.sqlite3 in ``tmp_path``): ext-a (no
    access), local (all), ext-b (all)."""
    store = TraceStore(db or tmp_path / "traces.sqlite3")
    config = pool_file(tmp_path, extra_b=extra_b)
    workers = fakes(a=question_of, b="svar")
    asyncio.run(
        build_orchestrator(config, traces=store, conductor=ScriptedConductor([PLAN_3]), workers=workers).run(QUESTION)
    )
    return store


@pytest.mark.slow
def test_register_lists_each_recipient_with_categories_pii_kinds_and_counts(tmp_path: Path) -> None:
    since = utc_now()
    store = traced(tmp_path)
    store2 = traced(tmp_path, extra_b="allow_pii = true\nregion = 'US'")  # same file, second request
    assert store2.path == store.path
    register = build_register(store, since, parse_time("2999-01-01"))
    by_name = {(r.recipient, r.region): r for r in register.recipients}
    assert set(by_name) == {("ext-a", "EU"), ("ext-b", None), ("ext-b", "US")}
    a = by_name[("ext-a", "EU")]
    assert a.provider == "Example AI" and a.endpoint == "https://api.example.com/v1"
    assert a.categories == ("question", "subtask")  # step 0 sees no earlier step
    assert a.pii_pseudonymized == {"DK_CPR": 2, "PERSON": 2} and a.pii_in_clear == {}
    assert (a.requests, a.calls, a.blocked) == (2, 2, 0)
    b = by_name[("ext-b", None)]
    assert b.endpoint == DEFAULT_ENDPOINTS["anthropic"] and b.provider == "api.anthropic.com"
    assert b.categories == ("earlier step outputs", "question", "subtask")
    assert b.pii_pseudonymized and not b.pii_in_clear
    clear = by_name[("ext-b", "US")]
    assert clear.pii_in_clear and not clear.pii_pseudonymized  # allow_pii: sent in clear, on record
    # the local worker is not a third party
    assert "local" not in {r.recipient for r in register.recipients}


def test_the_period_filters_requests_and_an_empty_period_says_so(tmp_path: Path) -> None:
    store = traced(tmp_path)
    before = build_register(store, parse_time("2000-01-01"), parse_time("2000-12-31"))
    assert before.recipients == ()
    assert "No data was sent to any third party" in before.to_markdown()
    with pytest.raises(ConfigError, match="must be before"):
        build_register(store, parse_time("2026-02-01"), parse_time("2026-01-01"))


def test_dates_parse_as_utc_and_a_bare_until_date_includes_its_day() -> None:
    assert parse_time("2026-11-30") == "2026-11-30T00:00:00.000Z"
    assert parse_time("2026-11-30", end_of_day=True) == "2026-12-01T00:00:00.000Z"
    assert parse_time("2026-11-30T12:00:00+01:00") == "2026-11-30T11:00:00.000Z"
    with pytest.raises(ConfigError, match="YYYY-MM-DD"):
        parse_time("30/11/2026")


def test_cli_prints_json_markdown_and_refuses_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = traced(tmp_path)
    db = str(store.path)
    assert cli(["dataflow", "--traces", db, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {r["recipient"] for r in data["recipients"]} == {"ext-a", "ext-b"}
    assert cli(["dataflow", "--traces", db, "--md", "--since", "2020-01-01"]) == 0
    md = capsys.readouterr().out
    assert md.startswith("# Data-flow register") and "| ext-a | Example AI | https://api.example.com/v1 | EU |" in md
    assert "070491-2846" not in md and "Mette" not in md  # kinds and counts, never values
    assert cli(["dataflow", "--traces", db]) == 0  # the table
    assert "ext-b" in capsys.readouterr().out
    assert cli(["dataflow", "--traces", db, "--since", "yesterday"]) == 2
    assert "YYYY-MM-DD" in capsys.readouterr().err
    assert cli(["dataflow", "--traces", str(tmp_path / "none.sqlite3")]) == 2


def test_a_version_2_database_gains_the_disclosure_columns_and_old_steps_read_as_none(tmp_path: Path) -> None:
    path = tmp_path / "v2.sqlite3"
    v2_trace_database(
        path,
        "INSERT INTO requests (id, started_at, mode, pool, conductor, status, question) "
        "VALUES ('ab12', '2026-11-29T00:00:00.000Z', 'run', 'p', 'c', 'ok', 'old question')",
        "INSERT INTO steps (request_id, phase, round, step_index, worker_index, worker, subtask, access, visible, "
        "visible_previous, messages, output, input_tokens, output_tokens, cached_input_tokens, cost_usd, latency_s, "
        "finish_reason, started_at, finished_at) VALUES ('ab12', 'workflow', 0, 0, 0, 'w', 's', '[]', '[]', '[]', "
        "'[]', 'out', 1, 1, 0, 0.0, 0.1, 'stop', '2026-11-29T00:00:00.000Z', '2026-11-29T00:00:01.000Z')",
    )
    store = TraceStore(path)
    old = store.get("ab12")
    assert old is not None and old.steps[0].disclosures == ()
    assert build_register(store, parse_time("2026-11-29"), parse_time("2026-11-30")).recipients == ()
    store.close()
    store = traced(tmp_path, db=path)  # a new request into the upgraded file
    register = build_register(store, parse_time("2020-01-01"), parse_time("2999-01-01"))
    assert {r.recipient for r in register.recipients} == {"ext-a", "ext-b"}
    assert store.get("ab12") is not None


def test_default_endpoints_match_the_backends() -> None:
    from podium.workers.native import AnthropicWorker, GeminiWorker
    from podium.workers.openai_compat import OpenAICompatWorker

    fields = {"settings": WorkerSettings(), "price": Price()}
    built = [cls("w", "m", **fields) for cls in (OpenAICompatWorker, AnthropicWorker, GeminiWorker)]
    assert {w.backend: w.info.endpoint for w in built} == DEFAULT_ENDPOINTS  # what each calls without base_url


def test_the_register_sees_requests_whose_traces_are_still_queued(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reads wait for the writes queued before them: the register too (it read the file at once,
    so a request finished a moment ago could be missing). A slow disk is simulated by writers
    whose commits take 0.3 s."""
    import time

    commit = TraceStore._commit

    def slow(self: TraceStore, ops: object) -> None:
        time.sleep(0.3)
        commit(self, ops)  # type: ignore[arg-type]

    monkeypatch.setattr(TraceStore, "_commit", slow)
    since = utc_now()
    store = traced(tmp_path)
    register = build_register(store, since, parse_time("2999-01-01"))
    assert {r.recipient for r in register.recipients} == {"ext-a", "ext-b"}
