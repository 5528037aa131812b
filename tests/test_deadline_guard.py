"""The request deadline and a step's timeout bound the whole guarded call: counting the prompt's
tokens (llama.cpp loads its model to count, seconds when cold) and reserving its cost included.
A count cut off by the limit is a WorkerTimeout / DeadlineExceeded like the call, and nothing
stays reserved."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator, Sequence

import pytest

from podium.budget import Limits, PeriodBudget, RequestBudget
from podium.errors import DeadlineExceeded, WorkerTimeout
from podium.orchestrator import Fallback, Orchestrator, OrchestratorConfig
from podium.testing import ScriptedConductor, ScriptedWorker
from podium.workers.base import Call, CallContext, CountsTokens, Message
from podium.workers.budget_guard import BudgetGuard

ONE_STEP = 'model_id = [0]\nsubtasks = ["Answer."]\naccess_list = [[]]'
MARGIN_S = 0.5  # scheduling on a loaded machine


class ColdCounter(ScriptedWorker):
    """A worker that counts tokens exactly, as llama.cpp does, but whose count takes as long as
    a cold model load (in a thread: the budget guard runs it off the event loop)."""

    def __init__(self, name: str, loaded: threading.Event, load_s: float = 5.0) -> None:
        super().__init__(name, reply="4")
        self.loaded, self.load_s = loaded, load_s

    def count_tokens(self, messages: Sequence[Message], prefix: str = "") -> int:
        self.loaded.wait(self.load_s)
        return 10


@pytest.fixture
def loaded() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()  # a failed test's counting threads finish too


def test_a_cold_token_count_is_cut_off_at_the_deadline_and_reserves_nothing(loaded: threading.Event) -> None:
    worker = ColdCounter("cold", loaded)
    assert isinstance(worker, CountsTokens)
    day = PeriodBudget(1.0, scope="pool:p/day")
    orchestrator = Orchestrator([worker], ScriptedConductor([ONE_STEP]), Fallback(0, "Answer."))
    budget = RequestBudget(Limits(deadline_s=1.0), [day])

    async def go() -> tuple[float, str, str | None]:
        started = time.perf_counter()
        record = await orchestrator.run("What is 2+2?", budget=budget)
        elapsed = time.perf_counter() - started
        loaded.set()  # the load finishes in the background (asyncio.run waits for its thread)
        return elapsed, record.status, record.error

    elapsed, status, error = asyncio.run(go())
    assert elapsed < 1.0 + MARGIN_S, f"{elapsed:.2f} s against a 1 s deadline"
    assert status == "error" and error is not None and error.split(":")[0] in {"DeadlineExceeded", "WorkerTimeout"}
    assert budget.ledger.reserved_usd == 0 and day.reserved_usd == 0 and day.spent_usd == 0


@pytest.mark.parametrize(
    ("limits", "raised"),
    [(Limits(deadline_s=0.5), DeadlineExceeded), (Limits(step_timeout_s=0.5), WorkerTimeout)],
)
def test_the_guarded_call_raises_at_its_limit_while_counting(
    loaded: threading.Event, limits: Limits, raised: type[Exception]
) -> None:
    guard = BudgetGuard(ColdCounter("cold", loaded))
    budget = RequestBudget(limits)

    async def go() -> float:
        started = time.perf_counter()
        with pytest.raises(raised):
            await guard.complete(Call([{"role": "user", "content": "hi"}], context=CallContext(budget=budget)))
        elapsed = time.perf_counter() - started
        loaded.set()
        return elapsed

    assert asyncio.run(go()) < 0.5 + MARGIN_S
    assert budget.ledger.reserved_usd == 0 and budget.ledger.spent_usd == 0


def test_a_step_cut_off_while_counting_leaves_time_for_the_fallback(loaded: threading.Event) -> None:
    """The workflow's cold step ends at the step timeout, so the fallback still answers within
    the deadline."""
    orchestrator = Orchestrator(
        [ColdCounter("cold", loaded), ScriptedWorker("warm", reply="4")],
        ScriptedConductor([ONE_STEP]),
        Fallback(1, "Answer."),
        config=OrchestratorConfig(limits=Limits(deadline_s=3.0, step_timeout_s=0.5)),
    )

    async def go() -> tuple[float, str]:
        started = time.perf_counter()
        record = await orchestrator.run("What is 2+2?")
        elapsed = time.perf_counter() - started
        loaded.set()
        return elapsed, record.status

    elapsed, status = asyncio.run(go())
    assert status == "fallback" and elapsed < 0.5 + MARGIN_S


def test_a_call_cut_at_what_was_left_of_the_deadline_is_the_deadline_not_a_worker_timeout() -> None:
    """uvloop's cached clock fired the cut a little before the monotonic clock reached the
    deadline, so the guard (which compared clocks afterwards) called it a WorkerTimeout and
    `podium serve` answered 502 instead of 504. A frozen budget clock is the extreme of that lag:
    the cut is still the deadline's, because the limit in force was what was left of it."""
    frozen = time.monotonic()
    budget = RequestBudget(Limits(deadline_s=0.2), clock=lambda: frozen)
    guard = BudgetGuard(ScriptedWorker("slow", delay_s=5))
    call = Call([Message(role="user", content="Q?")], context=CallContext(budget=budget))
    with pytest.raises(DeadlineExceeded):
        asyncio.run(guard.complete(call))

    step_bound = RequestBudget(Limits(deadline_s=10, step_timeout_s=0.2), clock=lambda: frozen)
    with pytest.raises(WorkerTimeout):  # the step timeout was the limit: a worker timeout
        asyncio.run(guard.complete(Call([Message(role="user", content="Q?")], context=CallContext(budget=step_bound))))
