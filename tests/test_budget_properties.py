"""Property tests of the budget ledger (hypothesis): whatever mix of calls — answered, over-
reporting, refused by the network, failing after being sent, cancelled while queued or while
running, timed out — runs concurrently against a request cap and a shared day budget, every
reservation is released, the ledgers add up, and caps hold up to the recorded overshoots.
Fake workers (ScriptedWorker) play the providers."""

from __future__ import annotations

import asyncio
import contextlib
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from podium.budget import Limits, PeriodBudget, RequestBudget
from podium.errors import ServerError, TransportError
from podium.orchestrator import Fallback, Orchestrator, OrchestratorConfig
from podium.testing import ScriptedConductor, ScriptedWorker
from podium.workers.base import Call, Completion, Price, Usage, WorkerSettings

BEHAVIOURS = ("ok", "overshoot", "refused", "server_error", "queued", "slow")


class _Provider(ScriptedWorker):
    """Each call does what the next behaviour in its script says."""

    def __init__(self, name: str, script: list[str], owed: list[float]) -> None:
        settings = WorkerSettings(max_tokens=50)
        super().__init__(name, reply="the answer is 4", price=Price(input=20.0, output=60.0), settings=settings)
        self.script = script
        self.owed = owed  # what each call should cost the ledger, by its fate (the test's own accounting)

    async def complete(self, call: Call) -> Completion:
        behaviour = self.script.pop(0) if self.script else "ok"
        budget = call.context.budget
        assert budget is not None
        reserved = budget.ledger.reserved_usd  # this request's only call in flight: its reservation
        call.context.mark_pending()
        await asyncio.sleep(0.001)
        if behaviour == "refused":
            raise TransportError("connection refused", worker=self.info.name)  # nothing sent: owes 0
        if behaviour == "queued":
            await asyncio.sleep(30)  # cancelled or timed out while still queued: nothing sent
        call.context.mark_sent()
        if behaviour in ("server_error", "slow"):
            self.owed.append(reserved)  # sent, then failed or cut off: may have been billed in full
        if behaviour == "server_error":
            raise ServerError("HTTP 503", worker=self.info.name, status=503)
        if behaviour == "slow":
            await asyncio.sleep(30)
        out = 50 * 4 if behaviour == "overshoot" else 20
        usage = Usage(100, out)
        self.owed.append(self.info.price.cost(usage))
        return Completion("the answer is 4", usage, self.info.price.cost(usage), 0.001)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(BEHAVIOURS), min_size=1, max_size=4), min_size=1, max_size=12),
    st.lists(st.booleans(), min_size=12, max_size=12),
    st.floats(0.002, 0.05),
)
@pytest.mark.slow
def test_every_reservation_is_released_and_caps_hold_up_to_incidents(
    scripts: list[list[str]], cancel: list[bool], day_cap: float
) -> None:
    day = PeriodBudget(day_cap, scope="pool:test/day")
    owed: list[float] = []
    plan = 'model_id = [0, 0]\nsubtasks = ["a", "b"]\naccess_list = [[], [0]]'
    records = []
    cap = 0.01

    async def main() -> None:
        runs = []
        for script in scripts:
            worker = _Provider("p", list(script), owed)
            limits = Limits(cost_cap_usd=cap, step_timeout_s=0.05)
            orch = Orchestrator(
                [worker], ScriptedConductor([plan]), Fallback(0, "A."),
                config=OrchestratorConfig(limits=limits, periods=[day], resamples=0),
            )  # fmt: skip
            runs.append(asyncio.create_task(orch.run("q")))
        await asyncio.sleep(0.02)
        for task, stop in zip(runs, cancel, strict=False):
            if stop:
                task.cancel()
        for task in runs:
            with contextlib.suppress(asyncio.CancelledError):
                records.append(await task)

    asyncio.run(main())
    assert day.reserved_usd == pytest.approx(0.0, abs=1e-12)  # nothing left held
    # the ledger holds exactly what the calls owe by their fate: real cost when answered, the
    # reservation when sent and then cut off, nothing when never sent (queued, refused)
    assert day.spent_usd == pytest.approx(sum(owed), abs=1e-12)
    assert day.spent_usd >= -1e-12
    finished_cost = sum(r.totals.total_cost_usd for r in records)
    assert finished_cost <= day.spent_usd + 1e-12  # cancelled requests' kept reservations count too
    excess = sum(max(i.actual_usd - i.reserved_usd, 0.0) for r in records for i in r.totals.incidents)
    worst_call = (100 * 20.0 + 50 * 60.0) / 1e6  # a call kept at its full reservation (sent, then cut off)
    # the day budget holds up to the overshoots recorded as incidents (and, for a request cancelled
    # while a call was in flight, that one call's reservation: it may have been billed)
    assert day.spent_usd <= day.cap_usd + excess + worst_call * sum(cancel[: len(scripts)]) + 1e-12
    for r in records:
        over = sum(max(i.actual_usd - i.reserved_usd, 0.0) for i in r.totals.incidents)
        assert r.totals.total_cost_usd <= cap + over + 1e-12


class _Reporter(ScriptedWorker):
    """Each call reports the cost the next entry of its script says (an impossible one too)."""

    def __init__(self, script: list[float | None], kept: list[float]) -> None:
        super().__init__("r", reply="the answer is 4", price=Price(input=20.0, output=60.0))
        self.script = script
        self.kept = kept  # worst cases kept for answered calls whose cost was refused

    async def complete(self, call: Call) -> Completion:
        done = await super().complete(call)
        cost = self.script.pop(0) if self.script else None
        if cost is None:
            return done  # priced from its usage
        if not 0 <= cost < math.inf:
            budget = call.context.budget
            assert budget is not None
            self.kept.append(budget.ledger.reserved_usd)  # this request's only call in flight
        return Completion(done.text, done.usage, cost, done.latency_s)


_COST = st.floats(0.0, 0.03) | st.sampled_from([math.nan, math.inf, -math.inf, -1.0, -1e-12, 0.0, 5.0])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(_COST, st.lists(st.none() | _COST, max_size=4), st.integers(0, 1)),
        min_size=1,
        max_size=8,
    ),
    st.floats(0.002, 0.2),
)
def test_the_day_ledger_equals_the_traces_whatever_conductors_and_workers_report(
    requests: list[tuple[float, list[float | None], int]], day_cap: float
) -> None:
    """Conductors reporting any cost (in the cap, over it, NaN, infinite, negative) and workers
    reporting any cost, concurrently, against a request cap and a day budget: the day's ledger
    equals the sum of the trace totals (what a restarted server recounts) plus the worst cases
    kept for answered calls whose cost was refused; every total and ledger is a finite amount of
    0 or more; each request stays within its cap up to its recorded overshoots."""
    day = PeriodBudget(day_cap, scope="pool:test/day")
    plan = 'model_id = [0, 0]\nsubtasks = ["a", "b"]\naccess_list = [[], [0]]'
    kept: list[float] = []
    cap = 0.02
    budgets = [RequestBudget(Limits(cost_cap_usd=cap), [day]) for _ in requests]

    async def main() -> list:
        runs = []
        for (conductor_cost, script, rounds), budget in zip(requests, budgets, strict=True):
            conductor = ScriptedConductor([plan], cost_usd=conductor_cost)
            orch = Orchestrator(
                [_Reporter(list(script), kept)],
                conductor,
                Fallback(0, "A."),
                config=OrchestratorConfig(recursion_rounds=rounds),
            )
            runs.append(orch.run("q", budget=budget))
        return await asyncio.gather(*runs)

    records = asyncio.run(main())
    for record, budget in zip(records, budgets, strict=True):
        t = record.totals
        for value in (t.cost_usd, t.conductor_cost_usd, t.total_cost_usd, *(s.cost_usd for s in record.steps)):
            assert math.isfinite(value) and value >= 0
        assert all(math.isfinite(a.cost_usd) and a.cost_usd >= 0 for a in record.attempts)
        assert budget.ledger.reserved_usd == pytest.approx(0.0, abs=1e-12)
        over = sum(max(i.actual_usd - i.reserved_usd, 0.0) for i in t.incidents)
        assert t.total_cost_usd <= cap + over + 1e-12
    traced = sum(r.totals.total_cost_usd for r in records)
    assert math.isfinite(day.spent_usd) and day.spent_usd >= 0 and day.reserved_usd == pytest.approx(0.0, abs=1e-12)
    assert day.spent_usd == pytest.approx(traced + sum(kept), rel=1e-9, abs=1e-12)
    if not kept:
        assert day.spent_usd == pytest.approx(traced, rel=1e-9, abs=1e-12)  # the ledger is the traces
    excess = sum(max(i.actual_usd - i.reserved_usd, 0.0) for r in records for i in r.totals.incidents)
    assert day.spent_usd <= day_cap + excess + 1e-9


_LIMIT = st.none() | st.floats(min_value=0.01, max_value=1e4)


@settings(max_examples=200, deadline=None)
@given(deadline=_LIMIT, cap=_LIMIT, asked_deadline=_LIMIT, asked_cap=_LIMIT)
def test_a_clients_limits_only_tighten_and_an_operators_replace(
    deadline: float | None, cap: float | None, asked_deadline: float | None, asked_cap: float | None
) -> None:
    """The one place limits are merged (``Limits.tightened``/``overridden``): a client's value
    never loosens the operator's (None = unlimited is the loosest), and is the result wherever it
    is tighter; an operator's override is taken as given. The other fields never change."""

    def looser(a: float | None, b: float | None) -> bool:  # a is looser than b
        return b is not None and (a is None or a > b)

    base = Limits(deadline, 3.0, cap, 0.3)
    t = base.tightened(deadline_s=asked_deadline, cost_cap_usd=asked_cap)
    for got, operator, asked in ((t.deadline_s, deadline, asked_deadline), (t.cost_cap_usd, cap, asked_cap)):
        assert not looser(got, operator) and not looser(got, asked)
        assert got in (operator, asked)
    o = base.overridden(deadline_s=asked_deadline, cost_cap_usd=asked_cap)
    assert o.deadline_s == (deadline if asked_deadline is None else asked_deadline)
    assert o.cost_cap_usd == (cap if asked_cap is None else asked_cap)
    assert (t.step_timeout_s, t.fallback_reserve, o.step_timeout_s, o.fallback_reserve) == (3.0, 0.3, 3.0, 0.3)
