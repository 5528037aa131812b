"""API keys for ``podium serve``: stored hashed, each with an optional period budget (USD).

A key is ``pk-podium-`` plus 32 random bytes (urlsafe base64); it is shown once, when created,
and only its SHA-256 is stored (a random 256-bit secret needs no slow hash: nothing can be
guessed from the digest). Every answered request's cost is recorded against its key, so the
key's budget holds across restarts; a key over its budget gets HTTP 429 ``insufficient_quota``.

Tables (SQLite, WAL): ``keys`` (name, digest, budget, period, created/revoked, UTC ISO 8601) and
``usage`` (one row per request: key, request id = trace id, time, cost USD).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from podium.budget import PeriodBudget
from podium.errors import ConfigError
from podium.records import utc_now

__all__ = ["PERIODS", "ApiKey", "KeyStore"]

PERIODS = {"hour": 3_600, "day": 86_400, "week": 604_800, "month": 2_592_000}
"""Budget periods, seconds (a "month" is 30 days); periods are aligned to the epoch (UTC)."""

_PREFIX = "pk-podium-"


@dataclass(frozen=True)
class ApiKey:
    """One key (never the secret itself).

    Attributes:
        name: unique, chosen by the operator (e.g. the team using it).
        budget_usd: USD per period, or None for no budget.
        period: a key of :data:`PERIODS`.
        created_at, revoked_at: UTC ISO 8601 (revoked_at None while active).
    """

    name: str
    budget_usd: float | None
    period: str
    created_at: str
    revoked_at: str | None = None


class KeyStore:
    """The key file.

    Raises ConfigError when the file cannot be opened.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._budgets: dict[str, PeriodBudget] = {}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA busy_timeout=5000")
            self._db.executescript(
                """
                CREATE TABLE IF NOT EXISTS keys (
                    name TEXT PRIMARY KEY, digest TEXT NOT NULL UNIQUE, budget_usd REAL,
                    period TEXT NOT NULL, created_at TEXT NOT NULL, revoked_at TEXT);
                CREATE TABLE IF NOT EXISTS usage (
                    key TEXT NOT NULL, request_id TEXT NOT NULL, at REAL NOT NULL, cost_usd REAL NOT NULL);
                CREATE INDEX IF NOT EXISTS usage_key_at ON usage (key, at);
                """
            )
        except (sqlite3.Error, OSError) as exc:
            raise ConfigError(f"cannot open key file {path}: {exc}") from None

    def create(self, name: str, *, budget_usd: float | None = None, period: str = "day") -> str:
        """A new key called ``name``; returns the secret (shown once, never stored).

        Raises ConfigError for an empty or taken name, an unknown period or a budget ≤ 0.
        """
        name = name.strip()
        if not name or len(name) > 64 or not name.replace("-", "").replace("_", "").isalnum():
            raise ConfigError(f"key name {name!r}: use 1-64 letters, digits, '-' or '_'")
        if period not in PERIODS:
            raise ConfigError(f"period {period!r}: use one of {', '.join(PERIODS)}")
        if budget_usd is not None and not budget_usd > 0:
            raise ConfigError(f"budget {budget_usd!r}: give a positive USD amount, or no budget")
        secret = _PREFIX + base64.urlsafe_b64encode(secrets.token_bytes(32)).decode().rstrip("=")
        try:
            with self._lock:
                self._db.execute(
                    "INSERT INTO keys (name, digest, budget_usd, period, created_at) VALUES (?, ?, ?, ?, ?)",
                    (name, _digest(secret), budget_usd, period, utc_now()),
                )
        except sqlite3.IntegrityError:
            raise ConfigError(f"a key named {name!r} exists; revoke it or pick another name") from None
        return secret

    def revoke(self, name: str) -> None:
        """Revoke key ``name`` (its usage stays). Raises ConfigError when there is none."""
        with self._lock:
            changed = self._db.execute(
                "UPDATE keys SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL", (utc_now(), name)
            ).rowcount
        if not changed:
            raise ConfigError(f"no active key named {name!r}; see 'podium keys list'")

    def list(self) -> list[ApiKey]:
        rows = self._db.execute(
            "SELECT name, budget_usd, period, created_at, revoked_at FROM keys ORDER BY created_at"
        ).fetchall()
        return [ApiKey(*row) for row in rows]

    def active(self) -> bool:
        """Whether any key is active (the server then requires one)."""
        return self._db.execute("SELECT 1 FROM keys WHERE revoked_at IS NULL LIMIT 1").fetchone() is not None

    def verify(self, secret: str) -> ApiKey | None:
        """The active key with this secret, or None."""
        digest = _digest(secret)
        row = self._db.execute(
            "SELECT name, budget_usd, period, created_at, revoked_at, digest FROM keys WHERE digest = ?", (digest,)
        ).fetchone()
        if row is None or row[4] is not None or not hmac.compare_digest(row[5], digest):
            return None
        return ApiKey(*row[:5])

    def budget(self, key: ApiKey) -> PeriodBudget | None:
        """The key's period budget, shared by all its requests in this process and starting
        from what the usage table says it spent this period. None without a budget."""
        if key.budget_usd is None:
            return None
        with self._lock:
            ledger = self._budgets.get(key.name)
            if ledger is None or ledger.cap_usd != key.budget_usd:
                ledger = PeriodBudget(
                    key.budget_usd, period_s=PERIODS[key.period], scope=f"key:{key.name}/{key.period}"
                )
                ledger.spent_usd = self.spent_since(key.name, ledger.period_start)
                self._budgets[key.name] = ledger
            return ledger

    def spent_since(self, name: str, since_epoch_s: float) -> float:
        """USD recorded for key ``name`` since ``since_epoch_s`` (Unix seconds)."""
        row = self._db.execute(
            "SELECT COALESCE(SUM(cost_usd), 0) FROM usage WHERE key = ? AND at >= ?", (name, since_epoch_s)
        ).fetchone()
        return float(row[0])

    def record(self, name: str, request_id: str, cost_usd: float) -> None:
        """Record a finished request's cost against key ``name``."""
        with self._lock:
            self._db.execute(
                "INSERT INTO usage (key, request_id, at, cost_usd) VALUES (?, ?, ?, ?)",
                (name, request_id, time.time(), cost_usd),
            )

    def close(self) -> None:
        self._db.close()


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()
