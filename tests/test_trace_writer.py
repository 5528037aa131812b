"""Trace writes off the request path: group commit, a bounded queue that never drops, flush on
shutdown (podium.trace.writer behind podium.trace.store).

The writer is held at a known point by taking the store's lock (its transaction needs it), so
what queues meanwhile is known exactly; SQLite's statement trace counts the transactions."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from podium.orchestrator import Fallback, Orchestrator
from podium.records import RunRecord
from podium.testing import ScriptedConductor, ScriptedWorker
from podium.trace.store import TraceStore, TraceStoreError
from podium.trace.writer import WriteBehind
from tests.test_trace_search import make_record

TEMPLATE = make_record("lighthouses")


def numbered(i: int) -> RunRecord:
    """A finished record with its own id and a searchable word of its own (``wordNNN``)."""
    return dataclasses.replace(TEMPLATE, id=f"{i:032x}", question=f"Tell me about word{i:03d}?")


def statements(store: TraceStore) -> list[str]:
    """Every SQL statement the store's connection runs from now on (SQLite's trace callback)."""
    seen: list[str] = []
    store._db.set_trace_callback(seen.append)
    return seen


def wait_until(condition: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def stored_ids(path: Path) -> set[str]:
    """The finished requests in the file, read by a connection of its own (as another process)."""
    db = sqlite3.connect(path)
    try:
        return {r[0] for r in db.execute("SELECT id FROM requests WHERE status <> 'running'")}
    finally:
        db.close()


def test_what_queues_during_a_commit_is_stored_in_one_transaction_with_its_index(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "t.sqlite3")
    sql = statements(store)
    with store._lock:  # the writer's first transaction waits here
        store.write(numbered(0))
        wait_until(lambda: store.stats().pending == 1 and not store._writer._queue)  # type: ignore[union-attr]
        for i in range(1, 51):  # these queue behind the blocked commit
            store.write(numbered(i))
    assert store.flush(timeout=30)
    commits = [s for s in sql if s == "COMMIT"]
    stats = store.stats()
    # the first record alone, then the 50 that queued meanwhile in one transaction
    assert len(commits) == 2 and stats.batches == 2 and stats.largest_batch == 50 and stats.written == 51
    # the second transaction holds the 50 records' rows and their search index entries
    second = sql[sql.index("COMMIT") + 1 :]
    assert second[0] == "BEGIN IMMEDIATE" and second[-1] == "COMMIT"
    assert any(s.startswith("INSERT INTO steps") for s in second) and any(s.startswith("WITH texts") for s in second)
    assert stored_ids(tmp_path / "t.sqlite3") == {f"{i:032x}" for i in range(51)}
    assert [h.trace.id for h in store.search("word037")] == [f"{37:032x}"]
    db = sqlite3.connect(tmp_path / "t.sqlite3")
    db.execute("INSERT INTO search_index (search_index) VALUES ('integrity-check')")  # FTS5 agrees with rows


def test_a_start_and_its_finished_record_in_one_batch_store_no_running_row(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "t.sqlite3")
    record = numbered(1)
    sql = statements(store)
    with store._lock:
        store.write(numbered(0))
        wait_until(lambda: not store._writer._queue)  # type: ignore[union-attr]
        store.begin(record.id, record.question, started_at=record.started_at, pool="p", conductor="c", mode="run")
        store.write(record)
    assert store.flush(timeout=30)
    # the running row would be replaced in the same commit
    assert not [s for s in sql if s.startswith("INSERT INTO requests") and "'running'" in s]
    got = store.get(record.id)
    assert got is not None and got.status == "ok" and len(store.search("word001")) == 1


def test_a_full_queue_makes_callers_wait_and_is_counted_and_logged_never_dropped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = TraceStore(tmp_path / "t.sqlite3", max_pending=4)
    caplog.set_level(logging.WARNING, logger="podium.trace")
    done = threading.Event()

    def producer() -> None:
        for i in range(20):
            store.write(numbered(i))
        done.set()

    with store._lock:  # the writer is stuck on its first batch; 4 more fill the queue
        thread = threading.Thread(target=producer)
        thread.start()
        wait_until(lambda: store.stats().full_waits >= 1)
        assert not done.is_set()  # the producer waits for room instead of dropping its record
    thread.join(timeout=30)
    assert done.is_set() and store.flush(timeout=30)
    stats = store.stats()
    assert stats.lost == 0 and stats.pending == 0 and stats.written == 20 and stats.full_waits >= 1
    assert stats.full_wait_s > 0
    assert stored_ids(tmp_path / "t.sqlite3") == {f"{i:032x}" for i in range(20)}
    assert any("trace writer is behind" in r.getMessage() and "nothing is dropped" in r.getMessage()
               for r in caplog.records)  # fmt: skip


def test_a_write_that_fails_is_counted_and_logged_and_its_batch_is_stored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = TraceStore(tmp_path / "t.sqlite3")
    caplog.set_level(logging.ERROR, logger="podium.trace")
    store.begin("ab" * 16, "first", started_at="2026-11-30T00:00:00.000Z", pool="p", conductor="c", mode="run")
    assert store.flush(timeout=30)
    with store._lock:
        store.write(numbered(0))
        wait_until(lambda: not store._writer._queue)  # type: ignore[union-attr]
        store.write(numbered(1))
        # the same id started twice: the primary key refuses it, failing its whole transaction
        store.begin("ab" * 16, "again", started_at="2026-11-30T00:00:00.000Z", pool="p", conductor="c", mode="run")
        store.write(numbered(2))
    assert store.flush(timeout=30)
    stats = store.stats()
    assert stats.lost == 1 and stats.written == 4 and "UNIQUE" in (stats.last_error or "")
    assert {f"{i:032x}" for i in range(3)} <= stored_ids(tmp_path / "t.sqlite3")  # the others of its batch
    assert any("ab" * 16 in r.getMessage() and "not stored" in r.getMessage() for r in caplog.records)


def test_writing_in_the_callers_thread_raises_as_before(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "t.sqlite3", write_behind=False)
    store.begin("cd" * 16, "q", started_at="2026-11-30T00:00:00.000Z", pool="p", conductor="c", mode="run")
    assert stored_ids(tmp_path / "t.sqlite3") == set() and store.get("cd" * 16) is not None  # committed at once
    with pytest.raises(TraceStoreError, match="UNIQUE"):
        store.begin("cd" * 16, "q", started_at="2026-11-30T00:00:00.000Z", pool="p", conductor="c", mode="run")


def test_close_stores_everything_queued(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "t.sqlite3")
    with store._lock:
        for i in range(30):
            store.write(numbered(i))
        assert store.stats().pending == 30
    store.close()
    assert stored_ids(tmp_path / "t.sqlite3") == {f"{i:032x}" for i in range(30)}


@pytest.mark.slow
def test_a_process_that_exits_without_closing_its_store_still_stores_every_trace(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite3"
    script = f"""
import dataclasses, sys
sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})
from tests.test_trace_writer import numbered
from podium.trace.store import TraceStore
store = TraceStore({str(path)!r})
with store._lock:  # everything is still queued when the interpreter starts to exit
    for i in range(200):
        store.write(numbered(i))
"""
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    assert stored_ids(path) == {f"{i:032x}" for i in range(200)}


def test_a_finished_request_is_read_back_at_once_and_close_on_the_orchestrator_flushes(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "t.sqlite3")
    orch = Orchestrator(
        [ScriptedWorker("w0", reply="42")],
        ScriptedConductor(['model_id = [0]\nsubtasks = ["Solve."]\naccess_list = [[]]']),
        Fallback(0, "Answer."),
        traces=store,
    )
    record = asyncio.run(orch.run("What is 6 * 7?"))
    assert TraceStore(tmp_path / "t.sqlite3").get(record.id) == record  # another store of this process
    second = asyncio.run(orch.run("And 6 * 8?"))
    orch.close()
    assert second.id in stored_ids(tmp_path / "t.sqlite3")  # no store involved in this read


def test_an_idle_writer_thread_ends_and_the_next_write_starts_one(tmp_path: Path) -> None:
    writes: list[list[int]] = []
    writer: WriteBehind[int] = WriteBehind(writes.append, max_pending=10)
    writer.IDLE_S = 0.05
    writer.put(1)
    assert writer.flush(timeout=10)
    wait_until(lambda: writer._thread is None)
    writer.put(2)
    assert writer.flush(timeout=10) and writes == [[1], [2]]
    writer.close()
    writer.put(3)  # after close: committed in the caller's thread
    assert writes == [[1], [2], [3]] and writer.stats().written == 3


class HoldingStore(TraceStore):
    RUNNING_ROW_AFTER_S = 30.0  # longer than any test's wait: only a flush writes a running row


def begin(store: TraceStore, record: RunRecord) -> None:
    store.begin(record.id, record.question, started_at=record.started_at, pool=record.pool,
                conductor=record.conductor, mode=record.mode)  # fmt: skip


def test_a_request_that_finishes_while_its_start_is_held_is_written_once_in_one_commit(tmp_path: Path) -> None:
    store = HoldingStore(tmp_path / "t.sqlite3")
    record = numbered(1)
    sql = statements(store)
    begin(store, record)
    time.sleep(0.1)  # an idle writer would have committed the start alone by now
    assert store.stats().batches == 0 and stored_ids(tmp_path / "t.sqlite3") == set()
    store.write(record)
    assert store.flush(timeout=30)
    # one transaction: no running row, nothing deleted, the question indexed once
    assert [s for s in sql if s == "COMMIT"] == ["COMMIT"]
    assert not [s for s in sql if s.startswith(("DELETE", "UPDATE")) or (s.startswith("INSERT") and "'running'" in s)]
    stats = store.stats()
    assert (stats.written, stats.batches, stats.coalesced, stats.pending) == (2, 1, 1, 0)
    assert store.get(record.id) == record and len(store.search("word001")) == 1


def test_a_read_writes_the_running_row_of_a_held_start_at_once(tmp_path: Path) -> None:
    store = HoldingStore(tmp_path / "t.sqlite3")
    record = numbered(2)
    begin(store, record)
    [summary] = store.list()  # a read flushes, held starts included
    assert summary.status == "running" and store.stats().coalesced == 0
    db = sqlite3.connect(tmp_path / "t.sqlite3")  # as another process sees it
    assert db.execute("SELECT status FROM requests").fetchall() == [("running",)]


def test_a_request_still_running_after_the_hold_gets_its_row_and_the_record_is_written_over_it(
    tmp_path: Path,
) -> None:
    class Brief(TraceStore):
        RUNNING_ROW_AFTER_S = 0.05

    path = tmp_path / "t.sqlite3"
    store = Brief(path)
    record = numbered(3)
    begin(store, record)
    # no flush: the writer writes the running row when the hold runs out
    wait_until(lambda: sqlite3.connect(path).execute("SELECT status FROM requests").fetchall() == [("running",)])
    sql = statements(store)
    store.write(record)
    assert store.flush(timeout=30)
    assert [s for s in sql if s.startswith("UPDATE requests")] and not [s for s in sql if s.startswith("DELETE")]
    assert store.get(record.id) == record and store.stats().coalesced == 0
    db = sqlite3.connect(path)
    texts = db.execute("SELECT field FROM search_text ORDER BY id").fetchall()
    assert texts.count(("question",)) == 1 and ("answer",) in texts  # the question kept, the rest added
    db.execute("INSERT INTO search_index (search_index) VALUES ('integrity-check')")  # FTS5 agrees with rows
    assert [h.trace.id for h in store.search("word003")] == [record.id]


def test_a_record_written_again_replaces_the_finished_one(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "t.sqlite3")
    record = numbered(4)
    store.write(dataclasses.replace(record, answer="first answer"))
    assert store.flush(timeout=30)
    store.write(record)
    got = store.get(record.id)
    assert got == record and store.stats().lost == 0 and store.search("first") == []


def test_what_is_held_goes_with_its_key_and_on_flush_close_and_a_full_queue() -> None:
    writes: list[list[tuple[str, str]]] = []
    writer: WriteBehind[tuple[str, str]] = WriteBehind(
        writes.append, max_pending=2, hold=lambda op: op[1] == "start", key=lambda op: op[0], hold_s=60.0
    )
    writer.put(("a", "start"))
    writer.put(("a", "end"))  # takes its start along, in order, in one batch
    assert writer.flush(timeout=10) and writes == [[("a", "start"), ("a", "end")]]
    writer.put(("b", "start"))
    assert writer.flush(timeout=10) and writes[-1] == [("b", "start")]  # a flush does not wait 60 s
    writer.put(("c", "start"))
    writer.put(("d", "start"))  # the queue is full of held starts
    writer.put(("e", "end"))  # waits for room: the writer lets the held ones go
    assert writer.stats().full_waits == 1 and writer.flush(timeout=10)
    assert sorted(op for batch in writes[2:] for op in batch) == [("c", "start"), ("d", "start"), ("e", "end")]
    writer.put(("f", "start"))
    writer.close()
    assert writes[-1] == [("f", "start")]
    stats = writer.stats()
    assert (stats.written, stats.pending, stats.coalesced, stats.lost) == (7, 0, 1, 0)


def test_an_idle_writer_woken_by_one_write_gathers_the_next_ones_into_its_commit() -> None:
    """Writes that trickle in (as requests finish one by one) share a commit: the writer, woken
    from idle by the first, waits up to ``gather_s`` for more. A full batch, a flush and a close
    end that wait at once, so nothing waits the whole ``gather_s`` for them."""
    writes: list[list[int]] = []
    writer: WriteBehind[int] = WriteBehind(writes.append, max_batch=4, gather_s=60.0)
    writer.put(0)  # the thread's first write is committed at once: it was not idle
    wait_until(lambda: writes == [[0]])
    time.sleep(0.05)  # the writer is now idle, waiting
    for i in range(1, 5):
        writer.put(i)
    wait_until(lambda: len(writes) == 2)  # a full batch (4) ends the gathering
    assert writes[1] == [1, 2, 3, 4]
    time.sleep(0.05)
    writer.put(5)
    writer.put(6)
    started = time.monotonic()
    assert writer.flush(timeout=30) and writes[2] == [5, 6]  # the flush ends it too
    assert time.monotonic() - started < 20
    writer.put(7)
    time.sleep(0.05)
    writer.close()  # and so does a close
    assert writes[3] == [7] and writer.stats().written == 8
