"""OpenAI-compatible HTTP backend (the official ``openai`` SDK).

One backend for every server that speaks ``POST /v1/chat/completions``: OpenAI, vLLM, the
llama.cpp server, Ollama, LM Studio, OpenRouter, Together. Provider errors are translated here,
once, into podium's typed errors: 429 → RateLimited (with ``retry_after`` from the header),
timeouts → WorkerTimeout, connection failures → TransportError, 5xx → ServerError, other 4xx →
ClientError. The SDK's own retries are off; podium's Retrying wrapper owns that policy.

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
from collections.abc import Callable, Sequence
from typing import Any

from podium.budget import prompt_token_bound
from podium.errors import (
    ClientError,
    ConfigError,
    ProviderError,
    RateLimited,
    ServerError,
    TransportError,
    WorkerTimeout,
)
from podium.unicode import utf8_length, valid_text
from podium.workers._clients import limits, shared_client
from podium.workers._remote import RemoteWorker
from podium.workers.base import Call, CallContext, Completion, Message, Usage

try:
    import openai
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ConfigError("the openai backend needs the openai SDK: pip install 'podium[openai]'") from exc

__all__ = ["OpenAICompatWorker", "estimate_usage"]

_log = logging.getLogger("podium")

_NO_KEY = "sk-no-key-needed"  # local servers ignore the key, but the SDK wants one


def _sdk_http_client() -> Any:
    """The SDK's own HTTP client class (its transport defaults kept) with podium's limits."""
    import httpx2  # the openai SDK's HTTP library

    return openai.DefaultAsyncHttpxClient(limits=limits(httpx2))


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
        self._client: openai.AsyncOpenAI | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def _api(self) -> openai.AsyncOpenAI:
        """The SDK client of this worker on the running loop, over the connection pool shared
        by every worker of this endpoint (:mod:`podium.workers._clients`)."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            key = self.api_key() or _NO_KEY
            http = shared_client("openai", self.base_url, _sdk_http_client)
            self._client = openai.AsyncOpenAI(base_url=self.base_url, api_key=key, max_retries=0, http_client=http)
            self._client_loop = loop
        return self._client

    async def served_models(self) -> tuple[str, ...]:
        """The model ids the server lists (``GET /models``). Raises ProviderError as
        :meth:`complete` does (a server without the endpoint: ClientError, status 404)."""
        try:
            page = await self._api().models.list()
        except openai.OpenAIError as exc:
            raise _translate(exc, self.info.name) from None
        return tuple(m.id for m in page.data)

    async def complete(self, call: Call) -> Completion:
        messages, s, context = call.messages, call.settings_for(self), call.context
        started = time.perf_counter()
        context.mark_pending()
        limit = context.call_timeout_s()
        timeout = self.timeout_s if limit is None else max(0.001, min(self.timeout_s, limit))
        request: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            "max_tokens": s.max_tokens,
            "temperature": s.temperature,
            "seed": s.seed,
            "timeout": timeout,
        }
        if s.top_p < 1.0:  # reasoning models refuse top_p: send it only when it means something
            request["top_p"] = s.top_p
        if s.reasoning_effort is not None:
            request["reasoning_effort"] = s.reasoning_effort
        if self.extra_body:
            request["extra_body"] = self.extra_body
        client = self._api()
        usage: Usage | None
        try:
            # `timeout` bounds the whole call, not each read: a stream trickling one chunk every
            # half second must still end at the limit (the SDK's timeout is per read)
            async with asyncio.timeout(timeout):
                context.mark_sent()
                if self.stream or context.stream is not None:  # stream the answer step to the caller
                    text, usage, finish = await self._streamed(client, request, context)
                else:
                    response = await client.chat.completions.create(**request)
                    self.last_model = response.model
                    choice = response.choices[0]
                    text, finish = choice.message.content or "", choice.finish_reason or "stop"
                    usage = _usage(response.usage)
        except TimeoutError:
            raise WorkerTimeout(
                f"worker {self.info.name!r}: no complete reply within {timeout:.1f} s", worker=self.info.name
            ) from None
        except openai.OpenAIError as exc:
            raise _translate(exc, self.info.name) from None
        done = self.completion(text, usage or Usage(), finish, started)  # its latency: the call's alone
        if usage is not None:
            return done
        # the server sent no usage (though a stream asks for it): count the tokens, and say so
        counted = await asyncio.to_thread(estimate_usage, self.model, messages, text)
        return dataclasses.replace(done, usage=counted, cost_usd=self.info.price.cost(counted), usage_reported=False)

    async def _streamed(
        self, client: openai.AsyncOpenAI, request: dict[str, Any], context: CallContext
    ) -> tuple[str, Usage | None, str]:
        """Text, usage (None when the server sent none) and finish reason of a streamed reply;
        the answering step's text goes on to ``context.stream`` as it arrives."""
        parts: list[str] = []
        usage: Usage | None = None
        finish = "stop"
        response = await client.chat.completions.create(**request, stream=True, stream_options={"include_usage": True})
        async for chunk in response:
            self.last_model = chunk.model or self.last_model
            if chunk.usage is not None:
                usage = _usage(chunk.usage)  # None for usage that cannot be true: estimated below
            for choice in chunk.choices:
                if choice.delta and choice.delta.content:
                    parts.append(choice.delta.content)
                    if context.stream is not None:
                        context.report_text("".join(parts))
                if choice.finish_reason:
                    finish = choice.finish_reason
        return "".join(parts), usage, finish


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
    from podium.local_models import EMBEDDED_MODELS, model_status, resolve_model

    if model not in EMBEDDED_MODELS or model_status(model) != "ready":
        return None
    try:
        import llama_cpp
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter
    except ImportError:
        return None
    vocab = llama_cpp.Llama(model_path=str(resolve_model(model, verify=False)), vocab_only=True, verbose=False)
    atexit.register(vocab.close)  # freed while llama.cpp is still loaded, not in interpreter teardown
    template = vocab.metadata.get("tokenizer.chat_template")
    if not template:
        return None
    eos, bos = vocab.token_eos(), vocab.token_bos()
    formatter = Jinja2ChatFormatter(
        template=template,
        eos_token=vocab.detokenize([eos], special=True).decode("utf-8", "replace"),
        bos_token=vocab.detokenize([bos], special=True).decode("utf-8", "replace") if bos >= 0 else "",
        add_generation_prompt=True,
    )

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
    if raw is None:
        return None
    cached = getattr(getattr(raw, "prompt_tokens_details", None), "cached_tokens", None)
    reasoning = getattr(getattr(raw, "completion_tokens_details", None), "reasoning_tokens", None)
    usage = Usage.reported(
        getattr(raw, "prompt_tokens", None), getattr(raw, "completion_tokens", None), cached, reasoning
    )
    if usage is None:
        _log.warning("a server reported usage that cannot be true (%r); the call is estimated instead", raw)
    return usage


def _retry_after(exc: openai.APIStatusError) -> float | None:
    value = exc.response.headers.get("retry-after") if exc.response is not None else None
    try:
        return None if value is None else max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: let the backoff decide


def _translate(exc: openai.OpenAIError, worker: str) -> ProviderError:
    """The one place provider errors become podium's typed errors."""
    if isinstance(exc, openai.APITimeoutError):
        return WorkerTimeout(f"worker {worker!r}: request timed out", worker=worker)
    if isinstance(exc, openai.APIConnectionError):
        return TransportError(f"worker {worker!r}: connection failed ({exc})", worker=worker)
    if isinstance(exc, openai.RateLimitError):
        return RateLimited(
            f"worker {worker!r}: rate limited (429)", worker=worker, status=429, retry_after=_retry_after(exc)
        )
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        message = f"worker {worker!r}: HTTP {status}: {_short(exc.message)}"
        if status >= 500:
            return ServerError(message, worker=worker, status=status)
        return ClientError(message, worker=worker, status=status)
    return ProviderError(f"worker {worker!r}: {type(exc).__name__}: {_short(str(exc))}", worker=worker)


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
