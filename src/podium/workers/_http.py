"""Shared HTTP plumbing for the native provider backends (Anthropic, Gemini): one async POST with
podium's deadline over the endpoint's shared connection pool (:mod:`podium.workers._clients`),
and the one translation of HTTP failures into podium's typed errors."""

from __future__ import annotations

import asyncio
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
from podium.workers._clients import limits, shared_client
from podium.workers.base import CallContext

try:
    import httpx
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ConfigError("native provider backends need httpx: pip install 'podium[providers]'") from exc

__all__ = ["post_json"]


def _client() -> httpx.AsyncClient:
    return httpx.AsyncClient(limits=limits(httpx))


def _retry_after(response: httpx.Response, body: Any) -> float | None:
    header = response.headers.get("retry-after")
    if header is not None:
        try:
            return max(0.0, float(header))
        except ValueError:
            return None
    # Gemini: error.details[].retryDelay = "30s"
    for detail in body.get("error", {}).get("details", []) if isinstance(body, dict) else []:
        delay = detail.get("retryDelay") if isinstance(detail, dict) else None
        if isinstance(delay, str) and delay.endswith("s"):
            try:
                return max(0.0, float(delay[:-1]))
            except ValueError:
                return None
    return None


async def post_json(
    worker: str, url: str, headers: dict[str, str], body: dict[str, Any], timeout_s: float, context: CallContext
) -> dict[str, Any]:
    """POST ``body`` as JSON within ``timeout_s`` seconds (or what ``context``'s request has
    left); returns the JSON reply. Raises the typed provider errors:
    429 → RateLimited (retry-after from the header or the body), 5xx and 529 → ServerError,
    other 4xx → ClientError, timeouts → WorkerTimeout, connection failures → TransportError."""
    limit = context.call_timeout_s()
    timeout = timeout_s if limit is None else max(0.001, min(timeout_s, limit))
    context.mark_pending()
    try:
        client = shared_client("httpx", url, _client)
        async with asyncio.timeout(timeout):  # the whole call, not each read
            context.mark_sent()
            response = await client.post(url, headers=headers, json=body, timeout=timeout)
    except (httpx.TimeoutException, TimeoutError):
        raise WorkerTimeout(f"worker {worker!r}: no complete reply within {timeout:.1f} s", worker=worker) from None
    except httpx.TransportError as exc:
        raise TransportError(f"worker {worker!r}: connection failed ({type(exc).__name__})", worker=worker) from None
    try:
        data: Any = response.json()
    except ValueError:
        data = {}
    if response.status_code < 400:
        if not isinstance(data, dict):
            raise ProviderError(f"worker {worker!r}: reply is not a JSON object", worker=worker)
        return data
    status = response.status_code
    error = data.get("error", {}) if isinstance(data, dict) else {}
    message = error.get("message", response.reason_phrase) if isinstance(error, dict) else str(error)
    text = f"worker {worker!r}: HTTP {status}: {str(message)[:300]}"
    if status == 429:
        raise RateLimited(text, worker=worker, status=status, retry_after=_retry_after(response, data))
    if status >= 500:
        raise ServerError(text, worker=worker, status=status)
    raise ClientError(text, worker=worker, status=status)
