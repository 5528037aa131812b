"""Budgets: a request's deadline and cost cap, and period budgets shared by a pool.

Cost is **reserved** before a call at its worst case — prompt tokens × input price + max_tokens ×
output price (docs/design.md, "Execution") — and **settled** to the real cost after it. A reservation that does
not fit is refused with :class:`~podium.errors.CostCapExceeded` and the call is not made. All
ledgers of a reservation (the request's and each period budget) are checked and charged under
one lock, so caps hold with any number of concurrent requests, as long as a call never costs more
than its worst case (which the token bound below guarantees for byte-level BPE tokenizers).

**Every path releases**: a call that succeeds settles at its real cost; a call that fails before
anything was sent (refused connection, 4xx, a circuit open, cancelled while queued for a local
model) settles at 0; a call cut off after it was sent (timeout, cancellation, 5xx) keeps its worst
case, since the provider may bill it. Backends say when a call leaves with :func:`mark_sent`.

**Overshoot** (a provider reporting more tokens than the worst case allowed: more completion
tokens than ``max_tokens``, more prompt tokens than the byte bound) is settled at the real cost —
the money is spent — and recorded as a :class:`BudgetIncident` naming the worker; the request then
makes no further call (its later reservations are refused), and a period budget pushed over its
cap refuses every call until its next period. So a misreporting provider can overshoot a cap by at
most its own calls already in flight.

**A conductor's own cost** — what a plan attempt reports beyond the calls its budget guard
already settled (a conductor that calls models podium does not see, or prices itself) — cannot
be reserved beforehand: it is settled as it is incurred, after each attempt, on the request
ledger and every period budget alike. A cost over what a capped ledger had left is an overshoot
naming the conductor, as for a worker.

**Costs are checked where they enter** (:func:`checked_cost`): a worker's or conductor's cost
that is not a finite number of 0 or more is refused (:class:`~podium.errors.InvalidCost`, the
call's error), so ledgers and traces only ever hold real amounts. :meth:`RequestBudget.settle` is
the one place a request's costs reach its ledgers.

**Shared period budgets** (:class:`PeriodBudget` subclasses with ``shared = True``, e.g. a
key's budget in ``podium.store.ledger``) keep their ledger in a database so several processes
draw on one cap: each reserves with its own :meth:`PeriodBudget.hold` transaction after the
in-process ledgers took their share, and is settled with :meth:`PeriodBudget.settle_hold`; a
refusal by one releases what the others took.

A request's budget travels with each of its calls (``Call.context.budget``,
:class:`podium.workers.base.CallContext`), so the budget guard wrapping each worker
(:class:`podium.workers.budget_guard.BudgetGuard`) sees it without any hidden state.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from podium.errors import ConfigError, CostCapExceeded, DeadlineExceeded, InvalidCost
from podium.records import BudgetIncident
from podium.unicode import utf8_length
from podium.workers.base import Message, Price

__all__ = [
    "BudgetIncident",
    "CallTicket",
    "CostLedger",
    "CostTally",
    "Limits",
    "PeriodBudget",
    "RequestBudget",
    "Reservation",
    "checked_cost",
    "prompt_token_bound",
    "usd",
    "worst_case_cost",
]

_LOCK = threading.Lock()  # one lock for every ledger: multi-ledger reservations are atomic
_log = logging.getLogger("podium")


def checked_cost(cost_usd: object, name: str, role: str = "worker") -> float:
    """A cost that worker (or conductor) ``name`` reported, USD, as podium accepts it: a finite
    number of 0 or more. Raises InvalidCost naming it for anything else — NaN, ±inf, a negative
    amount, not a number — so such a cost never reaches a trace or a ledger."""
    if isinstance(cost_usd, bool) or not isinstance(cost_usd, int | float) or not 0 <= cost_usd < math.inf:
        raise InvalidCost(
            f"{role} {name!r} reported a cost of {cost_usd!r} USD, which cannot be true (a cost is a finite "
            "number of 0 or more: a bug in its backend or price table); its result is not used",
            worker=name,
        )
    return float(cost_usd)


@dataclass(frozen=True)
class Limits:
    """Per-request limits (None = unlimited).

    Attributes:
        deadline_s: the request's latency budget, seconds, for everything (conductor, steps,
            retries, fallback).
        step_timeout_s: the most one worker call may take, seconds.
        cost_cap_usd: the most the request may cost, USD, conductor included.
        fallback_reserve: share of ``deadline_s`` kept back from the workflow so the fallback
            pipeline can still answer when the workflow runs out of time (0..0.9).
    """

    deadline_s: float | None = None
    step_timeout_s: float | None = None
    cost_cap_usd: float | None = None
    fallback_reserve: float = 0.25

    def __post_init__(self) -> None:
        for name in ("deadline_s", "step_timeout_s", "cost_cap_usd"):
            value = getattr(self, name)
            if value is not None and (not math.isfinite(value) or value <= 0):
                raise ConfigError(f"{name} must be a positive number, got {value!r}")
        if not 0 <= self.fallback_reserve <= 0.9:
            raise ConfigError(f"fallback_reserve must be within 0..0.9, got {self.fallback_reserve!r}")

    def overridden(self, *, deadline_s: float | None = None, cost_cap_usd: float | None = None) -> Limits:
        """These limits with the operator's overrides (``podium run --deadline/--cost-cap``, a
        serving preset's own limits): each value given replaces this one, looser or not; None
        keeps it. Raises ConfigError for a value that is not a positive number."""
        return replace(
            self,
            deadline_s=self.deadline_s if deadline_s is None else deadline_s,
            cost_cap_usd=self.cost_cap_usd if cost_cap_usd is None else cost_cap_usd,
        )

    def tightened(self, *, deadline_s: float | None = None, cost_cap_usd: float | None = None) -> Limits:
        """These limits under a client's own (a request's ``deadline_s``/``cost_cap_usd``): each
        value given applies only where it is lower, so a client can never loosen what the
        operator set (None here or there = unlimited). Raises ConfigError as :meth:`overridden`."""

        def lower(limit: float | None, asked: float | None) -> float | None:
            return limit if asked is None else asked if limit is None else min(limit, asked)

        return replace(
            self, deadline_s=lower(self.deadline_s, deadline_s), cost_cap_usd=lower(self.cost_cap_usd, cost_cap_usd)
        )


def usd(amount: float) -> str:
    """A dollar amount for a message: ``$0.000123``; under half a millionth, ``$2e-09``."""
    return f"${amount:.6f}" if amount == 0 or abs(amount) >= 5e-7 else f"${amount:.2g}"


class CostLedger:
    """Reserve-then-settle accounting against a cap, USD.

    Attributes:
        cap_usd: the cap (None = unlimited); scope: a name for errors and traces.
        spent_usd: settled cost; reserved_usd: cost reserved by calls in flight.
        shared: False for ledgers held in this process (under one lock); True for a ledger
            kept in a database that reserves and settles through :meth:`PeriodBudget.hold`.
    """

    shared = False

    def __init__(self, cap_usd: float | None, scope: str) -> None:
        self.cap_usd = cap_usd
        self.scope = scope
        self.spent_usd = 0.0
        self.reserved_usd = 0.0

    def _roll(self) -> None:
        """Hook for period budgets to start a new period."""

    def no_room(self, amount_usd: float, remaining_usd: float) -> CostCapExceeded:
        """The refusal of a call needing up to ``amount_usd`` when ``remaining_usd`` is left."""
        held = f"; {usd(self.reserved_usd)} more is held by calls in flight" if self.reserved_usd > 1e-9 else ""
        left = f"{usd(max(remaining_usd, 0.0))} of {usd(self.cap_usd or 0)} left{held}"
        what = (  # nothing to fit: the check before planning, on a budget already past its cap
            f"the {self.scope} budget is used up ({left})"
            if amount_usd <= 0
            else f"a call needing up to {usd(amount_usd)} (its worst case: the prompt and max_tokens) does not fit "
            f"the {self.scope} budget ({left})"
        )
        if self.never_fits(amount_usd):
            what += f"; it never will: raise the budget above {usd(amount_usd)}, one call's worst case"
        return CostCapExceeded(
            what,
            needed_usd=amount_usd,
            remaining_usd=max(remaining_usd, 0.0),
            scope=self.scope,
        )

    def never_fits(self, amount_usd: float) -> bool:
        """Whether a call needing up to ``amount_usd`` exceeds the whole cap: no wait helps."""
        return self.cap_usd is not None and amount_usd > self.cap_usd

    def _remaining(self) -> float:
        self._roll()
        if self.cap_usd is None:
            return math.inf
        return self.cap_usd - self.spent_usd - self.reserved_usd


class PeriodBudget(CostLedger):
    """A cost cap per period (e.g. per UTC day) shared by every request on a pool.

    Args:
        cap_usd: USD per period.
        period_s: the period, seconds (86400 = a UTC day); periods are aligned to the epoch.
        scope: a name, e.g. ``"pool:local/day"``.
        clock: wall clock in seconds (tests pass a fake).
    """

    def __init__(
        self, cap_usd: float, *, period_s: float = 86_400, scope: str = "period", clock: Callable[[], float] = time.time
    ) -> None:
        super().__init__(cap_usd, scope)
        self.period_s = period_s
        self.clock = clock
        self.period_start = self._start()

    def _start(self) -> float:
        return math.floor(self.clock() / self.period_s) * self.period_s

    def _roll(self) -> None:
        start = self._start()
        if start != self.period_start:
            self.period_start, self.spent_usd = start, 0.0  # in-flight reservations carry over

    def refresh(self) -> None:
        """Bring ``spent_usd`` / ``reserved_usd`` up to date (a shared ledger reads its database)."""
        self._roll()

    def until_next_period_s(self) -> float:
        """Seconds until the next period starts (the budget then has its whole cap again)."""
        now = self.clock()
        return (math.floor(now / self.period_s) + 1) * self.period_s - now

    def no_room(self, amount_usd: float, remaining_usd: float) -> CostCapExceeded:
        refusal = super().no_room(amount_usd, remaining_usd)
        if not self.never_fits(amount_usd):  # a new period cannot help a call larger than the cap
            refusal.retry_after_s = self.until_next_period_s()
        return refusal

    def exhausted(self) -> bool:
        """Whether this period's settled cost has reached the cap (serve then answers 429
        before planning)."""
        self._roll()
        return self.cap_usd is not None and self.spent_usd >= self.cap_usd

    def hold(self, amount_usd: float) -> object:
        """Shared ledgers: reserve ``amount_usd`` in one transaction and return a token for
        :meth:`settle_hold`. Raises CostCapExceeded (scope: this ledger's) when it does not
        fit, or when the ledger's store cannot be reached (fail closed)."""
        raise NotImplementedError(f"{type(self).__name__} is not a shared ledger")

    def settle_hold(self, token: object, actual_usd: float) -> None:
        """Shared ledgers: replace the hold ``token`` by the real cost (USD); with ``token`` None,
        add a cost nothing held (a conductor's own)."""
        raise NotImplementedError(f"{type(self).__name__} is not a shared ledger")


class Reservation:
    """Cost held on one or more ledgers for a call in flight; settle it exactly once.

    Args:
        ledgers: the in-process ledgers holding ``amount_usd``.
        amount_usd: the amount held, USD.
        holds: (shared ledger, its hold token) pairs, settled through the ledger.
    """

    def __init__(
        self,
        ledgers: Sequence[CostLedger],
        amount_usd: float,
        holds: Sequence[tuple[PeriodBudget, object]] = (),
    ) -> None:
        self.ledgers = tuple(ledgers)
        self.amount_usd = amount_usd
        self.holds = tuple(holds)
        self._open = True

    def settle(self, actual_usd: float) -> None:
        """Replace the reservation by the real cost (USD). A second call does nothing."""
        with _LOCK:
            if not self._open:
                return
            self._open = False
            for ledger in self.ledgers:
                ledger.reserved_usd -= self.amount_usd
                ledger.spent_usd += actual_usd
        for shared, token in self.holds:
            shared.settle_hold(token, actual_usd)


@dataclass(eq=False)
class CallTicket:
    """One worker call's state for the budget guard: whether the request has left.

    ``sent`` starts True (a backend that says nothing may have billed a call it did not finish).
    The budget guard opens one per call (``Call.context.ticket``); backends that know better
    call ``context.mark_pending()`` when a call starts and ``context.mark_sent()`` right before
    the request goes out (HTTP) or the model starts on it (in-process, after its queue), so a
    call cancelled before that releases its reservation."""

    sent: bool = True


@dataclass(eq=False)
class CostTally:
    """What the budget guard settled for the calls of one conductor attempt, USD
    (``CallContext.tally``): the orchestrator settles only the rest of the attempt's reported
    cost, so a conductor whose calls go through a guard is counted once."""

    settled_usd: float = 0.0


class RequestBudget:
    """One request's limits in force: its deadline (monotonic clock) and its cost ledger.

    Args:
        limits: the request's limits.
        periods: period budgets that also pay for this request's calls.
        clock: monotonic clock, seconds (tests pass a fake).
    """

    def __init__(
        self,
        limits: Limits | None = None,
        periods: Sequence[PeriodBudget] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limits = limits or Limits()
        self.clock = clock
        self.started = clock()
        self.deadline = None if self.limits.deadline_s is None else self.started + self.limits.deadline_s
        self.ledger = CostLedger(self.limits.cost_cap_usd, "request")
        self.periods = tuple(periods)
        self.incidents: list[BudgetIncident] = []
        """Calls of this request that cost more than their reservation."""

    @property
    def shared(self) -> bool:
        """Whether a period budget of this request is kept in a database (its reservations and
        settlements are transactions: callers on an event loop run them in a thread)."""
        return any(period.shared for period in self.periods)

    def overshoot(self, incident: BudgetIncident) -> None:
        """Record a call that cost more than reserved; under any cap, the request then makes no
        further call."""
        with _LOCK:
            self.incidents.append(incident)

    def remaining_s(self) -> float | None:
        """Seconds left before the deadline (may be negative), or None without a deadline."""
        return None if self.deadline is None else self.deadline - self.clock()

    def workflow_deadline(self) -> float | None:
        """The monotonic time the workflow must end by, leaving the fallback its reserve."""
        if self.deadline is None or self.limits.deadline_s is None:
            return None
        return self.deadline - self.limits.deadline_s * self.limits.fallback_reserve

    def call_timeout_s(self) -> float | None:
        """How long the next worker call may take: the step timeout or what is left."""
        options = [t for t in (self.limits.step_timeout_s, self.remaining_s()) if t is not None]
        return min(options) if options else None

    def deadline_binds(self) -> bool:
        """Whether the next call's time limit (:meth:`call_timeout_s`) is what is left of the
        deadline rather than the step timeout: a call cut off then was cut off by the deadline.
        (Asked instead of comparing clocks after the cut: an event loop's cached time, e.g.
        uvloop's, can fire a timer a little before the monotonic clock reaches it.)"""
        remaining = self.remaining_s()
        step = self.limits.step_timeout_s
        return remaining is not None and self.limits.deadline_s is not None and (step is None or remaining <= step)

    def deadline_exceeded(self) -> DeadlineExceeded:
        """The error of a request whose deadline has passed (``deadline_s`` is set)."""
        deadline_s = self.limits.deadline_s or 0.0
        return DeadlineExceeded(f"the request's deadline of {deadline_s:g} s has passed", deadline_s=deadline_s)

    def check_deadline(self) -> None:
        """Raises DeadlineExceeded when the deadline has passed."""
        remaining = self.remaining_s()
        if remaining is not None and remaining <= 0 and self.limits.deadline_s is not None:
            raise self.deadline_exceeded()

    def reserve(self, amount_usd: float) -> Reservation:
        """Hold ``amount_usd`` on the request ledger and every period budget, or none of them.

        Raises CostCapExceeded naming the ledger that cannot fit it.
        """
        ledgers = (self.ledger, *self.periods)
        local = tuple(ledger for ledger in ledgers if not ledger.shared)
        with _LOCK:
            self._refuse(amount_usd, local)
            for ledger in local:
                ledger.reserved_usd += amount_usd
        holds: list[tuple[PeriodBudget, object]] = []
        try:
            for period in self.periods:
                if period.shared:
                    holds.append((period, period.hold(amount_usd)))
        except BaseException:
            Reservation(local, amount_usd, holds).settle(0.0)  # release what the others took
            raise
        return Reservation(local, amount_usd, holds)

    def _refuse(self, amount_usd: float, ledgers: Sequence[CostLedger]) -> None:
        """Raises CostCapExceeded when a call needing up to ``amount_usd`` may not be made: after
        an overshoot (under any cap), or when it does not fit one of ``ledgers``. Under _LOCK."""
        if self.incidents and any(ledger.cap_usd is not None for ledger in (self.ledger, *self.periods)):
            first = self.incidents[0]
            against = "what was left" if first.role == "conductor" else "a reservation"
            raise CostCapExceeded(
                f"the request made no further call after {first.role} {first.worker!r} cost "
                f"{usd(first.actual_usd)} against {against} of {usd(first.reserved_usd)}",
                needed_usd=amount_usd,
                remaining_usd=0.0,
                scope="request",
            )
        for ledger in ledgers:
            remaining = ledger._remaining()
            if amount_usd > remaining:
                raise ledger.no_room(amount_usd, remaining)

    def check_room(self) -> None:
        """Raises CostCapExceeded when the request may make no further call whatever it costs:
        after an overshoot, or with a ledger past its cap (a shared one: its last view, no
        database read). Checked before each plan attempt, since a conductor's own calls cannot
        be reserved."""
        with _LOCK:
            self._refuse(0.0, (self.ledger, *self.periods))

    def settle(
        self,
        reservation: Reservation | None,
        cost_usd: float,
        *,
        by: str,
        role: Literal["worker", "conductor"] = "worker",
        tally: CostTally | None = None,
    ) -> None:
        """The one place a request's costs reach its ledgers: ``reservation`` (a call's worst
        case, from :meth:`reserve`) is replaced by ``cost_usd``; with None — a conductor's own
        cost, which could not be reserved — ``cost_usd`` is added to the request ledger and every
        period budget. A cost over the reservation (with None: over what a capped ledger had
        left) is an overshoot, a :class:`BudgetIncident` naming ``by``, and the request makes no
        further call. ``tally`` (a conductor attempt's) adds what was settled.

        Raises InvalidCost, settling nothing, for a cost that is not a finite number of 0 or
        more. A database transaction when a period budget is shared: callers on an event loop
        run it in a thread."""
        cost = checked_cost(cost_usd, by, role)
        if reservation is None:
            reservation, allowed = self._nothing_reserved()
        else:
            allowed = reservation.amount_usd
        reservation.settle(cost)
        if tally is not None:
            tally.settled_usd += cost
        if cost > max(allowed, 0.0) * (1 + 1e-9) + 1e-12:
            self.overshoot(BudgetIncident(by, max(allowed, 0.0), cost, role))
            _log.warning(
                "budget incident: %s %r cost $%.6f against %s of $%.6f; the request makes no further call",
                role,
                by,
                cost,
                "what the budget had left" if role == "conductor" else "a reservation",
                max(allowed, 0.0),
            )

    def settle_plan(self, cost_usd: float, tally: CostTally, *, by: str) -> None:
        """Settle a plan attempt's cost: what conductor ``by`` reported (``cost_usd``) beyond
        what its calls' budget guards settled already (``tally``), as the conductor's own cost.
        Raises InvalidCost, settling nothing, when the reported cost is not a finite number of 0
        or more; a database transaction as :meth:`settle`."""
        cost = checked_cost(cost_usd, by, "conductor")
        if cost > tally.settled_usd:
            self.settle(None, cost - tally.settled_usd, by=by, role="conductor", tally=tally)

    def _nothing_reserved(self) -> tuple[Reservation, float]:
        """A reservation of nothing on every ledger, to settle a cost no call reserved, and the
        least room a capped ledger has left (ledgers already past their cap are not counted:
        this cost did not put them there; inf when there is none)."""
        ledgers = (self.ledger, *self.periods)
        with _LOCK:
            rooms = [ledger._remaining() for ledger in ledgers if ledger.cap_usd is not None]
        local = tuple(ledger for ledger in ledgers if not ledger.shared)
        holds = tuple((period, None) for period in self.periods if period.shared)
        return Reservation(local, 0.0, holds), min((r for r in rooms if r >= -1e-12), default=math.inf)


_TEMPLATE_TOKENS_PER_MESSAGE = 16
"""Upper bound on chat-template tokens around one message (role markers, separators)."""


def prompt_token_bound(messages: Sequence[Message]) -> int:
    """An upper bound on the prompt tokens of ``messages`` for byte-level BPE tokenizers: no
    token is shorter than one UTF-8 byte, plus the chat template's markers. Never raises: a
    lone surrogate counts the 3 bytes of the U+FFFD it becomes (:func:`podium.unicode.utf8_length`)."""
    return sum(utf8_length(m["content"]) + _TEMPLATE_TOKENS_PER_MESSAGE for m in messages) + 8


def worst_case_cost(price: Price, prompt_tokens: int, max_tokens: int) -> float:
    """USD of a call at its worst: every prompt token uncached, every output token used."""
    return (prompt_tokens * price.input + max_tokens * price.output) / 1_000_000
