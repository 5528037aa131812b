"""Fault injection: workers that time out, hang, rate-limit, fail, reset or return nothing.

Unit tests with fake workers (``podium.testing``), by design: the faults are scripted so each
assertion names the behaviour it proves — bounded requests, typed errors, one complete trace per
request, and cost caps that hold under concurrency.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from podium.budget import Limits, PeriodBudget, RequestBudget
from podium.errors import (
    ClientError,
    ConfigError,
    CostCapExceeded,
    RateLimited,
    ServerError,
    TransportError,
    WorkerUnavailable,
)
from podium.orchestrator import Fallback, Orchestrator, OrchestratorConfig
from podium.records import RunRecord
from podium.testing import ScriptedConductor, ScriptedWorker
from podium.trace.store import TraceStore
from podium.workers.base import Call, CallContext, Completion, Message, Price
from podium.workers.failover import Failover
from podium.workers.resilience import CircuitBreaker, ResiliencePolicy, Retrying
from podium.workers.stack import stack

ONE_STEP = 'model_id = [0]\nsubtasks = ["Solve."]\naccess_list = [[]]'
FAST = ResiliencePolicy(attempts=3, base_delay_s=0.001, max_delay_s=0.01, breaker_threshold=50)


class Flaky(ScriptedWorker):
    """Raises the scripted errors in order, then replies."""

    def __init__(self, name: str, errors: Sequence[Exception], reply: str = "ok", **kw: object) -> None:
        super().__init__(name, reply=reply, **kw)  # type: ignore[arg-type]
        self.errors = list(errors)

    async def complete(self, call: Call) -> Completion:
        if self.errors:
            self.calls.append(list(call.messages))
            raise self.errors.pop(0)
        return await super().complete(call)


def orchestrator(workers: list[ScriptedWorker], tmp_path: Path | None = None, **config: Any) -> Orchestrator:
    traces = TraceStore(tmp_path / "t.sqlite3") if tmp_path else None
    return Orchestrator(
        [stack(w, resilience=FAST) for w in workers],
        ScriptedConductor([ONE_STEP]),
        Fallback(len(workers) - 1, "Answer."),
        OrchestratorConfig(**config),
        traces=traces,
    )


def test_429_with_retry_after_is_retried_after_that_wait() -> None:
    sleeps: list[float] = []

    async def sleep(s: float) -> None:
        sleeps.append(s)

    worker = Flaky("w", [RateLimited("slow down", worker="w", status=429, retry_after=0.25)] * 2, reply="42")
    retrying = Retrying(worker, attempts=3, sleep=sleep)
    result = asyncio.run(retrying.complete(Call([{"role": "user", "content": "q"}])))
    assert result.text == "42" and len(worker.calls) == 3
    assert sleeps == [0.25, 0.25]


@pytest.mark.parametrize(
    "error", [ServerError("500", worker="w", status=500), TransportError("connection reset", worker="w")]
)
def test_transient_errors_are_retried_with_bounded_jittered_backoff(error: Exception) -> None:
    sleeps: list[float] = []

    async def sleep(s: float) -> None:
        sleeps.append(s)

    worker = Flaky("w", [error, error], reply="fine")
    retrying = Retrying(worker, attempts=3, base_delay_s=1.0, max_delay_s=1.5, rng=random.Random(7), sleep=sleep)
    assert asyncio.run(retrying.complete(Call([{"role": "user", "content": "q"}]))).text == "fine"
    assert len(sleeps) == 2
    assert 0 <= sleeps[0] <= 1.0 and 0 <= sleeps[1] <= 1.5  # min(max, base * 2**k)
    assert len(set(sleeps)) == 2  # jittered, not a fixed schedule


def test_client_errors_are_not_retried_and_end_in_the_fallback(tmp_path: Path) -> None:
    primary = Flaky("primary", [ClientError("bad request", worker="primary", status=400)] * 5)
    fallback = ScriptedWorker("fallback", reply="fallback answer")
    record = asyncio.run(orchestrator([primary, fallback], tmp_path).run("Q?"))
    assert len(primary.calls) == 1
    assert record.status == "fallback" and record.fallback is not None and record.fallback.reason == "worker_error"
    assert record.steps[0].error_type == "ClientError" and record.answer == "fallback answer"


def test_circuit_breaker_takes_a_failing_worker_out_then_tries_again() -> None:
    now = [0.0]
    worker = Flaky("w", [ServerError("down", worker="w", status=503)] * 3, reply="back")
    breaker = CircuitBreaker(worker, threshold=2, cooldown_s=30, clock=lambda: now[0])
    msgs: list[Message] = [{"role": "user", "content": "q"}]
    for _ in range(2):
        with pytest.raises(ServerError):
            asyncio.run(breaker.complete(Call(msgs)))
    with pytest.raises(WorkerUnavailable) as info:
        asyncio.run(breaker.complete(Call(msgs)))
    assert len(worker.calls) == 2  # the open circuit did not call the worker
    assert info.value.retry_after == pytest.approx(30)
    now[0] = 31.0  # cool-down over: one trial call goes through (and fails: reopens)
    with pytest.raises(ServerError):
        asyncio.run(breaker.complete(Call(msgs)))
    with pytest.raises(WorkerUnavailable):
        asyncio.run(breaker.complete(Call(msgs)))
    now[0] = 62.0
    assert asyncio.run(breaker.complete(Call(msgs))).text == "back"
    assert breaker.failures == 0 and not breaker.is_open


def test_an_equivalent_worker_takes_over_and_the_trace_says_so() -> None:
    primary = Flaky("primary", [ServerError("down", worker="primary", status=500)] * 10)
    spare = ScriptedWorker("spare", reply="from spare")
    pool = [Failover(stack(primary, resilience=FAST), stack(spare, resilience=FAST))]
    orch = Orchestrator(pool, ScriptedConductor([ONE_STEP]), Fallback(0, "Answer."))
    record = asyncio.run(orch.run("Q?"))
    assert record.status == "ok" and record.answer == "from spare"
    assert record.steps[0].worker == "spare"
    assert len(primary.calls) == FAST.attempts


def test_a_hanging_step_ends_at_the_deadline_and_the_fallback_answers(tmp_path: Path) -> None:
    hanging = ScriptedWorker("hangs", reply="never", delay_s=60)
    quick = ScriptedWorker("quick", reply="fallback answer")
    orch = orchestrator([hanging, quick], tmp_path, limits=Limits(deadline_s=1.0, fallback_reserve=0.4))
    started = time.monotonic()
    record = asyncio.run(orch.run("Q?"))
    elapsed = time.monotonic() - started
    assert elapsed < 1.0 + 0.5  # the deadline holds, up to a small scheduling margin
    assert record.status == "fallback" and record.fallback is not None and record.fallback.reason == "deadline"
    cut = [s for s in record.steps if s.phase == "workflow"]
    assert len(cut) == 1 and cut[0].error_type in {"Cancelled", "WorkerTimeout"}
    assert cut[0].messages  # the cut-off step's exact messages are kept
    assert TraceStore(tmp_path / "t.sqlite3").get(record.id) == record


def test_a_cut_off_step_says_why_and_the_fallback_names_the_deadline() -> None:
    """A trial user saw a bare ``CancelledError:`` on a step and "the workflow's time limit of
    3.1 s" for a 10 s deadline: a cut-off step names its cause, the detail the request's deadline."""
    two = 'model_id = [0, 1]\nsubtasks = ["Solve.", "Solve too."]\naccess_list = [[], []]'
    failing = Flaky("fails", [ClientError("bad request", worker="fails", status=400)])
    hanging = ScriptedWorker("hangs", delay_s=60)
    orch = Orchestrator([failing, hanging], ScriptedConductor([two]), Fallback(0, "Answer."))
    record = asyncio.run(orch.run("Q?"))
    [cut] = [s for s in record.steps if s.phase == "workflow" and s.error_type == "Cancelled"]
    assert cut.worker == "hangs" and cut.error == "cancelled: another step failed"

    limits = Limits(deadline_s=1.0, fallback_reserve=0.4, step_timeout_s=30)
    slow = [ScriptedWorker("a", delay_s=60), ScriptedWorker("b", reply="fallback answer")]
    orch = Orchestrator(
        slow, ScriptedConductor([two]), Fallback(1, "Answer."), config=OrchestratorConfig(limits=limits)
    )
    record = asyncio.run(orch.run("Q?"))
    assert record.status == "fallback" and record.fallback is not None and record.fallback.reason == "deadline"
    assert (
        "the request's 1 s deadline less planning" in record.fallback.detail
        and "40% kept for the fallback" in record.fallback.detail
    )
    cut_steps = [s for s in record.steps if s.phase == "workflow" and s.error_type == "Cancelled"]
    assert cut_steps and all(s.error == "cancelled: the steps' time ran out" for s in cut_steps)


def cancelled_midway(orch: Orchestrator, tmp_path: Path) -> RunRecord:
    """Start a request, cancel it 0.2 s in (Ctrl-C, a client gone), and read back its stored trace."""

    async def cancel() -> None:
        task = asyncio.create_task(orch.run("Q?"))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel())
    [row] = TraceStore(tmp_path / "t.sqlite3").list(limit=5)
    record = TraceStore(tmp_path / "t.sqlite3").get(row.id)
    assert record is not None
    return record


def test_a_cancelled_request_is_stored_saying_it_was_stopped(tmp_path: Path) -> None:
    """Ctrl-C, a client hanging up or a shutdown cancels the request: its trace is kept and says
    so in words (it read a bare ``CancelledError:`` before)."""
    record = cancelled_midway(orchestrator([ScriptedWorker("hangs", delay_s=60)], tmp_path), tmp_path)
    assert record.status == "error"
    assert record.error is not None and record.error.startswith("Cancelled: stopped before it finished")
    # the step that was running is in the trace (a trial user's Ctrl-C left 0 steps and $0)
    assert [(s.worker, s.error_type) for s in record.steps] == [("hangs", "Cancelled")]


def test_cancelled_requests_are_found_apart_from_other_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--status error`` holds both; ``--status cancelled`` only the cancelled one (a trial
    user could not tell client hang-ups and Ctrl-C from failures)."""
    from podium.cli import cli

    cancelled = cancelled_midway(orchestrator([ScriptedWorker("hangs", delay_s=60)], tmp_path), tmp_path)
    failing = orchestrator([ScriptedWorker("down", error=ConfigError("model not installed"))], tmp_path)
    with pytest.raises(ConfigError):
        asyncio.run(failing.run("Q2?"))
    failing.close()

    def listed(status: str) -> set[str]:
        assert cli(["trace", "list", "--json", "--status", status, "--traces", str(tmp_path / "t.sqlite3")]) == 0
        return {row["id"] for row in json.loads(capsys.readouterr().out)}

    errors = listed("error")
    assert len(errors) == 2 and cancelled.id in errors
    assert listed("cancelled") == {cancelled.id}


def test_a_cancelled_parallel_workflow_keeps_every_step_that_ran(tmp_path: Path) -> None:
    """Two independent steps run at once; cancelling the request leaves both in its trace, the
    one that had finished with its output, the one still running as cancelled."""
    plan = 'model_id = [0, 1, 0]\nsubtasks = ["Fast.", "Slow.", "Join."]\naccess_list = [[], [], [0, 1]]'
    workers = [ScriptedWorker("fast", reply="quick"), ScriptedWorker("slow", delay_s=60)]
    traces = TraceStore(tmp_path / "t.sqlite3")
    orch = Orchestrator(
        [stack(w, resilience=FAST) for w in workers], ScriptedConductor([plan]), Fallback(0, "A."), traces=traces
    )
    record = cancelled_midway(orch, tmp_path)
    assert record.status == "error"
    steps = [(s.index, s.worker, s.output, s.error_type) for s in record.steps]
    assert steps == [(0, "fast", "quick", None), (1, "slow", "", "Cancelled")]  # step 2 never started


def test_when_nothing_fits_the_deadline_the_request_ends_with_a_typed_error(tmp_path: Path) -> None:
    workers = [ScriptedWorker("a", delay_s=60), ScriptedWorker("b", delay_s=60)]
    orch = orchestrator(workers, tmp_path, limits=Limits(deadline_s=0.6, fallback_reserve=0.5))
    started = time.monotonic()
    record = asyncio.run(orch.run("Q?"))
    assert time.monotonic() - started < 0.6 + 0.5
    assert record.status == "error" and record.answer == ""
    assert record.error is not None and record.error.split(":")[0] in {"WorkerTimeout", "DeadlineExceeded"}
    assert TraceStore(tmp_path / "t.sqlite3").get(record.id) == record


def test_step_timeout_is_a_worker_timeout_and_is_retried() -> None:
    slow = ScriptedWorker("slow", reply="late", delay_s=5)
    orch = orchestrator([slow, ScriptedWorker("fb", reply="fb")], limits=Limits(step_timeout_s=0.05))
    record = asyncio.run(orch.run("Q?"))
    assert len(slow.calls) == FAST.attempts
    assert record.steps[0].error_type == "WorkerTimeout" and record.answer == "fb"


def test_a_call_that_does_not_fit_the_cost_cap_is_never_made(tmp_path: Path) -> None:
    pricey = ScriptedWorker("pricey", price=Price(input=1000.0, output=1000.0))
    also_pricey = ScriptedWorker("fb", price=Price(input=1000.0, output=1000.0))
    orch = orchestrator([pricey, also_pricey], tmp_path, limits=Limits(cost_cap_usd=0.01))
    record = asyncio.run(orch.run("Q?"))
    assert pricey.calls == [] and also_pricey.calls == []
    assert record.fallback is not None and record.fallback.reason == "cost_cap"
    assert record.status == "error" and record.error is not None and "CostCapExceeded" in record.error
    assert record.totals.cost_usd == 0


def test_reservation_is_atomic_across_request_and_period_ledgers() -> None:
    day = PeriodBudget(1.0, scope="pool:x/day")
    budget = RequestBudget(Limits(cost_cap_usd=5.0), [day])
    held = budget.reserve(0.8)
    with pytest.raises(CostCapExceeded) as info:
        budget.reserve(0.3)  # fits the request, not the day
    assert info.value.scope == "pool:x/day"
    assert budget.ledger.reserved_usd == pytest.approx(0.8)  # the refused one left no trace
    held.settle(0.5)
    assert day.spent_usd == pytest.approx(0.5) and day.reserved_usd == pytest.approx(0.0)
    budget.reserve(0.3)


def test_period_budget_rolls_over_at_the_next_period() -> None:
    now = [86_400.0 * 10 + 5]
    day = PeriodBudget(1.0, clock=lambda: now[0])
    budget = RequestBudget(periods=[day])
    budget.reserve(1.0).settle(1.0)
    with pytest.raises(CostCapExceeded):
        budget.reserve(0.01)
    now[0] += 86_400
    budget.reserve(0.5)


def test_fifty_concurrent_requests_never_overshoot_their_caps(tmp_path: Path) -> None:
    """50 requests at once, each with a 3-step workflow, against a tight daily budget."""
    plan = 'model_id = [0, 1, 0]\nsubtasks = ["a", "b", "c"]\naccess_list = [[], [], "all"]'
    rng = random.Random(3)

    def reply(_: Sequence[Message]) -> str:
        return "x" * rng.randint(4, 400)  # actual cost varies below the worst case

    price = Price(input=20.0, output=40.0)  # USD per 1M tokens: worst case ~3 cents a call
    workers = [
        ScriptedWorker("a", reply=reply, price=price, delay_s=0.01),
        ScriptedWorker("b", reply=reply, price=price, delay_s=0.02),
    ]
    day = PeriodBudget(0.5, scope="pool:test/day")  # about half of what 50 requests would spend
    per_request = 0.08
    orch = Orchestrator(
        [stack(w, resilience=FAST) for w in workers],
        ScriptedConductor([plan]),
        Fallback(1, "Answer."),
        traces=TraceStore(tmp_path / "t.sqlite3"),
        config=OrchestratorConfig(limits=Limits(cost_cap_usd=per_request), periods=[day], recursion_rounds=0),
    )

    async def all_requests() -> list[object]:
        return await asyncio.gather(*(orch.run(f"Q{i}?") for i in range(50)))

    records = asyncio.run(all_requests())
    total = sum(r.totals.total_cost_usd for r in records)  # type: ignore[attr-defined]
    assert total <= day.cap_usd + 1e-12
    assert day.spent_usd == pytest.approx(total) and day.reserved_usd == pytest.approx(0.0, abs=1e-12)
    assert all(r.totals.total_cost_usd <= per_request + 1e-12 for r in records)  # type: ignore[attr-defined]
    statuses = {r.status for r in records}  # type: ignore[attr-defined]
    assert "ok" in statuses and "error" in statuses  # the cap really bit: some were refused
    store = TraceStore(tmp_path / "t.sqlite3")
    assert len(store.list(limit=100)) == 50
    for r in records:
        assert store.get(r.id) == r  # type: ignore[attr-defined]
        if r.status == "error":  # type: ignore[attr-defined]
            assert "CostCapExceeded" in (r.error or "")  # type: ignore[attr-defined]


def test_a_call_without_reported_usage_keeps_its_full_reservation() -> None:
    """Some servers omit usage (e.g. in streams): the cap must not treat the call as free."""

    class Unreported(ScriptedWorker):
        async def complete(self, call: Call) -> Completion:
            result = await super().complete(call)
            return Completion(result.text, usage_reported=False)

    budget = RequestBudget(Limits(cost_cap_usd=1.0))
    worker = stack(Unreported("w", price=Price(input=100.0, output=100.0)), resilience=FAST)
    asyncio.run(worker.complete(Call([{"role": "user", "content": "hi"}], context=CallContext(budget=budget))))
    # worst case = (prompt bound + 512 max_tokens) tokens at $100 per 1M, all of it kept as spent
    assert budget.ledger.spent_usd > 512 * 100 / 1e6
    assert budget.ledger.reserved_usd == pytest.approx(0.0)


def test_a_conductor_attempt_that_fails_midway_keeps_what_it_cost() -> None:
    """The LM conductor makes two calls (reasoning, then the lists); when the second does not
    fit the budget, the first one's cost must still reach the trace and the totals (a fake
    conductor that pays for one call through the real budget, then is refused)."""
    from podium.budget import Limits
    from podium.errors import CostCapExceeded
    from podium.orchestrator import Fallback, Orchestrator
    from podium.records import PlanAttempt
    from podium.testing import ScriptedWorker

    class HalfPaid:
        name = "half-paid"

        async def plan(self, question: str, pool: object, *, context: CallContext, **_: object) -> PlanAttempt:
            budget = context.budget
            assert budget is not None
            # the first pass ran and cost $0.003, settled where every cost is, on the attempt's tally
            budget.settle(budget.reserve(0.004), 0.003, by="half-paid", tally=context.tally)
            raise CostCapExceeded("the second pass does not fit", needed_usd=0.01, remaining_usd=0.0, scope="request")

    orch = Orchestrator([ScriptedWorker("w0", reply="fallback answer")], HalfPaid(), Fallback(0, "Answer."))  # type: ignore[arg-type]
    record = asyncio.run(orch.run("Q?", limits=Limits(cost_cap_usd=1.0)))
    assert record.status == "fallback" and record.fallback is not None and record.fallback.reason == "cost_cap"
    (attempt,) = record.attempts
    assert attempt.cost_usd == pytest.approx(0.003) and attempt.error_kind == "cost_cap"
    assert record.totals.conductor_cost_usd == pytest.approx(0.003)
    assert record.totals.total_cost_usd == pytest.approx(0.003 + record.steps[0].cost_usd)
