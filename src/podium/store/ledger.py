"""Period budgets kept in the store, so every process (replica) shares one cap.

A :class:`SharedPeriodBudget` is a :class:`~podium.budget.PeriodBudget` whose ledger is one row of
``budget_ledgers`` (the scope's current period, its settled cost, the cost reserved by calls in
flight) plus one row of ``budget_holds`` per call in flight. Reserving is one conditional
update — ``UPDATE … SET reserved_usd = reserved_usd + :cost WHERE spent + reserved + :cost <= :cap
RETURNING …`` (a new period's spent counting as 0) — and the hold's insert, in one transaction;
settling deletes the hold and moves its amount from reserved to the real cost. The database
applies each update atomically under the row's lock, so N processes together never reserve past
the cap, and the lock is held for two statements.

A hold expires ``hold_ttl_s`` after it was taken (default 15 min, longer than any call a
deadline allows): the process that took it died before settling. When a reservation does not
fit, expired holds of the scope are deleted and their amounts released, and it is tried once
more. What such a call really cost is unknown to podium; the provider's bill is the record.

When the store cannot be reached, a reservation is refused (fail closed, the call is not made):
serving on without the shared ledger could overshoot the budget by every replica's traffic.
A settlement that cannot be written is retried three times, then logged; its hold expires.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import socket
import time
import uuid
from collections.abc import Callable
from typing import Any

from podium.budget import PeriodBudget
from podium.errors import CostCapExceeded
from podium.store.engine import insert_ignore
from podium.store.schema import budget_holds, budget_ledgers

__all__ = ["Seed", "SharedPeriodBudget", "spent_by_pool"]

_log = logging.getLogger(__name__)

Seed = Callable[[Any, float], float]
"""(connection, period start in Unix s) → USD already spent this period, for a scope's first
row (e.g. a key's usage recorded before the shared ledger existed)."""


@functools.cache
def _statements() -> dict[str, Any]:
    """The ledger's statements, built once (values are bound per call): a reservation and a
    settlement are the hot path — a transaction before and after every worker call."""
    from sqlalchemy import bindparam, case, delete, insert, update

    ledger = budget_ledgers.c
    start: Any = bindparam("p_start")
    new_period = ledger.period_start < start
    spent = case((new_period, 0.0), else_=ledger.spent_usd)  # a new period starts at 0
    period = case((new_period, start), else_=ledger.period_start)
    amount: Any = bindparam("p_amount")
    return {
        "reserve": update(budget_ledgers)
        .where(ledger.scope == bindparam("p_scope"), spent + ledger.reserved_usd + amount <= bindparam("p_cap"))
        .values(spent_usd=spent, period_start=period, reserved_usd=ledger.reserved_usd + amount)
        .returning(ledger.spent_usd, ledger.reserved_usd),
        "settle": update(budget_ledgers)
        .where(ledger.scope == bindparam("p_scope"))
        .values(
            spent_usd=spent + bindparam("p_actual"),
            period_start=period,
            reserved_usd=_case_floor(ledger.reserved_usd - bindparam("p_released")),
        )
        .returning(ledger.spent_usd, ledger.reserved_usd),
        "insert_hold": insert(budget_holds),
        "delete_hold": delete(budget_holds)
        .where(budget_holds.c.id == bindparam("p_id"))
        .returning(budget_holds.c.amount_usd),
    }


def spent_by_pool(pool: str) -> Seed:
    """A pool ledger's seed: what the stored traces of ``pool`` (PostgreSQL trace tables) cost
    since the period's start."""

    def seed(connection: Any, start: float) -> float:
        from datetime import UTC, datetime

        from sqlalchemy import func, select

        from podium.store.schema import requests

        since = datetime.fromtimestamp(start, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        total = func.coalesce(func.sum(requests.c.total_cost_usd), 0.0)
        return float(
            connection.scalar(select(total).where(requests.c.pool == pool, requests.c.started_at >= since)) or 0.0
        )

    return seed


def _case_floor(value: Any) -> Any:
    """``value`` clamped at 0 (float rounding of many reserve/release pairs)."""
    from sqlalchemy import case

    return case((value < 0.0, 0.0), else_=value)


_SLACK = 1e-12  # float rounding of summed costs


class SharedPeriodBudget(PeriodBudget):
    """A cost cap per period held in the store's database.

    Args:
        engine: the store's SQLAlchemy engine (:func:`podium.store.engine.open_store`).
        cap_usd: USD per period.
        period_s: the period, seconds; periods are aligned to the epoch (UTC).
        scope: the ledger's name, shared by every process that draws on it (e.g. ``key:team-a/day``).
        hold_ttl_s: seconds after which an unsettled hold stops counting.
        seed: what the scope had spent before its first row (see :data:`Seed`).
        clock: wall clock, Unix seconds (tests pass a fake).

    ``spent_usd`` and ``reserved_usd`` are this process's last view of the ledger (refreshed by
    every reservation and settlement and by :meth:`refresh`), not the authority; so is
    :meth:`exhausted`, serve's pre-check before planning, which therefore reads no database on
    the event loop (a key another replica spent is refused at its first reservation instead).
    """

    shared = True

    def __init__(
        self,
        engine: Any,
        cap_usd: float,
        *,
        period_s: float = 86_400,
        scope: str,
        hold_ttl_s: float = 900.0,
        seed: Seed | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(cap_usd, period_s=period_s, scope=scope, clock=clock)
        self.engine = engine
        self.hold_ttl_s = hold_ttl_s
        self.seed = seed
        self.holder = f"{socket.gethostname()}:{os.getpid()}"

    def _now(self) -> tuple[float, float]:
        now = self.clock()
        return now, math.floor(now / self.period_s) * self.period_s

    def _ensure(self, connection: Any, start: float) -> None:
        """Create the scope's row (seeded, see :data:`Seed`) if it has none yet."""
        initial = self.seed(connection, start) if self.seed is not None else 0.0
        row = {"scope": self.scope, "period_start": start, "spent_usd": initial, "reserved_usd": 0.0}
        insert_ignore(connection, budget_ledgers, row)

    @property
    def _cap(self) -> float:
        return self.cap_usd if self.cap_usd is not None else math.inf

    def _reserve(self, connection: Any, amount_usd: float, start: float) -> Any:
        """The conditional update: the row after it, or None when the amount does not fit."""
        values = {"p_scope": self.scope, "p_amount": amount_usd, "p_start": start, "p_cap": self._cap + _SLACK}
        return connection.execute(_statements()["reserve"], values).first()

    def _release_expired(self, connection: Any, now: float) -> float:
        """Delete the scope's expired holds and release their amounts; returns the USD released."""
        from sqlalchemy import delete, update

        amounts = connection.execute(
            delete(budget_holds)
            .where(budget_holds.c.scope == self.scope, budget_holds.c.expires <= now)
            .returning(budget_holds.c.amount_usd)
        ).all()
        released = sum(float(a[0]) for a in amounts)
        if released:
            ledger = budget_ledgers.c
            connection.execute(
                update(budget_ledgers)
                .where(ledger.scope == self.scope)
                .values(reserved_usd=_case_floor(ledger.reserved_usd - released))
            )
        return released

    def _state(self, connection: Any, start: float, *, create: bool = False) -> tuple[float, float]:
        """(settled this period, reserved) as the row says (``create``: seeding it if missing)."""
        from sqlalchemy import select

        if create:
            self._ensure(connection, start)
        row = connection.execute(
            select(budget_ledgers.c.period_start, budget_ledgers.c.spent_usd, budget_ledgers.c.reserved_usd).where(
                budget_ledgers.c.scope == self.scope
            )
        ).first()
        if row is None:
            return 0.0, 0.0
        return (0.0 if row[0] < start else float(row[1])), float(row[2])

    def hold(self, amount_usd: float) -> object:
        """Reserve ``amount_usd`` (USD) in one transaction; returns the hold's id.

        Raises CostCapExceeded (scope: this ledger's) when settled cost + reserved + the amount
        exceed the cap, or when the database cannot be reached (fail closed).
        """
        from sqlalchemy.exc import SQLAlchemyError

        now, start = self._now()
        token = uuid.uuid4().hex
        try:
            with self.engine.begin() as connection:
                row = self._reserve(connection, amount_usd, start)
                if row is None:  # no row yet, or no room: create it / free what dead processes held
                    self._ensure(connection, start)
                    self._release_expired(connection, now)
                    row = self._reserve(connection, amount_usd, start)
                if row is None:
                    spent, reserved = self._state(connection, start)
                    self.period_start, self.spent_usd, self.reserved_usd = start, spent, reserved
                    raise self.no_room(amount_usd, (self.cap_usd or 0.0) - spent - reserved)
                hold = {"id": token, "scope": self.scope, "amount_usd": amount_usd, "created": now}
                connection.execute(_statements()["insert_hold"], {**hold, "expires": now + self.hold_ttl_s,
                                                                  "holder": self.holder})  # fmt: skip
        except SQLAlchemyError as exc:
            raise CostCapExceeded(
                f"the {self.scope} budget's database cannot be reached ({type(exc).__name__}); the call is "
                "refused rather than risk overshooting the budget",
                needed_usd=amount_usd,
                remaining_usd=0.0,
                scope=self.scope,
            ) from None
        self.period_start, self.spent_usd, self.reserved_usd = start, float(row[0]), float(row[1])
        return token

    def settle_hold(self, token: object, actual_usd: float) -> None:
        """Replace hold ``token`` by the real cost ``actual_usd`` (USD), in the current period;
        with ``token`` None, add a cost nothing held (a conductor's own), creating the row if the
        scope has none yet."""
        from sqlalchemy.exc import SQLAlchemyError

        statements = _statements()
        for attempt in range(3):
            _, start = self._now()
            try:
                with self.engine.begin() as connection:
                    if token is None:
                        self._ensure(connection, start)
                        held = None
                    else:
                        held = connection.execute(statements["delete_hold"], {"p_id": token}).first()
                    released = float(held[0]) if held is not None else 0.0  # None: expired and released already
                    values = {"p_scope": self.scope, "p_start": start, "p_actual": actual_usd, "p_released": released}
                    row = connection.execute(statements["settle"], values).first()
                if row is not None:
                    self.period_start, self.spent_usd, self.reserved_usd = start, float(row[0]), float(row[1])
                return
            except SQLAlchemyError as exc:
                if attempt == 2:
                    _log.error(
                        "could not settle $%.6f on the %s budget (%s); its hold expires in %.0f s",
                        actual_usd,
                        self.scope,
                        type(exc).__name__,
                        self.hold_ttl_s,
                    )
                    return
                time.sleep(0.05 * (attempt + 1))

    def refresh(self) -> None:
        """Read this period's settled cost and the reserved cost from the database into
        ``spent_usd`` / ``reserved_usd``. Raises SQLAlchemyError when it is unreachable."""
        _, start = self._now()
        with self.engine.begin() as connection:
            spent, reserved = self._state(connection, start, create=True)
        self.period_start, self.spent_usd, self.reserved_usd = start, spent, reserved

    def exhausted(self) -> bool:
        """Whether this process's last view of the period (see the class doc) has reached the
        cap; reads no database."""
        self._roll()
        return self.cap_usd is not None and self.spent_usd >= self.cap_usd - _SLACK
