"""HTTP to remote workers, for every remote backend (OpenAI-compatible, Anthropic, Gemini):
aiohttp over one connection pool per endpoint and event loop (:mod:`podium.workers._clients`),
the whole call — a streamed reply included — bounded by one time limit, and the one
translation of HTTP failures into podium's typed errors:

- 429 → :class:`~podium.errors.RateLimited` (``retry_after`` from the ``Retry-After`` header,
  or Gemini's ``error.details[].retryDelay``);
- 5xx and 529 (overloaded) → :class:`~podium.errors.ServerError`; other 4xx →
  :class:`~podium.errors.ClientError`;
- a time limit reached → :class:`~podium.errors.WorkerTimeout`; a connection that fails or
  drops → :class:`~podium.errors.TransportError`; a reply that is not a JSON object →
  :class:`~podium.errors.ProviderError`.

aiohttp (a C-accelerated HTTP parser) spends a tenth of the CPU per call that the ``openai``
SDK did on the same loopback server (``bench/worker_calls.py``; docs/overhead.md).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from podium.errors import (
    ClientError,
    ConfigError,
    ProviderError,
    RateLimited,
    ServerError,
    TransportError,
    WorkerTimeout,
)
from podium.workers._clients import KEEPALIVE_S, MAX_CONNECTIONS, shared_client
from podium.workers.base import CallContext

try:
    import aiohttp
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ConfigError("remote workers need aiohttp: pip install 'podium[openai]'") from exc

__all__ = ["call_timeout", "get_json", "post_json", "post_stream"]

_ERROR_BODY_BYTES = 64 * 1024
"""How much of an error reply is read for its message."""


def _session() -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(limit=MAX_CONNECTIONS, keepalive_timeout=KEEPALIVE_S)
    # no timeout of aiohttp's own: podium bounds each whole call (asyncio.timeout)
    return aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None))


async def _close(session: aiohttp.ClientSession) -> None:
    await session.close()


def _client(url: str) -> aiohttp.ClientSession:
    return shared_client("aiohttp", url, _session, close=_close)


def call_timeout(timeout_s: float, context: CallContext) -> float:
    """Seconds the call may take: the worker's ``timeout_s``, or less when the request's
    deadline or step timeout leaves less."""
    limit = context.call_timeout_s()
    return timeout_s if limit is None else max(0.001, min(timeout_s, limit))


def _retry_after(headers: Mapping[str, str], body: Any) -> float | None:
    header = headers.get("retry-after")
    if header is not None:
        try:
            return max(0.0, float(header))
        except ValueError:
            return None  # an HTTP date: let the backoff decide
    # Gemini: error.details[].retryDelay = "30s"
    error = body.get("error") if isinstance(body, dict) else None
    for detail in error.get("details", []) if isinstance(error, dict) else []:
        delay = detail.get("retryDelay") if isinstance(detail, dict) else None
        if isinstance(delay, str) and delay.endswith("s"):
            try:
                return max(0.0, float(delay[:-1]))
            except ValueError:
                return None
    return None


async def _raise_for_status(worker: str, response: aiohttp.ClientResponse) -> None:
    """Raises the typed error of a reply with status 400 or more (its message from the body's
    ``error.message`` where the provider sent one)."""
    status = response.status
    if status < 400:
        return
    raw = await response.content.read(_ERROR_BODY_BYTES)
    try:
        body: Any = json.loads(raw)
    except ValueError:
        body = {}
    error = body.get("error", {}) if isinstance(body, dict) else {}
    message = error.get("message") if isinstance(error, dict) else error
    text = f"worker {worker!r}: HTTP {status}: {str(message or response.reason or '')[:300]}"
    if status == 429:
        raise RateLimited(text, worker=worker, status=status, retry_after=_retry_after(response.headers, body))
    if status >= 500:
        raise ServerError(text, worker=worker, status=status)
    raise ClientError(text, worker=worker, status=status)


@asynccontextmanager
async def _translated(worker: str, timeout: float) -> AsyncIterator[None]:
    """The block's transport failures as podium's typed errors; its time limit is ``timeout``."""
    try:
        async with asyncio.timeout(timeout):  # the whole call, not each read
            yield
    except TimeoutError:
        raise WorkerTimeout(f"worker {worker!r}: no complete reply within {timeout:.1f} s", worker=worker) from None
    except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as exc:
        raise TransportError(f"worker {worker!r}: connection failed ({type(exc).__name__})", worker=worker) from None


async def post_json(
    worker: str, url: str, headers: dict[str, str], body: dict[str, Any], timeout_s: float, context: CallContext
) -> dict[str, Any]:
    """POST ``body`` as JSON within :func:`call_timeout` seconds; returns the JSON reply (an
    object). Raises the typed errors of the module docstring."""
    timeout = call_timeout(timeout_s, context)
    context.mark_pending()
    async with _translated(worker, timeout):
        client = _client(url)
        context.mark_sent()
        async with client.post(url, headers=headers, json=body) as response:
            await _raise_for_status(worker, response)
            raw = await response.read()
    try:
        data: Any = json.loads(raw)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise ProviderError(f"worker {worker!r}: reply is not a JSON object", worker=worker)
    return data


@asynccontextmanager
async def post_stream(
    worker: str, url: str, headers: dict[str, str], body: dict[str, Any], timeout_s: float, context: CallContext
) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
    """POST ``body`` and read the reply as server-sent events: the block gets an iterator of each
    event's JSON data (``data: [DONE]`` ends it; comments, other fields and data that is not a
    JSON object are skipped). The whole block — reading included — runs within
    :func:`call_timeout` seconds. Raises the typed errors of the module docstring."""
    timeout = call_timeout(timeout_s, context)
    context.mark_pending()
    async with _translated(worker, timeout):
        client = _client(url)
        context.mark_sent()
        async with client.post(url, headers=headers, json=body) as response:
            await _raise_for_status(worker, response)
            yield _events(response)


async def _events(response: aiohttp.ClientResponse) -> AsyncIterator[dict[str, Any]]:
    data: list[str] = []
    async for raw in response.content:
        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
            continue
        if line or not data:  # another field, a comment, or a blank line with no event
            continue
        text, data = "\n".join(data), []
        if text == "[DONE]":
            return
        try:
            event = json.loads(text)
        except ValueError:
            continue
        if isinstance(event, dict):
            yield event
    if data and (text := "\n".join(data)) != "[DONE]":  # a last event with no blank line after it
        try:
            event = json.loads(text)
        except ValueError:
            return
        if isinstance(event, dict):
            yield event


async def get_json(worker: str, url: str, headers: dict[str, str], timeout_s: float) -> Any:
    """GET ``url``; its JSON reply. Raises the typed errors of the module docstring."""
    async with _translated(worker, timeout_s), _client(url).get(url, headers=headers) as response:
        await _raise_for_status(worker, response)
        raw = await response.read()
    try:
        return json.loads(raw)
    except ValueError:
        raise ProviderError(f"worker {worker!r}: reply is not JSON", worker=worker) from None
