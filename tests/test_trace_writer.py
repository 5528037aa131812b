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
    assert not [s for s in sql if "'running'" in s]  # the running row would be replaced in the same commit
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
