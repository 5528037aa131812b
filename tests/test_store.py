"""The shared store (podium.store), one suite on both engines: an SQLite file and a database on a
real PostgreSQL server (tests/postgres_support.py). Keys, the budget ledger shared by several
processes (here: several engines, each a process's connection pool), crashed holds, migration of
a key file from before the store had migrations, and the errors a user sees for a store that is
down, wrong or behind."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

pytest.importorskip("sqlalchemy", reason="needs podium[serve]")

from podium.budget import Limits, PeriodBudget, RequestBudget
from podium.errors import ConfigError, CostCapExceeded
from podium.serve.keys import KeyStore
from podium.store.engine import StoreError, check, head_revision, mask_url, open_store, schema_revision
from podium.store.ledger import SharedPeriodBudget


def test_keys_round_trip(store_url: str) -> None:
    store = KeyStore(url=store_url)
    secret = store.create("team-a", budget_usd=0.5, period="week")
    key = store.verify(secret)
    assert key is not None and key.name == "team-a" and key.budget_usd == 0.5 and key.period == "week"
    assert store.verify(secret + "x") is None
    assert store.active()
    with pytest.raises(Exception, match="exists"):
        store.create("team-a")
    store.record("team-a", "r" * 32, 0.125)
    assert store.spent_since("team-a", 0) == pytest.approx(0.125)
    admin = store.create("ops", scope="admin")
    assert (store.verify(admin) or key).admin and not key.admin
    with pytest.raises(Exception, match="scope"):
        store.create("x", scope="root")
    store.revoke("team-a")
    store.revoke("ops")
    assert store.verify(secret) is None and not store.active()
    assert sorted(k.name for k in store.list()) == ["ops", "team-a"]
    store.close()


def test_replicas_together_never_reserve_past_the_cap(store_url: str) -> None:
    """Four 'replicas' (own engine each, as separate processes have) race 40 reservations of
    $0.001 each on one $0.01 ledger: exactly 10 fit, whatever the interleaving, because each
    reservation is one locked transaction in the database."""
    engines = [open_store(store_url) if i == 0 else open_store(store_url, migrate=False) for i in range(4)]
    ledgers = [SharedPeriodBudget(e, 0.01, scope="key:t/day") for e in engines]
    granted: list[object] = []
    refused: list[CostCapExceeded] = []
    lock = threading.Lock()

    def replica(ledger: SharedPeriodBudget) -> None:
        for _ in range(10):
            try:
                token = ledger.hold(0.001)
            except CostCapExceeded as exc:
                with lock:
                    refused.append(exc)
            else:
                with lock:
                    granted.append((ledger, token))

    threads = [threading.Thread(target=replica, args=(ledger,)) for ledger in ledgers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(granted) == 10 and len(refused) == 30
    assert all(exc.scope == "key:t/day" for exc in refused)
    for ledger, token in granted:  # type: ignore[misc]
        ledger.settle_hold(token, 0.0007)  # each call cost less than its worst case
    ledgers[0].refresh()
    assert ledgers[0].spent_usd == pytest.approx(0.007) and ledgers[0].reserved_usd == 0
    assert ledgers[1].hold(0.003)  # what settling freed is there for every replica
    with pytest.raises(CostCapExceeded):
        ledgers[2].hold(0.0001)
    for e in engines:
        e.dispose()


def test_a_crashed_replicas_hold_expires(store_url: str) -> None:
    now = [1_000_000.0]
    engine = open_store(store_url)
    crashed = SharedPeriodBudget(engine, 0.01, scope="pool:p/day", hold_ttl_s=60, clock=lambda: now[0])
    alive = SharedPeriodBudget(engine, 0.01, scope="pool:p/day", hold_ttl_s=60, clock=lambda: now[0])
    crashed.hold(0.01)  # never settled: its process died
    with pytest.raises(CostCapExceeded):
        alive.hold(0.001)
    now[0] += 61
    alive.hold(0.001)
    alive.refresh()
    assert alive.reserved_usd == pytest.approx(0.001)
    engine.dispose()


def test_a_shared_refusal_releases_the_request_ledger(store_url: str) -> None:
    engine = open_store(store_url)
    shared = SharedPeriodBudget(engine, 0.001, scope="key:k/day")
    pool_day = PeriodBudget(1.0, scope="pool:p/day")
    budget = RequestBudget(Limits(cost_cap_usd=0.5), [pool_day, shared])
    with pytest.raises(CostCapExceeded) as caught:
        budget.reserve(0.002)
    assert caught.value.scope == "key:k/day"
    assert budget.ledger.reserved_usd == 0 and pool_day.reserved_usd == 0
    reservation = budget.reserve(0.0008)
    reservation.settle(0.0005)
    assert budget.ledger.spent_usd == pytest.approx(0.0005) and pool_day.spent_usd == pytest.approx(0.0005)
    shared.refresh()
    assert shared.spent_usd == pytest.approx(0.0005) and shared.reserved_usd == 0
    engine.dispose()


def test_a_keys_budget_starts_from_its_recorded_usage_and_new_periods_from_zero(store_url: str) -> None:
    store = KeyStore(url=store_url)
    secret = store.create("team-b", budget_usd=0.01, period="hour")
    store.record("team-b", "a" * 32, 0.009)
    key = store.verify(secret)
    assert key is not None
    ledger = store.budget(key)
    assert isinstance(ledger, SharedPeriodBudget) and not ledger.exhausted()
    ledger.refresh()
    assert ledger.spent_usd == pytest.approx(0.009)
    store.record("team-b", "b" * 32, 0.002)  # usage after the ledger exists is not counted twice
    ledger.settle_hold(ledger.hold(0.001), 0.001)
    assert ledger.exhausted()
    now = [ledger.period_start + 3_600 + 1]
    later = SharedPeriodBudget(ledger.engine, 0.01, period_s=3_600, scope=ledger.scope, clock=lambda: now[0])
    later.refresh()
    assert later.spent_usd == 0 and not later.exhausted()
    store.close()


def test_a_key_file_from_before_migrations_is_upgraded_with_its_keys(tmp_path: Path) -> None:
    path = tmp_path / "keys.sqlite3"
    db = sqlite3.connect(path)
    db.executescript(
        """
        CREATE TABLE keys (name TEXT PRIMARY KEY, digest TEXT NOT NULL UNIQUE, budget_usd REAL,
            period TEXT NOT NULL, created_at TEXT NOT NULL, revoked_at TEXT);
        CREATE TABLE usage (key TEXT NOT NULL, request_id TEXT NOT NULL, at REAL NOT NULL, cost_usd REAL NOT NULL);
        CREATE INDEX usage_key_at ON usage (key, at);
        INSERT INTO keys VALUES ('old', 'd1', 1.0, 'day', '2026-11-01T00:00:00.000Z', NULL);
        INSERT INTO usage VALUES ('old', 'r1', 1.0, 0.25);
        """
    )
    db.commit()
    db.close()
    store = KeyStore(path)
    assert [(k.name, k.scope) for k in store.list()] == [("old", "api")]  # keys from before scopes: API only
    assert store.spent_since("old", 0) == 0.25
    assert schema_revision(store._db) == head_revision()
    store.close()


def test_postgres_behind_the_code_says_to_run_db_upgrade(postgres_server: object) -> None:
    url = postgres_server.new_database()  # type: ignore[attr-defined]
    with pytest.raises(StoreError, match="podium db upgrade"):
        open_store(url)  # PostgreSQL is never migrated behind the operator's back
    report = check(url)
    assert report.reachable and report.revision is None and not report.current


def test_unreachable_and_wrong_stores_are_named_without_the_password(tmp_path: Path) -> None:
    url = "postgresql://podium:s3cret@127.0.0.1:1/podium"
    assert mask_url(url) == "postgresql://podium:***@127.0.0.1:1/podium"
    with pytest.raises(StoreError) as caught:
        KeyStore(url=url)
    assert "s3cret" not in str(caught.value) and "127.0.0.1:1" in str(caught.value)
    report = check(url)
    assert not report.reachable and report.error and "s3cret" not in report.url
    with pytest.raises(Exception, match="sqlite:// or postgresql://"):
        KeyStore(url="mysql://a@b/c")
    with pytest.raises(ConfigError, match="PORT a number") as bad_port:  # was a ValueError traceback
        check("postgresql://podium:s3cret@127.0.0.1:notaport/podium")
    assert "s3cret" not in str(bad_port.value)
    assert check("postgres://podium:s3cret@127.0.0.1:1/podium").engine == "postgresql"  # providers' spelling
    missing = check(f"sqlite:///{tmp_path / 'none.sqlite3'}")
    assert not missing.reachable and not (tmp_path / "none.sqlite3").exists()  # a check creates nothing


def test_a_store_that_goes_down_refuses_reservations_instead_of_overshooting(tmp_path: Path) -> None:
    """Fail closed: without the shared ledger a replica cannot know what the others spent."""
    from sqlalchemy import create_engine

    engine = create_engine("postgresql+psycopg://podium@127.0.0.1:1/none", pool_pre_ping=False)
    ledger = SharedPeriodBudget(engine, 1.0, scope="key:k/day")
    with pytest.raises(CostCapExceeded, match="cannot be reached") as caught:
        RequestBudget(None, [ledger]).reserve(0.001)
    assert caught.value.scope == "key:k/day"
    assert not ledger.exhausted()  # the pre-check defers to the reservation, which says why
