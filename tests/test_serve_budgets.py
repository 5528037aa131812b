"""Which HTTP status a budget's refusal gets from ``podium serve``, decided by the refusing
budget (the error's type and scope), never by its text: a period budget — the pool's
``daily_budget_usd`` or a key's — is 429 ``insufficient_quota`` with Retry-After until its period
rolls over (docs/reliability.md, docs/serve.md); the request's own cap too small is 400
``cost_cap_exceeded``. Over real HTTP with the official ``openai`` client; the workers are fakes
(podium.testing.ScriptedWorker, also the LM conductor's model), priced so a budget binds."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import httpx
import openai
import pytest

from podium.budget import PeriodBudget, RequestBudget
from podium.errors import CostCapExceeded
from podium.orchestrator import Fallback, Orchestrator
from podium.serve.app import Server, create_app
from podium.serve.keys import KeyStore
from podium.serve.wire import failure as _failure
from podium.testing import ScriptedConductor, ScriptedWorker, ThreadedUvicorn
from podium.trace.store import TraceStore
from podium.workers.base import Message, Price

POOL = (Path(__file__).parent / "pools" / "three-fakes.toml").read_text()
PLAN = 'model_id = [1]\nsubtasks = ["Write the final answer."]\naccess_list = [[]]'
MESSAGES: list[Message] = [{"role": "user", "content": "What is 6 * 7?"}]


def reply(messages: Sequence[Message]) -> str:
    return PLAN if any("model_id" in m["content"] for m in messages) else "The answer is 42."


def serve(tmp_path: Path, pool_extra: str = "", keys: KeyStore | None = None) -> tuple[ThreadedUvicorn, TraceStore]:
    pool = tmp_path / "pool.toml"
    pool.write_text(POOL + pool_extra)
    traces = TraceStore(tmp_path / "traces.sqlite3")
    workers = [ScriptedWorker(n, reply, price=Price(5.0, 5.0)) for n in ("smol-a", "smol-b", "smol-c")]
    server = Server(pool=str(pool), traces=traces, keys=keys, workers=list(workers))
    return ThreadedUvicorn(create_app(server)), traces


def post(url: str, key: str | None = None, **headers: str) -> httpx.Response:
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    body = {"model": "podium", "messages": MESSAGES}
    return httpx.post(url + "/v1/chat/completions", json=body, headers=headers, timeout=30)


def assert_quota_refusal(response: httpx.Response, period_s: float = 86_400) -> None:
    assert response.status_code == 429, response.text
    error = response.json()["error"]
    assert (error["type"], error["code"]) == ("insufficient_quota", "insufficient_quota")
    assert 1 <= int(response.headers["retry-after"]) <= period_s  # until the period rolls over
    assert response.headers["x-request-id"] in error["message"]


def test_an_exhausted_pool_day_budget_is_429_with_retry_after(tmp_path: Path) -> None:
    running, traces = serve(tmp_path, "\n[limits]\ndaily_budget_usd = 0.05\n")
    try:
        codes = []
        for _ in range(60):  # each request reserves ~$0.02 and spends less: the day runs out
            response = post(running.url)
            codes.append(response.status_code)
            if response.status_code != 200:
                break
        assert codes[0] == 200 and codes[-1] == 429, codes
        assert_quota_refusal(response)
        traces.flush()
        record = traces.get(response.headers["x-request-id"])
        assert record is not None and record.status == "error" and "pool:three-fakes/day" in (record.error or "")
        client = openai.OpenAI(base_url=running.url + "/v1", api_key="x", max_retries=0)
        with pytest.raises(openai.RateLimitError):  # the SDK's retryable error, not BadRequestError
            client.chat.completions.create(model="podium", messages=MESSAGES)
    finally:
        running.stop()


def test_a_key_budget_smaller_than_one_call_is_429_without_retry_after(tmp_path: Path) -> None:
    """Nothing spent, but no call fits the whole budget: a new period cannot help, so no
    Retry-After (it was the two hours to midnight), and the message says what to raise."""
    keys = KeyStore(tmp_path / "keys.sqlite3")
    secret = keys.create("team-a", budget_usd=0.001, period="day")
    running, _ = serve(tmp_path, keys=keys)
    try:
        response = post(running.url, secret)
        assert response.status_code == 429 and response.json()["error"]["code"] == "insufficient_quota"
        assert "retry-after" not in response.headers
        assert "it never will: raise the budget above $" in response.json()["error"]["message"]
    finally:
        running.stop()


def test_the_requests_own_cap_too_small_is_400(tmp_path: Path) -> None:
    running, _ = serve(tmp_path, "\n[limits]\ndaily_budget_usd = 100.0\n")
    try:
        response = post(running.url, **{"X-Podium-Cost-Cap": "0.000001"})
        assert response.status_code == 400, response.text
        assert response.json()["error"]["code"] == "cost_cap_exceeded" and "retry-after" not in response.headers
    finally:
        running.stop()


@pytest.mark.parametrize("scope", ["pool:p/day", "team/month", "request key: x"])
def test_the_status_follows_the_refusing_budget_not_the_message(scope: str) -> None:
    """A period budget of any name is 429; the request's cap is 400 whatever its message says."""
    worker = ScriptedWorker("w", "4", price=Price(5.0, 5.0))
    plan = 'model_id = [0]\nsubtasks = ["a"]\naccess_list = [[]]'
    orchestrator = Orchestrator([worker], ScriptedConductor([plan]), Fallback(0, "Answer."))
    clock = [86_400 * 10 + 3_600.0]  # one hour into a day: 23 h to go
    period = PeriodBudget(1.0, period_s=86_400, scope=scope, clock=lambda: clock[0])
    period.spent_usd = 1.0 - 1e-9  # a call would fit a new period, not what is left of this one
    record = asyncio.run(orchestrator.run("2+2?", budget=RequestBudget(periods=[period])))
    assert isinstance(record.cause, CostCapExceeded) and record.cause.scope == scope
    refusal = _failure(record)
    assert (refusal.status, refusal.code) == (429, "insufficient_quota")
    assert refusal.headers["Retry-After"] == str(23 * 3600)


def test_a_stored_record_has_no_cause_and_the_cause_is_not_in_its_json(tmp_path: Path) -> None:
    traces = TraceStore(tmp_path / "traces.sqlite3")
    plan = 'model_id = [0]\nsubtasks = ["a"]\naccess_list = [[]]'
    orchestrator = Orchestrator(
        [ScriptedWorker("w", "4", price=Price(5.0, 5.0))], ScriptedConductor([plan]), Fallback(0, "A."), traces=traces
    )
    period = PeriodBudget(1e-9, period_s=86_400, scope="pool:p/day")
    record = asyncio.run(orchestrator.run("2+2?", budget=RequestBudget(periods=[period])))
    assert record.cause is not None and "cause" not in record.to_json()
    traces.flush()
    stored = traces.get(record.id)
    assert stored is not None and stored.cause is None and stored == record
