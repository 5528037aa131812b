"""Period budgets kept in the store, so every process (replica) shares one cap.

A :class:`SharedPeriodBudget` is a :class:`~podium.budget.PeriodBudget` whose ledger lives in
the tables ``budget_periods`` (settled cost per scope and period) and ``budget_holds`` (one row
per call in flight). Reserving is one transaction: lock the period's row (``SELECT … FOR
UPDATE`` on PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` locks the file), add the settled cost and
the live holds, and insert a hold only when the worst case still fits the cap. Settling is
another: delete the hold, add the real cost. So N processes together never reserve past the
cap.

A hold expires ``hold_ttl_s`` after it was taken (default 15 min, longer than any call a
deadline allows): the process that took it died before settling, and the hold stops counting.
What that call really cost is then unknown to podium — the provider's bill is the record.

Why lock-and-sum rather than a counter updated with ``WHERE spent + reserved + :cost <= :cap``:
a counter cannot forget a crashed process's reservation without a sweeper; holds with an expiry
need none, and the row lock costs one round trip more.

When the store cannot be reached, a reservation is refused (fail closed, the call is not made):
serving on without the shared ledger could overshoot the budget by every replica's traffic.
A settlement that cannot be written is retried three times, then logged; its hold expires.
"""

from __future__ import annotations

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
from podium.store.schema import budget_holds, budget_periods

__all__ = ["Seed", "SharedPeriodBudget"]

log = logging.getLogger(__name__)

Seed = Callable[[Any, float], float]
"""(connection, period start in Unix s) → USD already spent this period, for a scope's first
row (e.g. a key's usage recorded before the shared ledger existed)."""

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
    every reservation and by :meth:`refresh`), not the authority.
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

    def _spent(self, connection: Any, start: float, *, lock: bool) -> float:
        """The period's settled cost, creating its row (seeded for the scope's first) if needed."""
        from sqlalchemy import func, select

        query = select(budget_periods.c.spent_usd).where(
            budget_periods.c.scope == self.scope, budget_periods.c.period_start == start
        )
        if lock:
            query = query.with_for_update()
        spent = connection.scalar(query)
        if spent is None:
            first = not connection.scalar(
                select(func.count()).select_from(budget_periods).where(budget_periods.c.scope == self.scope)
            )
            initial = self.seed(connection, start) if first and self.seed is not None else 0.0
            row = {"scope": self.scope, "period_start": start, "spent_usd": initial}
            insert_ignore(connection, budget_periods, row)
            spent = connection.scalar(query)
        return float(spent)

    def _held(self, connection: Any, now: float) -> float:
        from sqlalchemy import func, select

        total = connection.scalar(
            select(func.coalesce(func.sum(budget_holds.c.amount_usd), 0.0)).where(
                budget_holds.c.scope == self.scope, budget_holds.c.expires > now
            )
        )
        return float(total or 0.0)

    def hold(self, amount_usd: float) -> object:
        """Reserve ``amount_usd`` (USD) in one transaction; returns the hold's id.

        Raises CostCapExceeded (scope: this ledger's) when settled cost + live holds + the
        amount exceed the cap, or when the database cannot be reached (fail closed).
        """
        from sqlalchemy import delete, insert
        from sqlalchemy.exc import SQLAlchemyError

        now, start = self._now()
        token = uuid.uuid4().hex
        try:
            with self.engine.begin() as connection:
                spent = self._spent(connection, start, lock=True)
                connection.execute(
                    delete(budget_holds).where(budget_holds.c.scope == self.scope, budget_holds.c.expires <= now)
                )
                held = self._held(connection, now)
                self.period_start, self.spent_usd, self.reserved_usd = start, spent, held
                remaining = (self.cap_usd or 0.0) - spent - held
                if amount_usd > remaining + _SLACK:
                    raise CostCapExceeded(
                        f"a call needing up to ${amount_usd:.6f} does not fit the {self.scope} budget "
                        f"(${max(remaining, 0):.6f} of ${self.cap_usd:.6f} left)",
                        needed_usd=amount_usd,
                        remaining_usd=max(remaining, 0.0),
                        scope=self.scope,
                    )
                connection.execute(
                    insert(budget_holds).values(
                        id=token,
                        scope=self.scope,
                        amount_usd=amount_usd,
                        created=now,
                        expires=now + self.hold_ttl_s,
                        holder=self.holder,
                    )
                )
        except SQLAlchemyError as exc:
            raise CostCapExceeded(
                f"the {self.scope} budget's database cannot be reached ({type(exc).__name__}); the call is "
                "refused rather than risk overshooting the budget",
                needed_usd=amount_usd,
                remaining_usd=0.0,
                scope=self.scope,
            ) from None
        self.reserved_usd += amount_usd
        return token

    def settle_hold(self, token: object, actual_usd: float) -> None:
        """Replace hold ``token`` by the real cost ``actual_usd`` (USD), in this period's row."""
        from sqlalchemy import delete, update
        from sqlalchemy.exc import SQLAlchemyError

        for attempt in range(3):
            _, start = self._now()
            try:
                with self.engine.begin() as connection:
                    connection.execute(delete(budget_holds).where(budget_holds.c.id == token))
                    spent = self._spent(connection, start, lock=True)
                    if actual_usd:
                        connection.execute(
                            update(budget_periods)
                            .where(budget_periods.c.scope == self.scope, budget_periods.c.period_start == start)
                            .values(spent_usd=budget_periods.c.spent_usd + actual_usd)
                        )
                self.period_start, self.spent_usd = start, spent + actual_usd
                return
            except SQLAlchemyError as exc:
                if attempt == 2:
                    log.error(
                        "could not settle $%.6f on the %s budget (%s); its hold expires in %.0f s",
                        actual_usd,
                        self.scope,
                        type(exc).__name__,
                        self.hold_ttl_s,
                    )
                    return
                time.sleep(0.05 * (attempt + 1))

    def refresh(self) -> None:
        """Read this period's settled cost and live holds from the database into
        ``spent_usd`` / ``reserved_usd``. Raises SQLAlchemyError when it is unreachable."""
        now, start = self._now()
        with self.engine.begin() as connection:
            self.period_start = start
            self.spent_usd = self._spent(connection, start, lock=False)
            self.reserved_usd = self._held(connection, now)

    def exhausted(self) -> bool:
        """Whether the period's settled cost has reached the cap, as the database says (False
        when it cannot be reached: the reservation then refuses, saying why)."""
        from sqlalchemy.exc import SQLAlchemyError

        try:
            self.refresh()
        except SQLAlchemyError:
            return False
        return self.cap_usd is not None and self.spent_usd >= self.cap_usd - _SLACK
