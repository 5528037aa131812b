"""A fixed-latency OpenAI-compatible upstream: a *fake* for tests and the load benchmark.

Every ``POST /v1/chat/completions`` waits ``latency_s`` and answers with a fixed text, a fixed
id and a fixed timestamp, streamed or not — so two identical requests get byte-identical
responses, which is what the shadow proxy's byte-equality test needs, and its latency is known,
which is what the load benchmark subtracts. Usage counts are words (not a tokenizer).

    python -m podium.serve.fake_upstream --port 8101 --latency-ms 50
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from podium._args import WholeNumber
from podium.errors import ConfigError

__all__ = [
    "REPLY",
    "create_upstream",
    "main",
]

REPLY = "Podium test upstream reply: 42."
"""The fixed answer."""


def create_upstream(latency_s: float = 0.0, reply: str = REPLY) -> FastAPI:
    """The fake upstream app: waits ``latency_s`` seconds per request, then answers ``reply``."""
    app = FastAPI()
    app.state.requests = 0

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": "fixed", "object": "model", "created": 0, "owned_by": "test"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        body = await request.json()
        app.state.requests += 1
        await asyncio.sleep(latency_s)
        prompt = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
        usage = {"prompt_tokens": prompt, "completion_tokens": len(reply.split()), "total_tokens": 0}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        base = {"id": "chatcmpl-fixed", "created": 1700000000, "model": body.get("model", "fixed")}
        if not body.get("stream"):
            message = {"role": "assistant", "content": reply}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            return JSONResponse({**base, "object": "chat.completion", "choices": [choice], "usage": usage})

        async def events() -> AsyncIterator[str]:
            for word in reply.split(" "):
                chunk = {**base, "object": "chat.completion.chunk"}
                chunk["choices"] = [{"index": 0, "delta": {"content": word + " "}, "finish_reason": None}]
                yield f"data: {json.dumps(chunk)}\n\n"
            end = {**base, "object": "chat.completion.chunk", "usage": usage}
            end["choices"] = [{"index": 0, "delta": {}, "finish_reason": "stop"}]
            yield f"data: {json.dumps(end)}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    return app


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", action=WholeNumber, low=1, high=65535, default=8101)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    try:
        args = parser.parse_args()
    except ConfigError as exc:  # a bad --port: one line, exit 2
        parser.error(str(exc))
    # uvicorn at log level warning says nothing on start: say where it listens, for a person at a terminal
    print(f"fake OpenAI-compatible upstream on http://{args.host}:{args.port}/v1 ({args.latency_ms:g} ms a call)",
          file=sys.stderr, flush=True)  # fmt: skip
    uvicorn.run(create_upstream(args.latency_ms / 1000), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
