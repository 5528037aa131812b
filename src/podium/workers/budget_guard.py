"""The budget guard: the wrapper that holds a request's deadline and cost cap on every call.

:class:`BudgetGuard` is innermost among the resilience wrappers (:func:`podium.workers.stack.stack`),
so each attempt of a retried call is checked, reserved and settled on its own. The orchestrator
applies :func:`budget_guarded` to every pool worker, and the LM conductor to its own model, so
caps hold whether or not a worker was stacked. The ledger itself — reservations, settlement,
period budgets — is :mod:`podium.budget`.
"""

from __future__ import annotations

import asyncio

from podium.budget import CallTicket, RequestBudget, Reservation, checked_cost, prompt_token_bound, worst_case_cost
from podium.errors import ClientError, InvalidCost, TransportError, WorkerTimeout, WorkerUnavailable
from podium.workers.base import Call, Completion, CountsTokens, Message, PricedPerCall, Worker
from podium.workers.wrapper import WorkerWrapper, unwrap

__all__ = ["BudgetGuard", "budget_guarded"]

_CLOCK_SLACK_S = 0.05
"""How close to the deadline a backend's own timeout counts as the deadline's: an event loop's
cached clock (uvloop's) and the backend's read of the time differ by a few milliseconds."""


def budget_guarded(worker: Worker) -> Worker:
    """``worker`` itself when a :class:`BudgetGuard` is among its wrappers, else the worker in
    one: the orchestrator (and the LM conductor for its model) applies this, so request caps and
    period budgets hold for any pool, stacked by :func:`podium.workers.stack.stack` or not."""
    inner: Worker = worker
    while isinstance(inner, WorkerWrapper):
        if isinstance(inner, BudgetGuard):
            return worker
        inner = inner.inner
    return BudgetGuard(worker)


class BudgetGuard(WorkerWrapper):
    """Enforces the budget of the request a call belongs to (``call.context.budget``).

    Before the call: the deadline is checked and the call's worst-case cost is reserved (exact
    prompt tokens when the worker can count them, else a byte bound); a reservation that does
    not fit raises CostCapExceeded and nothing is sent. The whole guarded call — counting the
    prompt's tokens (which may load a model), reserving, and the call itself — is cancelled at
    the step timeout or the request deadline (WorkerTimeout / DeadlineExceeded); cut off
    before its reservation was made, nothing is reserved. After: the
    reservation is settled to the real cost — or kept in full when a failed call may still
    have been billed (cut off after it was sent: timeouts, cancellation, 5xx), released when
    nothing was sent (connection refused, 4xx, cancelled while queued); all through
    :meth:`~podium.budget.RequestBudget.settle`. A call that cost more than its reservation is a
    :class:`~podium.budget.BudgetIncident` (see :mod:`podium.budget`). A reported cost that is
    not a finite number of 0 or more is the call's error (:class:`~podium.errors.InvalidCost`,
    not retried; the worst case is kept, as the call was answered).
    """

    async def complete(self, call: Call) -> Completion:
        budget, name, tally = call.context.budget, self.info.name, call.context.tally
        if budget is None or self.info.budgeted:  # e.g. a nested conductor: its own calls reserve
            if budget is not None:
                budget.check_deadline()
            result = await super().complete(call)
            cost = checked_cost(result.cost_usd, name)
            if tally is not None:  # settled by the nested request's own guards
                tally.settled_usd += cost
            return result
        budget.check_deadline()
        timeout, by_deadline = budget.call_timeout_s(), budget.deadline_binds()
        ticket = CallTicket()
        reservation: Reservation | None = None

        def settle(amount: float) -> None:
            if reservation is not None:
                budget.settle(reservation, amount, by=name, tally=tally)

        try:
            async with asyncio.timeout(timeout):  # the token count and the reservation too
                reservation = await _reserve(budget, await self._worst_case(call))
                result = await super().complete(call.with_context(ticket=ticket, tally=None))
        except (TimeoutError, WorkerTimeout) as exc:  # ours, or the backend's own cut at the same limit
            settle(reservation.amount_usd if reservation is not None and ticket.sent else 0.0)
            remaining = budget.remaining_s()
            if isinstance(exc, WorkerTimeout):  # the backend's own limit (its timeout_s), unless the
                if by_deadline and remaining is not None and remaining <= _CLOCK_SLACK_S:  # deadline's
                    raise budget.deadline_exceeded() from None
                raise
            if by_deadline:  # our limit was what was left of the deadline: the deadline cut it off
                raise budget.deadline_exceeded() from None
            raise WorkerTimeout(f"worker {name!r} took longer than {timeout:.1f} s", worker=name) from None
        except (TransportError, ClientError, WorkerUnavailable):
            settle(0.0)
            raise
        except BaseException:  # cancelled, a 5xx, a bug: billed only if it was sent
            settle(reservation.amount_usd if reservation is not None and ticket.sent else 0.0)
            raise
        assert reservation is not None
        try:
            cost = checked_cost(result.cost_usd, name)
        except InvalidCost:  # answered, so it may have been billed: keep the worst case
            settle(reservation.amount_usd)
            raise
        # usage not reported: the real cost is unknown; keep the worst case so caps still hold
        amount = cost if result.usage_reported else reservation.amount_usd
        if budget.shared:  # a database transaction: off the event loop (it completes even if cancelled)
            await asyncio.shield(asyncio.to_thread(settle, amount))
        else:
            settle(amount)
        return result

    _kinds_of: tuple[Worker, PricedPerCall | None, CountsTokens | None] | None = None

    def _kinds(self) -> tuple[PricedPerCall | None, CountsTokens | None]:
        """The innermost worker if it is priced per call, and ``inner`` if it counts tokens;
        checked once per inner worker (a runtime protocol check costs about 14 µs, on every call)."""
        kinds = self._kinds_of
        if kinds is None or kinds[0] is not self.inner:
            raw = unwrap(self.inner)
            kinds = self._kinds_of = (
                self.inner,
                raw if isinstance(raw, PricedPerCall) else None,
                self.inner if isinstance(self.inner, CountsTokens) else None,
            )
        return kinds[1], kinds[2]

    async def _worst_case(self, call: Call) -> float:
        """The most ``call`` can cost, USD: a per-call price (replay), else the exact prompt
        tokens when the worker can count them, else a byte bound — plus ``max_tokens`` of
        output."""
        settings, prefix = call.settings_for(self), call.prefix or ""
        priced, counter = self._kinds()
        if priced is not None:
            return float(priced.worst_case_usd(call))
        price = self.info.price
        if counter is not None:  # may load a model: keep it off the event loop
            prompt = await asyncio.to_thread(counter.count_tokens, call.messages, prefix)
        else:
            prompt = prompt_token_bound([*call.messages, _as_message(prefix)])
        return worst_case_cost(price, prompt, settings.max_tokens)


async def _reserve(budget: RequestBudget, amount: float) -> Reservation:
    """``budget.reserve(amount)``; with a shared (database) ledger in a thread, so the event loop
    serves other requests meanwhile. A caller cancelled while it runs never gets the reservation,
    so it is released as soon as it lands."""
    if not budget.shared:
        return budget.reserve(amount)
    task = asyncio.ensure_future(asyncio.to_thread(budget.reserve, amount))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:

        def release(done: asyncio.Future[Reservation]) -> None:
            if not done.cancelled() and done.exception() is None:
                done.result().settle(0.0)

        task.add_done_callback(release)
        raise


def _as_message(prefix: str) -> Message:
    return {"role": "assistant", "content": prefix}
