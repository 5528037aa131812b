"""HTTP to remote workers, for every remote backend (OpenAI-compatible, Anthropic, Gemini):
aiohttp over one connection pool per endpoint and event loop, the whole call — a streamed reply
included — bounded by one time limit, and the one translation of HTTP failures into podium's
typed errors:

- 429 → :class:`~podium.errors.RateLimited` (``retry_after`` from the ``Retry-After`` header,
  or Gemini's ``error.details[].retryDelay``);
- 5xx and 529 (overloaded) → :class:`~podium.errors.ServerError`; other 4xx →
  :class:`~podium.errors.ClientError`;
- a time limit reached → :class:`~podium.errors.WorkerTimeout`; a connection that fails or
  drops → :class:`~podium.errors.TransportError`; a reply that is not a JSON object →
  :class:`~podium.errors.ProviderError`.

aiohttp (a C-accelerated HTTP parser) spends a tenth of the CPU per call that the ``openai``
SDK did on the same loopback server (``bench/worker_calls.py``; docs/overhead.md).

Every remote worker that talks to the same endpoint (scheme, host and port) on the same event
loop uses one client session, so its connections are kept alive and reused across workers and
requests (no TLS handshake per call, no client built per request). A session belongs to the event
loop it was made on (its connections do); a new loop — ``podium run`` starts one per run, a test
per test — gets its own, and a session is closed when its loop shuts down (an async generator the
loop finalises in ``shutdown_asyncgens``, which ``asyncio.run`` and uvicorn call), so no
connection outlives its loop.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

from podium.errors import (
    ClientError,
    ConfigError,
    ProviderError,
    RateLimited,
    ServerError,
    TransportError,
    WorkerTimeout,
)
from podium.extras import install_command
from podium.workers.base import CallContext

try:
    import aiohttp
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ConfigError(f"remote workers need aiohttp: {install_command('openai')}") from exc

__all__ = ["KEEPALIVE_S", "MAX_CONNECTIONS", "call_timeout", "endpoint", "get_json", "post_json", "post_stream"]

MAX_CONNECTIONS = 256
"""Connections open at most per endpoint and loop (more concurrent calls wait for one)."""
KEEPALIVE_S = 30.0
"""Seconds an idle connection is kept."""
_ERROR_BODY_BYTES = 64 * 1024
"""How much of an error reply is read for its message."""

_SESSIONS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, aiohttp.ClientSession]] = (
    weakref.WeakKeyDictionary()
)
_CLOSERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list[Any]] = weakref.WeakKeyDictionary()


def endpoint(url: str) -> str:
    """``scheme://host:port`` of ``url`` (what one connection pool serves)."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.scheme}://{parts.hostname}:{port}"


def _client(url: str) -> aiohttp.ClientSession:
    """The session of ``url``'s endpoint on the running event loop, made on first use or when the
    previous one was closed (see the module docstring). Raises RuntimeError without a running loop."""
    loop = asyncio.get_running_loop()
    sessions = _SESSIONS.setdefault(loop, {})
    session = sessions.get(endpoint(url))
    if session is None or session.closed:
        connector = aiohttp.TCPConnector(limit=MAX_CONNECTIONS, keepalive_timeout=KEEPALIVE_S)
        # no timeout of aiohttp's own: podium bounds each whole call (asyncio.timeout)
        session = aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None))
        sessions[endpoint(url)] = session
        _close_at_shutdown(loop, session)
    return session


def _close_at_shutdown(loop: asyncio.AbstractEventLoop, session: aiohttp.ClientSession) -> None:
    """Close ``session`` when ``loop`` finalises its async generators (at shutdown)."""

    async def closer() -> AsyncIterator[None]:
        try:
            yield
        finally:
            await session.close()

    generator = closer()
    _CLOSERS.setdefault(loop, []).append(generator)  # the loop holds its generators weakly
    loop.create_task(anext(generator))  # type: ignore[arg-type]  # started: registered with the loop


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
    body = _json_object(await response.content.read(_ERROR_BODY_BYTES)) or {}
    error = body.get("error", {})
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


@asynccontextmanager
async def _post(
    worker: str, url: str, headers: dict[str, str], body: dict[str, Any], timeout_s: float, context: CallContext
) -> AsyncIterator[aiohttp.ClientResponse]:
    """POST ``body`` as JSON; the block gets the response, its status checked, and runs within
    :func:`call_timeout` seconds. Raises the typed errors of the module docstring."""
    timeout = call_timeout(timeout_s, context)
    context.mark_pending()
    async with _translated(worker, timeout):
        client = _client(url)
        context.mark_sent()
        async with client.post(url, headers=headers, json=body) as response:
            await _raise_for_status(worker, response)
            yield response


async def post_json(
    worker: str, url: str, headers: dict[str, str], body: dict[str, Any], timeout_s: float, context: CallContext
) -> dict[str, Any]:
    """POST ``body`` as JSON within :func:`call_timeout` seconds; returns the JSON reply (an
    object). Raises the typed errors of the module docstring."""
    async with _post(worker, url, headers, body, timeout_s, context) as response:
        data = _json_object(await response.read())
    if data is None:
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
    async with _post(worker, url, headers, body, timeout_s, context) as response:
        yield _events(response)


async def _events(response: aiohttp.ClientResponse) -> AsyncIterator[dict[str, Any]]:
    data: list[str] = []
    async for raw in response.content:
        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif not line and data:  # a blank line ends an event (other fields and comments are skipped)
            text, data = "\n".join(data), []
            if text == "[DONE]":
                return
            if (event := _json_object(text)) is not None:
                yield event
    if data and (text := "\n".join(data)) != "[DONE]" and (event := _json_object(text)) is not None:
        yield event  # a last event with no blank line after it


def _json_object(text: str | bytes) -> dict[str, Any] | None:
    """``text`` as a JSON object, or None when it is not one."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


async def get_json(worker: str, url: str, headers: dict[str, str], timeout_s: float) -> Any:
    """GET ``url``; its JSON reply. Raises the typed errors of the module docstring."""
    async with _translated(worker, timeout_s), _client(url).get(url, headers=headers) as response:
        await _raise_for_status(worker, response)
        raw = await response.read()
    try:
        return json.loads(raw)
    except ValueError:
        raise ProviderError(f"worker {worker!r}: reply is not JSON", worker=worker) from None
