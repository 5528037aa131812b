"""A streamed answer through an OpenAI-compatible server that sends no usage (though asked, with
``stream_options.include_usage``) is counted, not recorded as 0 tokens and $0: with the model's
tokenizer where podium has it, else an upper bound from UTF-8 bytes, and marked estimated in the
completion, the trace and ``podium trace show``; budgets keep the call's full reservation.

Against a real uvicorn server on 127.0.0.1 (tests/fake_openai.py) that streams as
llama-cpp-python's server does (no usage chunk)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("openai", reason="needs podium[openai]")

from podium.budget import Limits, RequestBudget, prompt_token_bound, worst_case_cost
from podium.cli import cli
from podium.local_models import model_status
from podium.workers.base import Call, CallContext, Message, Price, WorkerSettings
from podium.workers.budget_guard import BudgetGuard
from podium.workers.openai_compat import OpenAICompatWorker
from tests.conftest import ThreadedUvicorn
from tests.fake_openai import REPLY, fake_openai_app

MESSAGES: list[Message] = [{"role": "user", "content": "Name one colour of the rainbow, please."}]
PRICE = Price(input=0.5, output=1.5)


@pytest.fixture(scope="module")
def no_usage() -> Iterator[str]:
    server = ThreadedUvicorn(fake_openai_app(listed=None, stream_usage=False))
    yield server.url + "/v1"
    server.stop()


@pytest.fixture(scope="module")
def with_usage() -> Iterator[str]:
    server = ThreadedUvicorn(fake_openai_app(listed=None, stream_usage=True))
    yield server.url + "/v1"
    server.stop()


def worker(url: str, model: str = "smollm2", *, stream: bool = True) -> OpenAICompatWorker:
    settings = WorkerSettings(max_tokens=64)
    return OpenAICompatWorker("http", model, base_url=url, settings=settings, price=PRICE, stream=stream)


def test_a_stream_without_usage_is_counted_as_a_byte_bound_and_marked(no_usage: str) -> None:
    result = asyncio.run(worker(no_usage).complete(Call(MESSAGES)))
    assert result.text == REPLY
    assert not result.usage_reported and result.usage.estimated
    # no tokenizer for the name "smollm2": the bound — prompt bytes + template markers, reply bytes + 1
    assert result.usage.input_tokens == prompt_token_bound(MESSAGES)
    assert result.usage.output_tokens == len(REPLY.encode("utf-8")) + 1
    assert result.cost_usd == pytest.approx(PRICE.cost(result.usage)) and result.cost_usd > 0


def test_a_stream_with_usage_keeps_the_servers_counts(with_usage: str) -> None:
    result = asyncio.run(worker(with_usage).complete(Call(MESSAGES)))
    assert result.usage_reported and not result.usage.estimated
    assert (result.usage.input_tokens, result.usage.output_tokens) == (7, len(REPLY.split()))  # its word counts


@pytest.mark.slow
@pytest.mark.skipif(model_status("smollm2-135m-instruct") != "ready", reason="needs the embedded SmolLM2-135M")
def test_an_embedded_model_name_is_counted_with_its_tokenizer(no_usage: str) -> None:
    from podium.workers.llama_cpp import LlamaCppWorker

    result = asyncio.run(worker(no_usage, "smollm2-135m-instruct").complete(Call(MESSAGES)))
    assert result.usage.estimated and not result.usage_reported
    exact = LlamaCppWorker("local", "smollm2-135m-instruct", settings=WorkerSettings(), price=PRICE)
    assert result.usage.input_tokens == exact.count_tokens(MESSAGES)  # its chat template and vocabulary
    assert 1 < result.usage.output_tokens < len(REPLY.encode("utf-8"))  # real tokens, fewer than bytes


def test_the_budget_keeps_the_full_reservation(no_usage: str) -> None:
    """The estimate is for the record; the cap is charged the call's worst case, as before."""
    budget = RequestBudget(Limits(cost_cap_usd=1.0))

    async def call() -> None:
        await BudgetGuard(worker(no_usage)).complete(Call(MESSAGES, context=CallContext(budget=budget)))

    asyncio.run(call())
    worst = worst_case_cost(PRICE, prompt_token_bound([*MESSAGES, {"role": "assistant", "content": ""}]), 64)
    assert budget.ledger.spent_usd == pytest.approx(worst) and budget.ledger.reserved_usd == 0


def test_traces_and_trace_show_say_the_figures_are_estimated(
    no_usage: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pool = tmp_path / "http.toml"
    pool.write_text(
        'name = "http"\nmax_steps = 1\n[conductor]\nworker = "http"\nresamples = 0\n[fallback]\nworker = "http"\n'
        f'[[workers]]\nname = "http"\nbackend = "openai"\nmodel = "smollm2"\nbase_url = "{no_usage}"\n'
        "stream = true\nprice = { input = 0.5, output = 1.5 }\n",
        encoding="utf-8",
    )
    db = str(tmp_path / "t.sqlite3")
    assert cli(["run", "Which colour?", "--pool", str(pool), "--traces", db, "--json"]) == 0
    record = json.loads(capsys.readouterr().out)  # the conductor's plan does not parse: the fallback answers
    step = record["steps"][-1]
    assert step["usage"]["estimated"] is True and step["usage"]["output_tokens"] > 0 and step["cost_usd"] > 0
    assert record["totals"]["estimated_calls"] == len(record["steps"]) + len(record["attempts"])
    assert record["totals"]["total_cost_usd"] > 0
    assert cli(["trace", "show", record["id"][:8], "--traces", db, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == record  # stored and read back with the marks
    assert cli(["trace", "show", record["id"][:8], "--traces", db]) == 0
    shown = capsys.readouterr().out
    assert "(estimated: no usage reported)" in shown
    assert f"tokens and cost of {record['totals']['estimated_calls']} call(s): their server reported no usage" in shown
