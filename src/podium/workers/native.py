"""Native provider backends: Anthropic's Messages API and Google's Gemini ``generateContent``.

Each maps podium's chat messages and decoding settings to the provider's request, and the reply's
text and usage back (input, cached input, output, reasoning tokens). HTTP and errors go through
:mod:`podium.workers._http`. Keys come from the environment variable the pool file names
(``x-api-key`` / ``x-goog-api-key`` headers) and never reach traces.

References: Anthropic Messages API (``POST /v1/messages``, ``anthropic-version: 2023-06-01``);
Gemini API (``POST /v1beta/models/{model}:generateContent``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from podium.workers._http import api_key, post_json
from podium.workers.base import Completion, Message, Price, Usage, WorkerSettings

__all__ = ["AnthropicWorker", "GeminiWorker"]


class _NativeWorker:
    """Shared constructor of the native backends."""

    default_base_url = ""

    def __init__(
        self,
        name: str,
        model: str,
        *,
        settings: WorkerSettings,
        price: Price,
        api_key_env: str | None,
        base_url: str | None = None,
        timeout_s: float = 600.0,
        description: str = "",
        system_prompt: str | None = None,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.model = model
        self.settings = settings
        self.price = price
        self.api_key_env = api_key_env
        self.base_url = (base_url or self.default_base_url).rstrip("/")
        self.timeout_s = timeout_s
        self.description = description
        self.system_prompt = system_prompt
        self.extra_body = dict(extra_body or {})

    def _completion(self, text: str, usage: Usage, finish: str, started: float) -> Completion:
        return Completion(text, usage, self.price.cost(usage), time.perf_counter() - started, finish)


def _split_system(messages: Sequence[Message]) -> tuple[str, list[Message]]:
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    return system, [m for m in messages if m["role"] != "system"]


class AnthropicWorker(_NativeWorker):
    """Claude through the Messages API. ``extra_body`` can carry e.g. ``{"thinking": {"type":
    "enabled", "budget_tokens": 2000}}``. Input tokens reported = uncached + cache reads + cache
    writes; cache reads are ``cached_input_tokens``."""

    default_base_url = "https://api.anthropic.com"

    async def complete(self, messages: Sequence[Message], settings: WorkerSettings | None = None) -> Completion:
        s = settings or self.settings
        started = time.perf_counter()
        system, turns = _split_system(messages)
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": s.max_tokens,
            "messages": [{"role": m["role"], "content": m["content"]} for m in turns],
            "temperature": s.temperature,
            **self.extra_body,
        }
        if system:
            body["system"] = system
        if s.top_p < 1.0:
            body["top_p"] = s.top_p
        headers = {
            "x-api-key": api_key(self.name, self.api_key_env),
            "anthropic-version": "2023-06-01",
            "content-type": "application/json",
        }
        data = await post_json(self.name, f"{self.base_url}/v1/messages", headers, body, self.timeout_s)
        text = "".join(block.get("text", "") for block in data.get("content", []) if block.get("type") == "text")
        u = data.get("usage", {})
        cached = int(u.get("cache_read_input_tokens") or 0)
        written = int(u.get("cache_creation_input_tokens") or 0)
        usage = Usage(int(u.get("input_tokens") or 0) + cached + written, int(u.get("output_tokens") or 0), cached)
        finish = "length" if data.get("stop_reason") == "max_tokens" else "stop"
        return self._completion(text, usage, finish, started)


class GeminiWorker(_NativeWorker):
    """Gemini through ``generateContent``. ``reasoning_effort`` is not used; set a thinking
    budget with ``extra_body = {generationConfig = {thinkingConfig = {thinkingBudget = 1024}}}``.
    Thought tokens are billed as output and reported as ``reasoning_tokens``."""

    default_base_url = "https://generativelanguage.googleapis.com"

    async def complete(self, messages: Sequence[Message], settings: WorkerSettings | None = None) -> Completion:
        s = settings or self.settings
        started = time.perf_counter()
        system, turns = _split_system(messages)
        config: dict[str, Any] = {"maxOutputTokens": s.max_tokens, "temperature": s.temperature, "seed": s.seed}
        if s.top_p < 1.0:
            config["topP"] = s.top_p
        extra = dict(self.extra_body)
        config.update(extra.pop("generationConfig", {}))
        body: dict[str, Any] = {
            "contents": [
                {"role": "model" if m["role"] == "assistant" else "user", "parts": [{"text": m["content"]}]}
                for m in turns
            ],
            "generationConfig": config,
            **extra,
        }
        if system:
            body["systemInstruction"] = {"parts": [{"text": system}]}
        headers = {"x-goog-api-key": api_key(self.name, self.api_key_env), "content-type": "application/json"}
        url = f"{self.base_url}/v1beta/models/{self.model}:generateContent"
        data = await post_json(self.name, url, headers, body, self.timeout_s)
        candidates = data.get("candidates") or [{}]
        parts = candidates[0].get("content", {}).get("parts", [])
        text = "".join(p.get("text", "") for p in parts if not p.get("thought"))
        u = data.get("usageMetadata", {})
        thoughts = int(u.get("thoughtsTokenCount") or 0)
        usage = Usage(
            int(u.get("promptTokenCount") or 0),
            int(u.get("candidatesTokenCount") or 0) + thoughts,
            int(u.get("cachedContentTokenCount") or 0),
            thoughts,
        )
        finish = "length" if candidates[0].get("finishReason") == "MAX_TOKENS" else "stop"
        return self._completion(text, usage, finish, started)
