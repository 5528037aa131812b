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

from podium.workers._http import post_json
from podium.workers._remote import RemoteWorker
from podium.workers.base import Call, Completion, Message, Usage, token_count

__all__ = ["AnthropicWorker", "GeminiWorker"]


def _split_system(messages: Sequence[Message]) -> tuple[str, list[Message]]:
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    return system, [m for m in messages if m["role"] != "system"]


class AnthropicWorker(RemoteWorker):
    """Claude through the Messages API. ``extra_body`` can carry e.g. ``{"thinking": {"type":
    "enabled", "budget_tokens": 2000}}``. Input tokens reported = uncached + cache reads + cache
    writes; cache reads are ``cached_input_tokens``."""

    backend = "anthropic"
    """The backend's name in pool files (``backend = "anthropic"``); part of the request-cache key."""

    async def complete(self, call: Call) -> Completion:
        messages, s = call.messages, call.settings_for(self)
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
            "x-api-key": self.api_key() or "",
            "anthropic-version": "2023-06-01",
            "content-type": "application/json",
        }
        data = await post_json(
            self.info.name, f"{self.base_url}/v1/messages", headers, body, self.timeout_s, call.context
        )
        text = "".join(block.get("text", "") for block in data.get("content", []) if block.get("type") == "text")
        u = data.get("usage") or {}
        keys = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "output_tokens")
        fresh, cached, written, output = (token_count(u.get(k)) for k in keys)  # None: cannot be true
        usage = None
        if fresh is not None and cached is not None and written is not None and output is not None:
            usage = Usage(fresh + cached + written, output, cached)
        finish = "length" if data.get("stop_reason") == "max_tokens" else "stop"
        return self._answered(text, usage, finish, started, messages)


class GeminiWorker(RemoteWorker):
    """Gemini through ``generateContent``. ``reasoning_effort`` is not used; set a thinking
    budget with ``extra_body = {generationConfig = {thinkingConfig = {thinkingBudget = 1024}}}``.
    Thought tokens are billed as output and reported as ``reasoning_tokens``."""

    backend = "gemini"
    """The backend's name in pool files (``backend = "gemini"``); part of the request-cache key."""

    async def complete(self, call: Call) -> Completion:
        messages, s = call.messages, call.settings_for(self)
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
        headers = {"x-goog-api-key": self.api_key() or "", "content-type": "application/json"}
        url = f"{self.base_url}/v1beta/models/{self.model}:generateContent"
        data = await post_json(self.info.name, url, headers, body, self.timeout_s, call.context)
        candidates = data.get("candidates") or [{}]
        parts = candidates[0].get("content", {}).get("parts", [])
        text = "".join(p.get("text", "") for p in parts if not p.get("thought"))
        u = data.get("usageMetadata") or {}
        thoughts = token_count(u.get("thoughtsTokenCount"))
        visible = Usage.reported(
            u.get("promptTokenCount"), u.get("candidatesTokenCount"), u.get("cachedContentTokenCount")
        )
        usage = None
        if thoughts is not None and visible is not None:
            usage = Usage(visible.input_tokens, visible.output_tokens + thoughts, visible.cached_input_tokens, thoughts)
        finish = "length" if candidates[0].get("finishReason") == "MAX_TOKENS" else "stop"
        return self._answered(text, usage, finish, started, messages)
