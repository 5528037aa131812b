"""Re-test 17c, break 3: a conductor's own cost counts against the request's cap and the period
budgets as it is incurred, and no impossible cost (NaN, infinite, negative) ever reaches a trace
or a ledger. Fakes (ScriptedConductor, ScriptedWorker) play the conductor and the providers; the
orchestrator, the budget guard and the ledgers are podium's real code."""

from __future__ import annotations

import asyncio
import math
from datetime import UTC, datetime
from pathlib import Path

import pytest

from podium.budget import Limits, PeriodBudget, RequestBudget, checked_cost
from podium.conductor.lm import LMConductor, LMConductorSettings
from podium.errors import CostCapExceeded, InvalidCost
from podium.orchestrator import Fallback, Orchestrator, OrchestratorConfig
from podium.records import RunRecord
from podium.testing import ScriptedConductor, ScriptedWorker
from podium.trace.store import TraceStore
from podium.workers.base import Call, Completion, Price
from podium.workers.resilience import ResiliencePolicy
from podium.workers.stack import stack

PLAN = 'model_id=[0,0,0]\nsubtasks=["a","b","c"]\naccess_list=[[],[0],[1]]'
IMPOSSIBLE = [math.nan, -100.0, math.inf, -math.inf, -1e-9]


def _worker() -> ScriptedWorker:
    return ScriptedWorker("w", "ok", price=Price(input=1.0, output=1.0))


def _sane(record: RunRecord) -> None:
    t = record.totals
    for value in (t.cost_usd, t.conductor_cost_usd, t.total_cost_usd):
        assert math.isfinite(value) and value >= 0, t


@pytest.mark.parametrize("rounds", [0, 1])
def test_a_conductor_cost_over_the_request_cap_stops_every_worker_call(rounds: int) -> None:
    """Before: status ok, 3 worker calls, total $10.0003 ($20.0003 with a review round)."""
    worker, conductor = _worker(), ScriptedConductor([PLAN], cost_usd=10.0)
    budget = RequestBudget(Limits(cost_cap_usd=0.05))
    orch = Orchestrator([worker], conductor, Fallback(0, "Answer."), config=OrchestratorConfig(recursion_rounds=rounds))
    record = asyncio.run(orch.run("q?", budget=budget))
    assert record.status == "error" and isinstance(record.cause, CostCapExceeded)
    assert worker.calls == [] and len(conductor.questions) == 1  # no step, no fallback, no review
    (incident,) = record.totals.incidents
    assert (incident.role, incident.worker) == ("conductor", "scripted")
    assert incident.reserved_usd == pytest.approx(0.05) and incident.actual_usd == pytest.approx(10.0)
    assert record.totals.total_cost_usd == pytest.approx(10.0)
    assert budget.ledger.spent_usd == pytest.approx(record.totals.total_cost_usd)  # the ledger is the trace
    assert "conductor 'scripted' cost $10.000000" in (record.error or "")


def test_a_conductor_cost_within_the_cap_is_counted_once_and_leaves_the_rest_to_the_workers() -> None:
    worker, day = _worker(), PeriodBudget(1.0, scope="pool:x/day")
    orch = Orchestrator(
        [worker], ScriptedConductor([PLAN], cost_usd=0.01), Fallback(0, "A."), config=OrchestratorConfig(periods=[day])
    )
    budget = RequestBudget(Limits(cost_cap_usd=0.05), [day])
    record = asyncio.run(orch.run("q?", budget=budget))
    assert record.status == "ok" and len(worker.calls) == 3 and not record.totals.incidents
    assert record.totals.conductor_cost_usd == pytest.approx(0.02)  # the plan and the review round
    assert budget.ledger.spent_usd == pytest.approx(record.totals.total_cost_usd)
    assert day.spent_usd == pytest.approx(record.totals.total_cost_usd)


def test_a_day_budget_counts_the_conductor_and_equals_the_traces(tmp_path: Path) -> None:
    """Before: three $1 conductors under a $0.05 day budget were all ok; the ledger held $0.00077
    while the traces held $3.0008, so a restarted server was over budget."""
    day = PeriodBudget(0.05, scope="pool:x/day")
    worker, conductor = _worker(), ScriptedConductor([PLAN], cost_usd=1.0)
    traces = TraceStore(tmp_path / "t.sqlite3")
    orch = Orchestrator(
        [worker],
        conductor,
        Fallback(0, "A."),
        traces=traces,
        config=OrchestratorConfig(periods=[day], recursion_rounds=0, pool_name="x"),
    )

    async def three() -> list[RunRecord]:
        return [await orch.run(f"q{i}") for i in range(3)]

    records = asyncio.run(three())
    orch.close()
    assert [r.status for r in records] == ["error"] * 3 and worker.calls == []
    assert len(conductor.questions) == 1  # the day is spent: the next requests do not plan
    assert all(isinstance(r.cause, CostCapExceeded) for r in records)
    assert [r.cause.by_period_budget for r in records[1:]] == [True, True]  # type: ignore[union-attr]
    assert day.spent_usd == pytest.approx(sum(r.totals.total_cost_usd for r in records)) == pytest.approx(1.0)
    since = datetime.fromtimestamp(day.period_start, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    assert traces.spent_since("x", since) == pytest.approx(day.spent_usd)  # what a restarted server reads
    traces.close()


def test_a_priced_lm_conductor_is_counted_once() -> None:
    """The LM conductor's model goes through a budget guard, which settles its calls already;
    the orchestrator settles only what an attempt reports beyond that (nothing)."""
    model = ScriptedWorker("lm", PLAN, price=Price(input=2.0, output=4.0))
    conductor = LMConductor(model, LMConductorSettings(constrained=False))
    day = PeriodBudget(10.0, scope="pool:x/day")
    worker = _worker()
    orch = Orchestrator(
        [worker], conductor, Fallback(0, "A."), config=OrchestratorConfig(periods=[day], recursion_rounds=0)
    )
    budget = RequestBudget(Limits(cost_cap_usd=1.0), [day])
    record = asyncio.run(orch.run("q?", budget=budget))
    assert record.status == "ok" and record.totals.conductor_cost_usd > 0
    assert day.spent_usd == pytest.approx(record.totals.total_cost_usd, rel=1e-12)
    assert budget.ledger.spent_usd == pytest.approx(record.totals.total_cost_usd, rel=1e-12)


def test_a_priced_lm_conductor_over_the_cap_is_refused_before_it_is_called() -> None:
    model = ScriptedWorker("lm", PLAN, price=Price(input=1e6, output=1e6))  # $1 a token
    worker = _worker()
    conductor = LMConductor(model, LMConductorSettings(constrained=False))
    orch = Orchestrator(
        [worker], conductor, Fallback(0, "A."), config=OrchestratorConfig(limits=Limits(cost_cap_usd=0.05))
    )
    record = asyncio.run(orch.run("q?"))
    assert model.calls == [] and record.fallback is not None and record.fallback.reason == "cost_cap"
    _sane(record)


@pytest.mark.parametrize("cost", IMPOSSIBLE)
def test_an_impossible_conductor_cost_is_the_conductors_error(cost: float) -> None:
    """Before: NaN gave a trace total of nan, -100 one of -99.99."""
    day = PeriodBudget(1.0, scope="pool:x/day")
    worker = _worker()
    orch = Orchestrator(
        [worker], ScriptedConductor([PLAN], cost_usd=cost), Fallback(0, "A."), config=OrchestratorConfig(periods=[day])
    )
    record = asyncio.run(orch.run("q?"))
    assert record.status == "fallback" and record.fallback is not None
    assert record.fallback.reason == "conductor_error" and "InvalidCost" in record.fallback.detail
    assert "conductor 'scripted' reported a cost of" in record.fallback.detail
    assert len(worker.calls) == 1  # the fallback pipeline answered
    _sane(record)
    assert day.spent_usd == pytest.approx(record.totals.total_cost_usd)


class _BadCost(ScriptedWorker):
    def __init__(self, cost: float) -> None:
        super().__init__("w", "ok", price=Price(input=1.0, output=1.0))
        self.cost = cost

    async def complete(self, call: Call) -> Completion:
        c = await super().complete(call)
        return Completion(c.text, c.usage, self.cost, c.latency_s)


@pytest.mark.parametrize("cost", IMPOSSIBLE)
def test_an_impossible_worker_cost_is_the_calls_error_and_is_not_retried(cost: float) -> None:
    """Before: a worker's NaN / -5 / inf cost gave trace totals nan / -15 / inf."""
    day = PeriodBudget(1.0, scope="pool:x/day")
    worker = _BadCost(cost)
    pool = [stack(worker, resilience=ResiliencePolicy(attempts=3, base_delay_s=0.0))]
    orch = Orchestrator(
        pool, ScriptedConductor([PLAN]), Fallback(0, "A."), config=OrchestratorConfig(periods=[day], recursion_rounds=0)
    )
    record = asyncio.run(orch.run("q?", limits=Limits(cost_cap_usd=0.05)))
    assert record.status == "error" and isinstance(record.cause, InvalidCost)
    assert len(worker.calls) == 2  # the first step and the fallback, once each: not retried
    assert all(s.error_type == "InvalidCost" and s.cost_usd == 0 for s in record.steps)
    assert "worker 'w' reported a cost of" in (record.error or "")
    _sane(record)
    # answered, so it may have been billed: each call keeps its worst case (the ledger errs on the cap's side)
    assert day.spent_usd > record.totals.total_cost_usd == 0.0 and math.isfinite(day.spent_usd)


@pytest.mark.parametrize("value", [math.nan, -1.0, math.inf, True, "0.1", None])
def test_checked_cost_refuses_anything_but_a_finite_amount(value: object) -> None:
    with pytest.raises(InvalidCost, match="cannot be true"):
        checked_cost(value, "w")
    assert checked_cost(0, "w") == 0.0 and checked_cost(0.25, "w") == 0.25


def test_a_settlement_of_an_impossible_cost_settles_nothing() -> None:
    day = PeriodBudget(1.0, scope="pool:x/day")
    budget = RequestBudget(Limits(cost_cap_usd=0.5), [day])
    for cost in (math.nan, -1.0):
        with pytest.raises(InvalidCost):
            budget.settle(None, cost, by="c", role="conductor")
    assert budget.ledger.spent_usd == 0 == day.spent_usd and not budget.incidents


def test_a_shared_ledger_takes_a_conductor_cost_on_a_new_scope(store_url: str) -> None:
    pytest.importorskip("sqlalchemy", reason="needs podium[serve]")
    from podium.store.engine import open_store
    from podium.store.ledger import SharedPeriodBudget

    engine = open_store(store_url)
    shared = SharedPeriodBudget(engine, 0.05, scope="key:new/day")  # no row yet: nothing ever held
    budget = RequestBudget(Limits(cost_cap_usd=1.0), [shared])
    budget.settle(None, 0.08, by="c", role="conductor")
    shared.refresh()
    assert shared.spent_usd == pytest.approx(0.08) and budget.ledger.spent_usd == pytest.approx(0.08)
    (incident,) = budget.incidents  # over what the key had left
    assert incident.role == "conductor" and incident.reserved_usd == pytest.approx(0.05)
    engine.dispose()


def test_a_budget_already_used_up_says_so_instead_of_a_zero_dollar_call() -> None:
    """The check before planning asks for no amount: its refusal read "a call needing up to
    $0.000000 … does not fit" (a verification round's finding); it names the used-up budget."""
    day = PeriodBudget(0.01, scope="pool day")
    first = RequestBudget(Limits(), periods=[day])
    first.settle(None, 0.02, by="conductor", role="conductor")
    with pytest.raises(CostCapExceeded, match=r"the pool day budget is used up \(\$0\.000000 of \$0\.010000 left\)"):
        RequestBudget(Limits(), periods=[day]).check_room()


def test_a_budget_smaller_than_one_call_says_no_new_period_helps() -> None:
    """A key budget of $0.0001 against a $0.0006 worst case refused every request with a 429 and
    Retry-After of two hours, a first user found: a new period cannot fit it either."""
    day = PeriodBudget(0.0001, scope="key:support-team/day")
    budget = RequestBudget(Limits(), [day])
    with pytest.raises(CostCapExceeded) as too_big:
        budget.reserve(0.000604)
    assert too_big.value.retry_after_s is None
    assert "it never will: raise the budget above $0.000604, one call's worst case" in str(too_big.value)
    budget.reserve(0.00006)  # fits: the budget is not used up by the refusal
    with pytest.raises(CostCapExceeded) as later:
        budget.reserve(0.00006)  # fits the cap, not what is left: a new period helps
    assert later.value.retry_after_s is not None and "never" not in str(later.value)


def test_a_tiny_cap_keeps_its_digits_in_the_refusal() -> None:
    """A first user's ``--cost-cap 1e-9`` was refused with "$0.000000 of $0.000000 left": amounts
    under half a millionth now keep two significant digits, zero still reads $0.000000."""
    from podium.budget import usd

    assert (usd(0.0), usd(0.000604), usd(1e-9), usd(4.2e-7)) == ("$0.000000", "$0.000604", "$1e-09", "$4.2e-07")
    budget = RequestBudget(Limits(cost_cap_usd=1e-9))
    with pytest.raises(CostCapExceeded, match=r"up to \$0\.000604 .* \(\$1e-09 of \$1e-09 left\)"):
        budget.reserve(0.000604)
