"""Fault injection over real HTTP: a scripted OpenAI-compatible server on 127.0.0.1 that answers
429 with retry-after, 500, resets the connection, or streams two chunks and then hangs.

The server is a small asyncio socket server written here (a fake provider, by design: real
providers cannot be made to fail on cue); the client side is podium's real OpenAI backend and
its resilience wrappers, so the error translation and the deadline are tested end to end.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from podium.budget import Limits, RequestBudget
from podium.errors import ClientError, RateLimited, ServerError, TransportError, WorkerTimeout
from podium.workers.base import Call, CallContext, Price, WorkerSettings
from podium.workers.resilience import Retrying

pytest.importorskip("openai", reason="needs podium[openai]")
from podium.workers.openai_compat import OpenAICompatWorker

Handler = Callable[[asyncio.StreamWriter, int], Awaitable[None]]
MESSAGES = [{"role": "user", "content": "hi"}]


def _response(status: str, body: bytes, headers: dict[str, str] | None = None) -> bytes:
    # the scripted server closes each connection after one reply, so it says so (HTTP/1.1 §9.6):
    # a client may otherwise reuse the connection before it sees the close
    head = [f"HTTP/1.1 {status}", f"Content-Length: {len(body)}", "Content-Type: application/json", "Connection: close"]
    head += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def _completion(text: str) -> bytes:
    return json.dumps(
        {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
        }
    ).encode()


@asynccontextmanager
async def scripted_server(handler: Handler) -> Any:
    """Serves ``handler(writer, request_number)`` for each request; yields the base URL."""
    count = 0

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal count
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            (int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")),
            0,
        )
        await reader.readexactly(length)
        count += 1
        try:
            await handler(writer, count)
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1", lambda: count
    finally:
        server.close()


def http_worker(base_url: str, stream: bool = False) -> OpenAICompatWorker:
    return OpenAICompatWorker(
        "remote", "m", base_url=base_url, settings=WorkerSettings(max_tokens=16), price=Price(1, 1), stream=stream
    )


def test_429_retry_after_header_is_read_and_honoured() -> None:
    async def handler(writer: asyncio.StreamWriter, n: int) -> None:
        if n <= 2:  # the bare call, then the retrying call's first attempt
            writer.write(_response("429 Too Many Requests", b'{"error": {"message": "slow"}}', {"Retry-After": "0.3"}))
        else:
            writer.write(_response("200 OK", _completion("fine")))
        await writer.drain()

    async def scenario() -> tuple[float, str, int]:
        async with scripted_server(handler) as (url, count):
            with pytest.raises(RateLimited) as info:
                await http_worker(url).complete(Call(MESSAGES))  # type: ignore[arg-type]
            assert info.value.retry_after == pytest.approx(0.3) and info.value.status == 429
            started = time.monotonic()
            result = await Retrying(http_worker(url), attempts=2).complete(Call(MESSAGES))  # type: ignore[arg-type]
            return time.monotonic() - started, result.text, count()

    waited, text, requests = asyncio.run(scenario())
    assert text == "fine" and requests == 3
    assert waited >= 0.3  # it waited what the server asked for


def test_500_is_a_server_error_and_is_retried() -> None:
    async def handler(writer: asyncio.StreamWriter, n: int) -> None:
        status = "500 Internal Server Error" if n < 3 else "200 OK"
        writer.write(_response(status, _completion("ok") if n >= 3 else b'{"error": {"message": "boom"}}'))
        await writer.drain()

    async def scenario() -> str:
        async with scripted_server(handler) as (url, _):
            with pytest.raises(ServerError):
                await http_worker(url).complete(Call(MESSAGES))  # type: ignore[arg-type]
            worker = Retrying(http_worker(url), attempts=3, base_delay_s=0.01)
            return (await worker.complete(Call(MESSAGES))).text  # type: ignore[arg-type]

    assert asyncio.run(scenario()) == "ok"


def test_connection_reset_is_a_transport_error() -> None:
    async def handler(writer: asyncio.StreamWriter, n: int) -> None:
        writer.transport.abort()  # RST without a response

    async def scenario() -> None:
        async with scripted_server(handler) as (url, _):
            await http_worker(url).complete(Call(MESSAGES))  # type: ignore[arg-type]

    with pytest.raises(TransportError):
        asyncio.run(scenario())


@pytest.mark.slow
def test_a_stream_that_hangs_midway_ends_at_the_deadline() -> None:
    async def handler(writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        for word in ("Hello", " wor"):
            event = json.dumps(
                {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m",
                 "choices": [{"index": 0, "delta": {"content": word}, "finish_reason": None}]}
            )  # fmt: skip
            data = f"data: {event}\n\n".encode()
            writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            await writer.drain()
        await asyncio.sleep(60)  # hang mid-stream

    async def scenario() -> float:
        async with scripted_server(handler) as (url, _):
            context = CallContext(budget=RequestBudget(Limits(deadline_s=1.0)))
            started = time.monotonic()
            with pytest.raises(WorkerTimeout):
                await http_worker(url, stream=True).complete(Call(MESSAGES, context=context))  # type: ignore[arg-type]
            return time.monotonic() - started

    elapsed = asyncio.run(scenario())
    assert 0.9 <= elapsed < 1.5  # the transport timeout follows the request deadline


def test_unknown_model_404_is_a_client_error_and_not_retried() -> None:
    """llama_cpp.server answers whatever model name it is given, so the 'wrong model name' case
    of a multi-model server (vLLM, OpenAI) is scripted here: 404 model_not_found."""
    error = {"message": "The model `nope` does not exist", "type": "invalid_request_error", "code": "model_not_found"}
    body = json.dumps({"error": error}).encode()

    async def handler(writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(_response("404 Not Found", body))
        await writer.drain()

    async def scenario() -> tuple[BaseException, int]:
        async with scripted_server(handler) as (url, count):
            try:
                await Retrying(http_worker(url), attempts=3, base_delay_s=0.01).complete(Call(MESSAGES))  # type: ignore[arg-type]
            except Exception as exc:  # the assertions below name what is expected
                return exc, count()
        raise AssertionError("no error")

    error, requests = asyncio.run(scenario())
    assert isinstance(error, ClientError) and error.status == 404 and "does not exist" in str(error)
    assert requests == 1
