"""HTTP connection pools shared by the workers of one process: one client per endpoint and
event loop, with explicit limits.

Every remote worker that talks to the same endpoint (scheme, host and port) on the same event
loop uses one client, so its connections are kept alive and reused across workers and requests
(no TLS handshake per call, no client built per request). A client belongs to the event loop it
was made on (its connections do); a new loop — ``podium run`` starts one per run, a test per test
— gets its own. A client with a ``close`` coroutine is closed when its loop shuts down (an async
generator the loop finalises in ``shutdown_asyncgens``, which ``asyncio.run`` and uvicorn call),
so no connection outlives its loop.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

__all__ = ["KEEPALIVE_S", "MAX_CONNECTIONS", "MAX_IDLE", "endpoint", "shared_client"]

MAX_CONNECTIONS = 256
"""Connections open at most per endpoint and loop (more concurrent calls wait for one)."""
MAX_IDLE = 64
"""Idle connections kept alive at most per endpoint and loop."""
KEEPALIVE_S = 30.0
"""Seconds an idle connection is kept."""


_C = TypeVar("_C")

_CLIENTS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str], Any]] = weakref.WeakKeyDictionary()
_CLOSERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list[Any]] = weakref.WeakKeyDictionary()


def endpoint(url: str) -> str:
    """``scheme://host:port`` of ``url`` (what one connection pool serves)."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.scheme}://{parts.hostname}:{port}"


def shared_client(
    kind: str, url: str, factory: Callable[[], _C], *, close: Callable[[_C], Awaitable[None]] | None = None
) -> _C:
    """The client of this ``kind`` (e.g. ``"aiohttp"``: one per HTTP library) for ``url``'s
    endpoint on the running event loop, made by ``factory()`` on first use or when the previous
    one was closed; ``close(client)`` runs when the loop shuts down. Call from a coroutine
    (raises RuntimeError without a running loop)."""
    loop = asyncio.get_running_loop()
    clients = _CLIENTS.setdefault(loop, {})
    key = (kind, endpoint(url))
    client = clients.get(key)
    if client is None or getattr(client, "is_closed", False) or getattr(client, "closed", False):
        client = clients[key] = factory()
        if close is not None:
            _close_at_shutdown(loop, client, close)
    return client


def _close_at_shutdown(loop: asyncio.AbstractEventLoop, client: _C, close: Callable[[_C], Awaitable[None]]) -> None:
    """Run ``close(client)`` when ``loop`` finalises its async generators (at shutdown)."""

    async def closer() -> AsyncIterator[None]:
        try:
            yield
        finally:
            await close(client)

    generator = closer()
    _CLOSERS.setdefault(loop, []).append(generator)  # the loop holds its generators weakly
    loop.create_task(anext(generator))  # type: ignore[arg-type]  # started: registered with the loop
