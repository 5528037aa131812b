"""API keys for ``podium serve``: stored hashed, each with an optional period budget (USD).

A key is ``pk-podium-`` plus 32 random bytes (urlsafe base64); it is shown once, when created,
and only its SHA-256 is stored (a random 256-bit secret needs no slow hash: nothing can be
guessed from the digest). Every answered request's cost is recorded against its key, so the
key's budget holds across restarts; a key over its budget gets HTTP 429 ``insufficient_quota``.

The keys live in the store (:mod:`podium.store`): the SQLite file ``keys.sqlite3`` by default,
or the database ``PODIUM_DATABASE_URL`` names (PostgreSQL), which every ``podium serve``
replica then shares — keys, usage, and each key's period budget, reserved and settled in the
database (:class:`podium.store.ledger.SharedPeriodBudget`), so replicas together hold the cap.
Tables: :mod:`podium.store.schema` (``keys``, ``usage``, ``budget_ledgers``, ``budget_holds``).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from podium.budget import PeriodBudget
from podium.errors import ConfigError
from podium.records import utc_now
from podium.store.engine import StoreError, database_errors, mask_url, read_only
from podium.store.schema import keys, usage

__all__ = ["PERIODS", "SCOPES", "ApiKey", "KeyStore"]

_KEY_COLUMNS = (keys.c.name, keys.c.budget_usd, keys.c.period, keys.c.created_at, keys.c.revoked_at, keys.c.scope)
"""The columns of an :class:`ApiKey`, in its fields' order."""

PERIODS = {"hour": 3_600, "day": 86_400, "week": 604_800, "month": 2_592_000}
"""Budget periods, seconds (a "month" is 30 days); periods are aligned to the epoch (UTC)."""

SCOPES = ("api", "admin")
"""Key scopes: ``api`` calls the OpenAI-compatible API (``/v1``); ``admin`` also opens the web UI
(every request's trace, purge) — from any address, where ``api`` keys and no key reach nothing
of it."""

_PREFIX = "pk-podium-"


@dataclass(frozen=True)
class ApiKey:
    """One key (never the secret itself).

    Attributes:
        name: unique, chosen by the operator (e.g. the team using it).
        budget_usd: USD per period, or None for no budget.
        period: a key of :data:`PERIODS`.
        created_at, revoked_at: UTC ISO 8601 (revoked_at None while active).
        scope: a member of :data:`SCOPES`.
    """

    name: str
    budget_usd: float | None
    period: str
    created_at: str
    revoked_at: str | None = None
    scope: str = "api"

    @property
    def admin(self) -> bool:
        """Whether the key opens the web UI (scope ``admin``)."""
        return self.scope == "admin"


class KeyStore:
    """The key store: the embedded SQLite file, or the shared store's database.

    Args:
        path: the SQLite key file (used when ``url`` is None).
        url: the shared store's URL (e.g. ``postgresql://…``; see :mod:`podium.store.engine`),
            which every replica of ``podium serve`` then shares: keys, usage and the period
            budgets' ledger.

    Raises ConfigError (StoreError) when the store cannot be opened, naming it and the fix.
    """

    CACHE_S = 1.0
    """Seconds a key lookup is reused (how soon a key created or revoked elsewhere counts)."""
    _MAX_VERIFIED = 10_000

    def __init__(self, path: Path | None = None, *, url: str | None = None) -> None:
        from podium.store.engine import open_store, sqlite_url

        if url is None and path is None:
            raise ConfigError("KeyStore needs a key file path or a database URL")
        self.path = path
        self.url = url or sqlite_url(path)  # type: ignore[arg-type]
        self._lock = threading.Lock()
        self._budgets: dict[str, PeriodBudget] = {}
        self._active: tuple[bool, float] | None = None
        self._verified: dict[str, tuple[ApiKey | None, float]] = {}
        self._db = open_store(self.url)

    def create(self, name: str, *, budget_usd: float | None = None, period: str = "day", scope: str = "api") -> str:
        """A new key called ``name`` with this ``scope`` (:data:`SCOPES`); returns the secret
        (shown once, never stored).

        Raises ConfigError for an empty or taken name, an unknown period or scope, or a budget ≤ 0.
        """
        from sqlalchemy import insert
        from sqlalchemy.exc import IntegrityError

        name = name.strip()
        if not name or len(name) > 64 or not name.replace("-", "").replace("_", "").isalnum():
            raise ConfigError(f"key name {name!r}: use 1-64 letters, digits, '-' or '_'")
        if period not in PERIODS:
            raise ConfigError(f"period {period!r}: use one of {', '.join(PERIODS)}")
        if scope not in SCOPES:
            raise ConfigError(f"scope {scope!r}: use one of {', '.join(SCOPES)}")
        if budget_usd is not None and not budget_usd > 0:
            raise ConfigError(f"budget {budget_usd!r}: give a positive USD amount, or no budget")
        secret = _new_secret()
        try:
            with self._db.begin() as connection:
                connection.execute(
                    insert(keys).values(
                        name=name,
                        digest=_digest(secret),
                        budget_usd=budget_usd,
                        period=period,
                        created_at=utc_now(),
                        scope=scope,
                    )
                )
        except IntegrityError:
            if (revoked := self._revoked_at(name)) is not None:  # taken for good: traces and budgets name it
                raise ConfigError(
                    f"a key named {name!r} was revoked ({revoked}); a name is never reused, since traces and "
                    f"budgets are booked under it: pick another, e.g. {name}-2"
                ) from None
            raise ConfigError(
                f"a key named {name!r} exists; for a new secret under that name: podium keys rotate {name}"
            ) from None
        self._forget()
        return secret

    def rotate(self, name: str) -> str:
        """A new secret for active key ``name``, returned (shown once); the old secret stops
        working (on other replicas within :attr:`CACHE_S`). Name, scope, budget and this
        period's spending stay: a leaked or departing secret is replaced without a new name
        (a revoked name is never reused). Raises ConfigError when no active key has the name."""
        from sqlalchemy import update

        secret = _new_secret()
        with self._db.begin() as connection:
            changed = connection.execute(
                update(keys).where(keys.c.name == name, keys.c.revoked_at.is_(None)).values(digest=_digest(secret))
            ).rowcount
        self._forget()
        if not changed:
            raise self._no_active(name)
        return secret

    def revoke(self, name: str) -> None:
        """Revoke key ``name`` (its usage stays). Raises ConfigError when there is none."""
        from sqlalchemy import update

        with self._db.begin() as connection:
            changed = connection.execute(
                update(keys).where(keys.c.name == name, keys.c.revoked_at.is_(None)).values(revoked_at=utc_now())
            ).rowcount
        self._forget()
        if not changed:
            raise self._no_active(name)

    def _revoked_at(self, name: str) -> str | None:
        """When key ``name`` was revoked (UTC ISO 8601); None when it is active or unknown."""
        from sqlalchemy import select

        with self._db.connect() as connection:
            revoked: str | None = connection.scalar(select(keys.c.revoked_at).where(keys.c.name == name))
        return revoked

    def _no_active(self, name: str) -> ConfigError:
        """The error for a rotation or revocation of ``name`` when no active key has it."""
        if (revoked := self._revoked_at(name)) is not None:
            return ConfigError(f"key {name!r} was revoked ({revoked}) and stays so; create a key under a new name")
        return ConfigError(f"no active key named {name!r}; see 'podium keys list'")

    def list(self) -> list[ApiKey]:
        """Every key, oldest first."""
        from sqlalchemy import select

        with read_only(self._db) as connection:
            rows = connection.execute(select(*_KEY_COLUMNS).order_by(keys.c.created_at)).all()
        return [ApiKey(*row) for row in rows]

    def active(self) -> bool:
        """Whether any key is active (the server then requires one). Read from the store at
        most once per :attr:`CACHE_S` seconds; while the store cannot be read, the last answer
        read stands (see :meth:`verify`).

        Raises StoreError when the store cannot be read and nothing was read before."""
        from sqlalchemy import select

        now = time.monotonic()
        with self._lock:
            if self._active is not None and now < self._active[1]:
                return self._active[0]
        try:
            with self._reading() as connection:
                found = connection.scalar(select(keys.c.name).where(keys.c.revoked_at.is_(None)).limit(1)) is not None
        except StoreError:
            if self._active is None:
                raise
            return self._active[0]  # the store is down: what it said last
        with self._lock:
            self._active = (found, now + self.CACHE_S)
        return found

    def verify(self, secret: str) -> ApiKey | None:
        """The active key with this secret, or None. Each secret's answer is kept for
        :attr:`CACHE_S` seconds, so a busy server reads the store about once a second per key,
        not once per request; a key revoked elsewhere is refused within that time. While the
        store cannot be read, a secret already looked up keeps its last answer (a revocation
        needs the store too, so none can be missed).

        Raises StoreError when the store cannot be read and this secret was never looked up."""
        from sqlalchemy import select

        digest = _digest(secret)
        now = time.monotonic()
        with self._lock:
            known = self._verified.get(digest)
            if known is not None and now < known[1]:
                return known[0]
        try:
            with self._reading() as connection:
                row = connection.execute(select(*_KEY_COLUMNS, keys.c.digest).where(keys.c.digest == digest)).first()
        except StoreError:
            if known is None:
                raise
            return known[0]  # the store is down: a key it knew stays as it was (nothing can revoke it meanwhile)
        valid = row is not None and row.revoked_at is None and hmac.compare_digest(row.digest, digest)
        key = ApiKey(*row[:-1]) if valid and row is not None else None
        with self._lock:
            if len(self._verified) >= self._MAX_VERIFIED:  # unknown secrets must not grow it without bound
                self._verified = {d: v for d, v in self._verified.items() if now < v[1]}
                if len(self._verified) >= self._MAX_VERIFIED:
                    self._verified.clear()
            self._verified[digest] = (key, now + self.CACHE_S)
        return key

    @contextmanager
    def _reading(self) -> Iterator[Any]:
        """A read-only connection whose database errors are StoreErrors naming the store."""
        with database_errors(f"cannot read the key store at {mask_url(self.url)}"), read_only(self._db) as connection:
            yield connection

    def _forget(self) -> None:
        """Drop what :meth:`active` and :meth:`verify` remember (this process changed a key)."""
        with self._lock:
            self._active = None
            self._verified.clear()

    def budget(self, key: ApiKey) -> PeriodBudget | None:
        """The key's period budget (None without one): a ledger in this store's database, so
        every process using the store draws on one cap; its first period starts from what the
        usage table says the key spent. Its state is read from the database once, when this
        process first asks (later requests of other replicas are seen at the next reservation)."""
        from sqlalchemy.exc import SQLAlchemyError

        from podium.store.ledger import SharedPeriodBudget

        if key.budget_usd is None:
            return None
        with self._lock:
            ledger = self._budgets.get(key.name)
            if ledger is None or ledger.cap_usd != key.budget_usd:
                ledger = SharedPeriodBudget(
                    self._db,
                    key.budget_usd,
                    period_s=PERIODS[key.period],
                    scope=f"key:{key.name}/{key.period}",
                    seed=functools.partial(self._seed, key.name),
                )
                # this period's spending, read once, so that the first request on a used-up key is
                # refused by the key check as every later one is (unreachable: the first
                # reservation fails closed and says so)
                with suppress(SQLAlchemyError):
                    ledger.refresh()
                self._budgets[key.name] = ledger
            return ledger

    def spent_since(self, name: str, since_epoch_s: float) -> float:
        """USD recorded for key ``name`` since ``since_epoch_s`` (Unix seconds)."""
        with read_only(self._db) as connection:
            return self._spent_since(connection, name, since_epoch_s)

    @classmethod
    def _seed(cls, name: str, connection: Any, period_start: float) -> float:
        return cls._spent_since(connection, name, period_start)

    @staticmethod
    def _spent_since(connection: Any, name: str, since_epoch_s: float) -> float:
        from sqlalchemy import func, select

        spent = func.coalesce(func.sum(usage.c.cost_usd), 0.0)
        total = connection.scalar(select(spent).where(usage.c.key == name, usage.c.at >= since_epoch_s))
        return float(total or 0.0)

    def record(self, name: str, request_id: str, cost_usd: float) -> None:
        """Record a finished request's cost against key ``name`` in the usage table (reports, and
        the seed of the key's budget ledger when a period's ledger row is first made; the ledger,
        which each request's reservation settles, is what the budget enforces)."""
        from sqlalchemy import insert

        with self._db.begin() as connection:
            connection.execute(insert(usage).values(key=name, request_id=request_id, at=time.time(), cost_usd=cost_usd))

    @property
    def engine(self) -> Any:
        """The store's SQLAlchemy engine (shared with the switches, :mod:`podium.store.settings`)."""
        return self._db

    def close(self) -> None:
        """Close the store's connections."""
        self._db.dispose()


def _new_secret() -> str:
    return _PREFIX + base64.urlsafe_b64encode(secrets.token_bytes(32)).decode().rstrip("=")


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()
