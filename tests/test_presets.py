"""Packaged pool presets, the dated price table, and provider request fields (no network: the
HTTP side is a scripted server on 127.0.0.1 that records what podium sends)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from podium.cli import cli
from podium.errors import ConfigError
from podium.pool import PRICE_TABLE, PRICE_TABLE_AS_OF, load_pool, packaged_pools
from podium.pool_workers import build_pool_workers
from podium.workers.base import Price, WorkerSettings

pytest.importorskip("openai", reason="needs podium[openai]")
from podium.workers.base import Call
from podium.workers.openai_compat import OpenAICompatWorker


@pytest.mark.parametrize("name", sorted(packaged_pools()))
def test_every_preset_loads_and_builds(name: str) -> None:
    pool = load_pool(name)
    workers = build_pool_workers(pool)  # builds clients lazily: no model load, no network
    assert len(workers) == len(pool.workers) >= 3
    for w in pool.workers:
        merged = pool.merged(w)
        assert merged.price is not None
        if w.backend == "openai":
            assert merged.price.output > 0  # every remote worker is priced


def test_frontier_takes_prices_from_the_dated_table() -> None:
    pool = load_pool("frontier")
    gpt5 = pool.merged(next(w for w in pool.workers if w.name == "gpt-5"))
    assert gpt5.price == PRICE_TABLE["gpt-5"]
    assert PRICE_TABLE_AS_OF  # the table says when its prices were taken
    assert pool.conductor.model == "qwen2.5-coder-1.5b-instruct" and pool.conductor.worker is None


def test_unpriced_unknown_model_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(
        "[conductor]\nmodel = 'smollm2-135m-instruct'\n[fallback]\nworker = 'x'\n"
        "[[workers]]\nname = 'x'\nbackend = 'openai'\nmodel = 'my-own-model'\nbase_url = 'http://127.0.0.1:1/v1'\n"
    )
    with pytest.raises(ConfigError, match="not in podium's price table"):
        load_pool(path)


def test_conductor_needs_exactly_one_source(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(
        "[conductor]\nworker = 'x'\nmodel = 'smollm2-135m-instruct'\n[fallback]\nworker = 'x'\n"
        "[[workers]]\nname = 'x'\nbackend = 'python'\n"
    )
    with pytest.raises(ConfigError, match="exactly one"):
        load_pool(path)


def test_frontier_pool_check_without_keys_names_each_variable(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "TOGETHER_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    code = cli(["pool", "check", "--pool", "frontier", "--json"])
    rows = json.loads(capsys.readouterr().out)
    assert code == 1
    workers = [r for r in rows if r["role"] == "worker"]  # the last row checks the conductor
    assert {r["worker"]: r["error"].split(" in the environment variable ")[-1] for r in workers} == {
        "gpt-5": "OPENAI_API_KEY",
        "claude-sonnet-4": "ANTHROPIC_API_KEY",
        "gemini-2.5-pro": "GEMINI_API_KEY",
        "llama-3.3-70b": "TOGETHER_API_KEY",
        "qwen2.5-7b": "TOGETHER_API_KEY",
    }


def test_request_fields_and_reasoning_usage(monkeypatch: pytest.MonkeyPatch) -> None:
    """reasoning_effort and extra_body reach the wire, top_p=1.0 does not, the key is sent as a
    bearer token, and reasoning / cached tokens are read from the usage block."""
    seen: list[dict[str, Any]] = []
    headers: list[bytes] = []
    body = {
        "id": "x", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 30, "total_tokens": 80,
                  "prompt_tokens_details": {"cached_tokens": 20},
                  "completion_tokens_details": {"reasoning_tokens": 25}},
    }  # fmt: skip

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")).split(b":")[1])
        seen.append(json.loads(await reader.readexactly(length)))
        headers.append(head)
        payload = json.dumps(body).encode()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(payload))
        writer.write(payload)
        await writer.drain()
        writer.close()

    async def scenario() -> Any:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        monkeypatch.setenv("PODIUM_TEST_PROVIDER_KEY", "sk-secret")
        worker = OpenAICompatWorker(
            "r", "gpt-5", base_url=f"http://127.0.0.1:{port}/v1", api_key_env="PODIUM_TEST_PROVIDER_KEY",
            settings=WorkerSettings(max_tokens=64, temperature=1.0, reasoning_effort="low"),
            price=Price(input=1.25, output=10.0, cached_input=0.125),
            extra_body={"thinking": {"type": "enabled", "budget_tokens": 1024}},
        )  # fmt: skip
        try:
            return await worker.complete(Call([{"role": "user", "content": "hi"}]))
        finally:
            server.close()

    result = asyncio.run(scenario())
    (request,) = seen
    assert request["reasoning_effort"] == "low" and request["thinking"]["budget_tokens"] == 1024
    assert "top_p" not in request and request["max_tokens"] == 64
    assert b"authorization: bearer sk-secret" in headers[0].lower()
    assert result.usage.reasoning_tokens == 25 and result.usage.cached_input_tokens == 20
    assert result.cost_usd == pytest.approx((30 * 1.25 + 20 * 0.125 + 30 * 10.0) / 1e6)


def test_run_without_the_pools_keys_stops_before_any_work(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "TOGETHER_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    code = cli(["run", "2+2?", "--pool", "frontier", "--traces", str(tmp_path / "t.sqlite3")])
    err = capsys.readouterr().err
    assert code == 2
    assert "ANTHROPIC_API_KEY, GEMINI_API_KEY, OPENAI_API_KEY, TOGETHER_API_KEY" in err
    assert not (tmp_path / "t.sqlite3").exists()  # nothing ran
