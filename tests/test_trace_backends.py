"""Both trace stores — the SQLite file and PostgreSQL (a real server, tests/postgres_support.py) —
behind one interface: the same record comes back field for field, the same purge removes the same
requests, and on PostgreSQL the purged text is gone from the table files afterwards (VACUUM
FULL), while kept text is still there (so the byte check can fail). Requests run through the real
orchestrator with scripted fake workers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("sqlalchemy", reason="needs podium[serve]")

from podium.trace.backend import TraceBackend
from podium.trace.store import TraceStore
from tests.test_trace_purge import marker, run_marked, tails


@pytest.fixture(params=["sqlite", "postgresql"])
def traces(request: pytest.FixtureRequest, tmp_path: Path) -> TraceBackend:
    if request.param == "sqlite":
        return TraceStore(tmp_path / "t.sqlite3")
    from podium.trace.postgres import PostgresTraceStore

    return PostgresTraceStore(request.getfixturevalue("store_url_postgresql"))


def test_a_record_comes_back_field_for_field(traces: TraceBackend) -> None:
    run_marked(traces, subject="cust-1")  # type: ignore[arg-type]
    [summary] = traces.list()
    record = traces.get(summary.id)
    assert record is not None and record.status == "ok" and record.subject == "cust-1"
    again = traces.get(traces.resolve_id(summary.id[:6]))
    assert again == record
    assert len(record.steps) == 2 and record.steps[1].visible == (0,) and record.steps[1].access == "all"
    assert summary.steps == 2 and summary.subject == "cust-1"
    assert traces.spent_since(record.pool, "1970-01-01T00:00:00.000Z") == pytest.approx(record.totals.total_cost_usd)


def test_a_running_request_reads_as_unfinished_and_its_question_is_searchable(traces: TraceBackend) -> None:
    word = marker()
    traces.begin("e" * 32, f"Is {word} done?", started_at="2026-11-04T00:00:00.000Z", pool="p",
                 conductor="c", mode="run", tags=("t1",))  # fmt: skip
    record = traces.get("e" * 32)
    assert record is not None and (record.status, record.error) == ("error", "unfinished")
    assert [h.trace.id for h in traces.search(word)] == ["e" * 32]
    assert traces.list()[0].tags == ("t1",)


def test_folded_search_finds_what_was_written_with_accents(traces: TraceBackend) -> None:
    traces.begin("f" * 32, "Åbner butikken på lørdag?", started_at="2026-11-04T00:00:00.000Z",
                 pool="p", conductor="c", mode="run")  # fmt: skip
    [hit] = traces.search("lordag")
    assert [hit.snippet[a:b] for a, b in hit.highlights] == ["lørdag"]  # shown as written
    assert traces.search("abner")[0].trace.id == "f" * 32


def test_purge_by_subject_removes_it_from_list_search_and_get(traces: TraceBackend) -> None:
    gone = run_marked(traces, subject="cust-9")  # type: ignore[arg-type]
    kept = run_marked(traces, subject="cust-2")  # type: ignore[arg-type]
    dry = traces.purge(subject="cust-9", dry_run=True)
    assert len(dry.request_ids) == 1 and dry.dry_run and traces.search(gone[0])
    purged = traces.purge(subject="cust-9")
    assert purged.request_ids == dry.request_ids and purged.subjects == ("cust-9",)
    assert traces.get(purged.request_ids[0]) is None
    assert all(traces.search(m) == [] for m in gone)
    assert all(traces.search(m) for m in kept)
    assert [s.subject for s in traces.list()] == ["cust-2"]


def _table_bytes(server: Any, url: str) -> bytes:
    """Every file of the database's tables, indexes and TOAST on disk (base/<database oid>)."""
    import psycopg

    name = url.rsplit("/", 1)[1]
    with psycopg.connect(f"host=127.0.0.1 port={server.port} user=podium dbname={name}") as db:
        row = db.execute("SELECT oid FROM pg_database WHERE datname = %s", (name,)).fetchone()
        db.execute("CHECKPOINT")  # dirty pages of the new files reach disk, so a leftover would show
    assert row is not None
    folder = server.data / "base" / str(row[0])
    return b"".join(p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file())


def test_postgres_purge_leaves_no_purged_text_in_the_table_files(postgres_server: Any) -> None:
    from podium.store.engine import open_store
    from podium.trace.postgres import PostgresTraceStore

    url = postgres_server.new_database()
    open_store(url, migrate=True).dispose()
    store = PostgresTraceStore(url)
    gone = run_marked(store, subject="cust-9", pad=3000)  # type: ignore[arg-type]  # outputs TOASTed
    kept = run_marked(store, subject="cust-2")  # type: ignore[arg-type]
    store.flush()
    before = _table_bytes(postgres_server, url)
    assert all(t in before for t in tails(gone)), "the check must see the text before the purge"
    result = store.purge(subject="cust-9")
    assert result.log_truncated  # on PostgreSQL: VACUUM FULL rewrote the tables
    after = _table_bytes(postgres_server, url)
    assert not [t for t in tails(gone) if t in after]
    assert all(t in after for t in tails(kept))
    store.close()


def test_writes_that_cannot_reach_postgres_are_counted_lost_not_raised(postgres_server: Any) -> None:
    """The store going away mid-run: requests still get their answers (writes are off the
    request path); each trace that could not be written is counted and logged."""
    from podium.store.engine import open_store
    from podium.trace.postgres import PostgresTraceStore

    url = postgres_server.new_database()
    open_store(url, migrate=True).dispose()
    store = PostgresTraceStore(url)
    import sqlalchemy

    store.engine.dispose()  # the server "goes away": nothing listens at port 1
    store.engine = sqlalchemy.create_engine("postgresql+psycopg://podium@127.0.0.1:1/none")
    run_marked(store)  # type: ignore[arg-type]  # returns: the request was answered
    assert store.flush(timeout=30)
    stats = store.stats()
    assert stats.lost == 2 and stats.written == 0 and stats.last_error  # its begin and its finished record


def test_the_pools_daily_budget_is_shared_when_traces_are_in_postgres(postgres_server: Any) -> None:
    """Two processes' orchestrators (two stores on one database) draw on one pool day budget,
    which starts from what today's stored traces already cost."""
    from podium.builder import _periods
    from podium.pool import LimitsConfig, load_pool, packaged_pools
    from podium.store.engine import open_store
    from podium.store.ledger import SharedPeriodBudget, spent_by_pool
    from podium.trace.postgres import PostgresTraceStore

    url = postgres_server.new_database()
    open_store(url, migrate=True).dispose()
    first, second = PostgresTraceStore(url), PostgresTraceStore(url)
    config = load_pool(packaged_pools()["local"])
    config = config.model_copy(update={"limits": LimitsConfig(daily_budget_usd=0.01)})
    [a] = _periods(config, first)
    [b] = _periods(config, second)
    assert isinstance(a, SharedPeriodBudget) and isinstance(b, SharedPeriodBudget)
    a.settle_hold(a.hold(0.006), 0.006)
    with pytest.raises(Exception, match="does not fit"):
        b.hold(0.005)  # the other process sees what the first spent
    b.hold(0.004)
    # a pool's first day starts from what today's traces of that pool already cost
    run_marked(first)  # type: ignore[arg-type]  # pool "pool", a few tenths of a cent
    first.flush()
    [spent] = [r for r in first.list() if r.total_cost_usd]
    seeded = SharedPeriodBudget(first.engine, 1.0, scope="pool:pool/day", seed=spent_by_pool("pool"))
    seeded.refresh()
    assert seeded.spent_usd == pytest.approx(spent.total_cost_usd)
    first.close()
    second.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def patient_traces(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> TraceBackend:
    """As ``traces``, but a request's start is held up to 60 s for its finished record (not
    0.25 s): a loaded machine cannot split the two, so a test pins the coalescing, not the
    machine's speed (``make check`` beside a long recording once took longer than 0.25 s)."""
    if request.param == "sqlite":
        monkeypatch.setattr(TraceStore, "RUNNING_ROW_AFTER_S", 60.0)
        return TraceStore(tmp_path / "t.sqlite3")
    from podium.trace.postgres import PostgresTraceStore

    monkeypatch.setattr(PostgresTraceStore, "RUNNING_ROW_AFTER_S", 60.0)
    return PostgresTraceStore(request.getfixturevalue("store_url_postgresql"))


def test_the_page_cursor_orders_ties_by_id_on_both_engines(traces: TraceBackend) -> None:
    """Requests that started in the same millisecond: listed by id within it, and a cursor at
    one of them lists exactly those after it (what the UI's "older" page relies on)."""
    from podium.trace.query import TraceFilter
    from tests.test_trace_search import make_record, store_copy

    base = make_record("tie")
    for i in range(4):
        store_copy(traces, base, id=f"{i:032x}", started_at="2026-11-01T10:00:00.000Z")  # type: ignore[arg-type]
    store_copy(traces, base, id="f" * 32, started_at="2026-11-01T09:00:00.000Z")  # type: ignore[arg-type]
    listed = [s.id for s in traces.list(limit=10)]
    assert listed == [f"{i:032x}" for i in (3, 2, 1, 0)] + ["f" * 32]
    after = traces.list(limit=10, where=TraceFilter(older_than=("2026-11-01T10:00:00.000Z", f"{2:032x}")))
    assert [s.id for s in after] == [f"{1:032x}", f"{0:032x}", "f" * 32]


def test_a_request_that_finishes_at_once_is_one_write_and_one_commit(patient_traces: TraceBackend) -> None:
    traces = patient_traces
    question, *_ = run_marked(traces)  # type: ignore[arg-type]
    assert traces.flush(timeout=30)
    stats = traces.stats()  # begin and write: one batch, no running row written first
    assert (stats.written, stats.batches, stats.coalesced, stats.lost) == (2, 1, 1, 0)
    [hit] = traces.search(question)
    record = traces.get(hit.trace.id)
    assert record is not None and record.status == "ok"


def test_a_finished_record_written_over_its_running_row_reads_back_with_one_question(
    traces: TraceBackend, tmp_path: Path
) -> None:
    scratch = TraceStore(tmp_path / "scratch.sqlite3")  # makes the record
    question, *_, answer = run_marked(scratch, request_id="d" * 32)
    record = scratch.get("d" * 32)
    assert record is not None
    traces.begin(record.id, record.question, started_at=record.started_at, pool=record.pool,
                 conductor=record.conductor, mode=record.mode)  # fmt: skip
    assert traces.flush(timeout=30) and traces.list()[0].status == "running"
    traces.write(record)
    assert traces.get(record.id) == record and traces.stats().coalesced == 0
    assert [h.field for h in traces.search(question)] == ["question"]
    assert [h.field for h in traces.search(answer)] == ["answer"]
