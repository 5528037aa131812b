"""Purge and retention on a real SQLite trace file: after a purge none of the purged text is left
in the bytes of the database, its write-ahead log or its shared-memory index, while the text of
the requests kept is still there (so the byte checks can fail)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import uuid
from pathlib import Path

import pytest

from podium.cli import cli
from podium.errors import ConfigError
from podium.orchestrator import Fallback, Orchestrator
from podium.pool import load_pool, packaged_pools
from podium.testing import ScriptedConductor, ScriptedWorker
from podium.trace.store import TraceStore


def marker() -> str:
    """A word no other text shares a prefix with: FTS5 stores index terms prefix-compressed,
    so only the random tail is sure to appear verbatim; the checks look for that tail."""
    return "m" + uuid.uuid4().hex


def run_marked(
    store: TraceStore, *, subject: str | None = None, request_id: str | None = None, pad: int = 0
) -> list[str]:
    """One request whose question, conductor output, subtasks, outputs and answer each carry a
    marker of their own (the outputs after ``pad`` filler characters, so a large ``pad`` puts
    them on overflow pages); returns the markers."""
    marks = [marker() for _ in range(5)]
    q, reasoning, subtask, draft, final = marks
    plan = f'Reasoning: {reasoning}.\nmodel_id = [0, 1]\nsubtasks = ["Draft {subtask}.", "Finish."]\naccess_list = [[], "all"]'  # noqa: E501
    orch = Orchestrator(
        [
            ScriptedWorker("w0", reply=f"draft {'.' * pad} {draft}"),
            ScriptedWorker("w1", reply=f"final {'.' * pad} {final}"),
        ],
        ScriptedConductor([plan]),
        Fallback(0, "Answer."),
        traces=store,
    )
    asyncio.run(orch.run(f"What about {q}?", subject=subject, request_id=request_id))
    return marks


def file_bytes(path: Path) -> bytes:
    """The database, its -wal and its -shm file, as they are on disk now."""
    return b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")) if p.exists())


def tails(marks: list[str]) -> list[bytes]:
    return [m[-12:].encode() for m in marks]


def test_purged_text_is_gone_from_every_file_and_kept_text_stays(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite3"
    store = TraceStore(path)
    purged = run_marked(store, subject="customer-1") + run_marked(store, subject="customer-1")
    kept = run_marked(store, subject="customer-2")
    assert store.flush(timeout=10)  # the bytes below are read from the files, not through the store
    before = file_bytes(path)
    assert all(t in before for t in tails(purged + kept))  # the check below can fail
    result = store.purge(subject="customer-1")
    assert len(result.request_ids) == 2 and result.subjects == ("customer-1",) and result.log_truncated
    after = file_bytes(path)
    assert [t for t in tails(purged) if t in after] == []
    assert [t for t in tails(kept) if t not in after] == []
    assert store.search(purged[0]) == [] and len(store.search(kept[0])) == 1
    db = sqlite3.connect(path)
    for table in ("requests", "plan_attempts", "steps", "search_text"):
        assert db.execute(f"SELECT COUNT(DISTINCT {'id' if table == 'requests' else 'request_id'}) FROM {table}"
                          ).fetchone() == (1,), table  # fmt: skip
    db.execute("INSERT INTO search_index (search_index) VALUES ('integrity-check')")


def test_deleting_rows_alone_would_leave_the_text_in_the_files(tmp_path: Path) -> None:
    """Why purge scrubs: a plain DELETE leaves the text in free pages and the write-ahead log."""
    path = tmp_path / "t.sqlite3"
    store = TraceStore(path)
    marks = run_marked(store)
    assert store.flush(timeout=10)  # the raw connection below reads the file, not the store
    db = sqlite3.connect(path)
    db.execute("PRAGMA foreign_keys=ON")
    db.execute("DELETE FROM requests")
    db.commit()
    assert db.execute("SELECT COUNT(*) FROM search_text").fetchone() == (0,)  # the cascade ran
    assert any(t in file_bytes(path) for t in tails(marks))


def test_a_purge_also_scrubs_text_that_earlier_plain_deletes_left_behind(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite3"
    store = TraceStore(path)
    leftover = run_marked(store, request_id="5" * 32, pad=20_000)[3:]  # the outputs, on pages of their own
    run_marked(store, request_id="6" * 32)
    assert store.flush(timeout=10)  # the raw connection below works on the file, not through the store
    db = sqlite3.connect(path)
    db.execute("PRAGMA secure_delete=OFF")  # as a connection of a build without it would
    db.execute("PRAGMA foreign_keys=ON")
    db.execute("DELETE FROM requests WHERE id = ?", ("5" * 32,))
    db.commit()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    assert any(t in file_bytes(path) for t in tails(leftover))  # freed, not overwritten
    assert store.purge(request_ids=["6" * 32]).log_truncated  # VACUUM rebuilds every page
    assert [t for t in tails(leftover) if t in file_bytes(path)] == []


def test_purge_by_request_and_before_and_the_listener_gets_the_ids(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "t.sqlite3")
    one, two = "1" * 32, "2" * 32
    run_marked(store, request_id=one)
    run_marked(store, request_id=two)
    seen: list[tuple[str, ...]] = []
    store.add_purge_listener(seen.append)
    dry = store.purge(request_ids=[one], dry_run=True)
    assert dry.request_ids == (one,) and dry.dry_run and store.get(one) is not None and seen == []
    assert store.purge(request_ids=[one]).request_ids == (one,)
    assert seen == [(one,)] and store.get(one) is None and store.get(two) is not None
    assert store.purge(before="2000-01-01T00:00:00.000Z").request_ids == ()  # nothing that old
    assert store.purge(before="2999-01-01T00:00:00.000Z").request_ids == (two,)
    with pytest.raises(ConfigError, match="needs a selection"):
        store.purge()


def test_a_failing_listener_aborts_the_purge(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "t.sqlite3")
    run_marked(store, request_id="3" * 32)

    def vault_down(ids: tuple[str, ...]) -> None:
        raise ConfigError("vault is locked")

    store.add_purge_listener(vault_down)
    with pytest.raises(ConfigError, match="vault is locked"):
        store.purge(request_ids=["3" * 32])
    assert store.get("3" * 32) is not None  # nothing deleted, so the purge can be retried


@pytest.mark.slow
def test_a_reader_holding_the_log_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite3"
    store = TraceStore(path)
    marks = run_marked(store, request_id="4" * 32)
    run_marked(store)
    assert store.flush(timeout=10)  # the reader below reads the file, not through the store
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT COUNT(*) FROM requests").fetchone()  # an open read transaction
    result = store.purge(request_ids=["4" * 32])
    assert result.request_ids == ("4" * 32,) and not result.log_truncated
    reader.execute("COMMIT")
    reader.close()
    sqlite3.connect(path).execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the next checkpoint empties the log
    assert [t for t in tails(marks) if t in file_bytes(path)] == []


def test_retention_purges_old_requests_on_open_and_after_writes(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite3"
    store = TraceStore(path)
    store.begin("a" * 32, "ancient question", started_at="2020-01-01T00:00:00.000Z", pool="p", conductor="c",
                mode="run")  # fmt: skip
    run_marked(store, request_id="b" * 32)
    store.close()
    kept = TraceStore(path, retention_days=30)
    assert kept.get("a" * 32) is None and kept.get("b" * 32) is not None
    assert kept.search("ancient") == []
    kept.begin("c" * 32, "old too", started_at="2020-01-02T00:00:00.000Z", pool="p", conductor="c", mode="run")
    run_marked(kept)  # written within the hour: no second purge yet
    assert kept.get("c" * 32) is not None
    kept.RETENTION_CHECK_S = 0.0
    run_marked(kept)
    assert kept.get("c" * 32) is None and kept.get("b" * 32) is not None
    with pytest.raises(ConfigError, match="retention_days must be positive"):
        TraceStore(path, retention_days=0)


def test_retention_days_in_the_pool_file(tmp_path: Path) -> None:
    pool = tmp_path / "pool.toml"
    local = load_pool().model_dump(mode="json", exclude_none=True)
    assert local["traces"] == {}
    text = packaged_pools()["local"].read_text()
    pool.write_text(text.replace("[conductor]", "[traces]\nretention_days = 7\n\n[conductor]", 1))
    assert load_pool(pool).traces.retention_days == 7
    pool.write_text(text.replace("[conductor]", "[traces]\nretention_days = -1\n\n[conductor]", 1))
    with pytest.raises(ConfigError, match="retention_days"):
        load_pool(pool)


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def test_cli_purge(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.sqlite3"
    store = TraceStore(path)
    marks = run_marked(store, subject="customer-9", request_id="9" * 32)
    run_marked(store, request_id="8" * 32)
    db = ["--traces", str(path)]
    code, out, _ = run_cli(["trace", "purge", "--subject", "customer-9", "--dry-run", *db], capsys)
    assert code == 0 and "would purge 1 request" in out and "9" * 32 in out
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    code, _, err = run_cli(["trace", "purge", "--subject", "customer-9", *db], capsys)
    assert code == 2 and "pass --yes" in err and store.get("9" * 32) is not None
    code, out, _ = run_cli(["trace", "purge", "--request", "9999", "--yes", "--json", *db], capsys)
    result = json.loads(out)
    assert code == 0 and result["request_ids"] == ["9" * 32] and result["subjects"] == ["customer-9"]
    assert [t for t in tails(marks) if t in file_bytes(path)] == []
    code, out, _ = run_cli(["trace", "purge", "--before", "2000-01-01", "--yes", *db], capsys)
    assert code == 0 and "purged 0 request(s)" in out
    for argv, message in (
        ([], "say what to purge"),
        (["--before", "last week"], "--before 'last week' is not an ISO 8601"),
        (["--request", "abc"], "no request with id 'abc'"),
    ):
        code, _, err = run_cli(["trace", "purge", *argv, "--yes", *db], capsys)
        assert code == 2 and message in err, argv
