"""Native Anthropic and Gemini backends against replies in their APIs' documented formats,
served by a scripted HTTP server on 127.0.0.1 (no network, no real keys). The server also
records each request, so the request format and auth headers are checked too."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from podium.errors import ClientError, ConfigError, RateLimited, ServerError
from podium.workers.base import Price, WorkerSettings

pytest.importorskip("httpx", reason="needs podium[providers]")
from podium.workers.base import Call
from podium.workers.native import AnthropicWorker, GeminiWorker

# Replies in the shapes the providers document (Anthropic Messages API, Gemini generateContent).
ANTHROPIC_OK = {
    "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-20250514",
    "content": [{"type": "thinking", "thinking": "hidden", "signature": "x"}, {"type": "text", "text": "391"}],
    "stop_reason": "end_turn", "stop_sequence": None,
    "usage": {"input_tokens": 12, "cache_creation_input_tokens": 3, "cache_read_input_tokens": 40, "output_tokens": 9},
}  # fmt: skip
ANTHROPIC_429 = {"type": "error", "error": {"type": "rate_limit_error", "message": "Number of requests exceeded"}}
ANTHROPIC_529 = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
ANTHROPIC_401 = {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}
GEMINI_OK = {
    "candidates": [{"content": {"role": "model", "parts": [{"text": "thinking...", "thought": True}, {"text": "391"}]},
                    "finishReason": "STOP", "index": 0}],
    "usageMetadata": {"promptTokenCount": 20, "candidatesTokenCount": 2, "thoughtsTokenCount": 30,
                      "cachedContentTokenCount": 8, "totalTokenCount": 52},
    "modelVersion": "gemini-2.5-pro",
}  # fmt: skip
GEMINI_429 = {
    "error": {"code": 429, "message": "Resource has been exhausted", "status": "RESOURCE_EXHAUSTED",
              "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "17s"}]}
}  # fmt: skip
GEMINI_503 = {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "17*23?"}]
KEY = "sk-test-not-a-real-key"


class Provider:
    """Serves scripted (status, headers, body) replies in order and records requests."""

    def __init__(self, replies: list[tuple[int, dict[str, str], dict[str, Any]]]) -> None:
        self.replies = replies
        self.requests: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        self.url = ""

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        lines = head.split("\r\n")
        headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if ":" in line)}
        body = json.loads(await reader.readexactly(int(headers["content-length"])))
        self.requests.append((lines[0].split()[1], headers, body))
        status, extra, reply = self.replies[min(len(self.requests), len(self.replies)) - 1]
        payload = json.dumps(reply).encode()
        head_out = [f"HTTP/1.1 {status} X", "Content-Type: application/json", f"Content-Length: {len(payload)}"]
        head_out += [f"{k}: {v}" for k, v in extra.items()]
        writer.write(("\r\n".join(head_out) + "\r\n\r\n").encode() + payload)
        await writer.drain()
        writer.close()


def call(worker_cls: type, provider: Provider, **kw: Any) -> Any:
    async def scenario() -> Any:
        server = await asyncio.start_server(provider.serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        worker = worker_cls(
            "w", kw.pop("model", "m"), settings=WorkerSettings(max_tokens=64, temperature=0.2),
            price=Price(input=3.0, output=15.0, cached_input=0.3), api_key_env="PODIUM_NATIVE_KEY",
            base_url=f"http://127.0.0.1:{port}", **kw,
        )  # fmt: skip
        try:
            return await worker.complete(Call(MESSAGES))
        finally:
            server.close()

    return asyncio.run(scenario())


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("PODIUM_NATIVE_KEY", KEY)
    yield


def test_anthropic_request_and_reply() -> None:
    provider = Provider([(200, {}, ANTHROPIC_OK)])
    result = call(
        AnthropicWorker,
        provider,
        model="claude-sonnet-4-20250514",
        extra_body={"thinking": {"type": "enabled", "budget_tokens": 1024}},
    )
    path, headers, body = provider.requests[0]
    assert path == "/v1/messages"
    assert headers["x-api-key"] == KEY and headers["anthropic-version"] == "2023-06-01"
    assert body["system"] == "Be brief." and body["messages"] == [{"role": "user", "content": "17*23?"}]
    assert body["max_tokens"] == 64 and body["thinking"]["budget_tokens"] == 1024
    assert result.text == "391"  # thinking blocks are not the answer
    assert (result.usage.input_tokens, result.usage.cached_input_tokens, result.usage.output_tokens) == (55, 40, 9)
    assert result.cost_usd == pytest.approx((15 * 3.0 + 40 * 0.3 + 9 * 15.0) / 1e6)


def test_gemini_request_and_reply() -> None:
    provider = Provider([(200, {}, GEMINI_OK)])
    result = call(GeminiWorker, provider, model="gemini-2.5-pro",
                  extra_body={"generationConfig": {"thinkingConfig": {"thinkingBudget": 512}}})  # fmt: skip
    path, headers, body = provider.requests[0]
    assert path == "/v1beta/models/gemini-2.5-pro:generateContent"
    assert headers["x-goog-api-key"] == KEY
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert body["contents"] == [{"role": "user", "parts": [{"text": "17*23?"}]}]
    assert body["generationConfig"]["maxOutputTokens"] == 64
    assert body["generationConfig"]["thinkingConfig"]["thinkingBudget"] == 512
    assert result.text == "391"  # thought parts are not the answer
    assert result.usage.output_tokens == 32 and result.usage.reasoning_tokens == 30
    assert result.usage.input_tokens == 20 and result.usage.cached_input_tokens == 8


@pytest.mark.parametrize(
    ("worker_cls", "reply", "expected", "retry_after"),
    [
        (AnthropicWorker, (429, {"retry-after": "12"}, ANTHROPIC_429), RateLimited, 12.0),
        (AnthropicWorker, (529, {}, ANTHROPIC_529), ServerError, None),
        (AnthropicWorker, (401, {}, ANTHROPIC_401), ClientError, None),
        (GeminiWorker, (429, {}, GEMINI_429), RateLimited, 17.0),
        (GeminiWorker, (503, {}, GEMINI_503), ServerError, None),
    ],
    ids=["anthropic-429", "anthropic-529-overloaded", "anthropic-401", "gemini-429-retryinfo", "gemini-503"],
)
def test_provider_errors_are_typed(worker_cls: type, reply: Any, expected: type, retry_after: float | None) -> None:
    with pytest.raises(expected) as info:
        call(worker_cls, Provider([reply]))
    assert info.value.status == reply[0]  # type: ignore[attr-defined]
    assert info.value.retry_after == retry_after  # type: ignore[attr-defined]
    assert KEY not in str(info.value)


def test_missing_key_is_a_config_error_before_any_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PODIUM_NATIVE_KEY")
    provider = Provider([(200, {}, ANTHROPIC_OK)])
    with pytest.raises(ConfigError, match="PODIUM_NATIVE_KEY"):
        call(AnthropicWorker, provider)
    assert provider.requests == []
