"""OpenAI-compatible HTTP backend.

One backend for every server that speaks ``POST /v1/chat/completions``: OpenAI, vLLM, the
llama.cpp server, Ollama, LM Studio, OpenRouter, Together. The request is the chat-completions
JSON (``extra_body`` merged into it), sent with aiohttp over a connection pool shared by every
worker of the endpoint (:mod:`podium.workers._http`, which also translates failures into
podium's typed errors: 429 → RateLimited with ``retry_after``, timeouts → WorkerTimeout,
connection failures → TransportError, 5xx → ServerError, other 4xx → ClientError). There are no
retries here; podium's Retrying wrapper owns that policy.

The API key is read from the environment variable the pool file names (``api_key_env``) when
the first call is made; it is never stored in traces or logs.

Usage: a stream asks for it (``stream_options.include_usage``); a server that still sends none
(llama-cpp-python's server, some proxies) gets its tokens counted by podium and marked
estimated (``Usage.estimated``, ``Completion.usage_reported = False``) instead of recorded as
0 tokens and $0: with the model's own tokenizer when the model name is an embedded model that is
installed (its GGUF vocabulary and chat template, in llama.cpp), else an upper bound — the
prompt's UTF-8 bytes plus the chat template's markers (:func:`podium.budget.prompt_token_bound`)
and the reply's UTF-8 bytes plus one end token, since no byte-level BPE token is shorter than one
byte (a system prompt the server adds on its own is not seen by either count). Budgets keep such
a call's full reservation all the same.
"""

from __future__ import annotations

import asyncio
import atexit
import dataclasses
import functools
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from podium.budget import prompt_token_bound
from podium.errors import ConfigError, ProviderError
from podium.unicode import utf8_length, valid_text
from podium.workers._http import get_json, post_json, post_stream
from podium.workers._remote import RemoteWorker
from podium.workers.base import Call, CallContext, Completion, Message, Usage

__all__ = ["OpenAICompatWorker", "estimate_usage"]

_log = logging.getLogger("podium")

_NO_KEY = "sk-no-key-needed"  # local servers ignore the key; some proxies want one all the same


class OpenAICompatWorker(RemoteWorker):
    """A worker behind an OpenAI-compatible chat-completions endpoint (``base_url`` e.g.
    ``http://127.0.0.1:8000/v1``; fields as :class:`~podium.workers._remote.RemoteWorker`).

    Args:
        stream: stream the reply (usage is requested with ``stream_options.include_usage``).

    Attributes:
        last_model: the ``model`` field of the most recent reply (what the server says answered;
            some servers echo the requested name whatever they serve), or None before any.
    """

    backend = "openai"
    """The backend's name in pool files (``backend = "openai"``); part of the request-cache key."""

    def __init__(self, name: str, model: str, *, stream: bool = False, **fields: Any) -> None:
        super().__init__(name, model, **fields)
        self.stream = stream
        self.last_model: str | None = None

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key() or _NO_KEY}"}

    async def served_models(self) -> tuple[str, ...]:
        """The model ids the server lists (``GET /models``). Raises ProviderError as
        :meth:`complete` does (a server without the endpoint: ClientError, status 404)."""
        page = await get_json(self.info.name, f"{self.base_url}/models", self._headers(), self.timeout_s)
        data = page.get("data") if isinstance(page, dict) else None
        return tuple(str(m["id"]) for m in data or [] if isinstance(m, dict) and "id" in m)

    async def complete(self, call: Call) -> Completion:
        messages, s, context = call.messages, call.settings_for(self), call.context
        started = time.perf_counter()
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
            "max_tokens": s.max_tokens,
            "temperature": s.temperature,
            "seed": s.seed,
        }
        if s.top_p < 1.0:  # reasoning models refuse top_p: send it only when it means something
            body["top_p"] = s.top_p
        if s.reasoning_effort is not None:
            body["reasoning_effort"] = s.reasoning_effort
        body.update(self.extra_body)
        url, name = f"{self.base_url}/chat/completions", self.info.name
        usage: Usage | None
        if self.stream or context.stream is not None:  # stream the answer step to the caller
            body["stream"], body["stream_options"] = True, {"include_usage": True}
            async with post_stream(name, url, self._headers(), body, self.timeout_s, context) as events:
                text, usage, finish = await self._streamed(events, context)
        else:
            reply = await post_json(name, url, self._headers(), body, self.timeout_s, context)
            self.last_model = _text(reply.get("model")) or self.last_model
            choice = _first_choice(reply, name)
            message = choice.get("message")
            text = _text(message.get("content")) if isinstance(message, dict) else ""
            finish = _text(choice.get("finish_reason")) or "stop"
            usage = _usage(reply.get("usage"))
        done = self.completion(text, usage or Usage(), finish, started)  # its latency: the call's alone
        if usage is not None:
            return done
        # the server sent no usage (though a stream asks for it): count the tokens, and say so
        counted = await asyncio.to_thread(estimate_usage, self.model, messages, text)
        return dataclasses.replace(done, usage=counted, cost_usd=self.info.price.cost(counted), usage_reported=False)

    async def _streamed(
        self, events: AsyncIterator[dict[str, Any]], context: CallContext
    ) -> tuple[str, Usage | None, str]:
        """Text, usage (None when the server sent none) and finish reason of a streamed reply;
        the answering step's text goes on to ``context.stream`` as it arrives."""
        parts: list[str] = []
        usage: Usage | None = None
        finish = "stop"
        async for chunk in events:
            self.last_model = _text(chunk.get("model")) or self.last_model
            if chunk.get("usage") is not None:
                usage = _usage(chunk["usage"])  # None for usage that cannot be true: estimated below
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta") if isinstance(choice, dict) else None
                content = _text(delta.get("content")) if isinstance(delta, dict) else ""
                if content:
                    parts.append(content)
                    if context.stream is not None:
                        context.report_text("".join(parts))
                if isinstance(choice, dict) and choice.get("finish_reason"):
                    finish = _text(choice["finish_reason"]) or finish
        return "".join(parts), usage, finish


def _text(value: Any) -> str:
    """A string field of a reply as text ("" for a missing or non-string one)."""
    return value if isinstance(value, str) else ""


def _first_choice(reply: dict[str, Any], worker: str) -> dict[str, Any]:
    choices = reply.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ProviderError(f"worker {worker!r}: the reply has no choices", worker=worker)
    return choices[0]


def estimate_usage(model: str, messages: Sequence[Message], reply: str) -> Usage:
    """Token counts of a call whose server reported none, marked ``estimated``: exact for the
    prompt and reply as ``model``'s tokenizer reads them when ``model`` is an installed embedded
    model (the server's own chat template may add a few tokens), else an upper bound for
    byte-level BPE tokenizers (see the module docstring). May load a GGUF vocabulary (fast, no
    weights): call it off the event loop."""
    counter = _tokenizer(model)
    if counter is not None:
        prompt, output = counter(messages, reply)
        return Usage(prompt, output, estimated=True)
    return Usage(prompt_token_bound(messages), utf8_length(reply) + 1, estimated=True)


@functools.cache
def _tokenizer(model: str) -> Callable[[Sequence[Message], str], tuple[int, int]] | None:
    """(prompt, reply) → (prompt tokens, reply tokens) with ``model``'s own vocabulary and chat
    template, or None when podium has no tokenizer for it (not an installed embedded model, or
    llama-cpp-python missing)."""
    from podium.llama_runtime import load_llama_cpp
    from podium.local_models import EMBEDDED_MODELS, model_status, resolve_model

    if model not in EMBEDDED_MODELS or model_status(model) != "ready":
        return None
    try:
        llama_cpp = load_llama_cpp()
        from podium.workers.llama_cpp import chat_formatter
    except ConfigError:  # llama-cpp-python missing
        return None
    vocab = llama_cpp.Llama(model_path=str(resolve_model(model, verify=False)), vocab_only=True, verbose=False)
    atexit.register(vocab.close)  # freed while llama.cpp is still loaded, not in interpreter teardown
    formatter = chat_formatter(vocab)
    if formatter is None:
        return None

    def count(messages: Sequence[Message], reply: str) -> tuple[int, int]:
        formatted = formatter(messages=list(messages))  # type: ignore[arg-type]
        prompt = vocab.tokenize(
            valid_text(formatted.prompt).encode("utf-8"), add_bos=not formatted.added_special, special=True
        )
        output = vocab.tokenize(valid_text(reply).encode("utf-8"), add_bos=False, special=False) if reply else []
        return len(prompt), len(output) + 1  # the end-of-turn token ends every reply

    return count


def _usage(raw: Any) -> Usage | None:
    """The reported usage, or None when there is none or it cannot be true (:meth:`Usage.reported`):
    the call is then estimated, and its worst case kept in the budget."""
    if not isinstance(raw, dict):
        return None
    prompt_details, output_details = raw.get("prompt_tokens_details"), raw.get("completion_tokens_details")
    cached = prompt_details.get("cached_tokens") if isinstance(prompt_details, dict) else None
    reasoning = output_details.get("reasoning_tokens") if isinstance(output_details, dict) else None
    usage = Usage.reported(raw.get("prompt_tokens"), raw.get("completion_tokens"), cached, reasoning)
    if usage is None:
        _log.warning("a server reported usage that cannot be true (%r); the call is estimated instead", raw)
    return usage
