"""Workers on one endpoint share its connection pool (podium.workers._http): calls from several
workers of one process reuse kept-alive connections instead of opening one per worker (OpenAI
SDK) or one per call (native backends). Real servers on 127.0.0.1 count the TCP connections."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from podium.workers.base import Call, Message, Price, WorkerSettings

MESSAGES: list[Message] = [{"role": "user", "content": "What is 6 * 7?"}]


def test_openai_workers_on_one_endpoint_share_one_connection() -> None:
    pytest.importorskip("openai", reason="needs podium[openai]")
    from podium.testing import ThreadedUvicorn
    from podium.workers.openai_compat import OpenAICompatWorker
    from tests.fake_openai import fake_openai_app

    app = fake_openai_app()
    ports: list[int] = []

    @app.middleware("http")
    async def record(request: Any, call_next: Any) -> Any:
        ports.append(request.client.port)
        return await call_next(request)

    server = ThreadedUvicorn(app)
    workers = [
        OpenAICompatWorker(n, "smollm2", base_url=server.url + "/v1", settings=WorkerSettings(max_tokens=16),
                           price=Price(1.0, 1.0))
        for n in ("drafter", "checker")
    ]  # fmt: skip

    async def run() -> None:
        for _ in range(3):
            for worker in workers:
                await worker.complete(Call(MESSAGES))

    try:
        asyncio.run(run())
    finally:
        server.stop()
    assert len(ports) == 6 and len(set(ports)) == 1, ports  # one kept-alive connection for both workers


def test_native_calls_reuse_a_kept_alive_connection() -> None:
    """The Anthropic backend built an HTTP client (and a connection, and for HTTPS a TLS
    handshake) per call; now its calls go over one kept-alive connection."""
    pytest.importorskip("httpx", reason="needs podium[providers]")
    from podium.workers.native import AnthropicWorker

    connections = 0
    reply = {"id": "m", "type": "message", "role": "assistant", "model": "claude", "stop_reason": "end_turn",
             "content": [{"type": "text", "text": "42"}], "usage": {"input_tokens": 5, "output_tokens": 1}}  # fmt: skip

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        while True:  # HTTP/1.1 keep-alive: requests until the client closes
            try:
                head = (await reader.readuntil(b"\r\n\r\n")).decode()
            except (asyncio.IncompleteReadError, ConnectionError):
                break
            length = next(
                int(line.split(":")[1]) for line in head.split("\r\n") if line.lower().startswith("content-length")
            )
            await reader.readexactly(length)
            payload = json.dumps(reply).encode()
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         + f"Content-Length: {len(payload)}\r\n\r\n".encode() + payload)  # fmt: skip
            await writer.drain()
        writer.close()

    async def run() -> list[str]:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        worker = AnthropicWorker(
            "claude", "claude", base_url=f"http://127.0.0.1:{port}", settings=WorkerSettings(max_tokens=16),
            price=Price(1.0, 1.0), api_key_env="PODIUM_TEST_KEY",
        )  # fmt: skip
        try:
            return [(await worker.complete(Call(MESSAGES))).text for _ in range(4)]
        finally:
            server.close()

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PODIUM_TEST_KEY", "sk-test-not-a-real-key")
        answers = asyncio.run(run())
    assert answers == ["42"] * 4 and connections == 1
